"""Cura: profiles, the reservation book, the services, the VM-aware scheduler's guarantees,
reconfiguration's β rule, the servers-required search and the Appendix B golden schedules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from utilon.cli import app
from utilon.cloud.metrics import servers_required, summarize
from utilon.cloud.model import CloudJob, CloudSpec, VMType
from utilon.cloud.packing import equal_pools
from utilon.cloud.profile import (
    APPENDIX_B_TYPE_LOSS,
    ModelProfile,
    ProfileStore,
    appendix_b_cloud,
    appendix_b_profiles,
)
from utilon.cloud.sim import CloudSim
from utilon.cloud.workload import DeadlineDist, generate
from utilon.errors import ModelError, ParameterError, UnknownNameError
from utilon.policies import make_cloud_policy
from utilon.policies.cura.book import Book, Slot
from utilon.policies.cura.reconfig import capacity_plan, plan, usable
from utilon.repro import cura as R
from utilon.repro.claims import summarize as summarize_claims
from utilon.repro.cura_claims import CLAIMS, SYSTEMS, observe, observe_appendix_b

SWIM = R.SWIM
GOLDEN = Path(__file__).parent / "golden" / "cura-appendix-b.json"
UPDATE = os.environ.get("UTILON_UPDATE_GOLDEN") == "1"


def small_cloud() -> CloudSpec:
    return CloudSpec(vm_types=(VMType("s", 2), VMType("m", 4), VMType("l", 8)),
                     server_cores=8, boot_time=20.0, hadoop_start=5.0)


def small_store(error: float = 0.0) -> ProfileStore:
    cloud = small_cloud()
    profs = {f"p{b}": ModelProfile(work=0.05 * (1 + b), best=b, max_vms=8) for b in range(3)}
    return ProfileStore(cloud, profs, error=error)


def random_jobs(store: ProfileStore, n: int, seed: int) -> tuple[CloudJob, ...]:
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(4.0, n))
    out = []
    for i in range(n):
        probe = CloudJob(f"j{i}", 0, f"p{i % 3}", float(rng.choice([100, 1000, 3000])),
                         float(t[i]), float(t[i]) + 1)
        fastest = float(store.configs(probe).t_run.min())
        rel = max(2 * fastest + store.cloud.boot_time, float(rng.uniform(20, 400)))
        out.append(CloudJob(probe.id, i % 4, probe.kind, probe.size_mb, probe.arrival,
                            probe.arrival + rel))
    return tuple(out)


# -- profiles --------------------------------------------------------------------------------


def test_table_profile_reproduces_appendix_b_tables_1_to_4() -> None:
    store = ProfileStore(appendix_b_cloud(), appendix_b_profiles())
    paper = {"type1": {(0, 20): (473.68, 1578.94), (1, 30): (208.33, 2083.33),
                       (2, 40): (94.53, 2521.00)},
             "type2": {(0, 40): (367.64, 2450.98), (1, 10): (500.0, 1666.66)},
             "type3": {(2, 30): (324.07, 6481.48), (0, 10): (5000.0, 8333.33)},
             "type4": {(1, 20): (82.23, 548.24), (2, 40): (26.26, 700.28)}}
    for kind, cells in paper.items():
        t = store.configs(CloudJob("x", 0, kind, 0, 0, 1))
        for (k, n), (t_run, cost) in cells.items():
            i = int(np.flatnonzero((t.k == k) & (t.n == n))[0])
            assert t.t_run[i] == pytest.approx(t_run, abs=0.02)
            assert t.cost[i] == pytest.approx(cost, abs=0.1)  # the paper rounds t_run


def test_error_bound_is_folded_into_t_run_and_actual_stays_within() -> None:
    store = small_store(error=0.3)
    job = CloudJob("a", 0, "p1", 1000, 0, 1000)
    t = store.configs(job)
    np.testing.assert_allclose(t.t_run, t.t_pred * 1.3)
    assert store.actual(10.0, 1.0) == pytest.approx(13.0)
    assert store.actual(10.0, -1.0) == pytest.approx(7.0)
    assert np.all(np.diff(t.cost) >= -1e-9), "configurations are cheapest first"


def test_calibrated_type_loss_is_appendix_b_tables_loss() -> None:
    """Tables 1-4: 25% more cost one VM type from the best, 1/0.7 two types away."""
    loss, exp = APPENDIX_B_TYPE_LOSS
    cloud = CloudSpec(vm_types=(VMType("a", 2), VMType("b", 4), VMType("c", 8)),
                      hadoop_start=0, load_mbps=1e12)           # compute only
    store = ProfileStore(cloud, {"x": ModelProfile(work=1.0, best=0, type_loss=loss,
                                                   scale_loss=0.0, type_loss_exp=exp)})
    t = store.configs(CloudJob("j", 0, "x", 1000.0, 0, 10**6))
    c = {(int(k), int(n)): float(v) for k, n, v in zip(t.k, t.n, t.cost, strict=True)}
    assert c[1, 10] / c[0, 10] == pytest.approx(1875 / 1500)
    assert c[2, 10] / c[0, 10] == pytest.approx(2142.85 / 1500, rel=1e-4)


def test_unknown_profile_and_bad_error_are_one_line_errors() -> None:
    store = small_store()
    with pytest.raises(ModelError, match="no profile for job kind 'nope'"):
        store.configs(CloudJob("a", 0, "nope", 1, 0, 10))
    with pytest.raises(ModelError, match="fraction"):
        ProfileStore(small_cloud(), {}, error=1.5)
    with pytest.raises(ModelError, match="deadline"):
        CloudJob("a", 0, "p0", 1, 10, 5)
    with pytest.raises(ModelError, match="do not fit"):
        CloudSpec(vm_types=(VMType("huge", 32),))


# -- the book --------------------------------------------------------------------------------


def brute_earliest(slots: list[Slot], cap: int, n: int, d: float, now: float,
                   latest: float) -> float | None:
    cands = sorted({now} | {s.end for s in slots if s.end > now})
    for s in cands:
        if s > latest + 1e-9:
            return None
        pts = [s] + [x.start for x in slots if s < x.start < s + d]
        if all(sum(x.n for x in slots if x.start <= p < x.end) + n <= cap for p in pts):
            return s
    return None


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(1, 40), st.integers(1, 6)),
                max_size=8),
       st.integers(1, 8), st.integers(1, 30), st.integers(0, 20), st.integers(0, 80))
def test_earliest_matches_brute_force(raw: list[tuple[int, int, int]], n: int, d: int,
                                      now: int, slack: int) -> None:
    book = Book(1)
    book.set_cap([8])
    book.set_now(float(now))
    slots = []
    for i, (s, length, k) in enumerate(raw):
        sl = Slot(f"r{i}", 0, k, float(s), float(s + length), 1.0)
        book.add(sl)
        slots.append(sl)
    live = [s for s in slots if s.end > now]
    got = book.earliest(0, n, float(d), float(now + slack))
    want = brute_earliest(live, 8, n, float(d), float(now), float(now + slack))
    assert got == want


# -- the services ----------------------------------------------------------------------------


def check_capacity_and_deadlines(store: ProfileStore, res, pools_max: list[int]) -> None:
    """No pool is ever over-committed, and every started job meets its deadline."""
    for k in range(store.cloud.k):
        ev = []
        for r in res.records:
            if r.start is not None and r.k == k and not r.fresh:
                ev += [(r.start, 1, r.n), (r.end, 0, -r.n)]
        use = 0
        for _, _, dn in sorted(ev):
            use += dn
            assert use <= pools_max[k]
    for r in res.records:
        if r.start is not None:
            assert r.end <= r.job.deadline + 1e-6, r


@pytest.mark.parametrize("policy", ["vm-aware", "cura", "per-job-opt"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pooled_services_respect_capacity_and_claimed_deadlines(policy: str, seed: int) -> None:
    store = small_store(error=0.2)
    jobs = random_jobs(store, 60, seed)
    pol = make_cloud_policy(policy, store, {"reconf_window": 40.0} if policy == "cura" else None)
    res = CloudSim(store, pol, jobs, servers=6, seed=seed).run()
    pools = list(equal_pools(store.cloud, 6))
    if policy == "cura" and res.reconfigurations:
        pools = [10**6] * store.cloud.k     # reshaped pools: the deadlines are still checked
    check_capacity_and_deadlines(store, res, pools)
    assert any(r.start is not None for r in res.records)


def test_vm_aware_reservations_never_exceed_pools() -> None:
    """The book's invariant after every decision: reserved + running <= pool, at all times."""
    store = small_store()
    jobs = random_jobs(store, 80, 7)
    pol = make_cloud_policy("vm-aware", store)
    real = pol.decide
    seen = []

    def checked(now, view, arrived, finished):  # type: ignore[no-untyped-def]
        out = real(now, view, arrived, finished)
        for k in range(store.cloud.k):
            _, U = pol.book.profile(k)
            assert max(U) <= pol.book.cap[k]
        for s in pol.reserved.values():
            assert s.end <= pol.jobs[s.job].deadline + 1e-6
            assert s.start >= now - 1e-9
        seen.append(len(pol.reserved))
        return out

    pol.decide = checked  # type: ignore[method-assign]
    res = CloudSim(store, pol, jobs, servers=4).run()
    assert max(seen) > 0, "the test should exercise reservations"
    check_capacity_and_deadlines(store, res, list(equal_pools(store.cloud, 4)))
    assert res.success_rate > 0.5


