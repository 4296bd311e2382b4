"""RDS job-progress model (Cheng et al., TPDS 2019, §3.2): a Takagi–Sugeno fuzzy NARX model
with online recursive-least-squares self-learning, plus completion-time bookkeeping.

The paper predicts the progress ``y_j(t)`` of job ``j`` in control interval ``t`` from the
current map/reduce allocation ``u(t)``, the job input size ``d_j`` and lagged values
``ξ(t)`` (Eq. 5-6) with TS rules "IF ξ is Ω₁ … and u is Ω_{ρ+1} and d is Ω_{ρ+2} THEN
y = ζξ + ηu + ωd + θ" (Eq. 8). Initial parameters come from offline training (the authors
used MATLAB subtractive clustering + ANFIS); online, RLS with exponentially decaying weights
adapts the consequent parameters on the regressor ``X = [σ₁x, …, σ_Kx]`` (Eq. 9), where
``σ_k`` are normalised firing strengths.

Faithful here: TS rules with affine consequents over exactly the paper's inputs (map and
reduce allocation, job size, lagged progress); premises from subtractive clustering
(Chiu 1994, the method behind MATLAB ``genfis2``: accept ratio 0.5, reject ratio 0.15,
squash radius 1.5·r, Gaussian width ``r/√8`` in normalised units); online RLS with
exponential forgetting on the stacked consequent vector of Eq. 9.

Our choices, and why:

* Everything (clustering, least squares, RLS) is implemented in numpy: no well-kept Python
  fuzzy library offers TS identification with RLS (scikit-fuzzy is Mamdani-oriented and
  unmaintained), and the whole model is ~50 lines of linear algebra.
* No ANFIS back-propagation of premise parameters: premises are fixed after clustering and
  only consequents learn (offline by ridge-regularised global weighted least squares, online
  by RLS). The paper's online step also adapts only consequents.
* Eq. 10 weights the current and previous error by a "discount factor" τ; we read it as the
  standard exponential forgetting factor λ of RLS (weight λ^(t-s) on sample s), which is
  what "exponentially decaying weights" in §3.2.2 describes. ``forgetting`` is that λ.
* Lags: n_y = 1 (previous interval's progress) and n_u = 0 (only the current allocation);
  the paper leaves both open. Progress ``y`` is the fraction of the job's total work done
  during one interval; ``u_map``/``u_reduce`` are in capacity units (slots × speed); ``size``
  is the job's total task-seconds.
* Antecedent vector ``z = [u_map, u_reduce, log(size), y_prev]`` min/max-normalised with the
  training range (log size because sizes span orders of magnitude); consequent vector
  ``x = [u_map, u_reduce, size/size_scale, y_prev, 1]`` with ``size_scale`` the largest
  training size, to keep the RLS covariance well conditioned.
* Offline consequents: a global affine fit first, then ridge-penalised per-rule deviations
  from it, so a rule the data barely determine falls back to the global fit rather than
  to zero, and an affine law is recovered exactly whatever the number of rules.
* ``prior`` (no profile yet) fits the ideal fluid law ``min(1, u·interval/size)`` on a grid
  that includes each size's ramp; its centres come from the slice u_map = u_reduce,
  y_prev = 0.25, so no rule is spent on directions the fluid law ignores.
* Firing strengths are normalised in log space (a softmax), so far from every centre the
  nearest rule takes over instead of all strengths underflowing to 0/0.
* RLS continues the offline least squares (issue 22): a fitted model's covariance is
  ``(I/p0 + Σ φφᵀ)⁻¹`` over its training regressors, what RLS started at ``p0·I`` holds
  after the profiled runs, so each online interval is weighed against the profile and the
  profile is forgotten at rate λ, as §3.2.2's "exponentially decaying weights" describe.
  Before, the covariance restarted at ``p0·I`` after the fit: the first online interval of
  each kind was fitted almost exactly and overwrote the profile (Table 3, first solar day:
  online completion NRMSE 39.5% / 39.7% with it, 9.6% / 9.8% with RLS off, 12.7% / 11.7%
  now; docs/reproduction-rds.md, Fig. 10).  ``prior`` models (a synthetic law, no data)
  keep ``p0·I``.
* RLS covariance ``P`` of a prior model starts at ``p0·I``. Forgetting inflates ``P``
  without bound in directions the data do not excite (a job's size never changes;
  allocations are often held), the classic wind-up that makes the next sample touching them
  cause a huge jump.  So after every step the eigenvalues of ``P`` are capped at ``p0``
  (never less certain than the prior); as a last guard ``P`` is reset to ``p0·I`` when it
  turns non-finite or its trace exceeds 1e8, and resets are counted in ``resets``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

__all__ = ["CompletionLog", "ProgressModel", "ProgressSample", "completion_time"]

_N_Z = 4  # antecedent: u_map, u_reduce, log(size), y_prev
_N_X = 5  # consequent: u_map, u_reduce, size_scaled, y_prev, 1
_ACCEPT, _REJECT, _SQUASH = 0.5, 0.15, 1.5  # Chiu (1994) / genfis2 defaults
_MAX_CLUSTER_POINTS = 1500  # clustering is O(n²) in memory; stride-subsample above this
_TRACE_LIMIT = 1e8
# prior(): fractions of each size's saturating allocation added to the grid, even allocation
# levels, clustering radius and rule cap (tuned on the fluid law itself, see prior()).
_PRIOR_RAMP = (0.25, 0.5, 0.75, 1.0, 1.5)
_PRIOR_LEVELS, _PRIOR_RADIUS, _PRIOR_RULES = 9, 0.15, 12


@dataclass(frozen=True, slots=True)
class ProgressSample:
    """One measured control interval of one job."""

    u_map: float
    u_reduce: float
    size: float
    y_prev: float
    y: float


def _subtractive_clustering(z: FloatArray, radius: float, max_rules: int) -> FloatArray:
    """Chiu's subtractive clustering on points in the unit hypercube; returns the centres."""
    if len(z) > _MAX_CLUSTER_POINTS:
        z = z[np.unique(np.linspace(0, len(z) - 1, _MAX_CLUSTER_POINTS).round().astype(int))]
    d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(axis=2)
    alpha, beta = 4.0 / radius**2, 4.0 / (_SQUASH * radius) ** 2
    pot = np.exp(-alpha * d2).sum(axis=1)
    first = float(pot.max())
    chosen: list[int] = []
    while len(chosen) < max_rules:
        k = int(np.argmax(pot))  # first index wins ties: deterministic
        pk = float(pot[k])
        if pk <= 0.0 or pk < _REJECT * first:
            break
        if chosen and pk <= _ACCEPT * first:
            dmin = math.sqrt(float(d2[k, chosen].min()))
            if dmin / radius + pk / first < 1.0:
                pot[k] = 0.0  # grey zone, too close to an existing centre: skip this point
                continue
        chosen.append(k)
        pot = np.maximum(pot - pk * np.exp(-beta * d2[k]), 0.0)
    return z[chosen].copy()


