"""The ``run:`` block of a job in a scenario file: which real job to execute, as pydantic models.

One model per job kind, discriminated by ``kind``; a kind that is not built in is an installed
plugin's (``utilon.jobs`` entry points, validated by the plugin's model: a :class:`JobKind`,
found by :func:`job_kind`; the registry is here, with the union that names it).  Unknown keys are
errors (a typo never falls back to a default) and every model is frozen.  These models only
describe a job; turning one into stages, input and a verifier is ``utilon.jobs.kinds.plan_job``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, NamedTuple, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainValidator,
    Tag,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from utilon.jobs.plan import JobPlan


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_demand(v: dict[str, float] | None) -> dict[str, float] | None:
    for name, x in (v or {}).items():
        if x < 0:
            raise ValueError(f"demand of {name!r} must be >= 0, got {x}")
    return v


class _Planned(_Strict):
    """Fields every built-in kind shares: overrides of the scheduler-facing numbers."""

    estimate: dict[str, float] | None = Field(
        None, description="prior seconds per task, by stage name; overrides the kind's "
        "size-derived prior for the stages named")
    demand: dict[str, float] | None = Field(
        None, description="declared demand of every task (resource -> amount); "
        "None: the scenario's default demand")

    @field_validator("estimate")
    @classmethod
    def _positive_estimate(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for name, x in (v or {}).items():
            if x <= 0:
                raise ValueError(f"estimate of stage {name!r} must be > 0, got {x}")
        return v

    @field_validator("demand")
    @classmethod
    def _nonnegative_demand(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return _check_demand(v)


class _TextInput(_Planned):
    """Fields of the kinds that read text (word count, grep)."""

    maps: int = Field(4, ge=1, description="number of map tasks (input splits)")
    input: str | None = Field(
        None, description="a text file or a directory of text files; relative paths are "
        "relative to the scenario file's folder; None: generate text")
    generate_mb: float = Field(
        2.0, gt=0, description="when input is None: megabytes (10**6 bytes) of text to generate")
    vocabulary: int = Field(
        5000, ge=1, description="when input is None: distinct words of the generated text")


class WordCountRun(_TextInput):
    kind: Literal["wordcount"] = Field(description="count every word of a text corpus")
    reduces: int = Field(2, ge=1, description="number of reduce tasks (output partitions)")


class GrepRun(_TextInput):
    kind: Literal["grep"] = Field(
        description="count the matches of a regex in a text corpus (Hadoop's grep example); "
        "one reduce task")
    pattern: str = Field(description="a Python regular expression, matched within each line")

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"pattern {v!r} is not a valid Python regex: {e}") from None
        return v


class SortRun(_Planned):
    kind: Literal["sort"] = Field(
        description="TeraSort: sort generated 100-byte records (10-byte key, 90-byte value)")
    records: int = Field(200_000, ge=1, description="number of 100-byte records to generate")
    maps: int = Field(4, ge=1, description="number of map tasks (record ranges)")
    reduces: int = Field(2, ge=1, description="number of reduce tasks (key ranges)")


class PiRun(_Planned):
    kind: Literal["pi"] = Field(
        description="estimate pi by quasi-Monte Carlo (Hadoop's QuasiMonteCarlo example); "
        "one reduce task")
    maps: int = Field(4, ge=1, description="number of map tasks")
    samples: int = Field(2_000_000, ge=1, description="Halton points evaluated by each map")


class NBodyRun(_Planned):
    kind: Literal["nbody"] = Field(
        description="gravitational n-body simulation (alsched's NBODY): one stage per step")
    bodies: int = Field(2000, ge=2, description="number of bodies")
    tasks: int = Field(4, ge=1, description="tasks per step; task i advances a slice of bodies")
    steps: int = Field(1, ge=1, description="time steps; step s is stage 'step-s'")
    gang: bool = Field(True, description="start all tasks of a step together")
    dt: float = Field(0.01, gt=0, description="time step of the integrator")
    colocate_speedup: float = Field(
        1.0, ge=1, le=100, description="alsched's NBODY speedup f (§5.1): a step whose tasks "
        "all start together on one machine runs f times faster than one spread over several "
        "(live, a spread step pays an emulated exchange of (f - 1) x its compute time)")


class CallableStage(_Strict):
    name: str = Field(min_length=1, description="stage name, unique within the job")
    kind: str = Field("task", description="map, reduce or task (how the scheduler sees it)")
    tasks: int = Field(ge=1, description="number of tasks")
    call: str = Field(
        description="task function as 'package.module:function'; it receives a TaskContext")
    args: dict[str, Any] = Field(
        default_factory=dict, description="JSON-able arguments, passed as TaskContext.args")
    estimate: float = Field(gt=0, description="prior expected seconds per task")
    after: list[str] | None = Field(
        None, description="stages this one waits for; None: reduce waits for all maps, "
        "other kinds for none")
    demand: dict[str, float] | None = Field(
        None, description="declared demand of every task; None: the scenario's default demand")
    gang: bool = Field(False, description="start all tasks of the stage together")

    @field_validator("demand")
    @classmethod
    def _nonnegative_demand(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return _check_demand(v)


class CallableRun(_Strict):
    kind: Literal["callable"] = Field(description="stages whose tasks call your own functions")
    stages: list[CallableStage] = Field(min_length=1, description="the job's stages, in order")


BUILTIN_RUNS: tuple[type[BaseModel], ...] = (WordCountRun, GrepRun, SortRun, PiRun, NBodyRun,
                                             CallableRun)
BUILTIN_KINDS: tuple[str, ...] = tuple(get_args(m.model_fields["kind"].annotation)[0]
                                       for m in BUILTIN_RUNS)


def _kind_of(value: Any) -> str:
    """The union member a run block is validated by: its built-in kind, else ``plugin``."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return kind if kind in BUILTIN_KINDS else "plugin"


