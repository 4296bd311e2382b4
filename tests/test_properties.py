"""Liveness and invariants as properties of every registered policy.

Random scenarios (``strategies.scenarios``: several resources with or without ``slots``, demands
up to a machine's whole capacity, gang stages, chains and fans of stages, machines joining,
leaving, scaled and slowed) run under every registered policy -- the paper policies too, and
any registered later -- with its defaults and a few parameter variants, including the
tick-driven configurations.  After every run:

* **liveness**: every job that can run on the cluster (``strategies.runnable``: it fits the
  machines that are up once the timeline has ended) finishes, and the run does not stop early
  unless a job that cannot run is left;
* the run-level invariants of ``builders.check_run_invariants`` hold (no machine's declared
  capacity exceeded, each task done exactly once, stage order, utilities in range);
* the same scenario gives the same schedule, attempt by attempt;
* a run may instead refuse the workload up front (``Unrunnable``), but only for a reason the
  test can confirm independently -- a gang wider than the static slots of ``fair-slots``.

Every registered policy also runs with ``estimates: realistic`` (``sim.estimates``: priors off
by the error measured on a real trace, learned online), where what it believes of task
durations is not what the simulator runs.

The default profile runs a few dozen scenarios inside ``make test``; ``HYPOTHESIS_PROFILE=
thorough`` runs 1,000 (see the README's Tests section for the measured figures).
"""

from __future__ import annotations

import itertools
from operator import le
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import BASELINES, check_run_invariants, job_times, run
from strategies import Scenario, final_state, runnable, scenarios
from utilon.core.feasibility import Unrunnable
from utilon.model import Job
from utilon.policies import make_policy, policy_names
from utilon.sim import SimResult, Simulation
from utilon.sim.estimates import parse_mode, with_priors

VARIANTS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("fair-slots", {"k": 1}),
    ("fair-slots", {"k": 2, "reduce_k": 1}),
    ("alsched", {"constraints": "hard"}),
    ("alsched", {"constraints": "none"}),
    ("alsched", {"interval": 7.0}),
    ("ras", {"interval": 10.0}),
    ("ras", {"unmeasured": "prior", "tt_order": "index", "reduce_aware": False,
             "start": "plan"}),
    ("rds", {"predictor": "oracle", "interval": 60.0}),
    ("rds", {"objective": "deadline", "interval": 60.0}),
    ("rds", {"objective": "tardiness", "interval": 60.0}),
    ("rds", {"models": "job", "interval": 60.0}),
    ("cora", {"replan": "event"}),
    ("cora-ct", {"replan": "event"}),
    ("cora-ct", {"above_min": "edf"}),
    ("cora-ct", {"above_min": "sum"}),
)


def configs() -> list[tuple[str, dict[str, Any]]]:
    """Every registered policy with its defaults, then the variants."""
    return [(name, {}) for name in policy_names()] + list(VARIANTS)


def fair_slots_can_run(job: Job, sc: Scenario, k: int, reduce_k: int | None) -> bool:
    """Independent check of a ``fair-slots`` refusal: can every gang of ``job`` get a static
    slot per task, each on a final-state machine it fits (exhaustive on these sizes)?"""
    caps = list(final_state(sc.cluster).values())
    names = sc.cluster.resource_names
    for stage in job.stages:
        if not stage.gang:
            continue
        per = reduce_k if (reduce_k is not None and stage.kind == "reduce") else k
        homes = [[i for i, c in enumerate(caps)
                  if all(map(le, t.demand.vector(names), (x + 1e-6 for x in c.vector(names))))]
                 for t in stage.tasks]
        if not any(all(layout.count(i) <= per for i in set(layout))
                   for layout in itertools.product(*homes)):
            return False
    return True


def simulate(sc: Scenario, name: str, params: dict[str, Any], estimates: str,
             seed: int) -> SimResult:
    """``builders.run`` (validated, attempts recorded), with the priors of ``estimates``."""
    mode = parse_mode(estimates)
    if mode.learning == "declared" and mode.errors is None:
        return run(sc.cluster, sc.jobs, name, **params)
    return Simulation(sc.cluster, with_priors(sc.jobs, mode, seed), make_policy(name, params),
                      validate=True, record_attempts=True, estimates=mode.learning).run()


def check_liveness(sc: Scenario, name: str, params: dict[str, Any],
                   estimates: str = "declared", seed: int = 0) -> None:
    label = f"{name}{params} estimates={estimates}"
    try:
        first = simulate(sc, name, params, estimates, seed)
    except Unrunnable as refused:
        job = next(j for j in sc.jobs if j.id == refused.job)
        assert name == "fair-slots", f"{label} refused {refused.job}: {refused}"
        assert not fair_slots_can_run(job, sc, params.get("k", 4), params.get("reduce_k")), (
            f"{label} refused {refused.job}, which can run: {refused}")
        return
    able = [j.id for j in sc.jobs if runnable(j, sc.cluster) and (
        name != "fair-slots" or fair_slots_can_run(j, sc, params.get("k", 4),
                                                     params.get("reduce_k")))]
    unfinished = [j for j in able if first.core.jobs[j].finish is None]
    assert not unfinished, f"{label}: {unfinished} never finished ({first.stopped_early})"
    if len(able) == len(sc.jobs):
        assert first.stopped_early == "", f"{label}: {first.stopped_early}"
    check_run_invariants(first, sc.cluster, sc.jobs)
    # determinism: the same scenario gives the same schedule, attempt by attempt
    second = simulate(sc, name, params, estimates, seed)
    assert job_times(second) == job_times(first), label
    assert second.core.attempts == first.core.attempts, label


def test_configs_cover_every_registered_policy() -> None:
    assert {name for name, _ in configs()} == set(policy_names())
    assert set(BASELINES) <= set(policy_names())


@settings(max_examples=max(40, settings().max_examples))
@given(scenarios())
def test_every_policy_finishes_every_job_that_can_run(sc: Scenario) -> None:
    for name, params in configs():
        check_liveness(sc, name, params)


@pytest.mark.parametrize("slots", [True, False], ids=["slots", "cpu-only"])
@settings(max_examples=max(15, settings().max_examples))
@given(data=st.data())
def test_liveness_with_and_without_a_slot_resource(slots: bool, data: st.DataObject) -> None:
    """The same property with the slot resource forced on or off (policies count shares in
    ``slots`` when machines declare it, else in ``cpu``, often fractional)."""
    sc = data.draw(scenarios(slots=slots))
    for name, params in configs():
        check_liveness(sc, name, params)


@settings(max_examples=max(6, settings().max_examples // 6))
@given(scenarios(), st.integers(0, 2**32 - 1))
def test_every_policy_finishes_under_realistic_estimates(sc: Scenario, seed: int) -> None:
    """Liveness, invariants and determinism when policies plan with wrong priors that they
    learn online (``estimates: realistic``): wrong beliefs may cost utility, never a job."""
    for name in policy_names():
        check_liveness(sc, name, {}, "realistic", seed)
