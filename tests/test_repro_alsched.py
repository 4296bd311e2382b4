"""The per-seed claims of ``utilon reproduce alsched`` (issue 44): every relation of Table 1
and the statements about Figs. 7-9, decided on one seed by ``alsched_claims``."""

from __future__ import annotations

import copy

import pytest

from utilon.policies.alsched.jobs import workload
from utilon.repro import alsched as R
from utilon.repro.alsched_claims import CLAIMS, sweep_observations, table1_observations
from utilon.repro.claims import Observation, summarize

PAPER: dict[str, dict[str, float]] = {p: {k: float(v) for k, v in row.items()}
                                     for p, row in R.PAPER_TABLE1.items()}
SPEEDUPS = (1.2, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0)


def _holds(obs: list[Observation], key: str) -> bool:
    (o,) = [o for o in obs if o.claim == key]
    return bool(o.holds)


def test_the_papers_own_table_satisfies_every_table1_claim() -> None:
    """The rules are the table's relations: the paper's numbers pass all of them."""
    obs = table1_observations("alsched", 0, PAPER)
    assert {o.claim for o in obs} == {c.key for c in CLAIMS if c.key.startswith("t1.")}
    assert all(o.holds for o in obs), [o.claim for o in obs if not o.holds]


@pytest.mark.parametrize(("policy", "kind", "value", "fails"), [
    ("none", "NBODY", 22, {"t1.none.nbody_lt_pi", "t1.nbody.none_lt_hard"}),  # None never
    ("hard", "NBODY", 11.7, {"t1.nbody.soft_best", "t1.nbody.none_lt_hard"}),  # co-locates
    ("soft", "MIXED", 30, {"t1.mixed.soft_le_hard", "t1.mixed.soft_eq_hard",
                           "t1.mixed.none_2x", "t1.mixed_eq_pi"}),
    ("none", "MIXED", 40, {"t1.mixed.none_2x"}),  # 40 < 2 x 22, still the slowest
    ("hard", "LOCAL", 22, {"t1.local.equal", "t1.local_gt_pi"}),
    ("hard", "PI", 22 + 1e-9, set()),  # within the tie tolerance
])
def test_one_changed_cell_fails_exactly_its_relations(policy: str, kind: str, value: float,
                                                      fails: set[str]) -> None:
    t = copy.deepcopy(PAPER)
    t[policy][kind] = value
    obs = table1_observations("alsched", 3, t)
    assert {o.claim for o in obs if not o.holds} == fails
    assert all(o.seed == 3 and o.system == "alsched" for o in obs)


def _curves(soft: list[float], hard: list[float], none: list[float]) -> dict[str, list[float]]:
    return {"soft": soft, "hard": hard, "none": none}


