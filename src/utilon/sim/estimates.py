"""What policies know of task durations: the error models behind ``simulation.estimates``.

Policies see estimates; the simulator executes the truth.  Each stage's ``estimate`` is the
task duration a policy expects (``expected_duration`` in its snapshot); the tasks' own
``duration`` is what the simulator runs.  A mode names both the *prior* (what a stage's
estimate is before any of its tasks has finished) and the *learning* the scheduler core does
during the run:

==================  ==============================================  ===================
mode                prior                                           learning
==================  ==============================================  ===================
``exact``           what the scenario declares: the stage's         none
(``declared``)      ``estimate``, by default its tasks' mean
``online``          the same                                        online
``realistic``       true mean x an error calibrated on a real       online
                    trace (below)
``lognormal:S``     true mean x exp(N(0, S^2))                      online
==================  ==============================================  ===================

*Online* learning is the core's ``estimates="online"``: once a task of a stage finishes, the
stage's estimate becomes the running mean of its observed attempt times, as a live run
estimates.  Every error model learns online: a prior that stays wrong however many tasks
finish is not what a scheduler that watches its jobs run would see.  (``exact`` keeps the
name of what the core calls ``declared``; both spellings are one mode, stored as
``declared`` so that old scenarios keep their digest.)

**The realistic error.**  ``LOG_ERROR_KNOTS`` are the percentile midpoints (p = 0.005,
0.015, ..., 0.995) of ln(actual / predicted) over the 5,344 jobs of the Alibaba
cluster-trace-v2017 batch table that a *recurring-job* predictor could predict: predicted =
the median duration of the earlier jobs of the same shape (instances, CPU and memory of every
task) that had ended by the job's submission.  Measured by
``benchmarks/calibrate_estimates.py``; result in
``benchmarks/results-estimates-calibration.json``: 27.1% of those jobs are off by a factor of
two or more (14.1% under-, 13.1% overestimated; 22.2% of the jobs predicted at 60 s or more,
14.1% at 300 s or more), against 8-23% for the predictors 3Sigma studied (Park et al.,
EuroSys 2018) on three production traces.  The error is heavy-tailed (sd of ln error 0.78,
robust sd 0.46), so it is sampled from its empirical quantile function (linear between
knots; a draw beyond the outer knots takes them, which cuts the 0.5% most extreme errors at
each end), not a fitted normal; the model is off by >= 2x on 26.9% of draws.

**One draw per job.**  What was calibrated is the error of a prediction of a whole job's
duration, and a real predictor's errors are shared by a job's stages (one input size, one
cluster state, one guess of how the job compares to its history).  One factor per job,
applied to every stage, reproduces the measured job-level error; a draw per stage would
average out over a job's stages and understate it.

Draws come from their own stream, ``SeedSequence([seed, STREAM])``, one per job in workload
order: the same scenario and seed give the same priors, byte for byte, and the workload's
own draws (``scenario.build``) are untouched by the mode.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

import numpy as np

from utilon.model.job import Job, Stage

# benchmarks/results-estimates-calibration.json, model.log_error_knots: ln(actual / predicted)
# at p = (k + 0.5) / 100, k = 0..99 (benchmarks/calibrate_estimates.py; see the docstring)
LOG_ERROR_KNOTS: Final[tuple[float, ...]] = (
    -1.917, -1.674, -1.546, -1.433, -1.386, -1.282, -1.214, -1.13, -1.049, -0.949,
    -0.86, -0.789, -0.722, -0.661, -0.614, -0.568, -0.526, -0.492, -0.452, -0.422,
    -0.405, -0.385, -0.355, -0.332, -0.304, -0.285, -0.267, -0.251, -0.235, -0.218,
    -0.203, -0.188, -0.182, -0.177, -0.167, -0.158, -0.149, -0.135, -0.127, -0.116,
    -0.1, -0.088, -0.08, -0.071, -0.062, -0.048, -0.038, -0.027, -0.009, 0.0,
    0.0, 0.0, 0.0, 0.0, 0.0, 0.013, 0.029, 0.043, 0.057, 0.069,
    0.076, 0.091, 0.106, 0.124, 0.138, 0.145, 0.154, 0.169, 0.186, 0.207,
    0.223, 0.248, 0.268, 0.288, 0.313, 0.336, 0.36, 0.384, 0.405, 0.439,
    0.471, 0.511, 0.551, 0.594, 0.631, 0.667, 0.709, 0.755, 0.806, 0.847,
    0.916, 1.011, 1.089, 1.183, 1.299, 1.462, 1.705, 1.951, 2.33, 2.833,
)
_PROBS: Final = (np.arange(len(LOG_ERROR_KNOTS)) + 0.5) / len(LOG_ERROR_KNOTS)
CALIBRATION: Final = "benchmarks/results-estimates-calibration.json"

STREAM: Final = 0x45_E571_4A7E
"""Second word of the priors' seed sequence: larger than any job index, so it never meets
the ``[seed, job index]`` streams the builder gives ``run:`` jobs."""
MAX_SIGMA: Final = 5.0
TWO_X: Final = math.log(2.0)

LogErrors = Callable[[np.random.Generator, int], np.ndarray]
"""``n`` draws of ln(true / prior), one per job."""


@dataclass(frozen=True, slots=True)
class EstimateMode:
    text: str
    """The canonical spelling, as the scenario stores it."""
    learning: str
    """What the scheduler core is told: ``declared`` (fixed estimates) or ``online``."""
    prior: str
    """What a stage's estimate is before its tasks run, in words (provenance)."""
    errors: LogErrors | None = None
    """``None``: the prior is what the scenario declares."""


