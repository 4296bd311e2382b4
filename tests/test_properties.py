"""Liveness and invariants as properties of every registered policy.

Random scenarios (``strategies.scenarios``: several resources with or without ``slots``, demands
up to a machine's whole capacity, gang stages, chains and fans of stages, machines joining,
leaving, scaled and slowed) run under every registered policy -- the paper policies too, and
any registered later -- with its defaults and a few parameter variants, including the
tick-driven configurations.  After every run:

* **liveness**: every job that can run on the cluster (``strategies.runnable``: it fits the
  machines that are up once the timeline has ended) finishes, and the run does not stop early
  unless a job that cannot run is left;
* the run-level invariants of ``checks.check_run_invariants`` hold (no machine's declared
  capacity exceeded, each task done exactly once, stage order, utilities in range);
* the same scenario gives the same schedule, attempt by attempt;
* a run may instead refuse the workload up front (``Unrunnable``), but only for a reason the
  test can confirm independently -- a gang wider than the static slots of ``fair-slots``.

The properties, the random scenarios and the oracles live in ``utilon.checks``: ``utilon
check-policy`` runs the same checks on any policy, a plugin's too.

Every registered policy also runs with ``estimates: realistic`` (``sim.estimates``: priors off
by the error measured on a real trace, learned online), where what it believes of task
durations is not what the simulator runs.

The default profile runs a few dozen scenarios inside ``make test``; ``HYPOTHESIS_PROFILE=
thorough`` runs 1,000 (see the README's Tests section for the measured figures).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import BASELINES
from conftest import examples
from utilon.checks import Scenario, check_liveness, scenarios
from utilon.policies import policy_names

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


def test_configs_cover_every_registered_policy() -> None:
    assert {name for name, _ in configs()} == set(policy_names())
    assert set(BASELINES) <= set(policy_names())


@settings(max_examples=max(40, settings().max_examples))
@given(scenarios())
def test_every_policy_finishes_every_job_that_can_run(sc: Scenario) -> None:
    for name, params in configs():
        check_liveness(sc, name, params)


# 15 scenarios each (each runs every configuration): the property above already draws both
# kinds of cluster 40 times; these two only make sure each kind is drawn.
@pytest.mark.parametrize("slots", [True, False], ids=["slots", "cpu-only"])
@settings(max_examples=examples(15))
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