def _ridge_solve(a: FloatArray, b: FloatArray, ridge: float) -> FloatArray:
    """argmin ‖a·v − b‖²/n + ridge·‖v‖², via lstsq on the augmented system (no normal
    equations: they square the condition number)."""
    n, p = a.shape
    aug = np.vstack([a / math.sqrt(n), math.sqrt(ridge) * np.eye(p)])
    rhs = np.concatenate([b / math.sqrt(n), np.zeros(p)])
    return np.asarray(np.linalg.lstsq(aug, rhs, rcond=None)[0], dtype=float)


def _carried_covariance(firing: FloatArray, x: FloatArray, p0: float) -> FloatArray:
    """RLS's covariance after the training samples: ``(I/p0 + Σ φφᵀ)⁻¹`` over the stacked
    regressors ``φ = [σ₁x, …, σ_Kx]`` of Eq. 9, i.e. what RLS started at ``p0·I`` holds once
    it has seen the profiled runs.  Online updates then weigh each new measurement against
    everything the offline training knows (and forget that at rate λ, §3.2.2), instead of
    letting the first online interval overwrite the profile."""
    phi = (firing[:, :, None] * x[:, None, :]).reshape(len(x), -1)
    vals, vecs = np.linalg.eigh(phi.T @ phi)
    p = (vecs / (np.maximum(vals, 0.0) + 1.0 / p0)) @ vecs.T
    return np.asarray(0.5 * (p + p.T), dtype=float)


