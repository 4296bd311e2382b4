"""Who may talk to the service: API tokens per tenant, stored hashed in a YAML file.

::

    tenants:
      etl:   {token_sha256: 9f86d0..., weight: 2}
      adhoc: {token_sha256: 60303a..., weight: 1}
    admins:
      ops:   {token_sha256: fd61a0...}

A token is 32 random bytes (URL-safe base64) that ``utilon token create`` prints once; the
file keeps only its SHA-256, so reading the file does not give a token away (a token is random,
so an unsalted hash cannot be reversed by a dictionary).  A tenant sees, submits and cancels
only its own jobs; an admin sees and cancels every tenant's.  A tenant's ``weight`` multiplies
its jobs' weights, which is how tenant weights reach weighted policies such as Fair.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from utilon.errors import UtilonError

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class _TenantEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    weight: float = Field(1.0, gt=0, le=1e6)


class _AdminEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class TenantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tenants: dict[str, _TenantEntry] = Field(default_factory=dict)
    admins: dict[str, _AdminEntry] = Field(default_factory=dict)


@dataclass(frozen=True)
class Principal:
    """Who a request is from."""

    name: str
    admin: bool
    weight: float = 1.0

    def may_see(self, tenant: str) -> bool:
        return self.admin or tenant == self.name


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TenantBook:
    def __init__(self, data: TenantsFile, source: str = "") -> None:
        self.data = data
        self.source = source
        self._by_hash: dict[str, Principal] = {}
        for name, t in data.tenants.items():
            self._by_hash[t.token_sha256] = Principal(name, False, t.weight)
        for name, a in data.admins.items():
            self._by_hash[a.token_sha256] = Principal(name, True)

    @classmethod
    def load(cls, path: Path) -> TenantBook:
        if not path.exists():
            raise UtilonError("no tenants file", where=str(path),
                              fix="create tokens with `utilon token create NAME --tenants "
                                  f"{path}`")
        from utilon.scenario.load import read_data

        raw = read_data(path) or {}
        try:
            data = TenantsFile.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise UtilonError(first["msg"], where=f"{path}: {loc}",
                              fix="see docs/service.md#tenants") from None
        bad = [n for n in [*data.tenants, *data.admins] if not _valid_name(n)]
        if bad:
            raise UtilonError(f"bad name {bad[0]!r}", where=str(path),
                              fix="names are letters, digits, '_', '.', '-' (at most 64)")
        if not data.tenants and not data.admins:
            raise UtilonError("no tenants and no admins: nobody could use the service",
                              where=str(path), fix="utilon token create NAME")
        return cls(data, str(path))

    def authenticate(self, token: str | None) -> Principal | None:
        if not token:
            return None
        h = digest(token)
        for known, who in self._by_hash.items():  # constant time per comparison
            if hmac.compare_digest(known, h):
                return who
        return None

    def weight(self, tenant: str) -> float:
        t = self.data.tenants.get(tenant)
        return t.weight if t is not None else 1.0

    @property
    def names(self) -> list[str]:
        return sorted(self.data.tenants)


def _valid_name(name: str) -> bool:
    import re

    return re.match(_NAME, name) is not None


def create_token(path: Path, name: str, *, admin: bool = False, weight: float = 1.0) -> str:
    """Add (or replace) ``name``'s token in the tenants file; returns the new token."""
    if not _valid_name(name):
        raise UtilonError(f"bad name {name!r}", where="NAME",
                          fix="letters, digits, '_', '.', '-' (at most 64)")
    if not weight > 0:
        raise UtilonError(f"weight must be > 0, got {weight:g}", where="--weight")
    data = TenantBook.load(path).data if path.exists() else TenantsFile()
    token = secrets.token_urlsafe(32)
    if admin:
        data.tenants.pop(name, None)
        data.admins[name] = _AdminEntry(token_sha256=digest(token))
    else:
        data.admins.pop(name, None)
        data.tenants[name] = _TenantEntry(token_sha256=digest(token), weight=weight)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(data.model_dump(), sort_keys=True), encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)
    return token
