"""Real job kinds (utilon.jobs): each runs in-process here, task by task, and is checked both by
its own verifier and by an independent computation in the test."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from utilon.jobs import (
    JobPlan,
    RunSpec,
    TaskContext,
    Verification,
    nbody,
    plan_job,
    resolve_call,
    terasort,
    textdata,
)
from utilon.jobs.specs import PiRun

RUN = TypeAdapter(RunSpec)

SMALL: dict[str, dict[str, Any]] = {
    "wordcount": {"kind": "wordcount", "maps": 3, "reduces": 2, "generate_mb": 0.1,
                  "vocabulary": 500},
    "grep": {"kind": "grep", "pattern": r"\b[a-c][a-z]*", "maps": 3, "generate_mb": 0.1},
    "sort": {"kind": "sort", "records": 5000, "maps": 3, "reduces": 3},
    "pi": {"kind": "pi", "maps": 3, "samples": 40_000},
    "nbody": {"kind": "nbody", "bodies": 60, "tasks": 3, "steps": 3},
    "callable": {"kind": "callable", "stages": [
        {"name": "a", "tasks": 2, "call": "utilon.jobs.builtin:touch", "estimate": 0.1},
        {"name": "b", "tasks": 1, "call": "utilon.jobs.builtin:sleep", "args": {"seconds": 0},
         "estimate": 0.1, "after": ["a"]},
    ]},
}


def plan_of(run: dict[str, Any], base_dir: Path, seed: int = 7) -> JobPlan:
    return plan_job(RUN.validate_python(run), "job-1", seed, base_dir)


def run_task(plan: JobPlan, job_dir: Path, stage: str, index: int, attempt: int = 1) -> Any:
    st = next(s for s in plan.stages if s.name == stage)
    ctx = TaskContext(job="job-1", stage=st.name, index=index, tasks=st.tasks, attempt=attempt,
                      job_dir=job_dir, args=st.args)
    return resolve_call(st.call)(ctx)


def execute(plan: JobPlan, job_dir: Path) -> Verification | None:
    """Prepare, run every task of every stage in order, verify."""
    job_dir.mkdir(parents=True, exist_ok=True)
    if plan.prepare is not None:
        plan.prepare(job_dir)
    for st in plan.stages:
        for i in range(st.tasks):
            run_task(plan, job_dir, st.name, i)
    return plan.verify(job_dir) if plan.verify is not None else None


def run_small(kind: str, tmp_path: Path, **changes: Any) -> tuple[JobPlan, Path]:
    job_dir = tmp_path / "job"
    plan = plan_of({**SMALL[kind], **changes}, tmp_path)
    result = execute(plan, job_dir)
    if plan.verify is not None:
        assert result is not None and result.ok, result
    return plan, job_dir


def snapshot(job_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(job_dir)): p.read_bytes()
            for p in sorted(job_dir.rglob("*")) if p.is_file()}


WORD = re.compile(r"[a-z0-9']+")


def wordcount_output(job_dir: Path) -> Counter[str]:
    got: Counter[str] = Counter()
    for part in sorted((job_dir / "output").glob("part-*.tsv")):
        for line in part.read_text(encoding="utf-8").splitlines():
            word, n = line.split("\t")
            assert word not in got
            got[word] = int(n)
    return got


# -- every kind ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(SMALL))
def test_each_kind_completes_and_verifies(kind: str, tmp_path: Path) -> None:
    plan, job_dir = run_small(kind, tmp_path)
    assert plan.kind == kind and plan.notes
    for st in plan.stages:
        resolve_call(st.call)
        assert st.estimate > 0
    if kind == "callable":
        assert plan.prepare is None and plan.verify is None
        assert (job_dir / "output" / "a-1.txt").read_text() == "1\n"


@pytest.mark.parametrize("kind", ["wordcount", "grep", "sort", "pi", "nbody"])
def test_rerun_task_leaves_identical_outputs(kind: str, tmp_path: Path) -> None:
    plan, job_dir = run_small(kind, tmp_path)
    before = snapshot(job_dir)
    for st in plan.stages:
        for i in range(st.tasks):
            run_task(plan, job_dir, st.name, i, attempt=2)
    assert snapshot(job_dir) == before
    assert plan.verify is not None and plan.verify(job_dir).ok


def _tamper_tsv(job_dir: Path, name: str) -> None:
    path = job_dir / "output" / name
    lines = path.read_text(encoding="utf-8").splitlines()
    a, b = lines[0].split("\t")
    lines[0] = f"{a}\t{int(b) + 1}" if b.isdigit() else f"{int(a) + 1}\t{b}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _tamper_sort(job_dir: Path) -> None:
    path = job_dir / "output" / "part-00001.bin"
    data = bytearray(path.read_bytes())
    data[150] ^= 0xFF  # a byte of the second record's value: keys stay sorted
    path.write_bytes(bytes(data))


def _tamper_pi(job_dir: Path) -> None:
    path = job_dir / "output" / "pi.json"
    path.write_text(path.read_text().replace('"inside":', '"inside":1'))


def _tamper_nbody(job_dir: Path) -> None:
    path = nbody.slice_path(job_dir, 2, 1)
    arrays = dict(np.load(path))
    arrays["pos"][0, 0] += 1e-6
    np.savez(path, **arrays)


TAMPER = {
    "wordcount": lambda d: _tamper_tsv(d, "part-00000.tsv"),
    "grep": lambda d: _tamper_tsv(d, "matches.tsv"),
    "sort": _tamper_sort,
    "pi": _tamper_pi,
    "nbody": _tamper_nbody,
}


@pytest.mark.parametrize("kind", sorted(TAMPER))
def test_tampered_output_fails_verification(kind: str, tmp_path: Path) -> None:
    plan, job_dir = run_small(kind, tmp_path)
    TAMPER[kind](job_dir)
    assert plan.verify is not None
    assert plan.verify(job_dir).ok is False


def test_missing_output_fails_verification(tmp_path: Path) -> None:
    plan, job_dir = run_small("wordcount", tmp_path)
    (job_dir / "output" / "part-00001.tsv").unlink()
    assert plan.verify is not None
    result = plan.verify(job_dir)
    assert result.ok is False and "cannot read output" in result.detail


@pytest.mark.parametrize(("kind", "inputs"), [
    ("wordcount", ["input/corpus.txt", "splits.json"]),
    ("sort", ["input/records.bin", "partitions.json"]),
    ("nbody", ["input/state-00000.npz"]),
])
def test_same_seed_same_input_bytes(kind: str, inputs: list[str], tmp_path: Path) -> None:
    def prepared(seed: int, name: str) -> list[bytes]:
        plan = plan_of(SMALL[kind], tmp_path, seed=seed)
        assert plan.prepare is not None
        plan.prepare(tmp_path / name)
        return [(tmp_path / name / f).read_bytes() for f in inputs]

    first = prepared(7, "a")
    assert prepared(7, "b") == first
    assert prepared(8, "c")[0] != first[0]


# -- word count and grep ---------------------------------------------------------------------
def test_wordcount_equals_direct_counter(tmp_path: Path) -> None:
    _, job_dir = run_small("wordcount", tmp_path)
    text = (job_dir / "input" / "corpus.txt").read_text(encoding="utf-8")
    assert abs(len(text) - 100_000) < 1000 and text.endswith(".\n")
    assert wordcount_output(job_dir) == Counter(WORD.findall(text.lower()))


USER_TEXT = ("The quick brown Fox, the lazy dog.\r\nIt's 2024: THE end?\n"
             "Ünïcode wörds — and the tab\there\n" * 40 + "no newline at the end")


def test_user_input_file_and_relative_path(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "book.txt").write_text(USER_TEXT, encoding="utf-8")
    plan = plan_of({"kind": "wordcount", "maps": 5, "reduces": 3, "input": "data/book.txt"},
                   tmp_path)
    result = execute(plan, tmp_path / "job")
    assert result is not None and result.ok, result
    assert wordcount_output(tmp_path / "job") == Counter(WORD.findall(USER_TEXT.lower()))
    assert not (tmp_path / "job" / "input").exists()  # the user's file is read in place


def test_user_input_directory_splits_span_files(tmp_path: Path) -> None:
    src = tmp_path / "books"
    src.mkdir()
    texts = [USER_TEXT[: 50 * (k + 1)] + "\n" for k in range(6)]
    for k, text in enumerate(texts):
        (src / f"{k}.txt").write_text(text, encoding="utf-8")
    (src / ".hidden").write_text("secret secret\n")
    (src / "empty.txt").write_text("")
    plan = plan_of({"kind": "grep", "pattern": r"(?i)the\s\w+", "maps": 4,
                    "input": str(src)}, tmp_path)
    job_dir = tmp_path / "job"
    result = execute(plan, job_dir)
    assert result is not None and result.ok, result
    expected: Counter[str] = Counter()
    for text in texts:
        for line in text.split("\n"):
            expected.update(m.group(0) for m in re.finditer(r"(?i)the\s\w+", line))
    rows = (job_dir / "output" / "matches.tsv").read_text(encoding="utf-8").splitlines()
    got = {match: int(n) for n, match in (r.split("\t", 1) for r in rows)}
    assert got == expected
    counts = [int(r.split("\t")[0]) for r in rows]
    assert counts == sorted(counts, reverse=True)


def test_splits_are_line_aligned_and_cover_the_input(tmp_path: Path) -> None:
    lines = [f"line {k} " + "x" * (k % 17) + "\n" for k in range(300)]
    files = []
    for k in range(3):
        p = tmp_path / f"f{k}.txt"
        p.write_text("".join(lines[k * 100:(k + 1) * 100]))
        files.append(p)
    splits = textdata.compute_splits(files, 7)
    assert len(splits) == 7
    rebuilt = b""
    for pieces in splits:
        assert pieces
        for piece in pieces:
            data = Path(piece.path).read_bytes()
            assert piece.start == 0 or data[piece.start - 1:piece.start] == b"\n"
            assert piece.end == len(data) or data[piece.end - 1:piece.end] == b"\n"
            rebuilt += data[piece.start:piece.end]
    assert rebuilt == "".join(lines).encode()


# -- sort, pi, n-body ------------------------------------------------------------------------
def test_sort_output_is_sorted_permutation(tmp_path: Path) -> None:
    _, job_dir = run_small("sort", tmp_path)
    raw = (job_dir / "input" / "records.bin").read_bytes()
    records = [raw[i:i + 100] for i in range(0, len(raw), 100)]
    out = b"".join((job_dir / "output" / f"part-{r:05d}.bin").read_bytes() for r in range(3))
    got = [out[i:i + 100] for i in range(0, len(out), 100)]
    keys = [r[:10] for r in got]
    assert keys == sorted(keys)
    assert sorted(got) == sorted(records)
    sizes = [len(p) for p in terasort.read_output(job_dir, 3)]
    assert min(sizes) > 0.2 * len(records)  # sampled boundaries balance the reduces


def test_pi_estimate(tmp_path: Path) -> None:
    _, job_dir = run_small("pi", tmp_path)
    out = (job_dir / "output" / "pi.json").read_text()
    est = float(re.search(r'"estimate":([0-9.e-]+)', out).group(1))  # type: ignore[union-attr]
    assert abs(est - math.pi) < 1e-3


def test_nbody_equals_direct_computation(tmp_path: Path) -> None:
    plan, job_dir = run_small("nbody", tmp_path, dt=0.005)
    assert [s.name for s in plan.stages] == ["step-0", "step-1", "step-2"]
    assert plan.stages[0].after is None and plan.stages[2].after == ("step-1",)
    assert all(s.gang for s in plan.stages)
    with np.load(job_dir / "input" / "state-00000.npz") as z:
        pos, vel, mass = z["pos"], z["vel"], z["mass"]
    for _ in range(3):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = (d**2).sum(axis=2) + nbody.SOFTENING**2
        acc = (mass[None, :, None] * d / r2[:, :, None] ** 1.5).sum(axis=1)
        vel = vel + acc * 0.005
        pos = pos + vel * 0.005
    got_pos, got_vel = nbody.final_state(job_dir, 3, 3)
    assert np.allclose(got_pos, pos, rtol=1e-10, atol=1e-13)
    assert np.allclose(got_vel, vel, rtol=1e-10, atol=1e-13)


# -- callables and builtins ------------------------------------------------------------------
def test_builtin_tasks(tmp_path: Path) -> None:
    def ctx(attempt: int, **args: Any) -> TaskContext:
        return TaskContext(job="j", stage="s", index=2, tasks=3, attempt=attempt,
                           job_dir=tmp_path, args=args)

    fail_first = resolve_call("utilon.jobs.builtin:fail_first")
    with pytest.raises(RuntimeError):
        fail_first(ctx(1))
    assert fail_first(ctx(2)) == {"attempt": 2}
    resolve_call("utilon.jobs.builtin:touch")(ctx(3))
    assert (tmp_path / "output" / "s-2.txt").read_text() == "3\n"
    assert resolve_call("utilon.jobs.builtin:spin")(ctx(1, seconds=0.01))
    assert resolve_call("utilon.jobs.builtin:sleep")(ctx(1, seconds=0.0)) == {"slept": 0.0}
    with pytest.raises(ValueError, match="seconds"):
        resolve_call("utilon.jobs.builtin:sleep")(ctx(1))


def test_overrides_reach_the_stages(tmp_path: Path) -> None:
    plan = plan_of({**SMALL["wordcount"], "estimate": {"reduce": 9.0},
                    "demand": {"slots": 2.0}}, tmp_path)
    mp, rd = plan.stages
    assert (mp.name, mp.kind, rd.name, rd.kind, rd.after) == ("map", "map", "reduce",
                                                              "reduce", ("map",))
    assert rd.estimate == 9.0 and mp.estimate != 9.0
    assert mp.demand == {"slots": 2.0} == rd.demand
    assert plan_of(SMALL["wordcount"], tmp_path).stages[0].demand is None
    stages = plan_of(SMALL["callable"], tmp_path).stages
    assert stages[1].after == ("a",) and stages[1].args == {"seconds": 0}


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize(("run", "field"), [
    ({"kind": "wordcount", "input": "nope.txt"}, "input"),
    ({"kind": "grep", "pattern": "x", "input": "empty.txt"}, "input"),
    ({"kind": "wordcount", "input": "short.txt", "maps": 5}, "maps"),
    ({"kind": "wordcount", "generate_mb": 0.001, "maps": 4}, "generate_mb"),
    ({"kind": "sort", "records": 3, "maps": 4}, "maps"),
    ({"kind": "nbody", "bodies": 3, "tasks": 4}, "tasks"),
    ({"kind": "pi", "estimate": {"mapp": 1.0}}, "estimate"),
    ({"kind": "callable", "stages": [
        {"name": "a", "tasks": 1, "call": "utilon.jobs.builtin:nope", "estimate": 1}]},
     "stages[0].call"),
    ({"kind": "callable", "stages": [
        {"name": "a", "tasks": 1, "call": "no_such_module_x:f", "estimate": 1}]},
     "stages[0].call"),
    ({"kind": "callable", "stages": [
        {"name": "a", "tasks": 1, "call": "utilon.jobs.builtin:sleep", "estimate": 1,
         "after": ["b"]}]}, "stages[0].after"),
    ({"kind": "callable", "stages": [
        {"name": "a", "tasks": 1, "call": "utilon.jobs.builtin:sleep", "estimate": 1,
         "after": ["b"]},
        {"name": "b", "tasks": 1, "call": "utilon.jobs.builtin:sleep", "estimate": 1,
         "after": ["a"]}]}, "cycle"),
])
def test_bad_input_names_the_field(run: dict[str, Any], field: str, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "short.txt").write_text("one line\ntwo lines\n")
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        plan_of(run, tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith("job 'job-1' run.")


def test_bad_regex_is_rejected_naming_the_pattern() -> None:
    with pytest.raises(ValueError, match=r"pattern.*'\(unclosed'"):
        RUN.validate_python({"kind": "grep", "pattern": "(unclosed"})


@pytest.mark.parametrize("run", [
    {"kind": "wordcount", "mapz": 3},
    {"kind": "pi", "samples": 10, "reduces": 2},
    {"kind": "callable", "stages": [{"name": "a", "tasks": 1, "call": "m:f", "estimate": 1,
                                     "extra": True}]},
    {"kind": "callable", "stages": [{"name": "a", "tasks": 1, "call": "m:f"}]},  # no estimate
    {"kind": "nbody", "bodies": 1},
    {"kind": "hadoop"},
])
def test_schema_rejects_unknown_keys_and_bad_values(run: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        RUN.validate_python(run)


def test_specs_are_frozen() -> None:
    spec = PiRun.model_validate({"kind": "pi"})
    with pytest.raises(ValidationError):
        spec.maps = 3