def _realistic(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.interp(rng.random(n), _PROBS, LOG_ERROR_KNOTS)


def _lognormal(arg: str) -> EstimateMode:
    try:
        sigma = float(arg)
    except ValueError:
        sigma = math.nan
    if not 0.0 <= sigma <= MAX_SIGMA:
        raise ValueError(f"lognormal:SIGMA needs a number 0 <= SIGMA <= {MAX_SIGMA:g}, "
                         f"got {arg!r}")
    return EstimateMode(f"lognormal:{sigma!r}", "online",
                        f"true mean task duration x exp(N(0, {sigma!r}^2)), one draw per job",
                        lambda rng, n: sigma * rng.standard_normal(n))


_DECLARED = EstimateMode("declared", "declared", "declared: the stage's estimate, by default "
                         "its tasks' mean duration")
_FIXED: Final[dict[str, EstimateMode]] = {
    "exact": _DECLARED,
    "declared": _DECLARED,
    "online": EstimateMode("online", "online", _DECLARED.prior),
    "realistic": EstimateMode(
        "realistic", "online", "true mean task duration / exp(e), one draw of e per job from "
        f"the recurring-job predictor's error on the Alibaba v2017 batch trace ({CALIBRATION})",
        _realistic),
}
_PARAMETRIC: Final[dict[str, Callable[[str], EstimateMode]]] = {"lognormal": _lognormal}
ACCEPTED: Final = "exact (or declared), online, realistic, lognormal:SIGMA"


def parse_mode(text: str) -> EstimateMode:
    """The mode ``text`` names; a ``ValueError`` of one line listing the accepted ones."""
    fixed = _FIXED.get(text)
    if fixed is not None:
        return fixed
    name, sep, arg = text.partition(":")
    make = _PARAMETRIC.get(name) if sep else None
    if make is None:
        raise ValueError(f"estimates must be one of {ACCEPTED}, got {text!r}")
    return make(arg.strip())


def canonical(text: str) -> str:
    """``text`` as a scenario stores it (``exact`` is ``declared``), or a ``ValueError``."""
    return parse_mode(text).text


# ---------------------------------------------------------------------------------- priors
def with_priors(jobs: Sequence[Job], mode: EstimateMode, seed: int) -> tuple[Job, ...]:
    """The jobs with every stage's estimate replaced by the mode's prior (unchanged when the
    prior is the declared one): one error draw per job, deterministic for ``seed``."""
    if mode.errors is None:
        return tuple(jobs)
    rng = np.random.default_rng(np.random.SeedSequence([seed, STREAM]))
    factors = np.exp(-mode.errors(rng, len(jobs))).tolist()
    return tuple(replace(job, stages=tuple(_prior(st, f) for st in job.stages))
                 for job, f in zip(jobs, factors, strict=True))


def _prior(stage: Stage, factor: float) -> Stage:
    mean = stage.work / len(stage.tasks)
    est = mean * factor
    return replace(stage, estimate=est if est > 0 and math.isfinite(est) else mean)


def prior_error(jobs: Sequence[Job]) -> dict[str, Any]:
    """How wrong the priors policies start from are: over stages, the share whose estimate is
    off its tasks' true mean duration by a factor of two or more, and the share of those
    below it (underestimated)."""
    off = under = stages = 0
    for job in jobs:
        for st in job.stages:
            stages += 1
            err = math.log(st.work / len(st.tasks) / st.expected_duration)
            if abs(err) >= TWO_X - 1e-9:
                off += 1
                under += err > 0
    return {"stages": stages,
            "off_2x": round(off / stages, 6) if stages else 0.0,
            "underestimated_2x": round(under / stages, 6) if stages else 0.0}


@dataclass(frozen=True)
class Priors:
    """What one simulation of a workload runs: its jobs as policies know them, and the mode
    to tell the scheduler core."""

    mode: EstimateMode
    jobs: tuple[Job, ...]

    @property
    def learning(self) -> str:
        return self.mode.learning

    def summary(self) -> dict[str, Any] | None:
        """``summary.json``'s ``estimates``: the mode and how wrong its priors are; ``None``
        for the default (``declared``), whose summary stays as it always was."""
        if self.mode is _DECLARED:
            return None
        return {"mode": self.mode.text, "learning": self.mode.learning,
                **prior_error(self.jobs)}

    def provenance(self) -> dict[str, Any] | None:
        if self.mode is _DECLARED:
            return None
        return {"mode": self.mode.text, "prior": self.mode.prior,
                "learning": self.mode.learning}


class _Simulation(Protocol):
    @property
    def estimates(self) -> str: ...


class _Spec(Protocol):
    @property
    def simulation(self) -> _Simulation: ...


class Scenario(Protocol):
    """What :func:`priors` reads of a built scenario (``utilon.scenario.build.Workload``):
    named here because the scenario format is a room above the simulator."""

    @property
    def jobs(self) -> tuple[Job, ...]: ...
    @property
    def seed(self) -> int: ...
    @property
    def spec(self) -> _Spec: ...


def priors(workload: Scenario) -> Priors:
    """The priors of ``workload``'s simulation under its ``simulation.estimates``: every path
    that simulates a workload (``runner``, ``plan``) builds its simulation from these."""
    mode = parse_mode(workload.spec.simulation.estimates)
    return Priors(mode, with_priors(workload.jobs, mode, workload.seed))
