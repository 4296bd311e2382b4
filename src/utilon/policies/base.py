"""The policy registry: one for both worlds.

utilon has two worlds of jobs.  In the *slot* world (the scheduler core: every baseline and
CORA, RDS, RAS, alsched) jobs are stages of tasks granted resources on machines; its interface
(``Policy``, ``EVENT_TRIGGERS``) belongs to the core (``utilon.core.policy``) and is
re-exported here for policy authors.  In the *cloud* world (Cura's §4.1 services) jobs are
moldable clusters of VMs drawn from pools on servers; its interface is
``utilon.cloud.policy.CloudPolicy``.  Every policy class says which world it is from
(``world``) and is registered here by name with ``@register``.  Names are unique across both
worlds, so asking for a policy of the other world is a one-line error that says where it runs.

``make_policy`` / ``make_cloud_policy`` build one from a name and a parameter mapping,
validating the parameters against the constructor's signature and types so that a typo gives a
one-line error that lists what is accepted.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from utilon.cloud.policy import CloudPolicy
from utilon.core.policy import EVENT_TRIGGERS, Policy
from utilon.errors import ParameterError, UnknownNameError

__all__ = ["BUILTINS", "DEFAULT_ALIAS", "DEFAULT_POLICY", "EVENT_TRIGGERS", "WORLDS",
           "CloudPolicy", "P", "Policy", "canonical", "cloud_policy_class", "load_builtins",
           "make_cloud_policy", "make_policy", "policy_class", "policy_names",
           "policy_parameters", "register", "world_of"]

WORLDS = {"slot": "tasks granted resources on machines (the scheduler core)",
          "cloud": "moldable jobs on VM clusters from pools on servers (Cura's world)"}
_REGISTRY: dict[str, type[Policy] | type[CloudPolicy]] = {}
P = TypeVar("P", bound=type[Policy] | type[CloudPolicy])

#: The built-in policies: name -> (world, the module whose import registers it).  A module is
#: imported the first time one of its policies is asked for, so listing names (``--help``, an
#: unknown-name error, ``validate``) imports none of them (they pull in scipy, HiGHS, ...);
#: ``tests/test_policies.py`` holds this table to what the modules register.
BUILTINS: dict[str, tuple[str, str]] = {
    "alsched": ("slot", "utilon.policies.alsched.policy"),
    "cora": ("slot", "utilon.policies.cora.policy"),
    "cora-ct": ("slot", "utilon.policies.cora.policy"),
    "cora-lp": ("slot", "utilon.policies.cora.policy"),
    "edf-n": ("slot", "utilon.policies.edf"),
    "edf-p": ("slot", "utilon.policies.edf"),
    "fair": ("slot", "utilon.policies.fair"),
    "fair-slots": ("slot", "utilon.policies.fair"),
    "fifo": ("slot", "utilon.policies.fifo"),
    "ras": ("slot", "utilon.policies.ras.policy"),
    "rds": ("slot", "utilon.policies.rds.policy"),
    "rrh": ("slot", "utilon.policies.rrh"),
    "triage": ("slot", "utilon.policies.triage"),
    "cura": ("cloud", "utilon.policies.cura.reconfig"),
    "cura-capacity": ("cloud", "utilon.policies.cura.reconfig"),
    "dedicated": ("cloud", "utilon.policies.cura.baselines"),
    "per-job-cluster": ("cloud", "utilon.policies.cura.baselines"),
    "per-job-opt": ("cloud", "utilon.policies.cura.baselines"),
    "vm-aware": ("cloud", "utilon.policies.cura.vmaware"),
}


#: What ``--policy default`` (and every command's default) runs: utilon's own policy.
DEFAULT_POLICY = "triage"
DEFAULT_ALIAS = "default"


def canonical(name: str) -> str:
    """The registered name ``name`` stands for (``default`` is utilon's own policy)."""
    return DEFAULT_POLICY if name == DEFAULT_ALIAS else name


def load_builtins() -> None:
    """Import every built-in policy module (``utilon policies`` describes them all)."""
    for _, module in BUILTINS.values():
        importlib.import_module(module)


def _registered(name: str) -> type[Policy] | type[CloudPolicy] | None:
    name = canonical(name)
    cls = _REGISTRY.get(name)
    if cls is None and name in BUILTINS:
        importlib.import_module(BUILTINS[name][1])
        cls = _REGISTRY.get(name)
    return cls


def register(cls: P) -> P:
    """Class decorator: make the policy available under ``cls.name`` (in its ``world``)."""
    if cls.name in _REGISTRY:
        raise ValueError(f"policy {cls.name!r} registered twice")
    if cls.world not in WORLDS:
        raise ValueError(f"policy {cls.name!r}: unknown world {cls.world!r}")
    _REGISTRY[cls.name] = cls
    return cls


def policy_names(world: str = "slot") -> list[str]:
    """The policies of ``world`` (built in, and registered by other code), sorted."""
    return sorted({n for n, (w, _) in BUILTINS.items() if w == world}
                  | {n for n, c in _REGISTRY.items() if c.world == world})


def world_of(name: str) -> str | None:
    """The world a policy runs in, or ``None`` for an unknown name."""
    name = canonical(name)
    if name in _REGISTRY:
        return _REGISTRY[name].world
    return BUILTINS[name][0] if name in BUILTINS else None


def _lookup(name: str, world: str) -> Any:
    cls = _registered(name)
    if cls is None:
        raise UnknownNameError("policy", name, policy_names(world),
                               fix="run `utilon policies` to see them")
    if cls.world != world:
        kind = "a slot-world policy" if cls.world == "slot" else "a cloud service"
        section = "cluster:" if cls.world == "slot" else "cloud:"
        raise UnknownNameError("policy", name, policy_names(world),
                               fix=f"{name!r} is {kind}; it runs on scenarios with a "
                                   f"{section} section (see `utilon policies`)")
    return cls


def policy_class(name: str) -> type[Policy]:
    """The registered slot-world policy class ``name``."""
    cls: type[Policy] = _lookup(name, "slot")
    return cls


def cloud_policy_class(name: str) -> type[CloudPolicy]:
    """The registered cloud service class ``name``."""
    cls: type[CloudPolicy] = _lookup(name, "cloud")
    return cls


def policy_parameters(name: str) -> dict[str, tuple[Any, Any]]:
    """{parameter: (type, default)} of a registered policy's constructor, of either world (a
    cloud service's profile store is what it runs on, not a parameter)."""
    cls = _registered(name) or policy_class(name)
    hints = typing.get_type_hints(cls.__init__)
    out: dict[str, tuple[Any, Any]] = {}
    for pname, p in inspect.signature(cls.__init__).parameters.items():
        if pname in ("self", "store") or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        out[pname] = (hints.get(pname, Any), p.default)
    return out


def make_policy(name: str, params: Mapping[str, Any] | None = None, *, where: str = "") -> Policy:
    """Build a registered slot-world policy, validating ``params`` against its constructor."""
    try:
        cls = policy_class(name)
    except UnknownNameError as e:
        e.where = where
        raise
    policy: Policy = _build(cls, (), params, where)
    return policy


def make_cloud_policy(name: str, store: Any, params: Mapping[str, Any] | None = None, *,
                      where: str = "") -> CloudPolicy:
    """Build a registered cloud service on the profile store ``store``, validating ``params``
    against its constructor."""
    try:
        cls = cloud_policy_class(name)
    except UnknownNameError as e:
        e.where = where
        raise
    policy: CloudPolicy = _build(cls, (store,), params, where)
    return policy


def _build(cls: Any, args: tuple[Any, ...], params: Mapping[str, Any] | None,
           where: str) -> Any:
    name = cls.name
    accepted = policy_parameters(name)
    kwargs: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if key not in accepted:
            listing = ", ".join(sorted(accepted)) or "none"
            raise ParameterError(f"policy {name!r} has no parameter {key!r}; it accepts: "
                                 f"{listing}", where=where)
        typ, _ = accepted[key]
        try:
            kwargs[key] = TypeAdapter(typ).validate_python(value)
        except PydanticValidationError as exc:
            msg = exc.errors()[0]["msg"]
            raise ParameterError(f"policy {name!r}: parameter {key!r}={value!r}: {msg}",
                                 where=where) from None
    missing = [k for k, (_, d) in accepted.items() if d is inspect.Parameter.empty
               and k not in kwargs]
    if missing:
        raise ParameterError(f"policy {name!r} needs parameter(s): {', '.join(missing)}",
                             where=where)
    try:
        return cls(*args, **kwargs)
    except ValueError as exc:
        raise ParameterError(f"policy {name!r}: {exc}", where=where) from None
