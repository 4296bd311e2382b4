"""Tests for the RDS TS-fuzzy progress model (utilon.policies.rds.progress)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from utilon.policies.rds.predict import nrmse
from utilon.policies.rds.progress import (
    CompletionLog,
    ProgressModel,
    ProgressSample,
    completion_time,
)

INTERVAL = 600.0


def linear_law(um: float, ur: float, yp: float) -> float:
    return 0.002 * um + 0.001 * ur + 0.1 * yp


def linear_samples(n: int, seed: int, law=linear_law) -> list[ProgressSample]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        um, ur = rng.uniform(10, 20), rng.uniform(5, 10)
        yp, size = rng.uniform(0, 0.3), rng.uniform(5000, 5100)
        out.append(ProgressSample(um, ur, size, yp, law(um, ur, yp)))
    return out


def fluid_samples(n: int, seed: int) -> list[ProgressSample]:
    """y = u·600/size over sizes spanning 30×, never saturating (u·600 ≤ smallest size)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        size = math.exp(rng.uniform(math.log(6000.0), math.log(180000.0)))
        um, ur = rng.uniform(0, 6), rng.uniform(0, 4)
        out.append(ProgressSample(um, ur, size, rng.uniform(0, 0.5), (um + ur) * 600 / size))
    return out


def columns(samples: list[ProgressSample]) -> tuple[np.ndarray, ...]:
    return tuple(np.array([getattr(s, f) for s in samples])
                 for f in ("u_map", "u_reduce", "size", "y_prev", "y"))


def flat_model() -> ProgressModel:
    """Two rules with an enormous width: firing strengths are 0.5/0.5 everywhere."""
    return ProgressModel([[0.2, 0.2, 0.5, 0.1], [0.8, 0.8, 0.5, 0.9]], 1e6, [0, 0, 0, 0],
                         [20, 20, 12, 1], 1e5,
                         [[0.002, 0.001, -0.05, 0.2, 0.01], [0.004, 0.003, 0.05, 0.0, 0.03]])


def constant_model(rate: float) -> ProgressModel:
    return ProgressModel([[0.5, 0.5, 0.5, 0.5]], 0.2, [0, 0, 0, 0], [1, 1, 1, 1], 1.0,
                         [[0, 0, 0, 0, rate]])


# ------------------------------------------------------------------ fitting
def test_fit_recovers_linear_law() -> None:
    model = ProgressModel.fit(linear_samples(200, 0))
    assert model.rules >= 1
    um, ur, size, yp, y = columns(linear_samples(100, 1))
    assert np.max(np.abs(model.predict(um, ur, size, yp) - y)) < 1e-6


def test_multi_rule_beats_single_rule_on_fluid_law() -> None:
    train, test = fluid_samples(600, 2), fluid_samples(300, 3)
    um, ur, size, yp, y = columns(test)
    multi = ProgressModel.fit(train)
    single = ProgressModel.fit(train, max_rules=1)
    assert single.rules == 1 and multi.rules > 1
    rmse_multi = float(np.sqrt(np.mean((multi.predict(um, ur, size, yp) - y) ** 2)))
    rmse_single = float(np.sqrt(np.mean((single.predict(um, ur, size, yp) - y) ** 2)))
    assert rmse_multi < 0.6 * rmse_single
    # NRMSE normalised by the range of the actual values, as in rds.predict.nrmse.
    assert nrmse(multi.predict(um, ur, size, yp), y) < 0.15


def test_fit_is_deterministic() -> None:
    train = fluid_samples(300, 4)
    assert ProgressModel.fit(train).to_dict() == ProgressModel.fit(train).to_dict()


def test_fit_constant_data_gives_one_rule() -> None:
    s = ProgressSample(1.0, 1.0, 100.0, 0.0, 0.5)
    model = ProgressModel.fit([s, s])
    assert model.rules == 1
    assert model.predict(1.0, 1.0, 100.0, 0.0) == pytest.approx(0.5, abs=1e-6)


def test_predict_scalar_and_vector() -> None:
    model = flat_model()
    assert isinstance(model.predict(5.0, 2.0, 1e4, 0.1), float)
    out = model.predict(np.array([[1.0, 2.0], [3.0, 4.0]]), 2.0, 1e4, 0.1)
    assert out.shape == (2, 2)
    assert out[1, 0] == pytest.approx(model.predict(3.0, 2.0, 1e4, 0.1))


# ------------------------------------------------------------------ linearize
def test_linearize_exact_at_point_vectorised() -> None:
    model = ProgressModel.fit(fluid_samples(400, 5))
    um, ur, size, yp, _ = columns(fluid_samples(50, 6))
    a, bm, br, bp = model.linearize(um, ur, size, yp)
    np.testing.assert_allclose(a + bm * um + br * ur + bp * yp,
                               model.predict(um, ur, size, yp), rtol=0, atol=1e-12)
    scalar = model.linearize(float(um[0]), float(ur[0]), float(size[0]), float(yp[0]))
    assert all(isinstance(v, float) for v in scalar)
    assert scalar[1] == pytest.approx(bm[0])


