"""The scenario file format, as pydantic models.

These models are the single source of truth for the format: they validate files (unknown keys
are errors, so a typo never silently falls back to a default) and they generate the JSON Schema
published in ``docs/scenario.schema.json``.  Times inside a job's utility are relative to the
job's submit time; a string like ``"2.5x"`` means 2.5 times the job's standalone runtime.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from utilon.jobs.specs import RunSpec
from utilon.limits import MAX_COUNT, MAX_MACHINES, MAX_NAME, MAX_SECONDS, MAX_WEIGHT

AttrValue = str | int | float | bool


class _Strict(BaseModel):
    # NaN and infinity are never meaningful in a scenario: refuse them at the field
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False,
                                defer_build=True)


Seconds = Annotated[float, Field(ge=0, le=MAX_SECONDS)]
"""A time or duration in seconds: at most ``limits.MAX_SECONDS`` (about 31.7 years)."""


# -- distributions ---------------------------------------------------------------------------
class _Dist(_Strict):
    min: float | None = Field(None, description="clip samples below this value")
    max: float | None = Field(None, description="clip samples above this value")


class ConstantDist(_Dist):
    dist: Literal["constant"]
    value: float


class UniformDist(_Dist):
    dist: Literal["uniform"]
    low: float
    high: float


class NormalDist(_Dist):
    dist: Literal["normal"]
    mean: float
    std: float = Field(ge=0)


class LognormalDist(_Dist):
    dist: Literal["lognormal"]
    median: float = Field(gt=0, description="exp(mu) of the underlying normal")
    sigma: float = Field(ge=0)


class ExponentialDist(_Dist):
    dist: Literal["exponential"]
    mean: float = Field(gt=0)


class ChoiceDist(_Dist):
    dist: Literal["choice"]
    values: list[float] = Field(min_length=1)
    weights: list[float] | None = None


DistSpec = Annotated[
    ConstantDist | UniformDist | NormalDist | LognormalDist | ExponentialDist | ChoiceDist,
    Field(discriminator="dist"),
]
Num = float | DistSpec
"""A number, or a distribution sampled with the scenario's seeded generator."""

TimeSpec = float | str | DistSpec
"""Seconds after submit (a number or distribution), or ``"<k>x"``: k x standalone runtime."""


# -- utilities -------------------------------------------------------------------------------
class DeadlineSpec(_Strict):
    kind: Literal["deadline"]
    deadline: TimeSpec
    value: Num = 1.0
    late_value: Num = 0.0


class SoftHardSpec(_Strict):
    kind: Literal["soft_hard"]
    soft: TimeSpec
    hard: TimeSpec
    value: Num = 1.0


class TruncatedLinearSpec(_Strict):
    kind: Literal["truncated_linear"]
    deadline: TimeSpec
    slope: Num = Field(description="utility lost per second of execution")
    value: Num = 1.0
    late_value: Num = 0.0


class SigmoidSpec(_Strict):
    kind: Literal["sigmoid"]
    deadline: TimeSpec
    p: Num = 1.0
    mu: Num = Field(description="decay factor (per second)")


class PiecewiseSpec(_Strict):
    kind: Literal["piecewise"]
    points: list[tuple[TimeSpec, float]] = Field(min_length=1)


class ConstantSpec(_Strict):
    kind: Literal["constant"]
    value: float = 1.0


UtilitySpec = Annotated[
    DeadlineSpec | SoftHardSpec | TruncatedLinearSpec | SigmoidSpec | PiecewiseSpec
    | ConstantSpec,
    Field(discriminator="kind"),
]


# -- jobs ------------------------------------------------------------------------------------
class UsagePhaseSpec(_Strict):
    fraction: float = Field(gt=0, le=1)
    usage: dict[str, float]
    name: str = ""


