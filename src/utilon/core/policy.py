"""The policy interface: what the scheduler core calls, defined next to the core.

A policy is an object configured in its constructor with one method,
``decide(snapshot) -> Decision``: no clock reads, no I/O, no randomness it was not handed.
It declares which events it wants to be called on (``triggers``) and, if it runs a periodic
control loop, its ``tick`` in seconds.  The registry of named policies lives in
``utilon.policies``; the core needs only this interface.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from utilon.core.decision import Decision
from utilon.core.messages import Trigger
from utilon.core.snapshot import ClusterSnapshot, JobView
from utilon.model.cluster import Cluster
from utilon.model.job import Job

EVENT_TRIGGERS: frozenset[Trigger] = frozenset({
    Trigger.ARRIVAL, Trigger.STAGE_FINISHED, Trigger.JOB_FINISHED, Trigger.TASK_FAILED,
    Trigger.CAPACITY,
})
"""The events a policy is called on unless it says otherwise (``Policy.triggers``): arrivals,
stage and job completions, task failures and capacity changes; not every task completion, and
no periodic tick."""


class Policy(ABC):
    """A slot-world scheduling policy: ``decide(snapshot) -> Decision``, configured in its
    constructor.

    A subclass sets ``name`` and ``summary`` and implements ``decide``.  To be found by name
    (``utilon.runner.run_policy``, ``utilon compare --policies``) it is registered in the
    process with ``utilon.policies.register``, or named by its import path
    (``package.module:Class``), or installed as a ``utilon.policies`` entry point.  Its
    constructor's parameters, with type hints and
    defaults, are its configuration: a scenario's ``policies.<name>`` section and
    ``--param`` are validated against them.  Everything that can change a decision must be in
    the snapshot: no clock reads, no I/O, no randomness the constructor was not handed (a
    seed).  The hooks below (``bind``, ``unrunnable``, ``job_finished``, ``report``) are
    optional."""

    name: ClassVar[str]
    """The registered name (``utilon compare --policies NAME``); lower case, hyphens."""
    summary: ClassVar[str]
    """One line for ``utilon policies``."""
    paper: ClassVar[str] = ""
    """The paper the policy implements, if any (for ``utilon policies``)."""
    world: ClassVar[str] = "slot"
    """the world it runs in (``utilon.policies.WORLDS``); cloud services are ``"cloud"``."""
    triggers: ClassVar[frozenset[Trigger]] = EVENT_TRIGGERS
    """the events it is called on; the core reads them once, when it is built (a policy
    that chooses them sets them in its ``__init__``)."""
    uses_free_capacity: ClassVar[bool] = False
    """True for policies that read ``ClusterSnapshot.free``, the declared free capacity per
    machine (building it costs O(machines x resources) per decision)."""
    uses_placement: ClassVar[bool] = False
    """True for policies that need to know which machine each running task is on
    (``ClusterSnapshot.placement``): RAS's per-TaskTracker job slots."""
    overcommits: ClassVar[bool] = False
    """True for policies that over-commit declared resources on purpose (static slots): live
    backends then record over-commitment instead of refusing it."""
    tick: float | None = None
    """The period in seconds of a periodic control loop, or ``None`` for none.  A policy
    with a tick also lists ``Trigger.TICK`` in its ``triggers`` to be called on it."""
    order_only: ClassVar[bool] = False
    """True for an *order-only* policy: its decision is every active job, one whole-job grant
    each with no cap, sorted stably (ties stay in arrival order) by ``order_key``, which
    depends only on what a job was submitted with (FIFO, EDF-P).  At an arrival whose jobs all
    sort after the installed order the core then appends them without a snapshot or a call to
    ``decide``: the decision ``decide`` would return, without its O(active jobs) work.  Only
    after a decision that is exactly such an order (no backfill, slot limit, infeasible items
    or solver time), and never with a decision hook or validation."""

    @abstractmethod
    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        """Return the decision for this snapshot: grants in priority order for the jobs
        in ``snapshot.jobs``, and what cannot be honoured as ``Infeasible`` items.  Called at
        each event in ``triggers``; the decision stays installed until the next call."""

    def bind(self, cluster: Cluster) -> None:  # noqa: B027 - optional hook, no-op by default
        """Called once by the scheduler core before the first decision, with the cluster
        (machines and capacity timeline) the run starts from.  Policies that must know the
        future capacity (RDS's oracle predictor) keep what they need; others ignore it."""

    def unrunnable(self, job: Job, cluster: Cluster) -> str | None:
        """Why ``job`` can never run under this policy on ``cluster`` (its parameters forbid
        it: a gang wider than the static slots allow, a request no allocation can satisfy),
        or ``None``.  The core asks before a run and refuses such a job with this reason;
        only what the policy adds matters here -- a task that fits no machine at all is the
        core's own check (``core.feasibility``)."""
        return None

    def order_key(self, job: JobView) -> Any:
        """The sort key of an order-only policy (``order_only``); ``decide`` sorts by it."""
        raise NotImplementedError(f"policy {self.name!r} is not order-only")

    def job_finished(self, job_id: str, now: float) -> None:  # noqa: B027 - optional hook
        """Called by the core when a job's last task completes, before any decision at
        ``now``: a policy that predicts completions compares its plan with reality here."""

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