def test_per_job_cluster_boots_and_dedicated_never_waits() -> None:
    store = small_store()
    jobs = random_jobs(store, 40, 4)
    res = CloudSim(store, make_cloud_policy("per-job-cluster", store), jobs, 50).run()
    started = [r for r in res.records if r.start is not None]
    assert started and all(r.run_start - r.start == pytest.approx(20.0) for r in started)
    ded = make_cloud_policy("dedicated", store)
    fleet = ded.fixed_servers(jobs)
    res = CloudSim(store, ded, jobs, fleet).run()
    assert res.all_met
    assert all(r.start == r.job.arrival for r in res.records)


def test_per_job_opt_uses_only_the_optimal_configuration() -> None:
    store = small_store()
    jobs = random_jobs(store, 40, 5)
    res = CloudSim(store, make_cloud_policy("per-job-opt", store), jobs, 8).run()
    for r in res.records:
        if r.start is None:
            continue
        t = store.configs(r.job)
        ok = (t.t_run <= r.job.deadline - r.job.arrival + 1e-9) & (t.n <= 10**6)
        i = int(np.flatnonzero(ok)[0])
        assert (r.k, r.n) == (int(t.k[i]), int(t.n[i]))


def test_vm_aware_beats_per_job_opt_on_servers_required() -> None:
    store = small_store()
    jobs = random_jobs(store, 50, 9)
    need = {p: servers_required(store, lambda p=p: make_cloud_policy(p, store), jobs,
                                start=2).servers for p in ("per-job-opt", "vm-aware")}
    assert need["vm-aware"] <= need["per-job-opt"]
    s = servers_required(store, lambda: make_cloud_policy("vm-aware", store), jobs, start=2)
    assert s.tried[s.servers] and not s.tried.get(s.servers - 1, False)


