"""A paper's claims checked over many seeds: what every ``utilon reproduce`` reports.

A result that holds on the one draw it was developed on is not a result.  Each reproduction
states its paper's headline claims as :class:`Claim` values — the paper's words, the paper's
number and the acceptance rule, fixed in ``docs/reproduction-<paper>.md`` before the run —
and records one :class:`Observation` per claim, system and seed.  :func:`summarize` turns
them into the per-claim, per-system share of seeds on which the claim holds, and names it:

* ``held``    — on at least :data:`HELD_SHARE` of the seeds (80%);
* ``fragile`` — on some seeds, fewer than that;
* ``failed``  — on none.

The faithful system and each named variant (an extension the paper does not describe) are
separate *systems*, so a variant's success is never folded into the faithful row.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from utilon.errors import UtilonError

#: a claim is *held* when it holds on at least this share of seeds (issue 44)
HELD_SHARE = 0.8
#: seeds a full run and a ``--quick`` run use when ``--seeds`` is not given
DEFAULT_SEEDS = 10
QUICK_SEEDS = 3


@dataclass(frozen=True, slots=True)
class Claim:
    """One statement of a paper, with the rule that decides it on one seed."""

    key: str    # stable id, e.g. "table1.min"
    text: str   # the claim as the paper states it
    paper: str  # the paper's number(s), as text ("CORA 0.0084, baselines 0")
    rule: str   # the acceptance rule on one seed, in words (also in the docs)
    unit: str = ""  # unit of the observed value, for display ("%", "s", "")


@dataclass(frozen=True, slots=True)
class Observation:
    """A claim's outcome for one system on one seed."""

    claim: str           # Claim.key
    system: str          # "cora" (faithful), "cora-ct-sum" (variant), ...
    seed: int
    holds: bool
    value: float | None = None  # the number the rule compares (e.g. CORA's min - best baseline's)
    extra: dict[str, Any] = field(default_factory=dict)  # context (headroom, ...) kept in JSON


def seed_list(seed: int, seeds: int | None, quick: bool) -> list[int]:
    """The seeds of a run: ``seed, seed + 1, ...`` (``seeds`` of them, or the default)."""
    n = (QUICK_SEEDS if quick else DEFAULT_SEEDS) if seeds is None else seeds
    if n < 1:
        raise UtilonError(f"--seeds must be at least 1, got {n}", where="--seeds",
                          fix="give a number of seeds, e.g. --seeds 10, or omit it")
    return [seed + i for i in range(n)]


def verdict(share: float) -> str:
    if share >= HELD_SHARE - 1e-12:
        return "held"
    return "fragile" if share > 0 else "failed"


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def summarize(claims: Sequence[Claim], observations: Iterable[Observation],
              systems: Sequence[str]) -> list[dict[str, Any]]:
    """Per claim: the paper's text, number and rule, and per system the seeds it holds on.

    ``systems`` gives the order (faithful first); a system with no observation of a claim is
    left out of that claim.  Observations of an unknown claim are an error (a typo in a key
    would otherwise drop results silently).
    """
    keys = {c.key for c in claims}
    by: dict[tuple[str, str], list[Observation]] = {}
    for o in observations:
        if o.claim not in keys:
            raise ValueError(f"observation of unknown claim {o.claim!r}")
        by.setdefault((o.claim, o.system), []).append(o)
    out = []
    for c in claims:
        rows = []
        for s in systems:
            obs = sorted(by.get((c.key, s), []), key=lambda o: o.seed)
            if not obs:
                continue
            held = sum(o.holds for o in obs)
            vals = _finite(o.value for o in obs)
            share = held / len(obs)
            rows.append({
                "system": s, "seeds": [o.seed for o in obs], "held": held, "n": len(obs),
                "share": share, "verdict": verdict(share),
                "values": [o.value for o in obs],
                "mean": sum(vals) / len(vals) if vals else None,
                "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                "extra": [o.extra for o in obs] if any(o.extra for o in obs) else None,
            })
        out.append({"key": c.key, "claim": c.text, "paper": c.paper, "rule": c.rule,
                    "unit": c.unit, "systems": rows})
    return out


def fmt_value(x: float | None, unit: str = "") -> str:
    if x is None:
        return "–"
    a = abs(x)
    s = f"{x:.0f}" if a >= 100 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 \
        else f"{x:.3g}"
    return s + unit


def fmt_ours(row: dict[str, Any], unit: str = "") -> str:
    """``mean [min, max]`` of a system's values over its seeds."""
    if row["mean"] is None:
        return "–"
    if row["n"] == 1 or row["min"] == row["max"]:
        return fmt_value(row["mean"], unit)
    return (f"{fmt_value(row['mean'], unit)} [{fmt_value(row['min'], unit)}, "
            f"{fmt_value(row['max'], unit)}]")


def fmt_share(row: dict[str, Any]) -> str:
    return f"{row['held']}/{row['n']} ({row['share']:.0%}) {row['verdict']}"


def markdown(summary: Sequence[dict[str, Any]]) -> str:
    """The claims as a Markdown table (the README's and the docs' reproduction tables)."""
    lines = ["| claim | paper | system | ours: mean [range] | holds on |",
             "| --- | --- | --- | --- | --- |"]
    for c in summary:
        for i, r in enumerate(c["systems"]):
            first = i == 0
            lines.append(f"| {c['claim'] if first else ''} | {c['paper'] if first else ''} | "
                         f"{r['system']} | {fmt_ours(r, c['unit'])} | {fmt_share(r)} |")
    return "\n".join(lines)


def share_cell(row: dict[str, Any]) -> str:
    """``system held/n`` with the verdict, bold when the claim is not held."""
    text = f"{row['held']}/{row['n']} {row['verdict']}"
    return f"{row['system']} {text if row['verdict'] == 'held' else f'**{text}**'}"


def readme_rows(summary: Sequence[dict[str, Any]], paper: str) -> list[str]:
    """One Markdown row per claim: the paper, the claim, the paper's number, the faithful
    system's share of seeds (the first system) and each variant's (the README's table)."""
    rows = []
    for c in summary:
        if not c["systems"]:
            continue
        first, *rest = c["systems"]
        rows.append(f"| {paper} | {c['claim']} | {c['paper']} | {share_cell(first)} | "
                    + ("; ".join(share_cell(r) for r in rest) or "–") + " |")
    return rows