class StageSpec(_Strict):
    name: str = Field(min_length=1, max_length=MAX_NAME)
    kind: str | None = Field(None, description="map, reduce or task; default from the name")
    tasks: Num | None = Field(
        None, description="number of tasks (sampled once per job, rounded, >= 1)")
    duration: Num | None = Field(
        None, description="seconds of work per task at full speed (sampled per task)")
    durations: list[Annotated[float, Field(gt=0, le=MAX_SECONDS)]] | None = Field(
        None, min_length=1, description="exact seconds of each task (instead of tasks and "
        "duration; what trace importers write)")
    demand: dict[str, float] = Field(default_factory=lambda: {"slots": 1.0})
    usage: list[UsagePhaseSpec] | None = Field(
        None, description="actual usage phases; default: one phase using the declared demand")
    after: list[str] | None = Field(
        None, description="stages this one waits for; default: reduce waits for all maps")
    gang: bool = False
    estimate: float | None = Field(None, gt=0, description="task duration policies expect")
    colocate_speedup: float = Field(
        1.0, gt=0, description="tasks run this many times faster when the whole stage starts "
        "at once on one machine (alsched's NBODY locality speedup)")
    request: str | dict[str, Any] | None = Field(
        None, description="alsched placement utility: an expression in prefix syntax, a "
        "structured expression, or {expr, classes, each} (docs/policies.md#alsched)")

    @model_validator(mode="after")
    def _sizes(self) -> StageSpec:
        t = self.tasks
        if isinstance(t, int | float) and not (t >= 1 and float(t).is_integer()):
            # a literal count is taken as written (a distribution is rounded and clipped)
            raise ValueError(f"tasks must be a whole number >= 1, got {t:g}")
        if self.durations is not None:
            if self.tasks is not None or self.duration is not None:
                raise ValueError("give `durations` or `tasks` and `duration`, not both")
        elif self.tasks is None or self.duration is None:
            raise ValueError("give `tasks` and `duration` (or the list `durations`)")
        return self


class JobSpec(_Strict):
    id: str = Field(min_length=1, max_length=MAX_NAME)
    submit: Seconds
    tenant: str = Field("default", max_length=MAX_NAME)
    weight: float = Field(1.0, gt=0, le=MAX_WEIGHT)
    priority: int = Field(0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    job_class: str = Field("", alias="class", max_length=MAX_NAME)
    utility: UtilitySpec = Field(default_factory=lambda: ConstantSpec(kind="constant"))
    stages: list[StageSpec] = Field(
        default_factory=list, description="the job's stages (or give `run` instead)")
    run: RunSpec | None = Field(
        None, description="a real job (word count, grep, sort, pi, n-body, or Python "
        "callables): its stages and task durations' priors come from the job kind")
    request: str | dict[str, Any] | None = Field(
        None, description="alsched placement utility for every stage that has none of its "
        "own (real jobs' stages come from their kind, so this is how they state one)")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                              allow_inf_nan=False)

    @model_validator(mode="after")
    def _stages_or_run(self) -> JobSpec:
        if bool(self.stages) == (self.run is not None):
            raise ValueError("give either `stages` or `run` (a real job), not both or neither")
        return self


class TemplateSpec(_Strict):
    name: str = Field(min_length=1)
    share: float = Field(1.0, gt=0, description="relative frequency of this template")
    job_class: str | None = Field(None, alias="class")
    weight: Num = 1.0
    priority: Num = 0.0
    utility: UtilitySpec = Field(default_factory=lambda: ConstantSpec(kind="constant"))
    stages: list[StageSpec] = Field(min_length=1)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True,
                              allow_inf_nan=False)


class PoissonArrival(_Strict):
    process: Literal["poisson"]
    mean_interarrival: float = Field(gt=0, le=MAX_SECONDS)
    start: Seconds = 0.0


class UniformArrival(_Strict):
    process: Literal["uniform"]
    interval: float = Field(gt=0, le=MAX_SECONDS)
    start: Seconds = 0.0


class BatchArrival(_Strict):
    process: Literal["batch"]
    at: Seconds = 0.0


ArrivalSpec = Annotated[PoissonArrival | UniformArrival | BatchArrival,
                        Field(discriminator="process")]


class GeneratorSpec(_Strict):
    count: int = Field(ge=1, le=MAX_COUNT)
    id_prefix: str = "job"
    arrival: ArrivalSpec
    tenants: list[str] = Field(default_factory=lambda: ["default"], min_length=1)
    templates: list[TemplateSpec] = Field(min_length=1)


