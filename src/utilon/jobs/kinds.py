"""From a job's ``run:`` block to a ``JobPlan``: stages, priors, input preparation, verifier.

The prior of a task (``StagePlan.estimate``, the seconds policies expect before they have seen
the task run) is ``TASK_OVERHEAD_S`` (an assumed allowance for starting a task in a worker)
plus its size times a per-kind rate.  The rates below were measured on a 2-core machine and
are only priors: the scheduler's estimators replace them with what tasks actually take.
A run block's ``estimate`` overrides them per stage.

Input data depends only on ``seed`` and the run block, not on the job id: two jobs with the
same seed and parameters read identical input (pass a per-job seed for different data).

Other packages add kinds with ``utilon.jobs`` entry points: a ``JobKind`` is the model of its
run block that plans itself (docs/plugins.md).  ``job_kinds`` lists both, with where each
comes from.
"""

from __future__ import annotations

import graphlib
import re
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from utilon.jobs import grep, nbody, pi, terasort, textdata, wordcount
from utilon.jobs.common import TASK_OVERHEAD_S
from utilon.jobs.plan import JobPlan, StagePlan, resolve_call

# other packages' job kinds live with the run models that name them (jobs/specs.py), and are
# public here as they were
from utilon.jobs.specs import PLUGIN_GROUP as PLUGIN_GROUP
from utilon.jobs.specs import (
    CallableRun,
    GrepRun,
    JobKind,
    NBodyRun,
    PiRun,
    RunSpec,
    SortRun,
    WordCountRun,
    _TextInput,
)
from utilon.jobs.specs import KindInfo as KindInfo
from utilon.jobs.specs import job_kind as job_kind
from utilon.jobs.specs import job_kinds as job_kinds
from utilon.jobs.specs import plugin_run as plugin_run

# Measured on a 2-core machine (one task at a time, in-process, warm page cache, at the default
# sizes and at 2.5-10x them, rounded up); only priors, see the module docstring.  The
# measurements, in seconds per unit: word-count map 0.074-0.098, reduce 0.0006-0.005 (mostly
# fixed cost: its work grows with distinct words, not bytes); grep map 0.10-0.13 with the
# pattern r"\bq[a-z]*" or "(ab|cd)+e", reduce under 0.001; sort map 0.002-0.004, reduce
# 0.004-0.015 (n log n); pi map 0.24-0.29; n-body 0.035-0.046.
WORDCOUNT_MAP_S_PER_MB = 0.1  # per MB of text in the split
WORDCOUNT_REDUCE_S_PER_MB = 0.002  # per MB of the whole input, divided among the reduces
GREP_MAP_S_PER_MB = 0.12  # per MB of text in the split; a costlier pattern takes longer
GREP_REDUCE_S_PER_MB = 0.0005  # per MB of the whole input (distinct matches are few)
SORT_MAP_S_PER_MB = 0.005  # per MB of records in the map's range (more from a cold disk)
SORT_REDUCE_S_PER_MB = 0.015  # per MB of records in the reduce's key range
PI_MAP_S_PER_MSAMPLE = 0.27  # per million Halton points
NBODY_S_PER_MPAIR = 0.045  # per million body pairs (slice bodies x all bodies) per step

MB = 1e6


def plan_job(spec: RunSpec, job_id: str, seed: int, base_dir: Path) -> JobPlan:
    """The plan of a job; ValueError (one line naming the field and the fix) on bad input.

    ``base_dir`` is the scenario file's folder: relative input paths are resolved against it.
    """
    try:
        if isinstance(spec, WordCountRun):
            plan = _wordcount(spec, seed, base_dir)
        elif isinstance(spec, GrepRun):
            plan = _grep(spec, seed, base_dir)
        elif isinstance(spec, SortRun):
            plan = _sort(spec, seed)
        elif isinstance(spec, PiRun):
            plan = _pi(spec)
        elif isinstance(spec, NBodyRun):
            plan = _nbody(spec, seed)
        elif isinstance(spec, CallableRun):
            return _callable(spec)
        elif isinstance(spec, JobKind):
            plan = spec.plan(job_id, seed, base_dir)
        else:  # pragma: no cover - the discriminated union admits nothing else
            raise ValueError(f"kind: unknown job kind {type(spec).__name__}")
        return _override(plan, spec.estimate, spec.demand)
    except ValueError as e:
        raise ValueError(f"job {job_id!r} run.{e}") from None


def _estimate(seconds: float) -> float:
    return round(TASK_OVERHEAD_S + seconds, 4)


