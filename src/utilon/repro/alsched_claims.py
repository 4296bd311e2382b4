"""The claims of alsched's §5 (Table 1 and Figs. 7-9) and the rule that decides each on one
seed (issue 44).  The rules are fixed from the paper's words, before any run, and written
down with their reasons in docs/reproduction-alsched.md; this module is their one definition.

Table 1 (paper, total time to finish 100 jobs)::

            PI   NBODY  LOCAL  MIXED
    Soft    22   12     33     22
    Hard    22   18     33     22
    None    22   17     33     51

Every relation of the table is a claim: within each column (the policies' order) and along
each row (the workloads' order), ties as ties (equal within ``TIE``) and strict orders as
strict.  The text states four of them (PI and LOCAL the same under every policy, Soft best
on NBODY, on MIXED Soft at least as good as Hard and more than 2x better than None); the
others are the table's alone and are marked "(table)".

Figs. 7-9 are plots; the text says: Soft outperforms None "for all speedup factors" (the
sweep of §5.2: "from 1.2 to a factor of 10") and is better than Hard "until the speedup
factor is dialed up to about 10" (4:10); at 1:10 "the inflection point ... is pushed
further out, beyond x = 10" and Soft "still outperforms None, albeit by a smaller margin
for most settings".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from utilon.repro.claims import Claim, Observation

TIE = 1e-6
"""Two runtimes are equal when they differ by less than this (the simulator's times are
sums of durations and speedup quotients)."""
PAPER_RANGE = (1.2, 10.0)
"""§5.2: "we varied it from 1.2 to a factor of 10": the f over which "for all speedup
factors" and "for most settings" are read."""
ABOUT_10 = (9.0, 11.0)
"""§5.3's "about 10" for the 4:10 crossover: within one unit of 10, the step of an integer
sweep (the paper's plots go from 1.2 to 10; a crossover read off such a plot as "about 10"
lies between the grid points next to 10)."""

PolicyTable = Mapping[str, Mapping[str, float]]  # policy -> workload -> runtime
Curves = Mapping[str, Sequence[float]]  # policy -> runtime at each speedup

