"""Pluggable cluster-capacity predictors for RDS (paper §4), plus NRMSE bookkeeping.

RDS asks its resource predictor, once per control interval (10 minutes, §5.2), for the
available capacity of the next H_p intervals (H_p = 3, §6.6; §6.3 finds 3 steps gives the
smallest prediction error); the receding-horizon controller (§3.1, Eq. 3) uses those
values as the capacity bound of Eq. 2 over the prediction horizon.
Every predictor here sees one observation per interval (``observe``) and returns the next
``h`` interval values (``forecast``).

What the paper specifies, and what we chose where it does not:

* ``last`` — persistence (not in the paper): the baseline every other predictor must beat.
* ``arima`` (§4.1, Eq. 16, Table 2, §5.2) — the paper writes the model as a pure
  autoregression ``r(t) = a_1 r(t-1) + ... + a_n r(t-n)`` with no constant and no
  differencing, uses n = 3 lags (Table 2; §5.2 "the last 3 horizons") and builds the h-step
  forecast by iterating the one-step prediction. So the default order is (3, 0, 0).  We do
  fit a constant (``trend="c"``), which Eq. 16 omits: without it the iterated forecast of a
  series whose level is far from zero decays towards 0 (on a Google cell's capacity, about
  20,000 slots varying by 6%, the constant-free fit errs by ~30% of the mean; with it, by
  0.2–0.4%). The paper does not say how many past observations the coefficients are fitted
  on, how often they are refitted, or what happens when the fit fails. We fit
  ``statsmodels.tsa.arima.model.ARIMA`` by maximum likelihood on the last ``window`` = 48
  observations (8 hours at 10-minute intervals), refit every ``refit_every`` observations
  (default 1: every interval) and in between re-apply the last fitted coefficients to the
  current window (a Kalman-filter pass, about a tenth of the cost of a fit). The state-space
  forecast of an AR model is exactly the iterated one-step prediction of Table 2. With fewer
  than ``min_obs`` observations, a constant window, a failed fit or a non-finite forecast the
  predictor falls back to ``last`` and counts it in ``fallbacks``. Forecasts are clipped to
  ``[floor, clip_factor × max observed]`` (0 and 1.5 by default): capacity is never negative,
  and an unstable fit must not promise the controller far more capacity than ever seen.
* ``green`` (§4.2) — the paper takes the solar model of its reference [20]:
  ``P(k) = B(k) · (1 − CloudCover)`` with ``B`` the power expected under ideal sunny conditions
  (instantiated from NREL history) and ``CloudCover`` a *weather forecast*. We have no weather
  forecasts, so both factors come from the capacity history itself: ``B(k)`` is the clear-sky
  envelope, the ``quantile`` (default 1.0: the maximum) of the values at the same time of
  day on the last ``days`` = 7 days; ``1 − CloudCover`` is the ratio of the last
  ``recent`` = 3 observations to their envelope values (sums, daylight slots only), clipped to
  [0, 1] as the paper's fraction is. At night the last daylight ratio is carried forward.
  Before one full day of history the predictor falls back to ``last`` (counted).
  The wind model (``P = a·v³ + b``, least squares, §4.2) needs wind-speed forecasts, which a
  capacity series does not carry, so it is exposed as the functions ``fit_wind_curve`` and
  ``wind_power`` rather than as a predictor; the fitted power is clipped to [0, rated] (the
  turbine's cut-in and rated limits, which the bare cubic of the paper ignores).
* ``oracle`` — the paper's "ideal scheduler" knows future capacity exactly: constructed with
  the full true series, it returns the true next values (beyond the end of the series it
  repeats the last value).

NRMSE: the paper reports resource-prediction accuracy as "normalized root mean square error
(NRMSE), a standard metric for deviation" (§6.3, §6.4, citing [15]) without giving the
normaliser. We divide the RMSE by the range of the actual values (max − min), or by their
mean when the range is 0 (``nrmse``).
"""

from __future__ import annotations

import math
import time
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

__all__ = [
    "ArimaPredictor",
    "GreenPredictor",
    "LastValuePredictor",
    "OraclePredictor",
    "PredictionLog",
    "PredictionRecord",
    "Predictor",
    "WindCurve",
    "backtest",
    "fit_wind_curve",
    "make_predictor",
    "nrmse",
    "predictor_names",
    "wind_power",
]