def _override(plan: JobPlan, estimate: Mapping[str, float] | None,
              demand: Mapping[str, float] | None) -> JobPlan:
    names = [s.name for s in plan.stages]
    unknown = sorted(set(estimate or {}) - set(names))
    if unknown:
        raise ValueError(f"estimate: no stage named {', '.join(map(repr, unknown))}; "
                         f"stages of a {plan.kind} job: {', '.join(names)}")
    stages = tuple(
        StagePlan(name=s.name, kind=s.kind, tasks=s.tasks, call=s.call,
                  estimate=(estimate or {}).get(s.name, s.estimate), args=s.args, after=s.after,
                  demand=dict(demand) if demand is not None else s.demand, gang=s.gang,
                  colocate_speedup=s.colocate_speedup)
        for s in plan.stages)
    return JobPlan(kind=plan.kind, stages=stages, prepare=plan.prepare, verify=plan.verify,
                   notes=plan.notes)


def _map_reduce(module: str, maps: int, reduces: int, map_s: float, reduce_s: float,
                map_args: dict[str, Any], reduce_args: dict[str, Any]) -> tuple[StagePlan, ...]:
    return (
        StagePlan(name="map", kind="map", tasks=maps, call=f"utilon.jobs.{module}:map_task",
                  estimate=_estimate(map_s), args=map_args),
        StagePlan(name="reduce", kind="reduce", tasks=reduces,
                  call=f"utilon.jobs.{module}:reduce_task", estimate=_estimate(reduce_s),
                  args=reduce_args, after=("map",)),
    )


# -- text kinds ------------------------------------------------------------------------------
def _text_input(spec: _TextInput, base_dir: Path) -> tuple[str | None, float, str]:
    """Resolved input path (None: generate), input size in MB, and a note on the input."""
    if spec.input is None:
        if spec.generate_mb * MB / spec.maps < textdata.MIN_GENERATED_SPLIT:
            least = spec.maps * textdata.MIN_GENERATED_SPLIT / MB
            raise ValueError(f"generate_mb: {spec.generate_mb} MB is less than "
                             f"{textdata.MIN_GENERATED_SPLIT} bytes per map for maps="
                             f"{spec.maps}; raise generate_mb to >= {least:g} or lower maps")
        return None, spec.generate_mb, (
            f"input: {spec.generate_mb:g} MB of generated text (input/corpus.txt): words of a "
            f"random {spec.vocabulary}-word vocabulary with Zipf(s={textdata.ZIPF_S:g}) "
            f"frequencies, about {textdata.MEAN_WORDS_PER_LINE} a line, from the seed")
    path = Path(spec.input).expanduser()
    path = (path if path.is_absolute() else base_dir / path).resolve()
    files = textdata.input_files(path)
    textdata.compute_splits(files, spec.maps)  # fails now, not in the run, if it cannot
    size = sum(f.stat().st_size for f in files) / MB
    return str(path), size, f"input: {path} ({len(files)} file(s), {size:.3g} MB), read in place"


def _wordcount(spec: WordCountRun, seed: int, base_dir: Path) -> JobPlan:
    source, mb, note = _text_input(spec, base_dir)
    stages = _map_reduce("wordcount", spec.maps, spec.reduces,
                         WORDCOUNT_MAP_S_PER_MB * mb / spec.maps,
                         WORDCOUNT_REDUCE_S_PER_MB * mb / spec.reduces,
                         {"reduces": spec.reduces}, {"maps": spec.maps})
    return JobPlan(
        kind="wordcount", stages=stages,
        prepare=partial(textdata.prepare_text, seed=seed, maps=spec.maps, source=source,
                        megabytes=spec.generate_mb, vocabulary=spec.vocabulary),
        verify=partial(wordcount.verify, reduces=spec.reduces),
        notes=(note, _prior_note("map", WORDCOUNT_MAP_S_PER_MB, "MB of its split"),
               _prior_note("reduce", WORDCOUNT_REDUCE_S_PER_MB, "MB of input / reduces")))


def _grep(spec: GrepRun, seed: int, base_dir: Path) -> JobPlan:
    try:
        re.compile(spec.pattern)
    except re.error as e:
        raise ValueError(f"pattern: {spec.pattern!r} is not a valid Python regex ({e}); "
                         "fix the pattern") from None
    source, mb, note = _text_input(spec, base_dir)
    stages = _map_reduce("grep", spec.maps, 1, GREP_MAP_S_PER_MB * mb / spec.maps,
                         GREP_REDUCE_S_PER_MB * mb, {"pattern": spec.pattern},
                         {"maps": spec.maps})
    return JobPlan(
        kind="grep", stages=stages,
        prepare=partial(textdata.prepare_text, seed=seed, maps=spec.maps, source=source,
                        megabytes=spec.generate_mb, vocabulary=spec.vocabulary),
        verify=partial(grep.verify, pattern=spec.pattern),
        notes=(note, _prior_note("map", GREP_MAP_S_PER_MB, "MB of its split"),
               _prior_note("reduce", GREP_REDUCE_S_PER_MB, "MB of input")))