CLAIMS: tuple[Claim, ...] = (
    # --- Figs. 7-9 (the text of §5.3) ---------------------------------------------------
    Claim("fig7.soft_beats_none", "Fig. 7 (4:10): Soft outperforms None for all speedup "
          "factors", "every f in 1.2-10",
          "Soft < None at every f of the sweep in [1.2, 10]; value: the smallest margin "
          "(None - Soft) / None", "%"),
    Claim("fig7.crossover", "Fig. 7 (4:10): Soft is better than Hard until f is dialed up to "
          "about 10", "about 10",
          "the interpolated f where Hard first is no worse than Soft lies in [9, 11]; value: "
          "that f (none: Soft wins over the whole sweep, to 20)"),
    Claim("fig9.crossover", "Figs. 8-9 (1:10): the inflection point is pushed further out, "
          "beyond x = 10", "beyond 10",
          "the 1:10 crossover is > 10 (or Soft better than Hard over the whole sweep, to 20) "
          "and later than the 4:10 one; value: the 1:10 crossover (empty when beyond 20)"),
    Claim("fig9.soft_beats_none", "Figs. 8-9 (1:10): Soft still outperforms None",
          "every f in 1.2-10",
          "Soft < None at every f of the sweep in [1.2, 10]; value: the smallest margin", "%"),
    Claim("fig9.smaller_margin", "Figs. 8-9 (1:10): ... albeit by a smaller margin for most "
          "settings", "most f",
          "(None - Soft) / None at 1:10 below its 4:10 value at more than half of the f in "
          "[1.2, 10]; value: the share of those f", "%"),
    # --- Table 1: within each column ----------------------------------------------------
    Claim("t1.pi.equal", "Table 1 PI: all policies perform the same (control)",
          "22 / 22 / 22", "Soft = Hard = None; value: largest - smallest"),
    Claim("t1.local.equal", "Table 1 LOCAL: all policies perform the same (control)",
          "33 / 33 / 33", "Soft = Hard = None; value: largest - smallest"),
    Claim("t1.nbody.soft_best", "Table 1 NBODY: Soft performed better than the other two",
          "12 vs 18, 17", "Soft < Hard and Soft < None; value: Soft / min(Hard, None)"),
    Claim("t1.nbody.none_lt_hard", "Table 1 NBODY: None faster than Hard (table)",
          "17 < 18", "None < Hard; value: None / Hard"),
    Claim("t1.mixed.soft_le_hard", "Table 1 MIXED: Soft performed at least as well as Hard",
          "22 <= 22", "Soft <= Hard; value: Soft / Hard"),
    Claim("t1.mixed.soft_eq_hard", "Table 1 MIXED: Soft and Hard the same (table)",
          "22 = 22", "Soft = Hard; value: Soft / Hard"),
    Claim("t1.mixed.none_2x", "Table 1 MIXED: Soft outperforms None by more than a factor "
          "of 2", "51 / 22 = 2.3", "None > 2 x Soft; value: None / Soft"),
    # --- Table 1: along each row (every policy) -----------------------------------------
    Claim("t1.soft.nbody_lt_pi", "Table 1 Soft: NBODY faster than PI (table)", "12 < 22",
          "Soft's NBODY < its PI; value: NBODY / PI"),
    Claim("t1.hard.nbody_lt_pi", "Table 1 Hard: NBODY faster than PI (table)", "18 < 22",
          "Hard's NBODY < its PI; value: NBODY / PI"),
    Claim("t1.none.nbody_lt_pi", "Table 1 None: NBODY faster than PI, i.e. None gets some "
          "speedup (table)", "17 < 22", "None's NBODY < its PI; value: NBODY / PI"),
    Claim("t1.mixed_eq_pi", "Table 1 Soft and Hard: MIXED takes as long as PI (table)",
          "22 = 22 = 22", "MIXED = PI under Soft and under Hard; value: Soft's MIXED / PI"),
    Claim("t1.local_gt_pi", "Table 1: LOCAL slower than PI (and than MIXED under Soft and "
          "Hard) under every policy (table)", "33 > 22",
          "LOCAL > PI under each policy, and LOCAL > MIXED under Soft and Hard; value: the "
          "smallest LOCAL / PI"),
    Claim("t1.none.mixed_slowest", "Table 1 None: MIXED slower than every homogeneous "
          "workload (table)", "51 > 33 > 22 > 17",
          "None's MIXED > its LOCAL, PI and NBODY; value: MIXED / LOCAL"),
)


def _lt(a: float, b: float) -> bool:
    return a < b - TIE


def _eq(*xs: float) -> bool:
    return max(xs) - min(xs) < TIE


def table1_observations(system: str, seed: int, t: PolicyTable) -> list[Observation]:
    """Table 1's claims on one seed; ``t[policy][workload]`` is the runtime."""
    s, h, n = t["soft"], t["hard"], t["none"]

    def o(key: str, holds: bool, value: float, **extra: float) -> Observation:
        return Observation(key, system, seed, bool(holds), round(float(value), 6),
                           dict(extra))

    pi = [t[p]["PI"] for p in ("soft", "hard", "none")]
    local = [t[p]["LOCAL"] for p in ("soft", "hard", "none")]
    return [
        o("t1.pi.equal", _eq(*pi), max(pi) - min(pi)),
        o("t1.local.equal", _eq(*local), max(local) - min(local)),
        o("t1.nbody.soft_best", _lt(s["NBODY"], h["NBODY"]) and _lt(s["NBODY"], n["NBODY"]),
          s["NBODY"] / min(h["NBODY"], n["NBODY"]), soft=s["NBODY"], hard=h["NBODY"],
          none=n["NBODY"]),
        o("t1.nbody.none_lt_hard", _lt(n["NBODY"], h["NBODY"]), n["NBODY"] / h["NBODY"],
          hard=h["NBODY"], none=n["NBODY"]),
        o("t1.mixed.soft_le_hard", not _lt(h["MIXED"], s["MIXED"]), s["MIXED"] / h["MIXED"],
          soft=s["MIXED"], hard=h["MIXED"]),
        o("t1.mixed.soft_eq_hard", _eq(s["MIXED"], h["MIXED"]), s["MIXED"] / h["MIXED"]),
        o("t1.mixed.none_2x", _lt(2 * s["MIXED"], n["MIXED"]), n["MIXED"] / s["MIXED"],
          soft=s["MIXED"], none=n["MIXED"]),
        o("t1.soft.nbody_lt_pi", _lt(s["NBODY"], s["PI"]), s["NBODY"] / s["PI"]),
        o("t1.hard.nbody_lt_pi", _lt(h["NBODY"], h["PI"]), h["NBODY"] / h["PI"]),
        o("t1.none.nbody_lt_pi", _lt(n["NBODY"], n["PI"]), n["NBODY"] / n["PI"],
          none_nbody=n["NBODY"], pi=n["PI"]),
        o("t1.mixed_eq_pi", _eq(s["MIXED"], s["PI"]) and _eq(h["MIXED"], h["PI"]),
          s["MIXED"] / s["PI"], hard=h["MIXED"] / h["PI"]),
        o("t1.local_gt_pi", all(_lt(t[p]["PI"], t[p]["LOCAL"]) for p in t)
          and all(_lt(t[p]["MIXED"], t[p]["LOCAL"]) for p in ("soft", "hard")),
          min(t[p]["LOCAL"] / t[p]["PI"] for p in t)),
        o("t1.none.mixed_slowest",
          all(_lt(n[k], n["MIXED"]) for k in ("PI", "NBODY", "LOCAL")),
          n["MIXED"] / n["LOCAL"]),
    ]


