"""Issue 48, item 6: the per-job story (``core/story.py``) and ``utilon explain``.

A job that misses because a wider job held the slots is explained by naming the holder; kills
and machine losses appear with the id of their cause; the stories stay within their bounds;
the file is byte-identical across runs; bad input is one line and exit status 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builders import change, make_cluster, make_job, run
from utilon.cli.app import app
from utilon.core import ClusterSnapshot, Decision, Grant
from utilon.core import story as story_mod
from utilon.core.story import HEAD, TAIL, Story
from utilon.metrics.explain import explain
from utilon.metrics.outputs import job_rows, write_outputs
from utilon.model import Job
from utilon.policies import Policy
from utilon.sim import SimResult

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


class Urgent(Policy):
    """Earliest deadline first, each job granted what is left of the cluster's slots with
    kill_excess: an urgent arrival takes slots from a running job by killing its tasks."""

    name = "test-urgent"
    summary = "EDF with kill-and-requeue"

    def __init__(self, slots: int) -> None:
        self.slots = slots

    def decide(self, snapshot: ClusterSnapshot) -> Decision:
        left = self.slots
        grants = []
        for j in sorted(snapshot.jobs, key=lambda j: (j.utility.goal or 1e18, j.submit)):
            want = sum(st.total - st.done for st in j.stages)
            give = min(left, want)
            left -= give
            grants.append(Grant(j.id, slots=give, kill_excess=True))
        return Decision(grants=tuple(grants))


def write(tmp: Path, res: SimResult, jobs: list[Job]) -> Path:
    rows = job_rows(res, jobs)
    write_outputs(tmp, rows, {"scenario": "t"}, {}, res)
    return tmp


def story_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "story.jsonl").read_text().splitlines()]


def wide_and_small() -> tuple[Any, list[Job]]:
    """Four slots; a wide job takes all of them for 40 s, a small one arrives 1 s later
    with a goal at 15 s: under FIFO it waits behind the wide job and misses."""
    cluster = make_cluster(2, slots=2)
    jobs = [make_job("wide", submit=0, maps=8, reduces=0, dur=20, deadline=200),
            make_job("small", submit=1, maps=1, reduces=0, dur=5, deadline=15)]
    return cluster, jobs


def test_explain_names_the_wider_job_that_held_the_slots(tmp_path: Path) -> None:
    cluster, jobs = wide_and_small()
    d = write(tmp_path, run(cluster, jobs, "fifo"), jobs)
    ex = explain(d, "small")
    assert ex.waits == [(1.0, 40.0)]
    assert [h.job for h in ex.holders] == ["wide"] and ex.holders[0].share == 1.0
    assert ex.holders[0].granted is not None and ex.holders[0].granted["cause"] == "d1"
    assert ex.verdict.startswith("missed its goal by 30.0 s because it waited 39.0 s")
    assert "wide held 100%" in ex.verdict
    kinds = [e["kind"] for e in ex.entries]
    assert kinds == ["submitted", "granted", "stage_done", "finished"]
    res = runner.invoke(app, ["explain", str(d), "small"])
    assert res.exit_code == 0, res.output
    assert "verdict: missed its goal by 30.0 s" in res.output
    assert "wide: 156.0 slot-s (100%) from t=1.000; its grant: d1" in res.output
    assert explain(d, "wide").verdict == "on time: finished 160.0 s before its goal"
    as_json = json.loads(runner.invoke(app, ["explain", str(d), "small", "--json"]).output)
    assert as_json["holders"][0]["job"] == "wide" and as_json["verdict"] == ex.verdict


def test_kills_carry_the_decision_that_caused_them(tmp_path: Path) -> None:
    cluster, jobs = wide_and_small()
    res = run(cluster, jobs, Urgent(4))
    d = write(tmp_path, res, jobs)
    wide = explain(d, "wide").entries
    killed = [e for e in wide if e["kind"] == "killed"]
    assert len(killed) == 1 and killed[0]["cause"] == "d2" and killed[0]["t"] == 1.0
    assert killed[0]["stage"] == "map" and killed[0]["machine"].startswith("m")
    changed = [e for e in wide if e["kind"] == "grant_changed"]
    assert changed[0]["cause"] == "d2" and changed[0]["slots"] == 3
    out = runner.invoke(app, ["explain", str(d), "wide"]).output
    assert "killed on m" in out and "(by d2)" in out and "re-queued" in out
    assert explain(d, "small").verdict.startswith("on time")


def test_a_machine_loss_names_the_capacity_change(tmp_path: Path) -> None:
    cluster = make_cluster(2, slots=1, timeline=[change(5, "m0", "leave")])
    jobs = [make_job("j", submit=0, maps=2, reduces=0, dur=10, deadline=12)]
    d = write(tmp_path, run(cluster, jobs, "fifo"), jobs)
    ex = explain(d, "j")
    lost = [e for e in ex.entries if e["kind"] == "lost"]
    assert len(lost) == 1 and lost[0]["cause"] == "c1" and lost[0]["machine"] == "m0"
    assert ex.causes["c1"]["action"] == "leave"
    assert "1 of its task attempts were lost (by c1)" in ex.verdict
    out = runner.invoke(app, ["explain", str(d), "j"]).output
    assert "(c1: machine m0 leave)" in out


def test_a_jobs_story_keeps_its_head_and_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Story()
    for i in range(HEAD + TAIL + 10):
        s.requeued(float(i), ("j", 0, i), "map", "m0", "killed", "preempted")
    entries = s.of("j")
    assert len(entries) == HEAD + TAIL + 1  # and a marker where the middle went
    assert entries[HEAD] == {"kind": "dropped", "job": "j", "n": 10}
    assert [e["task"] for e in entries[:HEAD]] == list(range(HEAD))
    assert entries[-1]["task"] == HEAD + TAIL + 9
    assert s.held == HEAD + TAIL and s.dropped_entries == 10


def test_the_global_bound_drops_finished_on_time_stories_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(story_mod, "MAX_ENTRIES", 30)
    cluster = make_cluster(2, slots=2)
    # 12 one-task jobs, one after another; the odd ones have goals they cannot meet
    jobs = [make_job(f"j{i:02d}", submit=i * 10, maps=1, reduces=0, dur=5,
                     deadline=i * 10 + (1 if i % 2 else 100)) for i in range(12)]
    res = run(cluster, jobs, "fifo")
    st = res.core.story
    assert st.held <= 30 and st.dropped_jobs > 0
    d = write(tmp_path, res, jobs)
    lines = story_lines(d)
    header = lines[0]
    assert header["entries"] == st.held and header["dropped"]["jobs"] == st.dropped_jobs
    assert len(lines) - 1 - len(st.cluster) == st.held
    kept = {e["job"] for e in lines[1:] if e["job"]}
    # the late jobs' stories are all kept; the dropped ones were on time
    assert {f"j{i:02d}" for i in range(1, 12, 2)} <= kept
    gone = sorted({j.id for j in jobs} - kept)
    assert gone and all(int(j[1:]) % 2 == 0 for j in gone)
    ex = explain(d, gone[0])
    assert any("story was dropped" in n for n in ex.notes)


def test_the_story_is_byte_identical_across_runs(tmp_path: Path) -> None:
    cluster, jobs = wide_and_small()
    a = write(tmp_path / "a", run(cluster, jobs, Urgent(4)), jobs)
    b = write(tmp_path / "b", run(cluster, jobs, Urgent(4)), jobs)
    assert (a / "story.jsonl").read_bytes() == (b / "story.jsonl").read_bytes()


def test_the_story_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """A set's or dict's order must not leak into the file: two interpreters with other
    string hash seeds write the same bytes (the demo's first 40 jobs under fair)."""
    script = (
        "import sys; from pathlib import Path\n"
        "from utilon.scenario import load_scenario\n"
        "from utilon.runner import run_policy\n"
        f"wl = load_scenario(Path({str(ROOT / 'examples' / 'facebook-mix.yaml')!r}))\n"
        "from dataclasses import replace\n"
        "wl = replace(wl, jobs=wl.jobs[:40])\n"
        "run_policy(wl, 'fair', {}, out_dir=Path(sys.argv[1]))\n")
    outs = []
    for seed in ("1", "2"):
        d = tmp_path / seed
        env = os.environ | {"PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", script, str(d)], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append((d / "story.jsonl").read_bytes())
    assert outs[0] == outs[1] and len(outs[0].splitlines()) > 40


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    cluster, jobs = wide_and_small()
    d = write(tmp_path / "run", run(cluster, jobs, "fifo"), jobs)
    cases = [
        ([str(d), "smal"], "no job 'smal' in this run", "did you mean small?"),
        ([str(tmp_path / "nowhere"), "small"], "not a run folder (no jobs.csv)", "fix:"),
        ([str(tmp_path), "small"], "not a run folder (no jobs.csv)", "fix:"),
    ]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "jobs.csv").write_text((d / "jobs.csv").read_text())
    cases.append(([str(tmp_path / "old"), "small"], "has no story.jsonl", "re-run"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "jobs.csv").write_text((d / "jobs.csv").read_text())
    (tmp_path / "bad" / "story.jsonl").write_text('{"story": 1}\n{"job":"small", oops\n')
    cases.append(([str(tmp_path / "bad"), "small"], "line 2 is not JSON", "re-run"))
    for args, message, fix in cases:
        res = runner.invoke(app, ["explain", *args])
        assert res.exit_code == 2, (args, res.output)
        text = res.output.strip()
        assert len(text.splitlines()) == 1 and text.startswith("error:"), text
        assert message in text and fix in text, text


def test_grant_changes_in_a_row_are_logged_once() -> None:
    """Fair's shares move at every decision: a job's story logs the latest change when
    something else happens to it (or it is read), not every one."""
    s = Story()
    active = {"a": None, "b": None}
    for n in range(1, 41):
        s.decided(float(n), n, Decision(grants=(Grant("a", slots=n), Grant("b", slots=1))),
                  active)
    a = s.of("a")
    assert [e["kind"] for e in a] == ["granted", "grant_changed"]
    assert a[1]["slots"] == 40 and a[1]["cause"] == "d40" and a[1]["t"] == 40.0
    assert [e["kind"] for e in s.of("b")] == ["granted"]
    s.decided(41.0, 41, Decision(grants=(Grant("b", slots=1),)), active)
    assert s.of("a")[-1] == {"seq": s.seq - 1, "t": 41.0, "job": "a", "kind": "revoked",
                             "cause": "d41"}


@pytest.mark.live
def test_the_service_job_view_shows_the_recent_story(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from builders import wait_for
    from utilon.live import LocalBackend
    from utilon.policies import make_policy
    from utilon.scenario import build_cluster, parse_scenario
    from utilon.service.api import create_app
    from utilon.service.engine import ServiceEngine
    from utilon.service.store import Store
    from utilon.service.tenants import TenantBook, create_token

    token = create_token(tmp_path / "tenants.yaml", "team-a")
    cluster = {"machines": [{"id": "m", "count": 1, "capacity": {"slots": 1, "mem": 4}}]}
    spec = parse_scenario({"name": "t", "cluster": cluster, "workload": {}})
    engine = ServiceEngine(Store(str(tmp_path / "u.db")), spec, build_cluster(spec.cluster),
                           make_policy("fifo"), LocalBackend(), tmp_path / "state")
    job = {"id": "s1", "stages": [{"name": "s", "tasks": 2, "duration": 0.1,
                                   "demand": {"slots": 1}}]}
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(create_app(engine, TenantBook.load(tmp_path / "tenants.yaml"))) as client:
        assert client.post("/v1/jobs", json=job, headers=headers).status_code == 201
        wait_for(lambda: client.get("/v1/jobs/s1", headers=headers).json()["state"]
                 == "finished", what="s1 to finish")
        story = client.get("/v1/jobs/s1", headers=headers).json()["story"]
    kinds = [e["kind"] for e in story]
    assert kinds[:2] == ["submitted", "granted"] and kinds[-1] == "finished", kinds
    assert story[1]["cause"].startswith("d") and story[0]["cause"].startswith("s")