def test_simulation_is_deterministic() -> None:
    store = small_store(error=0.3)
    jobs = random_jobs(store, 40, 3)
    a = CloudSim(store, make_cloud_policy("cura", store), jobs, 5, seed=2).run()
    b = CloudSim(store, make_cloud_policy("cura", store), jobs, 5, seed=2).run()
    assert summarize(a, store) == summarize(b, store)
    assert [(r.k, r.n, r.start, r.end) for r in a.records] == \
        [(r.k, r.n, r.start, r.end) for r in b.records]


def test_unknown_policy_and_parameter_are_one_line_errors() -> None:
    store = small_store()
    with pytest.raises(UnknownNameError):
        make_cloud_policy("curra", store)
    with pytest.raises(ParameterError, match="accepts"):
        make_cloud_policy("cura", store, {"betta": 2})
    with pytest.raises(ParameterError, match="beta must be > 1"):
        make_cloud_policy("cura", store, {"beta": 1.0})


# -- reconfiguration -------------------------------------------------------------------------


def test_reconfiguration_triggers_only_when_benefit_exceeds_beta_times_cost() -> None:
    store = small_store()
    cloud = store.cloud
    jobs = [CloudJob(f"j{i}", 0, "p0", 1000, 0, 2000) for i in range(10)]   # all want VM "s"
    pools = (2, 2, 2)
    opt = store.configs(jobs[0]).cost[0]
    probe = plan(store, jobs, [], pools, 4, beta=1.5)
    assert probe is not None and probe.target[0] > pools[0]
    assert probe.share[0] == pytest.approx(1.0)
    cost = probe.cost
    assert cost == pytest.approx(sum(abs(a - b) * cloud.overhead(k) for k, (a, b)
                                     in enumerate(zip(probe.target, pools, strict=True))))
    for beta in (1.2, 2.0, 5.0):
        # observed - estimate == beta * cost exactly: triggers; a hair below: does not
        extra = beta * cost / len(jobs)
        used = [(j, opt + extra) for j in jobs]
        assert plan(store, jobs, used, pools, 4, beta).triggered
        used = [(j, opt + extra * 0.999) for j in jobs]
        assert not plan(store, jobs, used, pools, 4, beta).triggered
    assert plan(store, [], [], pools, 4, 1.5) is None