class WorkloadSpec(_Strict):
    jobs: list[JobSpec] = Field(default_factory=list)
    generate: list[GeneratorSpec] = Field(default_factory=list)


# -- cluster ---------------------------------------------------------------------------------
class MachineGroupSpec(_Strict):
    id: str = Field(min_length=1, description="machine id, or id prefix when count > 1")
    count: int = Field(1, ge=1, le=MAX_MACHINES)
    capacity: dict[str, float] = Field(min_length=1)
    attributes: dict[str, AttrValue] = Field(default_factory=dict)
    price: float = Field(0.0, ge=0, description="cost per machine-hour")
    down: bool = Field(False, description="absent at t=0 (joins later via the timeline)")

    @field_validator("capacity")
    @classmethod
    def _nonneg(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if x < 0:
                raise ValueError(f"capacity of {k!r} must be >= 0")
        return v


class CapacityEventSpec(_Strict):
    at: Seconds
    action: Literal["join", "leave", "scale", "speed"]
    machines: list[str] | str = Field(
        description="machine ids, a glob like 'small-*', or 'all'")
    factor: float = Field(1.0, ge=0)


class ClusterSpec(_Strict):
    machines: list[MachineGroupSpec] = Field(min_length=1)
    capacity: list[CapacityEventSpec] = Field(default_factory=list)
    thrashing: dict[str, float] = Field(
        default_factory=dict, description="over-commitment penalty per resource (simulator "
        "only; default none): with exponent g >= 0 for resource r, when the tasks on a machine "
        "use U_r > C_r of it, each task using r runs at (C_r/U_r)^(1+g) instead of C_r/U_r, "
        "so the machine does only (C_r/U_r)^g of r's capacity worth of useful work (disk seek "
        "thrashing, memory swapping); 0 is plain proportional sharing")

    @field_validator("thrashing")
    @classmethod
    def _gamma(cls, v: dict[str, float]) -> dict[str, float]:
        for k, g in v.items():
            if not (math.isfinite(g) and g >= 0):
                raise ValueError(f"thrashing exponent of {k!r} must be a finite number >= 0, "
                                 f"got {g!r}")
        return v


class PolicySpec(_Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class SimulationSpec(_Strict):
    horizon: float | None = Field(None, gt=0, description="stop the run at this time")
    estimates: str = Field(
        "declared", description="the task durations policies see (docs/estimates.md): "
        "`exact` (or `declared`: the declared ones, perfect knowledge), `online` (the running "
        "mean of observed task times per job and stage, starting from the declared value), "
        "`realistic` (priors off by an error measured on a real trace, then learned online) "
        "or `lognormal:SIGMA` (priors off by exp(N(0, SIGMA^2)), then learned online); live "
        "runs always estimate online", examples=["exact", "online", "realistic",
                                                   "lognormal:0.5"],
        json_schema_extra={"pattern": r"^(exact|declared|online|realistic|lognormal:.+)$"})

    @field_validator("estimates")
    @classmethod
    def _estimates(cls, v: str) -> str:
        # the error models live with the simulator; imported here, when a scenario is read,
        # so that importing the format does not load the simulator
        from utilon.sim.estimates import canonical

        return canonical(v)


class ScenarioSpec(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = 0
    cluster: ClusterSpec
    workload: WorkloadSpec
    policy: PolicySpec | None = Field(None, description="policy `utilon simulate` uses by default")
    policies: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="parameters per policy name, used whenever it runs")
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="free-form facts about the scenario; trace "
        "importers record their source files, what is real and what is assumed here, and "
        "every run copies it into provenance.json")
    simulation: SimulationSpec = Field(
        default_factory=lambda: SimulationSpec(horizon=None, estimates="declared"))
    admission: Literal["refuse", "accept"] = Field(
        "refuse", description="a job whose goal comes before it could finish even alone on the "
        "whole cluster: `refuse` (the default) makes `validate`, `simulate`, `compare` and `run` "
        "stop with one line naming it; `accept` runs it and counts it in the summary "
        "(`impossible_goals`)")