def test_linearize_matches_finite_differences_when_firing_is_flat() -> None:
    model = flat_model()
    point = (6.0, 3.0, 2e4, 0.2)
    a, bm, br, bp = model.linearize(*point)
    assert a + bm * point[0] + br * point[1] + bp * point[3] == pytest.approx(
        model.predict(*point), abs=1e-12)
    h = 1e-3
    for idx, slope in ((0, bm), (1, br), (3, bp)):
        hi, lo = list(point), list(point)
        hi[idx] += h
        lo[idx] -= h
        fd = (model.predict(*hi) - model.predict(*lo)) / (2 * h)
        assert fd == pytest.approx(slope, abs=1e-8)
    assert bm == pytest.approx(0.003)  # mean of the two rules' u_map coefficients


# ------------------------------------------------------------------ RLS
def law_b(um: float, ur: float, yp: float) -> float:
    return 0.001 * um + 0.003 * ur + 0.05 * yp + 0.02


def track(forgetting: float, max_rules: int = 1) -> tuple[float, float]:
    """Held-out RMSE on the new law right after the change and after 30 updates on it."""
    model = ProgressModel.fit(linear_samples(100, 7), forgetting=forgetting,
                              max_rules=max_rules)
    for s in linear_samples(100, 8):
        model.update(s)
    um, ur, size, yp, y = columns(linear_samples(100, 9, law_b))
    before = float(np.sqrt(np.mean((model.predict(um, ur, size, yp) - y) ** 2)))
    for s in linear_samples(30, 10, law_b):
        model.update(s)
    after = float(np.sqrt(np.mean((model.predict(um, ur, size, yp) - y) ** 2)))
    return before, after


def test_rls_tracks_changed_law() -> None:
    # One rule: 5 consequent parameters, well determined by 30 samples.
    before, after = track(0.9)
    assert after < 0.1 * before
    _, after_no_forgetting = track(1.0)
    assert after_no_forgetting > 2 * after
    # Eight rules (40 parameters) cannot be pinned down by 30 samples, but must still improve.
    before, after = track(0.9, max_rules=8)
    assert after < 0.5 * before


def test_update_returns_a_priori_error() -> None:
    model = ProgressModel.fit(linear_samples(50, 11))
    s = ProgressSample(15.0, 7.0, 5050.0, 0.1, 0.5)
    predicted = model.predict(s.u_map, s.u_reduce, s.size, s.y_prev)
    assert model.update(s) == pytest.approx(0.5 - predicted)
    assert abs(model.predict(s.u_map, s.u_reduce, s.size, s.y_prev) - 0.5) < abs(0.5 - predicted)


def test_covariance_stays_bounded_without_excitation() -> None:
    model = ProgressModel.fit(fluid_samples(200, 12), forgetting=0.5)
    s = ProgressSample(3.0, 2.0, 2e4, 0.1, 0.15)
    for _ in range(200):  # one repeated sample leaves most directions unexcited
        model.update(s)
    assert np.linalg.eigvalsh(model.covariance).max() <= model.p0 * (1 + 1e-9)
    assert model.resets == 0
    assert model.predict(s.u_map, s.u_reduce, s.size, s.y_prev) == pytest.approx(0.15)
    np.testing.assert_array_less(np.abs(model.theta), 1e3)


def test_covariance_reset_is_counted() -> None:
    # With p0 so large that p0·I itself has trace > 1e8, every step trips the guard.
    model = ProgressModel([[0.5] * 4], 0.2, [0] * 4, [1] * 4, 1.0, [[0.0] * 5], p0=1e8)
    for _ in range(3):
        model.update(ProgressSample(1.0, 1.0, 1.0, 0.0, 0.1))
    assert model.resets == 3
    assert np.array_equal(model.covariance, 1e8 * np.eye(5))


# ------------------------------------------------------------------ prior
def test_prior_matches_fluid_law_at_grid_sizes() -> None:
    sizes = [3000.0, 10000.0, 40000.0]
    model = ProgressModel.prior(sizes, INTERVAL, max_alloc=20.0)
    rng = np.random.default_rng(13)
    n = 2000
    size = rng.choice(sizes, n)
    total, frac = rng.uniform(0, 20, n), rng.uniform(0, 1, n)
    yp = rng.uniform(0, 0.5, n)
    truth = np.minimum(1.0, total * INTERVAL / size)
    err = model.predict(total * frac, total * (1 - frac), size, yp) - truth
    assert float(np.sqrt(np.mean(err**2))) < 0.06
    assert float(np.max(np.abs(err))) < 0.2
    assert ProgressModel.prior(sizes, INTERVAL, max_alloc=20.0).to_dict() == model.to_dict()


