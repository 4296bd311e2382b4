"""The league file (``league.yaml``): the competitors, the targets, and the workload sets.

Validated with pydantic like a scenario, with the same one-line errors (file, field, fix).
A workload is one of

* ``scenario: PATH`` -- an existing scenario file, run at the league's seeds (its sampled
  parts and estimate errors change with the seed);
* ``trace: {kind, file, start, duration, load, max_jobs, ...}`` -- a trace import recipe, run
  through ``utilon trace import``'s code (``utilon.traces.import_trace``) with the league's
  seed as the import's seed (job classes, utilities and goals are drawn per seed; the trace's
  jobs are the trace's), optionally with ``capacity:`` -- a cluster import (``solar``) whose
  machines and capacity timeline replace the imported cluster;
* ``repro: {paper: cora | rds, ...}`` -- a paper's evaluation workload, built by the code of
  ``utilon reproduce`` at each seed.

Paths in the file are relative to the file's folder; trace files are relative to ``data``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from utilon.errors import ScenarioError

SETS = ("tuning", "held-out")
"""The tuning set is what a candidate policy may be developed against; the held-out set is
run once, at the end, and reported as it comes out (docs/league.md)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceRecipe(_Strict):
    """``utilon trace import KIND FILE`` with its options (same names, ``_`` for ``-``)."""

    kind: str
    file: str
    start: str | None = None
    duration: str | None = None
    max_jobs: int | None = Field(None, ge=1)
    arrival_scale: float = Field(1.0, gt=0)
    machines: int | None = Field(None, ge=1)
    load: float | None = Field(None, gt=0)
    slack: float | None = Field(None, gt=0)
    utility: Literal["cora", "deadline"] | None = None
    set: dict[str, Any] = Field(default_factory=dict)
    max_bad: float = Field(0.01, ge=0, le=1)
    capacity: TraceRecipe | None = None
    """A cluster import (e.g. ``solar``) whose cluster replaces the imported one, as
    ``--capacity FILE`` does (imported once: it does not depend on the seed)."""


class ReproRecipe(_Strict):
    """A paper's evaluation workload: ``cora`` (§III-C, Table I's mix; ``jobs``) or ``rds``
    (Table 3's jobs on the solar-powered cluster of the seed's day; ``mode``)."""

    paper: Literal["cora", "rds"]
    jobs: int | None = Field(None, ge=1)
    mode: Literal["scale-up", "scale-out"] = "scale-up"


class Workload(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    scenario: str | None = None
    trace: TraceRecipe | None = None
    repro: ReproRecipe | None = None
    first_seed: int | None = Field(None, ge=0)
    """The first of the league's seeds for this workload (default: a scenario file's own
    seed; 0 for a recipe)."""
    wall_limit: float | None = Field(None, gt=0)
    """Seconds of wall-clock time per run (default: the league's)."""
    cpu_limit: float | None = Field(None, gt=0)
    """Seconds of CPU time per run (default: the league's): unlike a wall-clock limit, it
    stops the same runs on a busy machine as on an idle one."""
    exclude: dict[str, str] = Field(default_factory=dict)
    """Competitors not run on this workload, each with the reason (printed with the table)."""
    note: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        given = [k for k in ("scenario", "trace", "repro") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of scenario, trace, repro"
                             + (f" (got {', '.join(given)})" if given else ""))
        return self

    @field_validator("exclude")
    @classmethod
    def _reasons(cls, v: dict[str, str]) -> dict[str, str]:
        for k, reason in v.items():
            if not str(reason).strip():
                raise ValueError(f"excluding {k!r} needs a reason")
        return v


class Competitor(_Strict):
    """A registered policy, or a named variant: a policy with parameters."""

    name: str
    policy: str
    params: dict[str, Any] = Field(default_factory=dict)


class Targets(_Strict):
    """What the candidate must do on every workload (means over the seeds)."""

    baselines: tuple[str, ...] = ("fifo", "fair", "edf-p", "rrh")
    """The competitors the penalty and minimum-utility targets compare with."""
    penalty_factor: float = Field(1.25, gt=0)
    utility_min_slack: float = Field(0.05, ge=0)


class League(_Strict):
    seeds: int = Field(5, ge=1)
    estimates: tuple[str, ...] = ("realistic", "exact")
    judged: str = "realistic"
    """The estimate mode the targets are set for; the other modes are shown too."""
    candidate: str = "default"
    wall_limit: float | None = Field(None, gt=0)
    cpu_limit: float | None = Field(None, gt=0)
    data: str = "../shared/data"
    competitors: tuple[str | Competitor, ...]
    targets: Targets = Field(default_factory=lambda: Targets.model_validate({}))
    sets: dict[str, tuple[Workload, ...]]

    @field_validator("sets")
    @classmethod
    def _known_sets(cls, v: dict[str, tuple[Workload, ...]]) -> dict[str, tuple[Workload, ...]]:
        for k, items in v.items():
            if k not in SETS:
                raise ValueError(f"unknown set {k!r}; valid: {', '.join(SETS)}")
            names = [w.name for w in items]
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"workload name(s) used twice in {k}: {', '.join(sorted(dup))}")
        return v

    def competitor_list(self) -> list[Competitor]:
        out = [c if isinstance(c, Competitor) else Competitor(name=c, policy=c)
               for c in self.competitors]
        names = [c.name for c in out]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ScenarioError(f"competitor(s) listed twice: {', '.join(sorted(dup))}",
                                where="league: competitors")
        return out


def read_league(path: str | Path) -> tuple[League, Path]:
    """The league file, validated, and the folder its relative paths start from."""
    from utilon.readers import pydantic_error
    from utilon.scenario.load import read_data

    p = Path(path)
    data = read_data(p)
    try:
        league = League.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(exc, data, str(p), doc="docs/league.md") from None
    league.competitor_list()
    return league, p.resolve().parent