def test_cura_runs_jobs_only_on_vms_a_same_instant_reshape_keeps() -> None:
    """A reconfiguration that shrinks a pool removes its idle VMs before the same decision's
    starts: with a free reshape at every window (it used to start jobs on VMs being shut down,
    an InvalidDecision), every start is valid and every started job meets its deadline."""
    import dataclasses

    base = small_store(error=0.2)
    store = ProfileStore(dataclasses.replace(base.cloud, reconf_overhead=0.0), base.profiles,
                         error=0.2)
    for seed in (1, 2, 3):
        jobs = random_jobs(store, 80, seed)
        pol = make_cloud_policy("cura", store, {"reconf_window": 15.0})
        res = CloudSim(store, pol, jobs, servers=5, seed=seed).run()
        assert res.reconfigurations >= 1
        check_capacity_and_deadlines(store, res, [10**6] * store.cloud.k)


def test_a_due_reservation_does_not_count_idle_vms_a_reshape_shuts_down() -> None:
    """The defect behind the crash: ``view`` is from before the decision's Resize, whose
    shrink takes the pool's idle VMs first; the reservation must wait, not start."""
    from utilon.cloud.model import PoolView, Start

    store = small_store()
    pol = make_cloud_policy("vm-aware", store)
    job = CloudJob("a", 0, "p0", 100, 0, 1000)
    pol.jobs["a"] = job
    pol.book.set_cap([4, 4, 4])
    pol._reserve(Slot("a", 0, 3, 0.0, 10.0, 1.0))
    pol.target = [1, 4, 4]                      # the pool of type 0 shrinks from 4 to 1
    view = PoolView(size=(4, 4, 4), idle=(4, 4, 4), booting=(0, 0, 0), server_free=(0, 0))
    assert pol._run_due(0.0, view) == [] and "a" in pol.waiting
    pol.waiting.clear()
    pol._reserve(Slot("a", 0, 1, 0.0, 10.0, 1.0))
    assert pol._run_due(0.0, view) == [Start("a", 0, 1)]


def test_capacity_benefit_counts_the_bottleneck_pool() -> None:
    store = small_store()
    cloud = store.cloud
    # pools with cores 8 / 8 / 16 of 32; a demand all on type 0 can use 8/32 of them
    assert usable(cloud, (4, 2, 2), (1.0, 0.0, 0.0)) == pytest.approx(0.25)
    assert usable(cloud, (4, 2, 2), (0.25, 0.25, 0.5)) == pytest.approx(1.0)
    assert usable(cloud, (0, 0, 0), (1.0, 0.0, 0.0)) == 0.0
    jobs = [CloudJob(f"j{i}", 0, "p0", 1000, 0, 2000) for i in range(10)]   # all want "s"
    pools = (4, 2, 2)
    p = capacity_plan(store, jobs, pools, 4, 1.5, elapsed=100.0)
    assert p is not None and p.target[0] > pools[0]
    gain = usable(cloud, p.target, p.share) - usable(cloud, pools, p.share)
    assert p.benefit == pytest.approx(gain * 4 * 100.0)
    assert p.triggered == (p.benefit >= 1.5 * p.cost)
    # the longer the mismatch has lasted, the more a reshape is worth: it triggers eventually
    late = capacity_plan(store, jobs, pools, 4, 1.5, elapsed=10**6)
    soon = capacity_plan(store, jobs, pools, 4, 1.5, elapsed=1.0)
    assert late is not None and late.triggered and soon is not None and not soon.triggered


