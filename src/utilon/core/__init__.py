"""The scheduler core: messages, decisions, snapshots and the state machine between them."""

from utilon.core.decision import Decision, Grant, Infeasible, SlotLimit
from utilon.core.messages import (
    CapacityChanged,
    Command,
    JobSubmitted,
    Launch,
    Preempt,
    Stimulus,
    TaskFailed,
    TaskFinished,
    TaskRef,
    Tick,
    Trigger,
)
from utilon.core.policy import EVENT_TRIGGERS, Policy
from utilon.core.snapshot import ClusterSnapshot, JobView, MachineView, StageView

__all__ = [
    "EVENT_TRIGGERS",
    "CapacityChanged",
    "ClusterSnapshot",
    "Command",
    "Decision",
    "Grant",
    "Infeasible",
    "JobSubmitted",
    "JobView",
    "Launch",
    "MachineView",
    "Policy",
    "Preempt",
    "SlotLimit",
    "StageView",
    "Stimulus",
    "TaskFailed",
    "TaskFinished",
    "TaskRef",
    "Tick",
    "Trigger",
]
