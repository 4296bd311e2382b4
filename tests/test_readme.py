"""The README's demo table is what `make demo` prints: re-run it and compare every
deterministic column (decision latencies are measured, so they are left out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from utilon.policies import policy_names
from utilon.runner import run_policy
from utilon.scenario import load_workload

ROOT = Path(__file__).resolve().parents[1]


def _readme_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What `make demo` shows", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 14 and cells[0] not in ("policy", "---"):
            rows[re.sub(r"\s*\(.*\)", "", cells[0])] = cells
    return rows


ROWS = _readme_rows()


def test_readme_lists_every_demo_policy() -> None:
    """The table has a row for every policy `make demo` compares (the Makefile's list)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = re.search(r"^demo:.*\n\t.*--policies (\S+)", makefile, re.MULTILINE)
    assert demo is not None, "Makefile: no `demo` target with --policies"
    names = demo.group(1)
    assert set(ROWS) == set(policy_names() if names == "all" else names.split(","))


@pytest.mark.parametrize("policy", sorted(ROWS))
def test_readme_demo_row_is_reproduced(policy: str) -> None:
    workload = load_workload(ROOT / "examples" / "facebook-mix.yaml")
    s = run_policy(workload, policy).summary
    expected = ROWS[policy]
    got = [
        f"{s['utility_min']:.3f}", f"{s['utility_sum']:.2f}", f"{s['utility_mean']:.3f}",
        f"{s['misses']} ({s['miss_rate']:.0%})", f"{s['unfinished']}", f"{s['penalty']:.2f}",
        f"{s['makespan']:.0f}",
        f"{s['response_mean']:.0f}", f"{s['response_p95']:.0f}", f"{s['utilisation']:.0%}",
    ]
    assert got == expected[1:11], (
        f"README demo row for {policy} is stale: run `make demo` and update the table")


def test_readme_python_api_example_runs() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    code = text.split("## Python API", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    from utilon.policies import base

    try:
        namespace: dict[str, object] = {"__name__": "readme_example"}
        exec(compile(code, "README.md", "exec"), namespace)  # the example as a user runs it
    finally:
        base._REGISTRY.pop("srf", None)  # keep the registry as other tests expect it


def test_readme_unknown_policy_error_is_the_real_one() -> None:
    """The README's sample of a one-line error lists what the command really lists (issue 47:
    it showed 5 policies of 12)."""
    from typer.testing import CliRunner

    from utilon.cli import app

    res = CliRunner().invoke(app, ["simulate", str(ROOT / "examples" / "small-mapreduce.yaml"),
                                   "-p", "fiffo"])
    assert res.exit_code == 2
    line = " ".join(res.stderr.split())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert line in " ".join(readme.split()), line