# -- the other kinds -------------------------------------------------------------------------
def _sort(spec: SortRun, seed: int) -> JobPlan:
    if spec.maps > spec.records:
        raise ValueError(f"maps: {spec.maps} maps for {spec.records} records leaves a map "
                         "without records; lower maps or raise records")
    mb = spec.records * terasort.RECORD.itemsize / MB
    stages = _map_reduce("terasort", spec.maps, spec.reduces,
                         SORT_MAP_S_PER_MB * mb / spec.maps,
                         SORT_REDUCE_S_PER_MB * mb / spec.reduces,
                         {"records": spec.records, "reduces": spec.reduces}, {"maps": spec.maps})
    return JobPlan(
        kind="sort", stages=stages,
        prepare=partial(terasort.prepare, seed=seed, records=spec.records,
                        reduces=spec.reduces),
        verify=partial(terasort.verify, records=spec.records, reduces=spec.reduces),
        notes=(f"input: {spec.records} TeraGen-style 100-byte records ({mb:.3g} MB, "
               "input/records.bin) with random keys from the seed; reduce boundaries from a "
               f"sample of up to {terasort.SAMPLE} keys (partitions.json)",
               _prior_note("map", SORT_MAP_S_PER_MB, "MB of its records"),
               _prior_note("reduce", SORT_REDUCE_S_PER_MB, "MB of input / reduces")))


def _pi(spec: PiRun) -> JobPlan:
    stages = _map_reduce("pi", spec.maps, 1, PI_MAP_S_PER_MSAMPLE * spec.samples / MB, 0.0,
                         {"samples": spec.samples}, {"maps": spec.maps})
    return JobPlan(
        kind="pi", stages=stages,
        verify=partial(pi.verify, maps=spec.maps, samples=spec.samples),
        notes=("input: none; map i evaluates Halton points i*samples+1 .. (i+1)*samples",
               _prior_note("map", PI_MAP_S_PER_MSAMPLE, "million points"),
               f"prior: reduce {TASK_OVERHEAD_S} s (it adds {spec.maps} pairs of numbers)"))


def _nbody(spec: NBodyRun, seed: int) -> JobPlan:
    if spec.tasks > spec.bodies:
        raise ValueError(f"tasks: {spec.tasks} tasks for {spec.bodies} bodies leaves a task "
                         "without bodies; lower tasks or raise bodies")
    pairs = -(-spec.bodies // spec.tasks) * spec.bodies  # the largest slice's pairs
    f = spec.colocate_speedup
    # the prior is a step spread over machines (f x the compute, see nbody.step_task), so that
    # the simulator's speedup (duration / f when co-located) lands on the compute time
    stages = tuple(
        StagePlan(name=nbody.stage_name(s), kind="task", tasks=spec.tasks,
                  call="utilon.jobs.nbody:step_task",
                  estimate=_estimate(NBODY_S_PER_MPAIR * pairs / MB) * f,
                  args={"step": s, "dt": spec.dt},
                  after=(nbody.stage_name(s - 1),) if s else None, gang=spec.gang,
                  colocate_speedup=f)
        for s in range(spec.steps))
    return JobPlan(
        kind="nbody", stages=stages,
        prepare=partial(nbody.prepare, seed=seed, bodies=spec.bodies),
        verify=partial(nbody.verify, steps=spec.steps, tasks=spec.tasks, dt=spec.dt),
        notes=(f"input: {spec.bodies} bodies in a Gaussian blob with random velocities and "
               "masses from the seed (input/state-00000.npz)",
               _prior_note("step task", NBODY_S_PER_MPAIR,
                           "million body pairs (slice x all bodies)")))


def _callable(spec: CallableRun) -> JobPlan:
    names = [s.name for s in spec.stages]
    deps: dict[str, list[str]] = {}
    for k, st in enumerate(spec.stages):
        where = f"stages[{k}]"
        if names.count(st.name) > 1:
            raise ValueError(f"{where}.name: stage name {st.name!r} is used twice; rename one")
        try:
            resolve_call(st.call)
        except ValueError as e:
            raise ValueError(f"{where}.call: {e}; give an importable 'package.module:function'"
                             ) from None
        missing = [a for a in st.after or [] if a not in names]
        if missing:
            raise ValueError(f"{where}.after: no stage named {', '.join(map(repr, missing))}; "
                             f"stages: {', '.join(names)}")
        deps[st.name] = list(st.after or [])
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as e:
        raise ValueError(f"stages: 'after' forms a cycle {' -> '.join(e.args[1])}; "
                         "remove one dependency") from None
    stages = tuple(
        StagePlan(name=st.name, kind=st.kind, tasks=st.tasks, call=st.call,
                  estimate=st.estimate, args=dict(st.args),
                  after=tuple(st.after) if st.after is not None else None,
                  demand=dict(st.demand) if st.demand is not None else None, gang=st.gang)
        for st in spec.stages)
    return JobPlan(kind="callable", stages=stages,
                   notes=("input: none (the task functions bring their own)",
                          "prior: the estimate each stage declares"))


def _prior_note(stage: str, rate: float, unit: str) -> str:
    return (f"prior: {stage} task {TASK_OVERHEAD_S} s + {rate} s per {unit} "
            "(rate measured on a 2-core machine)")
