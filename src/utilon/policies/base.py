"""The policy interface and the policy registry.

A policy is an object configured in its constructor with one method,
``decide(snapshot) -> Decision``: no clock reads, no I/O, no randomness it was not handed.
It declares which events it wants to be called on (``triggers``) and, if it runs a periodic
control loop, its ``tick`` in seconds.  Policies are registered by name with ``@register``;
``make_policy`` builds one from a name and a parameter mapping, validating the parameters
against the constructor's signature so that a typo gives a one-line error that lists what is
accepted.
"""

from __future__ import annotations

import inspect
import typing
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from utilon.core.decision import Decision
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot
from utilon.errors import ParameterError, UnknownNameError
from utilon.model.cluster import Cluster

EVENT_TRIGGERS: frozenset[Trigger] = frozenset({
    Trigger.ARRIVAL, Trigger.STAGE_FINISHED, Trigger.JOB_FINISHED, Trigger.TASK_FAILED,
    Trigger.CAPACITY,
})


class Policy(ABC):
    name: ClassVar[str]
    summary: ClassVar[str]
    paper: ClassVar[str] = ""
    triggers: ClassVar[frozenset[Trigger]] = EVENT_TRIGGERS
    uses_free_capacity: ClassVar[bool] = False
    uses_placement: ClassVar[bool] = False
    """True for policies that need to know which machine each running task is on
    (``ClusterSnapshot.placement``): RAS's per-TaskTracker job slots."""
    overcommits: ClassVar[bool] = False
    """True for policies that over-commit declared resources on purpose (static slots): live
    backends then record over-commitment instead of refusing it."""
    tick: float | None = None

    @abstractmethod
    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        """Return the decision for this snapshot."""

    def bind(self, cluster: Cluster) -> None:  # noqa: B027 - optional hook, no-op by default
        """Called once by the scheduler core before the first decision, with the cluster
        (machines and capacity timeline) the run starts from.  Policies that must know the
        future capacity (RDS's oracle predictor) keep what they need; others ignore it."""

    def report(self) -> dict[str, Any]:
        """Policy-specific measurements for ``summary.json`` (``policy_report``); none by
        default.  Must be deterministic: wall-clock timings belong in ``timing``."""
        return {}

    def params(self) -> dict[str, Any]:
        """Constructor parameters, for outputs (``summary.json``)."""
        out: dict[str, Any] = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name != "self" and hasattr(self, name):
                out[name] = getattr(self, name)
        return out

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


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