def _check_h(h: int) -> None:
    if not isinstance(h, int | np.integer) or h < 1:
        raise ValueError(f"forecast horizon must be a positive integer, got {h!r}")


class Predictor(ABC):
    """Predicts the next ``h`` values of a regular-interval capacity series."""

    name: ClassVar[str]

    @abstractmethod
    def observe(self, t: float, value: float) -> None:
        """Record the observation ``value`` at time ``t`` (seconds, one per interval)."""

    @abstractmethod
    def forecast(self, h: int) -> FloatArray:
        """The next ``h`` interval values after the latest observation."""


class LastValuePredictor(Predictor):
    """Persistence: every future interval has the last observed value."""

    name: ClassVar[str] = "last"

    def __init__(self) -> None:
        self._last: float | None = None

    def observe(self, t: float, value: float) -> None:
        self._last = float(value)

    def forecast(self, h: int) -> FloatArray:
        _check_h(h)
        if self._last is None:
            raise ValueError("last: no observation yet")
        return np.full(h, self._last)


_FIT_CACHE_SIZE = 256
_fits: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def _fit_arima(y: FloatArray, order: tuple[int, int, int], trend: str) -> Any:
    """``ARIMA(y, order, trend).fit()``, memoised on the window's bytes (a bounded LRU).

    The fit is a deterministic function of the window, and runs on the same cluster see the
    same capacity series: the reproduction runs several ``rds`` variants on one solar day
    in one process, and each refits ARIMA at every control step (issue 44: 3-4 s of a
    5-s run).  The cached result is the one a refit would return."""
    from statsmodels.tsa.arima.model import ARIMA

    key = (order, trend, y.shape, y.tobytes())
    hit = _fits.get(key)
    if hit is not None:
        _fits.move_to_end(key)
        return hit
    res = ARIMA(y, order=order, trend=trend).fit()
    _fits[key] = res
    if len(_fits) > _FIT_CACHE_SIZE:
        _fits.popitem(last=False)
    return res


class ArimaPredictor(Predictor):
    """ARIMA over the last ``window`` observations, h-step forecasts by iteration (§4.1)."""

    name: ClassVar[str] = "arima"

    def __init__(self, order: tuple[int, int, int] = (3, 0, 0), window: int = 48,
                 refit_every: int = 1, trend: str = "c", min_obs: int | None = None,
                 clip_factor: float = 1.5, floor: float = 0.0) -> None:
        p, d, q = (int(x) for x in order)
        if min(p, d, q) < 0 or p + q == 0:
            raise ValueError(f"arima: order needs p + q >= 1 and no negative terms, got {order}")
        self.order = (p, d, q)
        # The fit needs several observations per parameter to be worth more than persistence.
        self.min_obs = 3 * (p + d + q) + 2 if min_obs is None else int(min_obs)
        if window < self.min_obs:
            raise ValueError(f"arima: window {window} is shorter than min_obs {self.min_obs}")
        if refit_every < 1:
            raise ValueError(f"arima: refit_every must be >= 1, got {refit_every}")
        if clip_factor <= 0:
            raise ValueError(f"arima: clip_factor must be positive, got {clip_factor}")
        self.window = int(window)
        self.refit_every = int(refit_every)
        self.trend = trend
        self.clip_factor = float(clip_factor)
        self.floor = float(floor)
        self._hist: deque[float] = deque(maxlen=self.window)
        self._max_seen = -math.inf
        self._result: Any = None  # statsmodels ARIMAResults of the latest fit
        self._since_fit = 0
        # Counters for reports: how the forecasts were made and what they cost.
        self.fits = 0
        self.fallbacks = 0
        self.forecasts = 0
        self.forecast_seconds = 0.0

    @property
    def mean_forecast_seconds(self) -> float:
        """Mean wall time of one ``forecast`` call, including any refit it triggered."""
        return self.forecast_seconds / self.forecasts if self.forecasts else 0.0

    def observe(self, t: float, value: float) -> None:
        # 10 significant digits: runs on one cluster measure the same capacity up to float
        # summation order (last bits), and must fit the same window to share fits
        value = float(f"{float(value):.10g}")
        self._hist.append(value)
        self._max_seen = max(self._max_seen, value)
        self._since_fit += 1

    def forecast(self, h: int) -> FloatArray:
        _check_h(h)
        if not self._hist:
            raise ValueError("arima: no observation yet")
        start = time.perf_counter()
        out = self._model_forecast(h)
        if out is None:
            self.fallbacks += 1
            out = np.full(h, self._hist[-1])
        # clip_factor × the largest value seen (for a non-negative series), never below floor.
        hi = self._max_seen + (self.clip_factor - 1.0) * abs(self._max_seen)
        out = np.clip(out, self.floor, max(hi, self.floor))
        self.forecasts += 1
        self.forecast_seconds += time.perf_counter() - start
        return out

    def _model_forecast(self, h: int) -> FloatArray | None:
        if len(self._hist) < self.min_obs:
            return None
        y = np.asarray(self._hist, dtype=float)
        if np.ptp(y) == 0.0:
            return None  # nothing to fit; persistence is exact for a constant window
        try:
            with warnings.catch_warnings():
                # Short windows routinely trigger convergence and start-parameter warnings;
                # a poor fit is caught by the finiteness check and the clipping instead.
                warnings.simplefilter("ignore")
                if self._result is None or self._since_fit >= self.refit_every:
                    self._result = _fit_arima(y, self.order, self.trend)
                    self._since_fit = 0
                    self.fits += 1
                    res = self._result
                else:
                    res = self._result.apply(y, refit=False)
                out = np.asarray(res.forecast(h), dtype=float)
        except Exception:  # statsmodels raises many types (LinAlgError, ValueError, ...)
            self._result = None
            return None
        return out if out.shape == (h,) and np.all(np.isfinite(out)) else None


