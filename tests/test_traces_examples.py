"""The scenarios in examples/traces are what the importers write today, and they run."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from utilon.cli.app import app
from utilon.runner import run_policy
from utilon.scenario.load import load_workload, read_data

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT / "examples" / "traces"
SCENARIOS = sorted(p for p in TRACES.glob("*.yaml") if not p.name.endswith(".cluster.yaml"))
CLUSTERS = sorted(TRACES.glob("*.cluster.yaml"))
SMALL = ["sls-2jobs.yaml", "synth-small.yaml", "swim-fb2009-1h.yaml",
         "swim-fb2009-1h-solar.yaml"]


def test_every_example_records_its_provenance() -> None:
    assert len(SCENARIOS) >= 7 and len(CLUSTERS) >= 2
    for p in SCENARIOS + CLUSTERS:
        meta = read_data(p)["metadata"]
        assert meta["real"] and meta["assumed"], p
        assert len(meta["trace"]["sha256"]) == 64, p


@pytest.mark.parametrize("name", SMALL)
def test_small_examples_run_every_job(name: str, tmp_path: Path) -> None:
    w = load_workload(TRACES / name)
    out = run_policy(w, "fair", out_dir=tmp_path)
    assert out.summary["finished"] == len(w.jobs)
    prov = (tmp_path / "provenance.json").read_text()
    assert '"assumed"' in prov and w.spec.metadata["trace"]["sha256"] in prov


def test_a_cluster_file_replaces_the_cluster(tmp_path: Path) -> None:
    w = load_workload(TRACES / "swim-fb2009-1h.yaml",
                      capacity=TRACES / "solar-week.cluster.yaml")
    assert len(w.cluster.timeline) > 0
    out = run_policy(w, "fifo")
    assert out.summary["finished"] == len(w.jobs)


def test_regenerating_an_example_gives_the_same_bytes(tmp_path: Path,
                                                      shared_data: Path) -> None:
    """The swim-fb2009-1h command from regenerate.sh, run again, writes the committed file."""
    script = (TRACES / "regenerate.sh").read_text()
    line = next(ln for ln in script.replace("\\\n", " ").splitlines()
                if "swim-fb2009-1h.yaml" in ln and "trace import swim" in ln)
    args = shlex.split(line.replace("$U", "").replace("$D", str(shared_data))
                       .replace("$T", str(tmp_path)))
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    def body(p: Path) -> list[str]:  # the header comment names the command line
        return [ln for ln in p.read_text().splitlines() if not ln.startswith("#")]

    assert body(tmp_path / "swim-fb2009-1h.yaml") == body(TRACES / "swim-fb2009-1h.yaml")
