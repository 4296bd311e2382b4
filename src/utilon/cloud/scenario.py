"""The cloud scenario format: a user's own jobs in Cura's world, as pydantic models.

A cloud scenario is a YAML (or JSON) file with a ``cloud:`` section where a slot scenario has
``cluster:``.  It says what the cloud is (servers, VM types, boot and start-up times), how long
each kind of job runs on each cluster configuration (``profiles:``: performance models,
Appendix B-style tables, or the 50 SWIM-derived models of §4.1), and the jobs (listed, or
generated the §4.2 way).  ``utilon simulate``, ``compare``, ``plan``, ``validate`` and
``report`` accept it as they accept a slot scenario; docs/cloud.md describes the format and
``docs/cloud-scenario.schema.json`` is its JSON Schema (``utilon schema --world cloud``).

Times are seconds; a job's ``deadline`` is relative to its arrival, as every deadline in a slot
scenario is relative to its submission.  A job whose deadline no configuration could meet even
alone from its arrival is refused with one line (it would be a miss under every service).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from utilon.cloud.model import CloudJob, CloudSpec, VMType, default_vm_types
from utilon.cloud.profile import ModelProfile, Profile, ProfileStore, TableProfile
from utilon.cloud.workload import CATEGORY_MB, DeadlineDist, generate, swim_profiles
from utilon.errors import ScenarioError, UtilonError
from utilon.limits import MAX_COUNT, MAX_MACHINES, MAX_SECONDS, max_tasks
from utilon.readers import pydantic_error

MAX_VMS = 1000
"""Largest cluster a profile may predict for (the paper's grid stops at 40 VMs)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


Seconds = Field(ge=0, le=MAX_SECONDS)


class VMTypeSpec(_Strict):
    name: str = Field(min_length=1, description="the VM type's name, used by profiles")
    cores: int = Field(ge=1, le=1024, description="VCPUs (and as many GB of memory)")


class CloudSection(_Strict):
    servers: int | None = Field(
        None, ge=0, le=MAX_MACHINES, description="physical servers of the fleet `simulate` "
        "and `compare` run on (a dedicated service sizes its own); `utilon plan` finds the "
        "smallest that meets a target")
    server_cores: int = Field(16, ge=1, le=4096, description="cores (and GB) of one server")
    vm_types: list[VMTypeSpec] | None = Field(
        None, min_length=1, max_length=64,
        description="VM types; default: the paper's six, 2 to 12 VCPUs in steps of 2")
    boot_time: float = Field(60.0, ge=0, le=MAX_SECONDS,
                             description="seconds to create and boot a per-job cluster's VMs")
    hadoop_start: float = Field(10.0, ge=0, le=MAX_SECONDS,
                                description="seconds to start Hadoop on a cluster")
    load_mbps: float = Field(50.0, ge=1e-3, le=1e9,
                             description="MB/s each VM loads its job's input at")
    reconf_overhead: float | None = Field(
        None, ge=0, le=MAX_SECONDS, description="§3.2's cost (server-seconds) of each VM a "
        "reconfiguration creates or shuts down; default: one boot of that VM")
    prediction_error: float = Field(
        0.0, ge=0, lt=1, description="error bound of the predictions: runs are reserved for "
        "t_pred × (1 + e) and take t_pred × (1 + u), u uniform in [-e, e]")


class ModelProfileSpec(_Strict):
    work: float = Field(gt=0, le=1e6, description="core-seconds per MB of input on the job's "
                        "best VM type")
    best: str = Field(description="the VM type the job runs most efficiently on")
    type_loss: float = Field(0.12, ge=0, le=100, description="efficiency lost per VM type "
                             "step away from `best`")
    scale_loss: float = Field(0.01, ge=0, le=1, description="efficiency lost per VM added")
    max_vms: int = Field(40, ge=1, le=MAX_VMS, description="largest cluster predicted")


class TableProfileSpec(_Strict):
    t10: dict[str, float] = Field(
        description="seconds on 10 VMs of each VM type (Appendix B's Tables 1-4); larger "
        "clusters in steps of 10 lose 5% efficiency per 10 VMs")
    max_vms: int = Field(100, ge=10, le=200, description="largest cluster predicted")


class SwimProfilesSpec(_Strict):
    trace: str = Field(description="a SWIM Facebook .tsv (relative to this file): each "
                       "profile is one real job's data ratios (§4.1)")
    count: int = Field(50, ge=1, le=10_000)
    seed: int = Field(0, ge=0)
    max_vms: int = Field(40, ge=1, le=MAX_VMS)


class ProfilesSpec(_Strict):
    models: dict[str, ModelProfileSpec] = Field(default_factory=dict)
    tables: dict[str, TableProfileSpec] = Field(default_factory=dict)
    swim: SwimProfilesSpec | None = None

    @model_validator(mode="after")
    def _some(self) -> ProfilesSpec:
        if not self.models and not self.tables and self.swim is None:
            raise ValueError("no profiles: give models:, tables: or swim:")
        both = sorted(set(self.models) & set(self.tables))
        if both:
            raise ValueError(f"job kinds {both} are both a model and a table")
        return self


class CloudJobSpec(_Strict):
    id: str = Field(min_length=1)
    kind: str = Field(min_length=1, description="a profiled job kind (a key of profiles)")
    arrival: float = Field(ge=0, le=MAX_SECONDS)
    deadline: float = Field(gt=0, le=MAX_SECONDS, description="seconds after arrival")
    size_mb: float = Field(0.0, ge=0, le=1e12, description="input size in MB")
    customer: int = Field(0, ge=0, le=MAX_COUNT, description="who submitted it (a "
                          "dedicated service gives each customer its own VMs)")
    category: str = Field("", description="free label for reports (small, medium, ...)")


class DeadlineDistSpec(_Strict):
    kind: Literal["uniform", "poisson", "exponential"] = "uniform"
    mean: float = Field(400.0, gt=0, le=MAX_SECONDS)


class GenerateSpec(_Strict):
    """§4.2's workload: Poisson (or SWIM) arrivals, customers, a size mix, random deadlines."""

    jobs: int = Field(ge=1, le=MAX_COUNT)
    duration: float = Field(gt=0, le=MAX_SECONDS, description="seconds the arrivals span")
    customers: int = Field(50, ge=1, le=MAX_COUNT)
    mix: dict[Literal["small", "medium", "large", "xlarge"], float] | None = Field(
        None, description="share of each size category (100 MB, 1 GB, 10 GB, 100 GB)")
    sizes: Literal["fixed", "swim"] = "fixed"
    arrivals: Literal["poisson", "swim"] = "poisson"
    swim_trace: str | None = Field(None, description="SWIM .tsv for sizes/arrivals from "
                                   "the trace (relative to this file)")
    deadline: DeadlineDistSpec = Field(
        default_factory=lambda: DeadlineDistSpec(kind="uniform", mean=400.0))
    floor: float = Field(2.0, ge=1, le=1000, description="a deadline below floor × the "
                         "fastest run + boot time is raised to it")


class CloudWorkloadSpec(_Strict):
    jobs: list[CloudJobSpec] = Field(default_factory=list, max_length=MAX_COUNT)
    generate: GenerateSpec | None = None

    @model_validator(mode="after")
    def _some(self) -> CloudWorkloadSpec:
        if not self.jobs and self.generate is None:
            raise ValueError("no jobs: list jobs: or give generate:")
        return self


class CloudPolicySpec(_Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)


class CloudScenarioSpec(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = 0
    cloud: CloudSection
    profiles: ProfilesSpec
    workload: CloudWorkloadSpec
    policy: CloudPolicySpec | None = Field(None, description="service `utilon simulate` "
                                           "uses by default")
    policies: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="parameters per service name, used whenever it runs")
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class CloudWorkload:
    """A built cloud scenario: the profile store, the jobs and the fleet."""

    name: str
    seed: int
    spec: CloudScenarioSpec
    store: ProfileStore
    jobs: tuple[CloudJob, ...]
    servers: int | None
    source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


def cloud_json_schema() -> dict[str, Any]:
    schema = CloudScenarioSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "utilon cloud scenario"
    return schema


def parse_cloud_scenario(data: Any, source: str = "<scenario>") -> CloudScenarioSpec:
    try:
        return CloudScenarioSpec.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(exc, data, source, "docs/cloud.md") from None


def build_cloud_workload(spec: CloudScenarioSpec, *, seed: int | None = None,
                         source: str = "") -> CloudWorkload:
    """The profile store, jobs and fleet of ``spec``; every inconsistency is one line naming
    the field."""
    src = source or "<scenario>"
    base = Path(source).resolve().parent if source else Path.cwd()
    seed = spec.seed if seed is None else seed
    cloud = _cloud(spec.cloud, src)
    profiles = _profiles(spec.profiles, cloud, base, src)
    store = ProfileStore(cloud, profiles, error=spec.cloud.prediction_error)
    notes: list[str] = []
    jobs = list(_listed(spec.workload.jobs, store, src))
    gen = spec.workload.generate
    total = len(spec.workload.jobs) + (gen.jobs if gen is not None else 0)
    if total > max_tasks():
        raise ScenarioError(f"{total:,} jobs is more than the limit of {max_tasks():,}",
                            where=f"{src}: workload", fix="use fewer jobs, or raise "
                            "UTILON_MAX_TASKS on a machine with the memory for them")
    if gen is not None:
        jobs += _generated(gen, store, base, seed, src, notes, taken={j.id for j in jobs})
    return CloudWorkload(spec.name, seed, spec, store, tuple(jobs), spec.cloud.servers,
                         source, tuple(notes))


def _cloud(c: CloudSection, src: str) -> CloudSpec:
    types = (tuple(VMType(v.name, v.cores) for v in c.vm_types) if c.vm_types
             else default_vm_types())
    try:
        return CloudSpec(vm_types=types, server_cores=c.server_cores, boot_time=c.boot_time,
                         hadoop_start=c.hadoop_start, load_mbps=c.load_mbps,
                         reconf_overhead=c.reconf_overhead)
    except UtilonError as e:
        raise ScenarioError(e.message, where=f"{src}: cloud", fix=e.fix) from None


def _type_index(cloud: CloudSpec, name: str, where: str) -> int:
    names = [v.name for v in cloud.vm_types]
    if name not in names:
        raise ScenarioError(f"unknown VM type {name!r}", where=where,
                            fix=f"use one of {', '.join(names)}")
    return names.index(name)


def _profiles(p: ProfilesSpec, cloud: CloudSpec, base: Path, src: str) -> dict[str, Profile]:
    out: dict[str, Profile] = {}
    if p.swim is not None:
        path = (base / p.swim.trace).resolve()
        if not path.is_file():
            raise ScenarioError(f"no SWIM trace at {path}", where=f"{src}: profiles.swim.trace",
                                fix="give the path of a SWIM .tsv relative to this file")
        out.update(swim_profiles(path, cloud, count=p.swim.count, seed=p.swim.seed,
                                 max_vms=p.swim.max_vms))
    for kind, m in p.models.items():
        best = _type_index(cloud, m.best, f"{src}: profiles.models.{kind}.best")
        out[kind] = ModelProfile(work=m.work, best=best, type_loss=m.type_loss,
                                 scale_loss=m.scale_loss, max_vms=m.max_vms)
    for kind, t in p.tables.items():
        where = f"{src}: profiles.tables.{kind}.t10"
        names = [v.name for v in cloud.vm_types]
        missing = [n for n in names if n not in t.t10]
        extra = [n for n in t.t10 if n not in names]
        if missing or extra:
            raise ScenarioError(f"needs one time per VM type ({', '.join(names)}); "
                                f"missing {missing}, unknown {extra}", where=where)
        if any(not 0 < t.t10[n] <= MAX_SECONDS for n in names):
            raise ScenarioError("every time must be > 0 s", where=where)
        out[kind] = TableProfile(t10=tuple(t.t10[n] for n in names), max_vms=t.max_vms)
    return out


def _listed(specs: list[CloudJobSpec], store: ProfileStore, src: str) -> list[CloudJob]:
    seen: set[str] = set()
    out = []
    for i, j in enumerate(specs):
        where = f"{src}: workload.jobs[{i}]"
        if j.id in seen:
            raise ScenarioError(f"duplicate job id {j.id!r}", where=f"{where}.id",
                                fix="give each job its own id")
        seen.add(j.id)
        if j.kind not in store:
            kinds = sorted(store.profiles)
            raise ScenarioError(f"no profile for job kind {j.kind!r}", where=f"{where}.kind",
                                fix=f"use one of {', '.join(kinds[:8])}"
                                    + (" ..." if len(kinds) > 8 else ""))
        if j.arrival + j.deadline > MAX_SECONDS:
            raise ScenarioError("arrival + deadline is too far in the future",
                                where=f"{where}.deadline", fix=f"keep it under {MAX_SECONDS:g} s")
        try:
            job = CloudJob(j.id, j.customer, j.kind, j.size_mb, j.arrival,
                           j.arrival + j.deadline, category=j.category or j.kind)
        except UtilonError as e:  # a deadline too small to tell from the arrival
            raise ScenarioError(e.message, where=f"{where}.deadline", fix=e.fix) from None
        fastest = float(store.configs(job).t_run.min())
        if fastest > j.deadline + 1e-9:
            raise ScenarioError(
                f"deadline {j.deadline:g} s cannot be met: the fastest configuration of a "
                f"{j.kind!r} job of {j.size_mb:g} MB takes {fastest:.1f} s",
                where=f"{where}.deadline", fix=f"give at least {math.ceil(fastest)} s")
        out.append(job)
    return out


def _generated(g: GenerateSpec, store: ProfileStore, base: Path, seed: int, src: str,
               notes: list[str], taken: set[str]) -> list[CloudJob]:
    trace = None
    if g.sizes == "swim" or g.arrivals == "swim":
        if g.swim_trace is None:
            raise ScenarioError("sizes or arrivals from SWIM need the trace",
                                where=f"{src}: workload.generate.swim_trace",
                                fix="give the path of a SWIM .tsv relative to this file")
        trace = (base / g.swim_trace).resolve()
        if not trace.is_file():
            raise ScenarioError(f"no SWIM trace at {trace}",
                                where=f"{src}: workload.generate.swim_trace",
                                fix="give the path of a SWIM .tsv relative to this file")
    mix = {str(k): v for k, v in g.mix.items()} if g.mix else None
    if mix is not None and (sum(mix.values()) <= 0 or min(mix.values()) < 0):
        raise ScenarioError("shares must be >= 0 and not all 0",
                            where=f"{src}: workload.generate.mix",
                            fix=f"e.g. {{{', '.join(f'{c}: 1' for c in CATEGORY_MB)}}}")
    try:
        w = generate(store, jobs=g.jobs, duration=g.duration, customers=g.customers, mix=mix,
                     sizes=g.sizes, arrivals=g.arrivals,
                     deadline=DeadlineDist(g.deadline.kind, g.deadline.mean),
                     swim_path=trace, floor=g.floor, seed=seed)
    except UtilonError as e:
        raise ScenarioError(e.message, where=f"{src}: workload.generate", fix=e.fix) from None
    clash = sorted(taken & {j.id for j in w.jobs})
    if clash:
        raise ScenarioError(f"generated job ids {clash[:3]} clash with listed jobs",
                            where=f"{src}: workload.jobs",
                            fix="do not name listed jobs j0, j1, ... (the generated names)")
    notes.append(f"generated: {w.description}")
    return list(w.jobs)