class GreenPredictor(Predictor):
    """Solar model P(k) = B(k)·(1 − CloudCover) with both factors estimated from history."""

    name: ClassVar[str] = "green"

    def __init__(self, interval: float | None = None, period: float = 86400.0, days: int = 7,
                 quantile: float = 1.0, recent: int = 3, daylight: float = 0.05) -> None:
        if interval is not None and interval <= 0:
            raise ValueError(f"green: interval must be positive, got {interval}")
        if days < 1 or recent < 1:
            raise ValueError("green: days and recent must be >= 1")
        if not 0.0 <= quantile <= 1.0:
            raise ValueError(f"green: quantile must be in [0, 1], got {quantile}")
        self.interval = None if interval is None else float(interval)
        self.period = float(period)
        self.days = int(days)
        self.quantile = float(quantile)
        self.recent = int(recent)
        # Slots whose envelope is below this fraction of the peak count as night: their
        # ratio observed/expected is noise over a near-zero denominator.
        self.daylight = float(daylight)
        self._t0: float | None = None
        self._steps_per_period = 0
        self._values: dict[int, float] = {}  # step index -> observed value (clipped at 0)
        self._now: int | None = None
        self._first: float | None = None
        self._last = 0.0
        self._clear_fraction = 1.0  # 1 − CloudCover, carried over the night
        self.fallbacks = 0

    def _step_of(self, t: float) -> int:
        assert self._t0 is not None and self.interval is not None
        return round((t - self._t0) / self.interval)

    def observe(self, t: float, value: float) -> None:
        v = max(float(value), 0.0)  # inverter standby draw at night is not capacity
        self._last = v
        if self._t0 is None:
            self._t0 = float(t)
            if self.interval is None:
                self._first = v  # stored once the second observation fixes the step
                return
        elif self.interval is None:
            self.interval = float(t) - self._t0  # regular series: the first gap is the step
            if self.interval <= 0:
                raise ValueError("green: observation times must increase")
            if self._first is not None:
                self._values[0] = self._first
        if self._steps_per_period == 0:
            assert self.interval is not None
            steps = self.period / self.interval
            if abs(steps - round(steps)) > 1e-6 or round(steps) < 1:
                raise ValueError(f"green: period {self.period} is not a whole number of "
                                 f"{self.interval}-second intervals")
            self._steps_per_period = round(steps)
        n = self._step_of(t)
        self._now = n
        self._values[n] = v
        keep_from = n - (self.days + 1) * self._steps_per_period
        for old in [k for k in self._values if k < keep_from]:
            del self._values[old]
        self._update_clear_fraction(n)

    def _envelope(self, n: int) -> float | None:
        """Clear-sky value B at step ``n``: same time of day on the previous ``days`` days."""
        now = self._now if self._now is not None else n
        past = [self._values[k] for k in
                (n - j * self._steps_per_period for j in range(1, self.days + 1))
                if k in self._values and k <= now]
        if not past:
            return None
        return float(np.quantile(past, self.quantile))

    def _peak(self) -> float:
        return max(self._values.values(), default=0.0)

    def _update_clear_fraction(self, n: int) -> None:
        threshold = self.daylight * self._peak()
        seen = expected = 0.0
        for k in range(n - self.recent + 1, n + 1):
            b = self._envelope(k)
            if b is None or k not in self._values or b <= threshold or b <= 0.0:
                continue
            seen += self._values[k]
            expected += b
        if expected > 0.0:
            self._clear_fraction = min(max(seen / expected, 0.0), 1.0)

    @property
    def clear_fraction(self) -> float:
        """Current estimate of 1 − CloudCover."""
        return self._clear_fraction

    def forecast(self, h: int) -> FloatArray:
        _check_h(h)
        if self._now is None:
            if self._t0 is None:
                raise ValueError("green: no observation yet")
            self.fallbacks += 1  # one observation, the interval is not known yet
            return np.full(h, self._last)
        envelope = [self._envelope(self._now + j) for j in range(1, h + 1)]
        if any(b is None for b in envelope):
            self.fallbacks += 1
            return np.full(h, self._last)
        return np.array([b * self._clear_fraction for b in envelope if b is not None])


