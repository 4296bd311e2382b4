"""The policy registry.

The interface itself (``Policy``, ``EVENT_TRIGGERS``) belongs to the scheduler core
(``utilon.core.policy``) and is re-exported here for policy authors.  Policies are registered
by name with ``@register``; ``make_policy`` builds one from a name and a parameter mapping,
validating the parameters against the constructor's signature so that a typo gives a one-line
error that lists what is accepted.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from utilon.core.policy import EVENT_TRIGGERS, Policy
from utilon.errors import ParameterError, UnknownNameError

__all__ = ["EVENT_TRIGGERS", "P", "Policy", "make_policy", "policy_class", "policy_names",
           "policy_parameters", "register"]

_REGISTRY: dict[str, type[Policy]] = {}
P = TypeVar("P", bound=type[Policy])


def register(cls: P) -> P:
    """Class decorator: make the policy available under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise ValueError(f"policy {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def policy_class(name: str) -> type[Policy]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("policy", name, list(_REGISTRY),
                               fix="run `utilon policies` to see them") from None


def policy_parameters(name: str) -> dict[str, tuple[Any, Any]]:
    """{parameter: (type, default)} of a registered policy's constructor."""
    cls = policy_class(name)
    hints = typing.get_type_hints(cls.__init__)
    out: dict[str, tuple[Any, Any]] = {}
    for pname, p in inspect.signature(cls.__init__).parameters.items():
        if pname == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        out[pname] = (hints.get(pname, Any), p.default)
    return out


def make_policy(name: str, params: Mapping[str, Any] | None = None, *, where: str = "") -> Policy:
    """Build a registered policy, validating ``params`` against its constructor."""
    try:
        cls = policy_class(name)
    except UnknownNameError as e:
        e.where = where
        raise
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
        return cls(**kwargs)
    except ValueError as exc:
        raise ParameterError(f"policy {name!r}: {exc}", where=where) from None