def test_generated_workload_is_seeded_and_checks_its_input() -> None:
    store = small_store()
    store.profiles = {"p0": store.profiles["p0"]}
    a = generate(store, jobs=30, duration=100, sizes="fixed", seed=3)
    b = generate(store, jobs=30, duration=100, sizes="fixed", seed=3)
    assert a.jobs == b.jobs and len(a.jobs) == 30
    assert all(j.size_mb in (100.0, 1000.0, 10000.0) for j in a.jobs)
    with pytest.raises(ModelError, match="categories"):
        generate(store, jobs=3, mix={"tiny": 1.0}, sizes="fixed")
    with pytest.raises(ModelError, match="uniform, poisson or exponential"):
        DeadlineDist("gamma", 10)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="swim_path"):
        generate(store, jobs=3, sizes="swim")


def test_swim_workload_takes_real_sizes_in_each_band(shared_data: Path) -> None:
    from utilon.cloud.workload import swim_profiles

    store = ProfileStore(CloudSpec(), swim_profiles(SWIM, CloudSpec()))
    assert len(store.profiles) == 50
    assert {p.best for p in store.profiles.values()} == set(range(6))
    w = generate(store, jobs=300, duration=200, swim_path=SWIM, seed=1)
    for j in w.jobs:
        nominal = {"small": 100, "medium": 1000, "large": 10000}[j.category]
        assert nominal / 3.17 <= j.size_mb < nominal * 3.17
    assert len({j.size_mb for j in w.jobs}) > 100, "sizes are real SWIM inputs, not nominal"


# -- Appendix B ------------------------------------------------------------------------------


def test_appendix_b_golden_schedules() -> None:
    got = R.appendix_b()
    slim = {t: [{"job": r["job"], **{k: r["ours"][k] for k in ("vm", "vms", "start", "end")}}
                for r in got[t]["rows"]] for t in ("table5", "table6")}
    slim["pools"] = {"table5": got["pools_t5"], "table6": got["pools_t6"]}
    if UPDATE or not GOLDEN.exists():
        GOLDEN.write_text(json.dumps(slim, indent=1, sort_keys=True) + "\n")
    assert slim == json.loads(GOLDEN.read_text())
    t5 = got["table5"]
    # jobs 1-6 are scheduled exactly as the paper's Table 5
    for r in t5["rows"][:6]:
        p, o = r["paper"], r["ours"]
        assert (o["vm"], o["vms"]) == (p["vm"], p["vms"]), r
    assert t5["met_paper"] == 15
    assert {7, 10, 15} <= set(t5["inconsistent_paper_rows"])
    # job 7 as printed (type 1, 145 s to its deadline): only 30 or 40 VM-3s are fast enough,
    # and the paper's own jobs 4 and 5 hold VM-3 (20 of them until 461): no start in time
    j7 = got["job7"]
    assert {(p["vm"], p["vms"]) for p in j7["proof"]} == {(3, 30), (3, 40)}
    assert all(not p["meets"] and p["running"] == [4, 5] for p in j7["proof"])
    assert t5["met_ours"] == 14
    # with the types the rows' own durations show, all 15 deadlines are met
    assert j7["retyped"] == {"7": "type4", "10": "type4", "15": "type1"}
    assert j7["retyped_met"] == 15
    assert {1, 2, 3, 4, 5, 7, 8, 10, 12, 13, 14, 15} <= set(j7["retyped_rows_like_paper"])