class OraclePredictor(Predictor):
    """Knows the true series: returns the true values after the latest observed time."""

    name: ClassVar[str] = "oracle"

    def __init__(self, times: ArrayLike, values: ArrayLike) -> None:
        self._times = np.asarray(times, dtype=float)
        self._values = np.asarray(values, dtype=float)
        if self._times.ndim != 1 or self._times.shape != self._values.shape or not len(
                self._times):
            raise ValueError("oracle: times and values must be equal-length non-empty 1-D")
        if np.any(np.diff(self._times) <= 0):
            raise ValueError("oracle: times must be strictly increasing")
        self._i: int | None = None

    def observe(self, t: float, value: float) -> None:
        i = int(np.searchsorted(self._times, t, side="right")) - 1
        self._i = max(i, 0)

    def forecast(self, h: int) -> FloatArray:
        _check_h(h)
        if self._i is None:
            raise ValueError("oracle: no observation yet")
        idx = np.minimum(np.arange(self._i + 1, self._i + 1 + h), len(self._values) - 1)
        return self._values[idx].copy()


_REGISTRY: dict[str, type[Predictor]] = {
    cls.name: cls
    for cls in (LastValuePredictor, ArimaPredictor, GreenPredictor, OraclePredictor)
}


def predictor_names() -> list[str]:
    """Names accepted by ``make_predictor``."""
    return sorted(_REGISTRY)


def make_predictor(name: str, **params: Any) -> Predictor:
    """A new predictor by registry name, with constructor parameters."""
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ValueError(f"unknown predictor {name!r}; valid names: "
                         f"{', '.join(predictor_names())}")
    try:
        return cls(**params)
    except TypeError as exc:  # wrong parameter names: say which predictor rejected them
        raise ValueError(f"bad parameters for predictor {name!r}: {exc}") from exc


def nrmse(predicted: ArrayLike, actual: ArrayLike) -> float:
    """RMSE / (max(actual) − min(actual)); / mean(actual) when the range is 0.

    When the actual values are constant and their mean is 0 the result is 0 for an exact
    prediction and infinite otherwise.
    """
    p = np.asarray(predicted, dtype=float)
    a = np.asarray(actual, dtype=float)
    if p.shape != a.shape or a.size == 0:
        raise ValueError(f"nrmse needs equal, non-empty shapes, got {p.shape} and {a.shape}")
    rmse = float(np.sqrt(np.mean((p - a) ** 2)))
    scale = float(np.ptp(a))
    if scale == 0.0:
        scale = abs(float(np.mean(a)))
    if scale == 0.0:
        return 0.0 if rmse == 0.0 else math.inf
    return rmse / scale