def test_sweep_claims_read_the_papers_words() -> None:
    # 4:10: Hard overtakes Soft between 8 and 10 (interpolated 9.0): "about 10"
    soft7 = [400.0, 300, 250, 200, 160, 150, 140, 130, 120]
    hard7 = [900.0, 600, 400, 250, 190, 120, 90, 70, 50]
    none7 = [500.0] * 9
    # 1:10: Soft better than Hard over the whole sweep; Soft beats None by less
    soft9 = [550.0, 450, 400, 360, 340, 300, 280, 250, 220]
    hard9 = [3000.0, 2000, 1000, 700, 550, 450, 400, 300, 260]
    none9 = [600.0] * 9
    obs = sweep_observations("alsched", 1, SPEEDUPS, _curves(soft7, hard7, none7),
                             _curves(soft9, hard9, none9))
    assert all(o.holds for o in obs), [(o.claim, o.value) for o in obs if not o.holds]
    (cross,) = [o for o in obs if o.claim == "fig7.crossover"]
    assert cross.value == pytest.approx(9.0)
    # the crossover at about 5 (ours) is outside "about 10"; the band is [9, 11]
    hard_early = [900.0, 600, 260, 150, 100, 80, 70, 60, 50]
    obs = sweep_observations("alsched", 1, SPEEDUPS, _curves(soft7, hard_early, none7),
                             _curves(soft9, hard9, none9))
    assert not _holds(obs, "fig7.crossover")
    # ... and the 1:10 crossover must come after 10 and after the 4:10 one
    hard9_early = [3000.0, 2000, 1000, 300, 200, 150, 100, 90, 80]
    obs = sweep_observations("alsched", 1, SPEEDUPS, _curves(soft7, hard7, none7),
                             _curves(soft9, hard9_early, none9))
    assert not _holds(obs, "fig9.crossover")
    # a tie with None at one f in [1.2, 10] breaks "for all speedup factors"; f = 20 does not
    none_tie = [500.0, 300] + [500.0] * 7
    none_late = [500.0] * 8 + [100.0]
    for none, holds in ((none_tie, False), (none_late, True)):
        obs = sweep_observations("alsched", 1, SPEEDUPS, _curves(soft7, hard7, none),
                                 _curves(soft9, hard9, none9))
        assert _holds(obs, "fig7.soft_beats_none") is holds
    # a larger margin at 1:10 than at 4:10 at most f: not "a smaller margin"
    obs = sweep_observations("alsched", 1, SPEEDUPS, _curves(soft7, hard7, none7),
                             _curves(soft9, hard9, [2000.0] * 9))
    assert not _holds(obs, "fig9.smaller_margin")
    assert _holds(obs, "fig9.soft_beats_none")


def test_shares_over_seeds_call_a_claim_held_only_at_80_percent() -> None:
    obs = []
    for seed in range(5):
        t = copy.deepcopy(PAPER)
        if seed >= 4:  # the paper's table on 4 seeds of 5, None never co-located on one
            t["none"]["NBODY"] = t["none"]["PI"]
        obs += table1_observations("alsched", seed, t)
        obs += table1_observations("alsched-spread", seed, {**t, "none": {
            **t["none"], "NBODY": t["none"]["PI"]}})
    summary = {c["key"]: c for c in summarize(CLAIMS, obs, R.SYSTEMS)}
    rows = {r["system"]: r for r in summary["t1.none.nbody_lt_pi"]["systems"]}
    assert (rows["alsched"]["held"], rows["alsched"]["verdict"]) == (4, "held")
    assert (rows["alsched-spread"]["held"], rows["alsched-spread"]["verdict"]) == (0, "failed")
    assert [r["system"] for r in summary["t1.pi.equal"]["systems"]] == list(R.SYSTEMS)
    assert summary["fig7.crossover"]["systems"] == []  # no sweep observed here


def test_each_seed_is_a_different_workload_and_the_runs_follow_the_seeds() -> None:
    sizes = [[len(j.stages[0].tasks) for j in workload(("nbody",), 50, duration=100.0,
                                                       speedup=2.0, seed=s)] for s in (0, 1)]
    assert sizes[0] != sizes[1]
    runs = R.sweep_runs("4:10", (2.0,), [7, 8], 500, scale=2)
    assert {r.seed for r in runs} == {7, 8}
    assert {(r.large, r.small, r.jobs) for r in runs} == {(4, 40, 250)}
    t1 = R.table1_runs([7], extras=False)
    assert {r.fill for r in t1} == {"first-fit", "spread"}
    assert len(t1) == len(R.SYSTEMS) * len(R.TABLE_KINDS) * len(R.POLICIES)


def test_none_co_locates_by_chance_first_fit_and_never_when_spread() -> None:
    """Table 1 NBODY, f = 2, seed 0: None's first-fit cores land some jobs whole on one
    machine (faster than PI, as in the paper: 17 < 22); spread, never (None = PI)."""
    cl = R.cluster(*R.CLUSTERS["table1"])
    nbody = workload(("nbody",), 100, duration=10.0, speedup=2.0, seed=0)
    pi = workload(("pi",), 100, duration=10.0, speedup=2.0, seed=0)
    first = R.total_runtime(nbody, cl, "none")
    spread = R.total_runtime(nbody, cl, "none", fill="spread")
    assert first < R.total_runtime(pi, cl, "none") == spread