# -- job kinds of other packages -------------------------------------------------------------
class JobKind(_Planned):
    """A job kind from another package: the pydantic model of its ``run:`` block, which plans
    itself.  A subclass sets ``kind`` to a ``Literal`` of its name, adds its fields (unknown
    keys are errors, the model is frozen, as for the built-in kinds; ``estimate`` and
    ``demand`` override the plan's priors and demands as they do for them) and implements
    ``plan``; an installed package declares it as a ``utilon.jobs`` entry point of the same
    name.  Task functions are named by import path (``StagePlan.call``), so they run in local
    worker processes and on Ray workers alike, wherever the package is installed."""

    kind: str
    summary: ClassVar[str] = ""
    """one line for ``utilon job-kinds``"""

    def plan(self, job_id: str, seed: int, base_dir: Path) -> JobPlan:
        """The job's stages, input preparation and verifier; a ``ValueError`` whose message
        starts with the field at fault (``"tasks: ..."``) becomes one line naming the job."""
        raise NotImplementedError(f"job kind {self.kind!r} does not implement plan()")


PLUGIN_GROUP = "utilon.jobs"


class KindInfo(NamedTuple):
    """One job kind, for listings: its one-line summary, fields with defaults, and origin."""

    kind: str
    summary: str
    fields: str
    origin: str


def _plugin_problem(name: str, obj: Any) -> str | None:
    if not (isinstance(obj, type) and issubclass(obj, JobKind)):
        what = getattr(obj, "__qualname__", None) or repr(obj)
        return f"{what} is not a job kind (a subclass of utilon.jobs.kinds.JobKind)"
    kinds = get_args(obj.model_fields["kind"].annotation)
    if kinds != (name,):
        return (f"the entry point is named {name!r} but the job kind's kind field is "
                f"{obj.model_fields['kind'].annotation!r} (write kind: Literal[{name!r}])")
    if name in BUILTIN_KINDS:
        return f"{name!r} is a built-in job kind's name; the built-in is used"
    if obj.plan is JobKind.plan:
        return f"job kind {name!r} does not implement plan()"
    return None


def job_kind(kind: str) -> type[JobKind] | None:
    """The installed plugin's job kind ``kind``, or None (``PluginError`` if it is broken)."""
    from utilon.plugins import load

    cls: type[JobKind] | None = load(PLUGIN_GROUP, kind, _plugin_problem)
    return cls


def plugin_run(value: Any) -> JobKind:
    """Validate a run block whose kind is not built in against its plugin's model (the
    scenario format's ``RunSpec`` calls this for such kinds)."""
    from utilon.plugins import PluginError

    if isinstance(value, JobKind):
        return value
    kind = value.get("kind") if isinstance(value, dict) else None
    if not isinstance(kind, str):
        raise PydanticCustomError("job_kind", f"a run block needs a kind, one of: {_listing()}")
    try:
        cls = job_kind(kind)
    except PluginError as e:
        raise PydanticCustomError("job_kind", e.one_line()) from None
    if cls is None:
        raise PydanticCustomError(
            "job_kind", f"unknown job kind {kind!r}; valid: {_listing()} (a plugin's kind "
            "needs its package installed; `utilon job-kinds` lists them)")
    return cls.model_validate(value)


def _listing() -> str:
    return ", ".join(k.kind for k in job_kinds())


def _fields(model: type[Any]) -> str:
    """A kind's own fields (``estimate`` and ``demand``, which every kind has, left out)."""
    return ", ".join(f"{n}={f.default!r}" if not f.is_required() else n
                     for n, f in model.model_fields.items()
                     if n not in ("kind", "estimate", "demand")) or "-"


def job_kinds() -> list[KindInfo]:
    """The built-in job kinds, then the installed plugins' (a broken plugin is a logged
    warning, and left out)."""
    from utilon.plugins import load_all

    out = [KindInfo(k, m.model_fields["kind"].description or "", _fields(m), "utilon")
           for k, m in zip(BUILTIN_KINDS, BUILTIN_RUNS, strict=True)]
    for name, (cls, plugin) in sorted(load_all(PLUGIN_GROUP, _plugin_problem).items()):
        summary = cls.summary or cls.model_fields["kind"].description or ""
        out.append(KindInfo(name, summary, _fields(cls), plugin.dist))
    return out


PluginRun = Annotated[Any, PlainValidator(plugin_run), WithJsonSchema({
    "type": "object", "title": "PluginRun", "required": ["kind"],
    "description": "a job kind of an installed plugin (`utilon job-kinds` lists them, "
                   "docs/plugins.md); its fields are the plugin's",
    "properties": {"kind": {"type": "string", "not": {"enum": list(BUILTIN_KINDS)}}}})]
"""A ``utilon.jobs`` entry point's kind: validated by the plugin's own model."""

RunSpec = Annotated[
    Annotated[WordCountRun, Tag("wordcount")] | Annotated[GrepRun, Tag("grep")]
    | Annotated[SortRun, Tag("sort")] | Annotated[PiRun, Tag("pi")]
    | Annotated[NBodyRun, Tag("nbody")] | Annotated[CallableRun, Tag("callable")]
    | Annotated[PluginRun, Tag("plugin")],
    Discriminator(_kind_of),
]
"""What a job executes when run live; ``kind`` selects the model (a kind that is not built in
is an installed plugin's, :class:`JobKind`)."""
