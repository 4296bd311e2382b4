"""RDS capacity predictors (``utilon.policies.rds.predict``) on known series and real PV data."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from utilon.policies.rds.predict import (
    ArimaPredictor,
    GreenPredictor,
    LastValuePredictor,
    OraclePredictor,
    PredictionLog,
    WindCurve,
    backtest,
    fit_wind_curve,
    make_predictor,
    nrmse,
    predictor_names,
    wind_power,
)

DAY = 86400.0
STEP = 900.0  # 15 minutes: the NREL series' interval
PER_DAY = round(DAY / STEP)
SERIES = Path("nrel_pvdaq_serf_east") / "serf_east_15min_ac_power.csv"


def _solar_days(days: int, seed: int = 0) -> np.ndarray:
    """A bell-shaped solar day (sunrise 6:00, sunset 18:00) under clouds that persist 3 h."""
    hours = (np.arange(days * PER_DAY) % PER_DAY) * STEP / 3600.0
    clear = np.clip(np.sin(np.pi * (hours - 6.0) / 12.0), 0.0, None) * 1000.0
    rng = np.random.default_rng(seed)
    blocks = rng.uniform(0.3, 1.0, size=days * 8)  # one cloud level per 3-hour block
    return clear * np.repeat(blocks, PER_DAY // 8)


# --- registry -----------------------------------------------------------------------------

def test_registry_names_and_unknown_name() -> None:
    assert predictor_names() == ["arima", "green", "last", "oracle"]
    assert isinstance(make_predictor("last"), LastValuePredictor)
    assert isinstance(make_predictor("arima", window=20), ArimaPredictor)
    with pytest.raises(ValueError, match="unknown predictor 'prophet'; valid names: "
                                         "arima, green, last, oracle"):
        make_predictor("prophet")
    with pytest.raises(ValueError, match="bad parameters for predictor 'last'"):
        make_predictor("last", window=3)


def test_forecast_needs_observation_and_positive_horizon() -> None:
    pred = LastValuePredictor()
    with pytest.raises(ValueError, match="no observation"):
        pred.forecast(1)
    pred.observe(0.0, 1.0)
    with pytest.raises(ValueError, match="positive integer"):
        pred.forecast(0)


# --- nrmse and the log ----------------------------------------------------------------------

def test_nrmse_hand_examples() -> None:
    # errors 0, 1, 2 -> RMSE sqrt(5/3); range of actual 5 - 1 = 4
    assert nrmse([1.0, 2.0, 3.0], [1.0, 3.0, 5.0]) == pytest.approx(math.sqrt(5 / 3) / 4)
    assert nrmse([3.0, 3.0], [2.0, 2.0]) == pytest.approx(0.5)  # range 0: RMSE 1 / mean 2
    assert nrmse([0.0], [0.0]) == 0.0
    assert nrmse([1.0], [0.0]) == math.inf
    with pytest.raises(ValueError, match="equal, non-empty"):
        nrmse([1.0, 2.0], [1.0])


def test_prediction_log_nrmse_per_step() -> None:
    log = PredictionLog(interval=10.0)
    log.predict(0.0, [1.0, 2.0])    # for t = 10, 20
    log.actual(10.0, 1.0)
    log.predict(10.0, [5.0, 6.0])   # for t = 20, 30
    log.actual(20.0, 3.0)
    log.predict(20.0, [9.0, 9.0])   # for t = 30 (known below), 40 (never known)
    log.actual(30.0, 7.0)
    assert [(r.time, r.step, r.predicted, r.actual) for r in log.records] == [
        (0.0, 1, 1.0, 1.0), (0.0, 2, 2.0, 3.0),
        (10.0, 1, 5.0, 3.0), (10.0, 2, 6.0, 7.0),
        (20.0, 1, 9.0, 7.0), (20.0, 2, 9.0, None)]
    by_step = log.nrmse_by_step()
    # step 1: predicted 1, 5, 9 vs actual 1, 3, 7 -> errors 0, 2, 2; range 6
    assert by_step[1] == pytest.approx(math.sqrt(8 / 3) / 6)
    # step 2: predicted 2, 6 vs actual 3, 7 -> errors 1, 1; range 4
    assert by_step[2] == pytest.approx(1 / 4)


# --- last and oracle ------------------------------------------------------------------------

def test_last_on_a_step() -> None:
    pred = make_predictor("last")
    for i, v in enumerate([1.0, 1.0, 1.0, 5.0]):
        pred.observe(i * 600.0, v)
    assert pred.forecast(3).tolist() == [5.0, 5.0, 5.0]


def test_oracle_is_exact() -> None:
    times = np.arange(50) * 600.0
    values = _solar_days(1)[:50] + 3.0
    oracle = make_predictor("oracle", times=times, values=values)
    log = backtest(oracle, times, values, 3, 600.0)
    assert all(v == 0.0 for v in log.nrmse_by_step().values())
    assert oracle.forecast(3).tolist() == [values[-1]] * 3  # past the end: last true value
    oracle.observe(times[10], values[10])
    assert oracle.forecast(2).tolist() == values[11:13].tolist()
    with pytest.raises(ValueError, match="strictly increasing"):
        OraclePredictor([0.0, 0.0], [1.0, 2.0])


# --- ARIMA ----------------------------------------------------------------------------------

def test_arima_on_ar1_matches_conditional_mean() -> None:
    rng = np.random.default_rng(0)
    phi, mean = 0.8, 10.0
    x = [mean]
    for _ in range(299):
        x.append(mean + phi * (x[-1] - mean) + rng.normal(0.0, 0.5))
    pred = ArimaPredictor(order=(1, 0, 0), trend="c", window=300)
    for i, v in enumerate(x):
        pred.observe(i * 600.0, v)
    expected = mean + phi ** np.arange(1, 4) * (x[-1] - mean)
    np.testing.assert_allclose(pred.forecast(3), expected, atol=0.3)
    assert pred.fits == 1 and pred.fallbacks == 0


def test_arima_beats_last_on_a_trend() -> None:
    rng = np.random.default_rng(2)
    n = 120
    values = 50.0 + 2.0 * np.arange(n) + rng.normal(0.0, 0.5, n)
    times = np.arange(n) * 600.0
    arima = ArimaPredictor(order=(1, 1, 0), trend="t", window=48, refit_every=10)
    a = backtest(arima, times, values, 3, 600.0, warmup=50).nrmse_by_step()
    last = backtest(LastValuePredictor(), times, values, 3, 600.0, warmup=50).nrmse_by_step()
    assert a[3] < 0.5 * last[3]
    assert a[1] < last[1]
    # One fit once min_obs observations are in, then one per 10 new observations.
    assert arima.fits == (n - arima.min_obs) // 10 + 1
    assert arima.fallbacks == arima.min_obs - 1  # forecasts before min_obs observations
    assert arima.mean_forecast_seconds > 0.0


def test_arima_falls_back_and_clips() -> None:
    pred = ArimaPredictor(window=20)  # paper default: AR(3) on the level, no constant
    pred.observe(0.0, 4.0)
    assert pred.forecast(2).tolist() == [4.0, 4.0]  # too few observations
    for i in range(1, 20):
        pred.observe(i * 600.0, 4.0)
    assert pred.forecast(2).tolist() == [4.0, 4.0]  # constant window: nothing to fit
    assert pred.fallbacks == 2 and pred.fits == 0
    # A steep ramp: the forecast may not exceed 1.5 x the largest value seen, nor drop below 0.
    ramp = ArimaPredictor(order=(1, 1, 0), trend="t", window=20, clip_factor=1.01)
    for i in range(20):
        ramp.observe(i * 600.0, 10.0 * i)
    out = ramp.forecast(3)
    assert np.all(out >= 0.0) and np.all(out <= 190.0 * 1.01 + 1e-9)
    with pytest.raises(ValueError, match="window"):
        ArimaPredictor(window=3)


# --- green ----------------------------------------------------------------------------------

def test_green_beats_last_on_cloudy_solar_days() -> None:
    values = _solar_days(10)
    times = np.arange(len(values)) * STEP
    warm = 7 * PER_DAY
    green = GreenPredictor()
    g = backtest(green, times, values, 3, STEP, warmup=warm).nrmse_by_step()
    last = backtest(LastValuePredictor(), times, values, 3, STEP, warmup=warm).nrmse_by_step()
    assert g[3] < 0.9 * last[3]
    assert green.interval == STEP  # inferred from the first two observations
    assert 0.0 <= green.clear_fraction <= 1.0


def test_green_clear_sky_times_cloud_fraction() -> None:
    # Two identical clear days, then the third at half power: forecast = envelope x 0.5.
    shape = np.clip(np.sin(np.pi * (np.arange(PER_DAY) * STEP / 3600.0 - 6.0) / 12.0), 0, None)
    series = np.concatenate([shape, shape, 0.5 * shape[:48]])
    green = GreenPredictor(interval=STEP, recent=3)
    for i, v in enumerate(series):
        green.observe(i * STEP, v)
    assert green.clear_fraction == pytest.approx(0.5)
    np.testing.assert_allclose(green.forecast(3), 0.5 * shape[48:51])


def test_green_falls_back_before_a_full_day() -> None:
    green = GreenPredictor()
    green.observe(0.0, 2.0)
    assert green.forecast(2).tolist() == [2.0, 2.0]
    green.observe(STEP, 3.0)
    assert green.forecast(1).tolist() == [3.0]
    assert green.fallbacks == 2
    with pytest.raises(ValueError, match="whole number"):
        GreenPredictor(interval=7.0).observe(0.0, 1.0)


# --- wind -----------------------------------------------------------------------------------

def test_wind_curve_recovers_parameters() -> None:
    rng = np.random.default_rng(3)
    a, b, rated = 0.002, 0.1, 5.0
    speeds = rng.uniform(0.0, 18.0, 2000)
    powers = np.clip(a * speeds**3 + b + rng.normal(0.0, 0.05, speeds.size), 0.0, rated)
    curve = fit_wind_curve(speeds, powers, rated=rated)
    assert curve.a == pytest.approx(a, rel=0.03)
    assert curve.b == pytest.approx(b, abs=0.03)
    assert curve.rated == rated
    out = wind_power(curve, [0.0, 10.0, 30.0])
    assert out[0] == pytest.approx(b, abs=0.03)
    assert out[1] == pytest.approx(a * 1000 + b, rel=0.05)
    assert out[2] == rated  # clipped at the rated power
    assert wind_power(WindCurve(1.0, -5.0, 10.0), [1.0]).tolist() == [0.0]  # below cut-in


# --- real data ------------------------------------------------------------------------------

def test_predictors_on_real_pv_days(shared_data: Path) -> None:
    raw = np.loadtxt(shared_data / SERIES, delimiter=",", skiprows=1, usecols=1,
                     max_rows=4 * PER_DAY)
    values = np.clip(raw, 0.0, None)  # night-time standby draw is not capacity
    times = np.arange(len(values)) * STEP
    warm = PER_DAY  # the green model needs one day of history
    configs: list[tuple[str, dict[str, Any]]] = [
        ("last", {}), ("green", {}), ("oracle", {"times": times, "values": values}),
        ("arima", {"refit_every": 8})]
    results = {}
    for name, params in configs:
        log = backtest(make_predictor(name, **params), times, values, 3, STEP, warmup=warm)
        results[name] = log.nrmse_by_step()
        assert len(log.records) == 3 * (len(values) - warm)
    assert all(v == 0.0 for v in results["oracle"].values())
    for name in ("last", "green", "arima"):
        assert all(math.isfinite(v) and 0.0 < v < 1.0 for v in results[name].values())