@dataclass
class PredictionRecord:
    """One predicted value: made at ``time`` for ``step`` intervals ahead."""

    time: float
    step: int
    target: float
    predicted: float
    actual: float | None = None


class PredictionLog:
    """Predictions of a run, matched with the actual values as they arrive."""

    def __init__(self, interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        self.interval = float(interval)
        self.records: list[PredictionRecord] = []
        self._pending: dict[int, list[int]] = {}  # target slot -> record indices

    def _slot(self, t: float) -> int:
        return round(t / self.interval)

    def predict(self, t: float, forecast: ArrayLike) -> None:
        """Record ``forecast[k-1]`` as the prediction for time ``t + k·interval``."""
        for k, value in enumerate(np.asarray(forecast, dtype=float).ravel(), start=1):
            target = t + k * self.interval
            self._pending.setdefault(self._slot(target), []).append(len(self.records))
            self.records.append(PredictionRecord(t, k, target, float(value)))

    def actual(self, t: float, value: float) -> None:
        """The true value at time ``t``: completes every prediction made for it."""
        for i in self._pending.pop(self._slot(t), []):
            self.records[i].actual = float(value)

    def nrmse_by_step(self) -> dict[int, float]:
        """NRMSE per horizon step over the predictions whose actual value is known."""
        by_step: dict[int, tuple[list[float], list[float]]] = {}
        for r in self.records:
            if r.actual is not None:
                pred, act = by_step.setdefault(r.step, ([], []))
                pred.append(r.predicted)
                act.append(r.actual)
        return {k: nrmse(p, a) for k, (p, a) in sorted(by_step.items())}


def backtest(predictor: Predictor, times: ArrayLike, values: ArrayLike, horizon: int,
             interval: float, warmup: int = 0) -> PredictionLog:
    """Walk the series: observe each value, then forecast ``horizon`` steps ahead.

    Forecasts made before observation ``warmup`` are not logged (the predictor still sees
    those observations), so the NRMSE covers the same targets for every predictor.
    """
    _check_h(horizon)
    log = PredictionLog(interval)
    for i, (t, v) in enumerate(zip(np.asarray(times, float), np.asarray(values, float),
                                   strict=True)):
        predictor.observe(float(t), float(v))
        log.actual(float(t), float(v))
        forecast = predictor.forecast(horizon)
        if i >= warmup:
            log.predict(float(t), forecast)
    return log


@dataclass(frozen=True)
class WindCurve:
    """Wind power curve P = a·v³ + b (paper §4.2), clipped to [0, rated]."""

    a: float
    b: float
    rated: float


def wind_power(curve: WindCurve, speeds: ArrayLike) -> FloatArray:
    """Power at the given wind speeds."""
    v = np.asarray(speeds, dtype=float)
    return np.clip(curve.a * v**3 + curve.b, 0.0, curve.rated)


def fit_wind_curve(speeds: ArrayLike, powers: ArrayLike,
                   rated: float | None = None) -> WindCurve:
    """Least-squares fit of P = a·v³ + b to (wind speed, power) history.

    ``rated`` defaults to the largest observed power. Points at 0 or at the rated power are
    left out of the fit when at least two others remain: there the turbine is below cut-in or
    at its limit, and the cubic does not describe them.
    """
    v = np.asarray(speeds, dtype=float).ravel()
    p = np.asarray(powers, dtype=float).ravel()
    if v.shape != p.shape or v.size < 2:
        raise ValueError("fit_wind_curve needs at least two (speed, power) pairs")
    top = float(np.max(p)) if rated is None else float(rated)
    if top <= 0:
        raise ValueError(f"rated power must be positive, got {top}")
    inside = (p > 0.0) & (p < top * (1.0 - 1e-9))
    if np.count_nonzero(inside) >= 2:
        v, p = v[inside], p[inside]
    design = np.column_stack([v**3, np.ones_like(v)])
    (a, b), *_ = np.linalg.lstsq(design, p, rcond=None)
    return WindCurve(float(a), float(b), top)
