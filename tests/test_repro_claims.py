"""The per-seed claim summary that every ``utilon reproduce`` prints (issue 44)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from utilon.errors import UtilonError
from utilon.repro.claims import (
    Claim,
    Observation,
    markdown,
    seed_list,
    summarize,
    verdict,
)

C = [Claim("t1.min", "Table I: min >= every baseline", "0.0084 vs 0", "min - best >= 0"),
     Claim("t1.sum", "Table I: sum >= every baseline", "+45%", "sum >= best", unit="%")]


def _obs(claim: str, system: str, holds: list[bool], values: list[float | None] | None = None
         ) -> list[Observation]:
    vals = values or [None] * len(holds)
    return [Observation(claim, system, s, h, v) for s, (h, v) in enumerate(zip(holds, vals,
                                                                                strict=True))]


def test_share_and_verdict_per_system_faithful_first() -> None:
    obs = (_obs("t1.min", "cora-ct-sum", [True] * 9 + [False], [1.0] * 9 + [-2.0])
           + _obs("t1.min", "cora", [True] * 7 + [False] * 3)
           + _obs("t1.sum", "cora", [False] * 10, [-1.0, 3.0] * 5))
    s = summarize(C, obs, ["cora", "cora-ct-sum"])
    rows = {(c["key"], r["system"]): r for c in s for r in c["systems"]}
    assert [r["system"] for r in s[0]["systems"]] == ["cora", "cora-ct-sum"]
    assert rows["t1.min", "cora"]["verdict"] == "fragile"  # 7/10 < 80%: never "held"
    assert rows["t1.min", "cora"]["share"] == pytest.approx(0.7)
    assert rows["t1.min", "cora-ct-sum"]["verdict"] == "held"  # 9/10
    assert rows["t1.min", "cora-ct-sum"]["min"] == -2.0
    assert rows["t1.min", "cora-ct-sum"]["mean"] == pytest.approx(0.7)
    assert rows["t1.sum", "cora"]["verdict"] == "failed"
    assert ("t1.sum", "cora-ct-sum") not in rows  # no observation: no row, not a 0/0
    assert rows["t1.min", "cora"]["mean"] is None


def test_verdict_boundary_is_80_percent() -> None:
    assert verdict(0.8) == "held"
    assert verdict(0.79) == "fragile"
    assert verdict(0.0) == "failed"
    assert verdict(1.0) == "held"


def test_unknown_claim_key_is_an_error_not_dropped() -> None:
    with pytest.raises(ValueError, match="unknown claim"):
        summarize(C, [Observation("t1.mni", "cora", 0, True)], ["cora"])


def test_seed_list_defaults_and_bad_count() -> None:
    assert seed_list(5, None, quick=True) == [5, 6, 7]
    assert seed_list(1, None, quick=False) == list(range(1, 11))
    assert seed_list(0, 2, quick=True) == [0, 1]
    with pytest.raises(UtilonError, match="--seeds"):
        seed_list(0, 0, quick=False)


def test_markdown_lists_every_system_with_its_share() -> None:
    obs = _obs("t1.sum", "cora", [True, False], [2.0, -1.0]) + _obs("t1.sum", "x", [True], [4.0])
    md = markdown(summarize(C, obs, ["cora", "x"]))
    lines = md.splitlines()
    assert lines[2] == ("| Table I: sum >= every baseline | +45% | cora | 0.50% [-1.00%, 2.00%] "
                        "| 1/2 (50%) fragile |")
    assert lines[3] == "|  |  | x | 4.00% | 1/1 (100%) held |"


def test_readme_rows_put_the_faithful_system_first() -> None:
    from utilon.repro.claims import readme_rows

    obs = (_obs("t1.min", "cora", [True] * 8 + [False] * 2)
           + _obs("t1.min", "cora-ct-sum", [True] * 3 + [False] * 7))
    (row,) = readme_rows(summarize(C, obs, ["cora", "cora-ct-sum"]), "CORA")
    assert row == ("| CORA | Table I: min >= every baseline | 0.0084 vs 0 | cora 8/10 held | "
                   "cora-ct-sum **3/10 fragile** |")


def test_reproduce_table_prints_every_finished_papers_claims(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from utilon.cli import app

    obs = _obs("t1.min", "cora", [True, False]) + _obs("t1.min", "cora-ct", [True, True])
    res = {"seeds": [1, 2], "claims": summarize(C, obs, ["cora", "cora-ct"])}
    (tmp_path / "cora").mkdir()
    (tmp_path / "cora" / "results.json").write_text(json.dumps(res))
    r = CliRunner().invoke(app, ["reproduce", "table", "--dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert ("| CORA | Table I: min >= every baseline | 0.0084 vs 0 | cora **1/2 fragile** | "
            "cora-ct 2/2 held |") in r.stdout
    assert "CORA: seeds 1–2 (2)" in r.stdout
    (tmp_path / "cora" / "results.json").write_text("{}")
    r = CliRunner().invoke(app, ["reproduce", "table", "--dir", str(tmp_path)])
    assert r.exit_code == 2 and "not a reproduction's results" in r.stderr
    r = CliRunner().invoke(app, ["reproduce", "table", "--dir", str(tmp_path / "none")])
    assert r.exit_code == 2 and "no reproduction results found" in r.stderr
