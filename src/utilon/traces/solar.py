"""``solar``: a measured solar-power series -> a cluster whose capacity follows the sun.

RDS (Cheng et al., TPDS 2019, §5.4 and §6) evaluates its scheduler on "a Hadoop cluster running
partially on renewable energy ... powered by half traditional energy and half green energy",
with the available resource derived from an NREL renewable-power trace, in two set-ups:
*scale-up* (fixed nodes whose capacity, hence the speed of a slot, follows the supply) and
*scale-out* (fixed-size nodes whose number follows the supply).  This importer turns a real
NREL PV series into that capacity timeline.

Input (see ``../shared/data/nrel_pvdaq_serf_east/README.md``): CSV with a header
``measured_on,ac_power``; ``measured_on`` is an ISO timestamp with UTC offset, ``ac_power`` the
array's AC output in watts (the unit is an inference of that README), one row per 15 minutes.
Without a header the first column is the time and the second the power.

What is **real**: the timestamps and the shape of the power curve (days, nights, clouds).

What is **assumed** (all options, recorded in the scenario's metadata):

* ``factor(t) = brown + (1 - brown) x green(t)`` with ``green = clip(ac_power, 0) / normaliser``
  (capped at 1): a ``brown`` share of the capacity is always on grid power (RDS: half);
  ``normalise`` is ``"max"`` (the largest power in the whole file = full green supply) or a
  nameplate in watts.  Negative power (night-time inverter standby draw) counts as 0.
* ``mode``: ``scale-out`` -- ``common.machines`` (default 10) machines, of which
  ``round(N x factor)`` (half up, at least one: a cluster with no machine cannot even hold
  its queue) are up; machines leave highest-numbered first and join lowest-numbered first.
  ``scale-up`` -- all machines stay, each runs at ``factor`` x its speed (``speed`` events on
  ``all``: the same slots, slower tasks; RDS's changing ``r_slot``).  ``scale-capacity`` -- all
  machines stay, their resources are scaled by ``factor`` (``scale`` events: fewer tasks fit,
  fractional slots included).
* ``min_change`` is a dead band: a new level is applied only when the factor moved at least
  that much from the level last applied, or when it reaches its night (``brown``) or full
  (1) value exactly, so that nights are always at the night level.
* Between samples (and over gaps in the timestamps) the last value holds; after the last
  sample (or past the window) the last level holds.
* Each machine has capacity ``{"slots": slots}`` (plus ``cpu`` if given).

Window: ``--start``/``--duration`` are seconds from the series origin (its first timestamp),
or ``date`` gives the start as an ISO date/time instead of ``--start``; events are shifted so
the window starts at 0 (not scaled by ``--arrival-scale``).  The sample at or before the
window start sets the state at t = 0: scale-out machines that are off then are declared
``down: true``; scale-up/-capacity get an event at t = 0.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from utilon.limits import MAX_SECONDS
from utilon.traces.base import (
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    SkipLog,
    TraceError,
    TracePart,
    open_lines,
    register,
)

DEFAULT_MACHINES = 10
GAP_FACTOR = 1.5  # a step longer than 1.5 x the usual step is a gap


class SolarOptions(ImporterOptions):
    brown: float = Field(0.5, ge=0, le=1, description="share of capacity on grid power")
    normalise: Literal["max"] | Annotated[float, Field(gt=0)] = Field(
        "max", description='"max" of the whole file, or the nameplate in watts')
    mode: Literal["scale-out", "scale-up", "scale-capacity"] = "scale-out"
    slots: int = Field(8, ge=1, description="slots per machine")
    cpu: float | None = Field(None, gt=0, description="cpu per machine (optional)")
    min_change: float = Field(0.02, ge=0, le=1, description="dead band on the factor")
    date: str | None = Field(None, description="window start as an ISO date/time")
    column: str = Field("ac_power", description="power column (files with a header)")


def _parse_time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def _read_series(path: Path, column: str, log: SkipLog
                 ) -> tuple[list[datetime], list[float], list[int]]:
    """Good rows as (timestamps, watts, line numbers); bad rows go to ``log``."""
    times: list[datetime] = []
    watts: list[float] = []
    lines: list[int] = []
    t_col, p_col = 0, 1
    seen_first = False
    for n, line in open_lines(path):
        if not line.strip():
            continue  # blank lines (the real file ends with two) are not rows
        fields = [f.strip() for f in line.split(",")]
        if not seen_first:
            seen_first = True
            if _parse_time(fields[0]) is None:  # a header
                names = [f.strip('"') for f in fields]
                if column not in names:
                    raise TraceError(f"no column {column!r} in the header "
                                     f"({', '.join(names)})", where=f"{path}:{n}",
                                     fix="set column=<name of the power column>")
                p_col = names.index(column)
                continue
        log.row()
        if len(fields) <= max(t_col, p_col):
            log.bad(n, "too few fields")
            continue
        ts = _parse_time(fields[t_col])
        if ts is None:
            log.bad(n, "bad timestamp")
            continue
        try:
            p = float(fields[p_col])
        except ValueError:
            log.bad(n, "power is not a number")
            continue
        if not math.isfinite(p):
            log.bad(n, "power is not a number")
            continue
        if times:
            if (ts.tzinfo is None) != (times[0].tzinfo is None):
                log.bad(n, "timestamp with and without UTC offset mixed")
                continue
            if ts <= times[-1]:
                log.bad(n, "timestamp not after the previous row")
                continue
            if (ts - times[0]).total_seconds() > MAX_SECONDS:
                log.bad(n, f"timestamp more than {MAX_SECONDS:g} s after the first sample")
                continue
        times.append(ts)
        watts.append(p)
        lines.append(n)
    return times, watts, lines


def _start_of(opts: SolarOptions, common: Common, origin: datetime) -> float:
    """Window start in seconds from the series origin (``date`` or ``--start``)."""
    if opts.date is None:
        return common.window.start
    if common.window.start:
        raise TraceError("give the window start as --start or as date, not both",
                         where="--set date")
    when = _parse_time(opts.date)
    if when is None:
        raise TraceError(f"not an ISO date/time: {opts.date!r}", where="--set date",
                         fix="write e.g. 2016-07-04 or 2016-07-04T06:00-07:00")
    if (when.tzinfo is None) != (origin.tzinfo is None):
        when = when.replace(tzinfo=origin.tzinfo)  # a plain date is in the series' zone
    start = (when - origin).total_seconds()
    if start < 0:
        raise TraceError(f"date {opts.date} is before the series starts ({origin.isoformat()})",
                         where="--set date")
    return start


@register
class SolarImporter(Importer):
    kind = "solar"
    summary = ("NREL PV power series (CSV measured_on, ac_power) -> capacity timeline of a "
               "half-renewable cluster (RDS): scale-out, scale-up or scale-capacity")
    produces = "cluster"
    Options = SolarOptions

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: SolarOptions = options
        times, watts, lines = _read_series(path, opts.column, log)
        if not times:
            log.finish("samples")  # raises: no rows, or all malformed
            raise TraceError("no usable sample", where=str(path))
        origin = times[0]
        secs = [(t - origin).total_seconds() for t in times]
        clipped = [max(p, 0.0) for p in watts]
        if opts.normalise == "max":
            norm = max(clipped)
            if norm <= 0:
                raise TraceError("the power is never positive, so 'max' cannot normalise it",
                                 where=str(path), fix="set normalise=<nameplate watts>")
        else:
            norm = float(opts.normalise)
        over_nameplate = sum(1 for p in clipped if p > norm)
        brown = opts.brown

        def factor(i: int) -> float:
            return brown + (1.0 - brown) * min(1.0, clipped[i] / norm)

        # -- the window: the sample at or before its start sets the state at t = 0
        start = _start_of(opts, common, origin)
        end = start + common.window.duration if common.window.duration is not None \
            else math.inf
        first = bisect.bisect_right(secs, start) - 1 if start <= secs[-1] else None
        used: list[int] = []
        for i, t in enumerate(secs):
            if first is None or i < first:
                log.filter(lines[i], "before the window start")
            elif i > first and t >= end:
                log.filter(lines[i], "after the window end")
            else:
                log.use()
                used.append(i)
        log.finish("samples")

        # -- the timeline
        n_machines = common.machines or DEFAULT_MACHINES
        cap: dict[str, float] = {"slots": float(opts.slots)}
        if opts.cpu is not None:
            cap["cpu"] = float(opts.cpu)
        ids = [f"solar-{i}" for i in range(n_machines)]

        def up_for(f: float) -> int:
            return max(1, min(n_machines, math.floor(n_machines * f + 0.5)))

        f0 = factor(used[0])
        applied = f0
        up = up_for(f0)
        ups = [up]
        events: list[dict[str, Any]] = []
        action = {"scale-up": "speed", "scale-capacity": "scale"}.get(opts.mode)
        if action is not None and f0 != 1.0:
            events.append({"at": 0.0, "action": action, "machines": "all",
                           "factor": round(f0, 4)})
        for i in used[1:]:
            f = factor(i)
            extreme = f in (brown, 1.0) and f != applied
            if abs(f - applied) < opts.min_change and not extreme:
                continue
            applied = f
            at = round(secs[i] - start, 6)
            if action is not None:
                events.append({"at": at, "action": action, "machines": "all",
                               "factor": round(f, 4)})
                continue
            want = up_for(f)
            if want < up:  # the highest-numbered machines leave first
                events.append({"at": at, "action": "leave", "machines": ids[want:up]})
            elif want > up:
                events.append({"at": at, "action": "join", "machines": ids[up:want]})
            up = want
            ups.append(up)

        machines: list[dict[str, Any]] = []
        up0 = up_for(f0) if action is None else n_machines
        for i, mid in enumerate(ids):
            m: dict[str, Any] = {"id": mid, "capacity": dict(cap)}
            if i >= up0:
                m["down"] = True
            machines.append(m)

        # -- gaps: steps much longer than the usual one (the last value holds over them)
        steps = [b - a for a, b in itertools.pairwise(secs)]
        step = statistics.median(steps) if steps else 0.0
        w_steps = [secs[b] - secs[a] for a, b in itertools.pairwise(used)]
        gaps = [d for d in w_steps if step and d > GAP_FACTOR * step]

        factors = [factor(i) for i in used]
        t_first, t_last = times[used[0]], times[used[-1]]
        prov = Provenance(
            real=[
                f"measured AC power of {path.name}: {len(used)} samples "
                f"({step:g}-s steps) from {t_first.isoformat()} to {t_last.isoformat()}; "
                "the timeline follows its days, nights and clouds",
            ],
            assumed=[
                f"capacity factor = {brown:g} (grid) + {1 - brown:g} x green, green = "
                f"clip(power, 0) / {norm:g} W "
                + ("(the file's maximum)" if opts.normalise == "max" else "(nameplate)")
                + "; negative power (night standby draw) counted as 0"
                + (f"; {over_nameplate} samples above the nameplate capped at 1"
                   if over_nameplate else ""),
                _mode_note(opts.mode, n_machines),
                f"machine capacity {cap}",
                f"a new level is applied when the factor moves >= {opts.min_change:g} "
                f"(or reaches {brown:g} or 1); between samples the last value holds",
                f"window: {common.window.describe()}"
                + (f", starting at {opts.date}" if opts.date else "")
                + f"; series origin {origin.isoformat()}",
            ],
        )
        if gaps:
            prov.assumed.append(f"{len(gaps)} gaps in the timestamps (longest {max(gaps):g} s):"
                                " the last value holds over them")
        stats: dict[str, Any] = {
            "samples": len(used),
            "events": len(events),
            "mean_factor": round(statistics.fmean(factors), 4),
            "min_factor": round(min(factors), 4),
            "max_factor": round(max(factors), 4),
            "machines_up_min": min(ups) if action is None else n_machines,
            "machines_up_max": max(ups) if action is None else n_machines,
            "normaliser_w": norm,
            "gaps": len(gaps),
        }
        cluster = {"machines": machines, "capacity": events}
        return TracePart(cluster=cluster, provenance=prov, stats=stats)


def _mode_note(mode: str, n: int) -> str:
    if mode == "scale-out":
        return (f"scale-out (RDS): {n} machines, round(N x factor) of them up (half up, at "
                "least 1); the highest-numbered leave first, the lowest-numbered join first")
    if mode == "scale-up":
        return (f"scale-up (RDS): {n} machines always up, each at factor x its speed "
                "(same slots, slower tasks)")
    return f"scale-capacity: {n} machines always up, their resources scaled by the factor"
