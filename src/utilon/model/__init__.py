"""The domain model: values that describe clusters, jobs and what their completion is worth."""

from utilon.model.cluster import AttrValue, CapacityAction, CapacityChange, Cluster, Machine
from utilon.model.job import Job, Stage, Task, UsagePhase, mapreduce_job
from utilon.model.lifecycle import JobState, MachineState, TaskState
from utilon.model.resources import Resources
from utilon.model.utility import (
    UTILITY_KINDS,
    Constant,
    DeadlineStep,
    PiecewiseLinear,
    Sigmoid,
    SoftHard,
    TimeUtility,
    TruncatedLinear,
)

__all__ = [
    "UTILITY_KINDS",
    "AttrValue",
    "CapacityAction",
    "CapacityChange",
    "Cluster",
    "Constant",
    "DeadlineStep",
    "Job",
    "JobState",
    "Machine",
    "MachineState",
    "PiecewiseLinear",
    "Resources",
    "Sigmoid",
    "SoftHard",
    "Stage",
    "Task",
    "TaskState",
    "TimeUtility",
    "TruncatedLinear",
    "UsagePhase",
    "mapreduce_job",
]