def inflection(speedups: Sequence[float], soft: Sequence[float],
               hard: Sequence[float]) -> float | None:
    """The smallest speedup at which Hard's total runtime is no worse than Soft's, linearly
    interpolated between the sweep's points; ``None`` if Soft wins over the whole sweep."""
    diff = [h - s for s, h in zip(soft, hard, strict=True)]
    for k, d in enumerate(diff):
        if d <= 0:
            if k == 0:
                return float(speedups[0])
            d0 = diff[k - 1]
            x0, x1 = speedups[k - 1], speedups[k]
            return float(x0 + (x1 - x0) * d0 / (d0 - d))
    return None


def _in_paper_range(speedups: Sequence[float]) -> list[int]:
    lo, hi = PAPER_RANGE
    return [i for i, f in enumerate(speedups) if lo - TIE <= f <= hi + TIE]


def _margins(c: Curves, idx: Sequence[int]) -> list[float]:
    return [100 * (c["none"][i] - c["soft"][i]) / c["none"][i] for i in idx]


def sweep_observations(system: str, seed: int, speedups: Sequence[float], fig7: Curves,
                       fig9: Curves) -> list[Observation]:
    """The claims about Figs. 7-9 on one seed; ``fig7`` / ``fig9`` map each policy to its
    runtime at each of ``speedups`` (4:10 and 1:10)."""
    idx = _in_paper_range(speedups)
    m7, m9 = _margins(fig7, idx), _margins(fig9, idx)
    beats7 = all(_lt(fig7["soft"][i], fig7["none"][i]) for i in idx)
    beats9 = all(_lt(fig9["soft"][i], fig9["none"][i]) for i in idx)
    inf7 = inflection(speedups, fig7["soft"], fig7["hard"])
    inf9 = inflection(speedups, fig9["soft"], fig9["hard"])
    lo, hi = ABOUT_10
    smaller = sum(a < b - TIE for a, b in zip(m9, m7, strict=True))
    later = inf9 is None or (inf9 > 10.0 and (inf7 is None or inf9 > inf7))
    return [
        Observation("fig7.soft_beats_none", system, seed, beats7, round(min(m7), 3)),
        Observation("fig7.crossover", system, seed, inf7 is not None and lo <= inf7 <= hi,
                    None if inf7 is None else round(inf7, 3)),
        Observation("fig9.crossover", system, seed, later,
                    None if inf9 is None else round(inf9, 3),
                    {"beyond_sweep": inf9 is None}),
        Observation("fig9.soft_beats_none", system, seed, beats9, round(min(m9), 3)),
        Observation("fig9.smaller_margin", system, seed, 2 * smaller > len(idx),
                    round(100 * smaller / len(idx), 3)),
    ]