def _check_finite(name: str, value: ArrayLike) -> None:
    if not np.all(np.isfinite(np.asarray(value, dtype=float))):
        raise ValueError(f"ProgressModel: {name} must be finite")


class ProgressModel:
    """TS fuzzy NARX progress model: ``y = Σ_k σ_k(z)·(θ_k · x)`` (see module docstring)."""

    def __init__(self, centers: ArrayLike, sigma: float, scale_lo: ArrayLike,
                 scale_hi: ArrayLike, size_scale: float, theta: ArrayLike, *,
                 forgetting: float = 0.98, p0: float = 1e3) -> None:
        self.centers: FloatArray = np.array(centers, dtype=float).reshape(-1, _N_Z)
        self.theta: FloatArray = np.array(theta, dtype=float).reshape(-1, _N_X)
        if len(self.centers) == 0 or len(self.centers) != len(self.theta):
            raise ValueError(f"ProgressModel: need ≥1 rule and one centre per rule, got "
                             f"{len(self.centers)} centres and {len(self.theta)} consequents")
        self.sigma = float(sigma)
        self.scale_lo: FloatArray = np.array(scale_lo, dtype=float).reshape(_N_Z)
        self.scale_hi: FloatArray = np.array(scale_hi, dtype=float).reshape(_N_Z)
        self.size_scale = float(size_scale)
        self.forgetting = float(forgetting)
        self.p0 = float(p0)
        checks: list[tuple[str, ArrayLike]] = [
            ("centers", self.centers), ("theta", self.theta), ("scale_lo", self.scale_lo),
            ("scale_hi", self.scale_hi), ("sigma", self.sigma), ("size_scale", self.size_scale)]
        for name, v in checks:
            _check_finite(name, v)
        if self.sigma <= 0 or self.size_scale <= 0 or self.p0 <= 0:
            raise ValueError("ProgressModel: sigma, size_scale and p0 must be positive")
        if not 0.0 < self.forgetting <= 1.0:
            raise ValueError(f"ProgressModel: forgetting must be in (0, 1], got {forgetting}")
        n = self.theta.size
        self.covariance: FloatArray = self.p0 * np.eye(n)
        self.resets = 0

    @property
    def rules(self) -> int:
        """Number of fuzzy rules."""
        return len(self.centers)

    # ---------------------------------------------------------------- features
    def _features(self, u_map: ArrayLike, u_reduce: ArrayLike, size: ArrayLike,
                  y_prev: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """Normalised firing strengths (n, K) and consequent vectors (n, 5)."""
        um, ur, s, yp = (np.ravel(a).astype(float)
                         for a in np.broadcast_arrays(u_map, u_reduce, size, y_prev))
        if np.any(s <= 0):
            raise ValueError("ProgressModel: job size must be positive")
        z = np.column_stack([um, ur, np.log(s), yp])
        span = self.scale_hi - self.scale_lo
        zn = (z - self.scale_lo) / np.where(span > 0, span, 1.0)
        logw = -((zn[:, None, :] - self.centers[None, :, :]) ** 2).sum(axis=2) \
            / (2.0 * self.sigma**2)
        w = np.exp(logw - logw.max(axis=1, keepdims=True))
        firing = w / w.sum(axis=1, keepdims=True)
        x = np.column_stack([um, ur, s / self.size_scale, yp, np.ones_like(um)])
        return firing, x

    @staticmethod
    def _shape_out(values: FloatArray, *args: ArrayLike) -> Any:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        return float(values[0]) if shape == () else values.reshape(shape)

    # ---------------------------------------------------------------- fitting
    @classmethod
    def fit(cls, samples: Sequence[ProgressSample], *, radius: float = 0.5,
            max_rules: int = 8, forgetting: float = 0.98,
            ridge: float = 1e-6) -> ProgressModel:
        """Identify the model offline: subtractive clustering of the normalised antecedent
        vectors gives the rule centres (≥ 1), then ridge-regularised least squares gives all
        consequents at once (a global affine fit plus per-rule deviations from it). ``ridge``
        acts on consequents in units of each input's largest training magnitude, so it is
        scale-free. Clustering uses at most 1500 (evenly strided) samples."""
        return cls._identify(samples, None, radius, max_rules, forgetting, ridge, carry=True)

    @classmethod
    def _identify(cls, samples: Sequence[ProgressSample], cluster_on: NDArray[np.bool_] | None,
                  radius: float, max_rules: int, forgetting: float,
                  ridge: float, *, carry: bool) -> ProgressModel:
        """``fit``, with the clustering optionally restricted to the samples in
        ``cluster_on`` (consequents always use every sample).  ``carry``: the RLS
        covariance starts where RLS would be after the training samples (see
        ``_carried_covariance``); else at ``p0·I``, knowing nothing."""
        if len(samples) < 2:
            raise ValueError(f"ProgressModel.fit needs at least 2 samples, got {len(samples)}")
        if radius <= 0 or max_rules < 1 or ridge < 0:
            raise ValueError("ProgressModel.fit: need radius > 0, max_rules ≥ 1, ridge ≥ 0")
        data = np.array([[s.u_map, s.u_reduce, s.size, s.y_prev, s.y] for s in samples],
                        dtype=float)
        if not np.all(np.isfinite(data)):
            bad = int(np.flatnonzero(~np.isfinite(data).all(axis=1))[0])
            raise ValueError(f"ProgressModel.fit: sample {bad} has non-finite values: "
                             f"{samples[bad]}")
        if np.any(data[:, 2] <= 0):
            raise ValueError("ProgressModel.fit: job sizes must be positive")
        z = np.column_stack([data[:, 0], data[:, 1], np.log(data[:, 2]), data[:, 3]])
        lo, hi = z.min(axis=0), z.max(axis=0)
        hi = np.where(hi > lo, hi, lo + 1.0)  # constant dimension: any range works
        zn = (z - lo) / (hi - lo)
        centers = _subtractive_clustering(zn if cluster_on is None else zn[cluster_on],
                                          radius, max_rules)
        k = len(centers)
        model = cls(centers, radius / math.sqrt(8.0), lo, hi, float(data[:, 2].max()),
                    np.zeros((k, _N_X)), forgetting=forgetting)
        firing, x = model._features(data[:, 0], data[:, 1], data[:, 2], data[:, 3])
        n = len(data)
        col = np.maximum(np.abs(x).max(axis=0), 1e-12)
        # Stage 1: one global affine model. Stage 2: per-rule deviations from it, ridge-
        # penalised, so a rule the data barely determine falls back to the global fit
        # (not to zero) and an affine law is recovered exactly whatever the rule count.
        base = _ridge_solve(x / col, data[:, 4], ridge) / col
        phi = (firing[:, :, None] * (x / col)[:, None, :]).reshape(n, -1)
        dev = _ridge_solve(phi, data[:, 4] - x @ base, ridge).reshape(k, _N_X) / col
        model.theta = base[None, :] + dev
        if carry:
            model.covariance = _carried_covariance(firing, x, model.p0)
        return model

    @classmethod
    def prior(cls, sizes: Sequence[float], interval: float, *, max_alloc: float,
              forgetting: float = 0.98) -> ProgressModel:
        """Model for jobs with no profile: fitted to the ideal fluid law
        ``y = min(1, (u_map + u_reduce)·interval/size)`` on a deterministic grid: sizes are
        the given ones (at most 16 log-spaced quantiles of them) ×[0.5, 1, 2]; total
        allocations are 9 even levels in [0, max_alloc] plus 0.25, 0.5, 0.75, 1 and 1.5 times
        each size's saturating allocation ``size/interval`` (when ≤ max_alloc), split
        all-map, half-half and all-reduce; ``y_prev ∈ {0, 0.25, 0.5}``. Up to 12 rules,
        clustering radius 0.15 (tuned on this law: RMSE ≈ 0.03 over a 50× size range)."""
        base = np.unique(np.asarray(sizes, dtype=float))
        if base.size == 0 or not np.all(np.isfinite(base)) or np.any(base <= 0):
            raise ValueError("ProgressModel.prior needs positive, finite job sizes")
        if interval <= 0 or max_alloc <= 0:
            raise ValueError("ProgressModel.prior needs interval > 0 and max_alloc > 0")
        if base.size > 16:
            base = np.unique(np.exp(np.quantile(np.log(base), np.linspace(0.0, 1.0, 16))))
        grid = np.unique(np.outer(base, [0.5, 1.0, 2.0]).ravel())
        rows: list[tuple[float, float, float, float, bool]] = []
        for size in grid:
            # Even levels alone miss the ramp of small jobs (saturated from the first
            # level on), so add a quarter, half and all of each size's saturating allocation.
            ramp = size / interval * np.array(_PRIOR_RAMP)
            totals = np.unique(np.concatenate([np.linspace(0.0, max_alloc, _PRIOR_LEVELS),
                                               ramp[ramp <= max_alloc]]))
            for tot in totals:
                for frac in (0.0, 0.5, 1.0):
                    for yp in (0.0, 0.25, 0.5):
                        rows.append((tot * frac, tot * (1 - frac), float(size), yp,
                                     frac == 0.5 and yp == 0.25))
        samples = [ProgressSample(um, ur, s, yp, min(1.0, (um + ur) * interval / s))
                   for um, ur, s, yp, _ in rows]
        # The fluid law depends on total allocation and size only; clustering the full grid
        # would spend rules on the map/reduce split and y_prev. Centres taken from the
        # slice u_map = u_reduce, y_prev = .25 are equidistant in those directions, so the
        # normalised firing strengths ignore them.
        on_slice = np.array([r[4] for r in rows])
        # a synthetic law, not data: the covariance stays p0·I so the first real samples
        # take over
        return cls._identify(samples, on_slice, _PRIOR_RADIUS, _PRIOR_RULES, forgetting, 1e-6,
                             carry=False)

    # ---------------------------------------------------------------- use
    def predict(self, u_map: ArrayLike, u_reduce: ArrayLike, size: ArrayLike,
                y_prev: ArrayLike) -> Any:
        """Predicted progress; a float for scalar inputs, else an array of the broadcast
        shape."""
        firing, x = self._features(u_map, u_reduce, size, y_prev)
        y = np.einsum("nk,nk->n", firing, x @ self.theta.T)
        return self._shape_out(y, u_map, u_reduce, size, y_prev)

    def linearize(self, u_map: ArrayLike, u_reduce: ArrayLike, size: ArrayLike,
                  y_prev: ArrayLike) -> tuple[Any, Any, Any, Any]:
        """Affine model with firing strengths frozen at the operating point:
        ``y ≈ a + b_map·u_map + b_reduce·u_reduce + b_prev·y_prev`` (the size term is folded
        into ``a``, since a job's size is fixed). Exact at the point. Returns
        ``(a, b_map, b_reduce, b_prev)``, floats or arrays like ``predict``."""
        firing, x = self._features(u_map, u_reduce, size, y_prev)
        eff = firing @ self.theta  # (n, 5): blended consequent per point
        a = eff[:, 2] * x[:, 2] + eff[:, 4]
        args = (u_map, u_reduce, size, y_prev)
        return (self._shape_out(a, *args), self._shape_out(eff[:, 0], *args),
                self._shape_out(eff[:, 1], *args), self._shape_out(eff[:, 3], *args))

    def update(self, sample: ProgressSample) -> float:
        """One RLS step with forgetting on the stacked consequents (Eq. 9); returns the
        a-priori error ``y − ŷ`` of the model before the update."""
        values = [sample.u_map, sample.u_reduce, sample.size, sample.y_prev, sample.y]
        _check_finite("update sample", values)
        firing, x = self._features(*values[:4])
        reg = (firing[0][:, None] * x[0][None, :]).ravel()
        theta = self.theta.ravel()
        err = float(sample.y - reg @ theta)
        p = self.covariance
        pr = p @ reg
        gain = pr / (self.forgetting + reg @ pr)
        self.theta = (theta + gain * err).reshape(self.theta.shape)
        p = (p - np.outer(gain, pr)) / self.forgetting
        p = 0.5 * (p + p.T)  # round-off makes P drift asymmetric, then indefinite
        if np.all(np.isfinite(p)):
            # Anti-windup: forgetting inflates P by 1/λ per step in directions the data do
            # not excite (a job's size is constant, allocations are often held), and the
            # next sample touching them then makes a huge jump. Capping the eigenvalues at
            # p0 keeps those directions no less certain than the initial prior.
            vals, vecs = np.linalg.eigh(p)
            if vals[-1] > self.p0:
                p = (vecs * np.minimum(vals, self.p0)) @ vecs.T
        if not np.all(np.isfinite(p)) or np.trace(p) > _TRACE_LIMIT:
            p = self.p0 * np.eye(len(reg))
            self.resets += 1
        self.covariance = p
        return err

    def copy(self) -> ProgressModel:
        """Independent deep copy (parameters, covariance and reset count)."""
        return self.from_dict(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """JSON-able state (lists of floats) that ``from_dict`` restores exactly."""
        return {"centers": self.centers.tolist(), "sigma": self.sigma,
                "scale_lo": self.scale_lo.tolist(), "scale_hi": self.scale_hi.tolist(),
                "size_scale": self.size_scale, "theta": self.theta.tolist(),
                "forgetting": self.forgetting, "p0": self.p0,
                "covariance": self.covariance.tolist(), "resets": self.resets}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProgressModel:
        """Inverse of ``to_dict``; ``covariance`` and ``resets`` are optional."""
        model = cls(d["centers"], d["sigma"], d["scale_lo"], d["scale_hi"], d["size_scale"],
                    d["theta"], forgetting=d.get("forgetting", 0.98), p0=d.get("p0", 1e3))
        if "covariance" in d:
            cov = np.array(d["covariance"], dtype=float)
            if cov.shape != model.covariance.shape:
                raise ValueError(f"ProgressModel.from_dict: covariance shape {cov.shape}, "
                                 f"expected {model.covariance.shape}")
            model.covariance = cov
        model.resets = int(d.get("resets", 0))
        return model


FLUID_BAND = (0.5, 2.0)
"""A fitted model is trusted within these multiples of the ideal fluid law y = u·Δ/d."""


def bounded_progress(model: ProgressModel, u_map: float, u_reduce: float, size: float,
                     y_prev: float, interval: float) -> float:
    """The model's progress, kept inside the envelope [½, 2] × the fluid law u·Δ/d: no
    progress without allocation, none faster than twice the ideal rate nor slower than
    half of it.  Data-driven models extrapolate badly where their training never went
    (zero allocation, a new phase), and the policy's QP trusts its gains in the same band."""
    y = float(model.predict(u_map, u_reduce, size, y_prev))
    fluid = (u_map + u_reduce) * interval / size
    return min(max(y, FLUID_BAND[0] * fluid), FLUID_BAND[1] * fluid)


def completion_time(model: ProgressModel, *, now: float, progress: float, size: float,
                    u_map: float, u_reduce: float, y_prev: float, interval: float,
                    max_steps: int = 1000) -> float:
    """Absolute time at which the job reaches progress 1 when its allocation stays constant,
    iterating the model one interval at a time (each prediction feeds the next ``y_prev``)
    and interpolating linearly inside the last interval. ``math.inf`` when three consecutive
    intervals make no progress (≤ 1e-9) or ``max_steps`` intervals do not suffice."""
    remaining = 1.0 - progress
    t = now
    stalled = 0
    for _ in range(max_steps):
        if remaining <= 0.0:
            return t
        y = float(model.predict(u_map, u_reduce, size, y_prev))
        if y <= 1e-9:
            stalled += 1
            if stalled >= 3:
                return math.inf
            y = 0.0
        else:
            stalled = 0
        if y >= remaining:
            return t + interval * remaining / y
        remaining -= y
        t += interval
        y_prev = y
    return math.inf


class CompletionLog:
    """Completion-time predictions and outcomes, for the NRMSE of completion-time
    predictions (§6.3, Fig. 10a).  The paper does not define the normaliser (it cites [15]
    for "a standard metric"); two are reported:

    * ``nrmse``: RMSE of (predicted − actual finish) over the mean *remaining* time at
      prediction (actual finish − prediction time), the error as a fraction of the horizon
      being predicted (our first reading, the stricter one);
    * ``nrmse_completion``: the same RMSE over the mean actual *job completion time*
      (finish − submission).  The paper "compare[s] the error between the predicted job
      completion times and the actual completion times", and its job completion time is
      a duration from submission (§5.3: deadlines are 2.5 × "the job completion time in
      dedicated cluster"); an RMSE over the mean of the actual values is the usual NRMSE.
      Predicted − actual is the same whether times are absolute or from submission, so
      only the normaliser differs.  This is our reading of the paper's metric.
    """

    def __init__(self) -> None:
        self._predictions: dict[str, list[tuple[float, float]]] = {}
        self._finish: dict[str, tuple[float, float]] = {}

    def predict(self, job: str, t: float, predicted_finish: float) -> None:
        """Record that at time ``t`` job ``job`` was predicted to finish at
        ``predicted_finish``."""
        self._predictions.setdefault(job, []).append((float(t), float(predicted_finish)))

    def finished(self, job: str, finish: float, submit: float = 0.0) -> None:
        """Record the actual finish time of ``job`` (submitted at ``submit``)."""
        self._finish[job] = (float(finish), float(submit))

    def _rows(self) -> FloatArray:
        """(prediction time, predicted finish, actual finish, submission) per prediction."""
        rows = [(t, p, *self._finish[job]) for job, preds in self._predictions.items()
                if job in self._finish for t, p in preds if math.isfinite(p)]
        return np.array(rows, dtype=float).reshape(-1, 4)

    def pairs(self) -> tuple[FloatArray, FloatArray]:
        """(predicted, actual) finish times of every finite prediction of a finished job."""
        rows = self._rows()
        return rows[:, 1].copy(), rows[:, 2].copy()

    def _nrmse(self, since: int) -> float:
        rows = self._rows()
        if len(rows) == 0:
            return math.nan
        norm = float(np.mean(rows[:, 2] - rows[:, since]))
        if norm <= 0:
            return math.nan
        return float(np.sqrt(np.mean((rows[:, 1] - rows[:, 2]) ** 2)) / norm)

    def nrmse(self) -> float:
        """RMSE of predicted − actual finish over the mean remaining time at prediction;
        ``nan`` when there are no pairs or the mean remaining time is not positive."""
        return self._nrmse(0)

    def unfinished(self) -> int:
        """Predictions of finished jobs that never reach completion (``inf``), which the
        NRMSEs leave out (a plan that gives a job nothing)."""
        return sum(1 for job, preds in self._predictions.items() if job in self._finish
                   for _, p in preds if not math.isfinite(p))

    def nrmse_completion(self) -> float:
        """RMSE of predicted − actual finish over the mean actual job completion time
        (finish − submission); ``nan`` without pairs or a positive mean."""
        return self._nrmse(3)
