"""Sampling the scenario format's distributions with one seeded numpy Generator."""

from __future__ import annotations

import numpy as np

from utilon.scenario.spec import (
    ChoiceDist,
    ConstantDist,
    ExponentialDist,
    LognormalDist,
    NormalDist,
    Num,
    UniformDist,
)


def sample_many(spec: Num, rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` samples of a number or distribution, clipped to the spec's [min, max]."""
    if isinstance(spec, int | float):
        return np.full(n, float(spec))
    if isinstance(spec, ConstantDist):
        out = np.full(n, spec.value)
    elif isinstance(spec, UniformDist):
        out = rng.uniform(spec.low, spec.high, n)
    elif isinstance(spec, NormalDist):
        out = rng.normal(spec.mean, spec.std, n)
    elif isinstance(spec, LognormalDist):
        out = rng.lognormal(np.log(spec.median), spec.sigma, n)
    elif isinstance(spec, ExponentialDist):
        out = rng.exponential(spec.mean, n)
    elif isinstance(spec, ChoiceDist):
        p = None
        if spec.weights is not None:
            w = np.asarray(spec.weights, dtype=float)
            p = w / w.sum()
        out = rng.choice(np.asarray(spec.values, dtype=float), size=n, p=p)
    else:  # pragma: no cover - the discriminated union is exhaustive
        raise TypeError(f"not a distribution: {spec!r}")
    if spec.min is not None or spec.max is not None:
        out = np.clip(out, spec.min, spec.max)
    return out


def sample(spec: Num, rng: np.random.Generator) -> float:
    if isinstance(spec, int | float):
        return float(spec)
    return float(sample_many(spec, rng, 1)[0])