def test_reproduce_cura_quick_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                  shared_data: Path) -> None:
    assert SWIM.is_relative_to(shared_data)
    monkeypatch.setattr(R, "QUICK_JOBS", 40)
    res = CliRunner().invoke(app, ["reproduce", "cura", "--quick", "--seeds", "2", "--jobs", "1",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for text in ("Table 5", "Table 6", "paper", "servers required", "claims over 2 seed(s)",
                 "every seed"):
        assert text in res.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["seeds"] == [1, 2] and data["jobs"] == 40
    assert set(data["figures"]["fig5_6"]["points"]["200.0"]) == set(R.SERVICES)
    assert set(data["fig5_6_by_seed"]) == {"1", "2"}
    claims = {c["key"]: c for c in data["claims"]}
    assert set(claims) == {c.key for c in CLAIMS}
    # the faithful system first, the variant after it; every claim on both seeds
    assert [r["system"] for r in claims["fig5a.order"]["systems"]] == ["cura", "cura-capacity"]
    assert all(r["n"] == 2 for c in claims.values() for r in c["systems"])
    # Appendix B is deterministic: the same observation on each seed
    t5 = claims["appb.table5"]["systems"][0]
    assert t5["values"] == [14, 14] and t5["verdict"] == "failed"
    assert (tmp_path / "cura-table5.png").exists()


def _point(servers: dict[str, int], resp: dict[str, float] | None = None
           ) -> dict[str, dict[str, float]]:
    resp = resp or {}
    return {s: {"servers": v, "mean_response_s": resp.get(s, 100.0),
                "effective_utilization": 100.0 / v} for s, v in servers.items()}


def test_claims_are_decided_per_seed_for_the_faithful_system_and_the_variant() -> None:
    base = {"per-job-cluster": 200, "dedicated": 300, "per-job-opt": 250, "vm-aware": 100,
            "cura": 100, "cura-capacity": 60}
    resp = {"per-job-cluster": 200.0, "dedicated": 120.0, "cura": 70.0, "cura-capacity": 71.2}
    good = {"200.0": _point(base, resp), "800.0": _point({**base, "cura": 150}, resp)}
    # seed 2: Cura ties per-job clusters at one point, and per-job exceeds dedicated at another
    bad = {"200.0": _point({**base, "cura": 200}, resp),
           "800.0": _point({**base, "per-job-cluster": 310}, resp)}
    obs = observe(1, good) + observe(2, bad)
    by = {(o.claim, o.system, o.seed): o for o in obs}
    assert by["fig5a.order", "cura", 1].holds and not by["fig5a.order", "cura", 2].holds
    assert by["fig5a.order", "cura", 1].value == 25.0       # smallest saving: 150 vs 200
    assert by["fig5a.baselines", "baselines", 1].holds
    assert not by["fig5a.baselines", "baselines", 2].holds
    # "up to 80%": the largest saving against the worse baseline; 75% is the rule's edge
    assert by["fig5a.saving", "cura", 1].value == pytest.approx(100 * (1 - 100 / 300))
    assert by["fig5a.saving", "cura-capacity", 1].value == 80.0
    assert by["fig5a.saving", "cura-capacity", 1].holds
    assert not by["fig5a.saving", "cura", 1].holds
    # "up to 65%" lower response: 65% holds, 64.5% is the edge
    assert by["fig5b.size", "cura", 1].value == 65.0 and by["fig5b.size", "cura", 1].holds
    assert by["fig5b.size", "cura-capacity", 1].value == 64.4   # 71.2 / 200: below the edge
    assert not by["fig5b.size", "cura-capacity", 1].holds
    assert by["fig5b.lower", "baselines", 1].value == 40.0   # dedicated 120 vs per-job 200
    # utilization is 100 / servers here: Cura 1 against per-job 0.5 and dedicated 0.33
    assert by["fig5d.size", "cura", 1].value == pytest.approx(3.0)
    assert by["fig5d.higher", "cura", 1].value == pytest.approx(200 / 150, abs=1e-4)
    assert by["fig6a.perjobopt", "cura", 1].value == 2.5
    assert not by["fig6a.perjobopt", "cura", 1].holds
    assert by["fig6a.reconfig", "cura-capacity", 1].value == 40.0
    assert by["fig6a.reconfig", "cura", 1].value == 0.0
    summary = {c["key"]: c for c in summarize_claims(CLAIMS, obs, SYSTEMS)}
    row = summary["fig5a.order"]["systems"][0]
    assert (row["system"], row["held"], row["n"], row["verdict"]) == ("cura", 1, 2, "fragile")
    assert [r["system"] for r in summary["fig5b.lower"]["systems"]] == list(SYSTEMS)


def test_appendix_b_observations_are_one_per_seed_and_equal() -> None:
    ab = {"table5": {"met_ours": 14, "met_paper": 15}, "table6": {"met_ours": 12,
                                                                  "met_paper": 12},
          "job7": {"retyped_met": 15}}
    obs = observe_appendix_b([3, 4, 5], ab)
    assert [(o.claim, o.seed) for o in obs] == [(k, s) for s in (3, 4, 5)
                                                for k in ("appb.table5", "appb.table6")]
    assert {(o.claim, o.holds, o.value) for o in obs} == {("appb.table5", False, 14),
                                                          ("appb.table6", True, 12)}


def test_the_arrival_rate_decides_the_per_job_against_dedicated_order() -> None:
    """Issue 44: dedicated clusters are sized for each customer's peak, per-job clusters share
    one fleet.  At the paper's λ = 0.5 per s, 300 jobs span 600 s (about five runs) and the
    customers' peaks add up to more than per-job clusters need, as in Fig. 5(a); at 11,500 jobs
    per 100 minutes the same 300 jobs arrive within about one run and the order reverses."""
    store = R._store()

    def servers(svc: str, rate: float) -> int:
        w = generate(store, jobs=R.QUICK_JOBS, duration=R.QUICK_JOBS / rate, swim_path=SWIM,
                     seed=1, deadline=DeadlineDist("uniform", 200.0))
        return servers_required(store, lambda: make_cloud_policy(svc, store), w.jobs, seed=1,
                                start=64).servers

    assert servers("per-job-cluster", R.ARRIVAL_RATE) < servers("dedicated", R.ARRIVAL_RATE)
    assert servers("per-job-cluster", 11500 / 6000) > servers("dedicated", 11500 / 6000)


def test_full_run_claims_and_figures_from_results(tmp_path: Path) -> None:
    """The full run's claims and figures (Figs. 7-12), on hand-made results."""
    def pt(servers: dict[str, int]) -> dict[str, dict[str, float]]:
        return {s: {"servers": v, "mean_response_s": 100.0 + v, "per_job_server_hours": 0.1,
                    "effective_utilization": 10.0 / v} for s, v in servers.items()}

    five = dict(zip(R.SERVICES, (400, 300, 500, 250, 200, 180), strict=True))
    figs = {"fig5_6": {"x": "mean deadline s", "points": {"200.0": pt(five)}},
            "fig7_8": {"x": "prediction error", "points": {"0.0": pt(five),
                                                             "0.7": pt({**five, "cura": 270})}},
            "fig10_11": {"x": "job size", "points": {"small": pt(five)}},
            "fig12": {"x": "deadline distribution", "points": {
                "uniform": pt({"cura": 200}), "poisson": pt({"cura": 220}),
                "exponential": pt({"cura": 260})}},
            "fig9": {"vm-aware": {"100": 0.5, "200": 1.0}}}
    ours = R.claims(figs)
    assert ours["fig5_servers"] == "cura: up to 50% fewer servers than per-job, 33% than " \
                                   "dedicated clusters; cura-capacity: up to 55% fewer servers " \
                                   "than per-job, 40% than dedicated clusters"
    assert ours["fig6_reconfig"] == "cura: up to 20% of vm-aware's servers (0 " \
                                    "reconfigurations); cura-capacity: up to 28% of vm-aware's " \
                                    "servers (0 reconfigurations)"
    assert ours["fig7_error"].startswith("5.0% more servers per 10% error")
    assert ours["fig10_sizes"] == "small 2.0x"
    assert ours["fig12_dists"] == "exponential needs 30% more than the better of the others"
    from utilon.repro.cura_figures import plot

    ab = R.appendix_b()
    paths = plot({"appendix_b": ab, "figures": figs}, tmp_path)
    assert {p.name for p in paths} >= {"cura-fig9.png", "cura-fig12.png", "cura-table5.png"}
