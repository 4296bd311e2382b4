"""Who may talk to the service: API tokens per tenant, stored hashed in a YAML file.

::

    limits: {max_queued_jobs: 200}          # every tenant's, over the defaults
    tenants:
      etl:   {token_sha256: 9f86d0..., weight: 2, limits: {max_running_share: 0.5}}
      adhoc: {token_sha256: 60303a..., weight: 1}
    admins:
      ops:   {token_sha256: fd61a0...}

A token is 32 random bytes (URL-safe base64) that ``utilon token create`` prints once; the
file keeps only its SHA-256, so reading the file does not give a token away (a token is random,
so an unsalted hash cannot be reversed by a dictionary).  A tenant sees, submits and cancels
only its own jobs; an admin sees and cancels every tenant's.  A tenant's ``weight`` multiplies
its jobs' weights, which is how tenant weights reach weighted policies such as Fair.  Its
``limits`` (``service.quotas.Limits``: queued jobs, tasks, running slots, input, body and
string sizes) are the defaults, then the file's ``limits:``, then its own.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from utilon.errors import UtilonError
from utilon.service.quotas import Limits

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class _TenantEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    weight: float = Field(1.0, gt=0, le=1e6)
    limits: dict[str, Any] | None = None


class _AdminEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class TenantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limits: dict[str, Any] | None = None
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
        self._default = Limits.model_validate(data.limits or {})
        self._limits = {name: Limits.model_validate({**(data.limits or {}), **t.limits})
                        for name, t in data.tenants.items() if t.limits}
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
            book = cls(data, str(path))
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            if first["loc"] and first["loc"][0] in Limits.model_fields:
                loc = f"limits.{loc}"  # a limit's own error: the file's or a tenant's
            raise UtilonError(first["msg"], where=f"{path}: {loc}",
                              fix="see docs/service.md#tenants") from None
        bad = [n for n in [*data.tenants, *data.admins] if not _valid_name(n)]
        if bad:
            raise UtilonError(f"bad name {bad[0]!r}", where=str(path),
                              fix="names are letters, digits, '_', '.', '-' (at most 64)")
        if not data.tenants and not data.admins:
            raise UtilonError("no tenants and no admins: nobody could use the service",
                              where=str(path), fix="utilon token create NAME")
        return book

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

    def limits(self, tenant: str) -> Limits:
        """``tenant``'s limits (the file's defaults for an admin or an unknown name)."""
        return self._limits.get(tenant, self._default)

    @property
    def caps_running(self) -> bool:
        """Some tenant's running slots are capped (the scheduler must enforce it)."""
        return self._default.caps_running or any(x.caps_running
                                                 for x in self._limits.values())

    @property
    def names(self) -> list[str]:
        return sorted(self.data.tenants)

    @property
    def everyone(self) -> list[str]:
        """Every name jobs can belong to: tenants, and admins (an admin's own jobs)."""
        return sorted({*self.data.tenants, *self.data.admins})


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
        old = data.tenants.get(name)  # a new token keeps the tenant's limits
        data.tenants[name] = _TenantEntry(token_sha256=digest(token), weight=weight,
                                          limits=old.limits if old is not None else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(data.model_dump(exclude_none=True), sort_keys=True),
                   encoding="utf-8")
    tmp.chmod(0o600)
    tmp.replace(path)
    return token