def test_prior_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="positive"):
        ProgressModel.prior([], INTERVAL, max_alloc=10.0)
    with pytest.raises(ValueError, match="positive"):
        ProgressModel.prior([0.0, 100.0], INTERVAL, max_alloc=10.0)


# ------------------------------------------------------------------ state
def test_to_dict_round_trip_predicts_identically() -> None:
    model = ProgressModel.fit(fluid_samples(200, 14))
    model.update(ProgressSample(2.0, 1.0, 3e4, 0.1, 0.05))
    restored = ProgressModel.from_dict(json.loads(json.dumps(model.to_dict())))
    um, ur, size, yp, _ = columns(fluid_samples(50, 15))
    assert np.array_equal(restored.predict(um, ur, size, yp), model.predict(um, ur, size, yp))
    assert restored.to_dict() == model.to_dict()
    s = ProgressSample(4.0, 1.0, 5e4, 0.2, 0.07)
    assert restored.update(s) == model.update(s)
    assert np.array_equal(restored.theta, model.theta)


def test_copy_is_independent() -> None:
    model = ProgressModel.fit(fluid_samples(200, 16))
    before = model.to_dict()
    clone = model.copy()
    for _ in range(5):
        clone.update(ProgressSample(2.0, 1.0, 3e4, 0.1, 0.5))
    assert model.to_dict() == before
    assert clone.predict(2.0, 1.0, 3e4, 0.1) != model.predict(2.0, 1.0, 3e4, 0.1)


# ------------------------------------------------------------------ completion time
def test_completion_time_constant_rate() -> None:
    model = constant_model(0.1)
    # 0.75 left at 0.1 per interval: 7.5 intervals.
    t = completion_time(model, now=100.0, progress=0.25, size=1.0, u_map=1.0, u_reduce=0.0,
                        y_prev=0.1, interval=INTERVAL)
    assert t == pytest.approx(100.0 + 7.5 * INTERVAL)
    assert completion_time(model, now=5.0, progress=1.0, size=1.0, u_map=1.0, u_reduce=0.0,
                           y_prev=0.1, interval=INTERVAL) == 5.0


def test_completion_time_infinite_without_progress() -> None:
    for rate in (0.0, -0.2):
        assert completion_time(constant_model(rate), now=0.0, progress=0.0, size=1.0,
                               u_map=0.0, u_reduce=0.0, y_prev=0.0,
                               interval=INTERVAL) == math.inf
    assert completion_time(constant_model(1e-3), now=0.0, progress=0.0, size=1.0, u_map=1.0,
                           u_reduce=0.0, y_prev=0.0, interval=INTERVAL,
                           max_steps=10) == math.inf


# ------------------------------------------------------------------ completion log
def test_completion_log_nrmse_hand_computed() -> None:
    log = CompletionLog()
    log.predict("a", 0.0, 110.0)
    log.predict("a", 50.0, 95.0)
    log.predict("b", 0.0, math.inf)  # infinite predictions are excluded
    log.predict("b", 10.0, 40.0)
    log.predict("c", 0.0, 70.0)  # never finishes: excluded
    log.finished("a", 100.0)
    log.finished("b", 50.0)
    predicted, actual = log.pairs()
    assert sorted(zip(predicted.tolist(), actual.tolist(), strict=True)) == [
        (40.0, 50.0), (95.0, 100.0), (110.0, 100.0)]
    # errors 10, -5, -10 -> RMSE sqrt(75); remaining times 100, 50, 40 -> mean 190/3
    assert log.nrmse() == pytest.approx(math.sqrt(75.0) / (190.0 / 3.0))


def test_completion_log_empty_is_nan() -> None:
    log = CompletionLog()
    assert math.isnan(log.nrmse())
    log.predict("a", 0.0, 10.0)
    assert math.isnan(log.nrmse())
    assert log.pairs()[0].size == 0


# ------------------------------------------------------------------ bad input
def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="at least 2 samples"):
        ProgressModel.fit([])
    good = ProgressSample(1.0, 1.0, 100.0, 0.0, 0.1)
    with pytest.raises(ValueError, match="non-finite"):
        ProgressModel.fit([good, ProgressSample(1.0, math.nan, 100.0, 0.0, 0.1)])
    with pytest.raises(ValueError, match="non-finite"):
        ProgressModel.fit([good, ProgressSample(1.0, 1.0, 100.0, 0.0, math.inf)])
    with pytest.raises(ValueError, match="positive"):
        ProgressModel.fit([good, ProgressSample(1.0, 1.0, 0.0, 0.0, 0.1)])


def test_update_rejects_non_finite_sample() -> None:
    model = constant_model(0.1)
    with pytest.raises(ValueError, match="finite"):
        model.update(ProgressSample(1.0, 1.0, 1.0, math.nan, 0.1))
