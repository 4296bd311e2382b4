"""Google cluster trace 2019 (cell a): ``machine_events`` -> a cluster with a capacity timeline.

The table (gzip JSON lines, one event per line, not sorted; see
``shared/data/google_2019_machine_events/README.md`` and ``google/cluster-data``
``clusterdata_trace_format_v3.proto``) records every machine ADD (type 1), REMOVE (2) and
UPDATE (3) with the machine's normalized CPU and memory capacity.

*Real*: which machines exist, when each comes and goes, and their capacity.
*Assumed*:

* the window: scenario time 0 is the trace start (600 s after the time origin) plus
  ``--start``; without ``--duration`` one day (``default_duration``) is replayed, because the
  whole month of 10,000 machines is far more than a scheduling experiment needs.  Machines
  up at the window start (after replaying everything before it) are up at 0, later ADDs
  join (declared ``down: true``), REMOVEs leave; times are shifted, not scaled;
* the sample: ``--machines`` (default ``default_machines`` = 200) machine ids drawn with the
  seed among those up at some time in the window;
* capacity: ``cpu`` and ``mem`` are the normalized values (1 = the largest machine) and
  ``slots = max(1, round(cpus x slots_per_unit))`` so that slot-demanding jobs can run.  A
  machine is declared with its first capacity in the window; an UPDATE (or a re-ADD) that
  changes its cpus becomes a ``scale`` event with factor = new cpus / declared cpus, which
  scales every resource of the machine (memory-only changes are not replayed);
* 459 ADD rows have no capacity: the machine's last known capacity is used, else the next
  one it reports (in this file an UPDATE follows within seconds), else the most common one;
* inconsistent sequences (an ADD of a machine that is up, a REMOVE of one that is not) are
  skipped and counted as filtered, so the timeline is always valid.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from utilon.limits import MAX_SECONDS
from utilon.traces.base import (
    Common,
    Importer,
    ImporterOptions,
    Provenance,
    SkipLog,
    TracePart,
    open_lines,
    register,
    timeline_stats,
)

TRACE_START_US = 600_000_000  # time origin is 600 s before the trace starts
AFTER_TRACE = 2**63 - 1  # "happened after the trace window"
LAST_TIME_US = TRACE_START_US + MAX_SECONDS * 1_000_000  # utilon's time limit, in trace us
MAX_CAPACITY = 1000.0
"""Largest normalized cpus or memory of a machine (1 = the largest machine of the cell)."""
MIN_CPUS = 1e-6
"""Smallest positive normalized cpus: a smaller one would make scale factors overflow."""
ADD, REMOVE, UPDATE = 1, 2, 3
_NAMES = {ADD: "ADD", REMOVE: "REMOVE", UPDATE: "UPDATE"}


class GoogleOptions(ImporterOptions):
    default_duration: float | None = Field(
        86400.0, gt=0, description="seconds replayed without --duration; null: to the end")
    default_machines: int | None = Field(
        200, ge=1, description="machines sampled without --machines; null: all")
    slots_per_unit: float = Field(16.0, gt=0, description="slots of a machine with cpus = 1")


Cap = tuple[float, float]  # (cpus, memory), normalized


@register
class Google2019Machines(Importer):
    kind: ClassVar[str] = "google-2019-machines"
    summary: ClassVar[str] = "Google 2019 machine_events: machines and capacity over time"
    produces: ClassVar[Literal["workload", "cluster"]] = "cluster"
    Options: ClassVar[type[ImporterOptions]] = GoogleOptions

    def read(self, path: Path, common: Common, options: Any, log: SkipLog) -> TracePart:
        opts: GoogleOptions = options
        # -- parse: compact tuples (time us, line, machine, type, capacity or None) ----------
        rows: list[tuple[int, int, str, int, Cap | None]] = []
        for n, line in open_lines(path):
            if not line.strip():
                continue
            log.row()
            try:
                ev = json.loads(line)
                t, mid, typ = int(ev["time"]), str(ev["machine_id"]), int(ev["type"])
                cap_d = ev.get("capacity")
                cap: Cap | None = None
                if isinstance(cap_d, dict) and cap_d.get("cpus") is not None:
                    cap = (float(cap_d["cpus"]), float(cap_d.get("memory") or 0.0))
            except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
                log.bad(n, "not a machine event (JSON with time, machine_id, type)")
                continue
            if t < 0 or not mid:
                log.bad(n, "negative time or empty machine id")
                continue
            if cap is not None and not (all(math.isfinite(x) and x >= 0 for x in cap)):
                log.bad(n, "negative capacity")
                continue
            if cap is not None and (max(cap) > MAX_CAPACITY or 0 < cap[0] < MIN_CPUS):
                log.bad(n, f"capacity outside [{MIN_CPUS:g}, {MAX_CAPACITY:g}] (normalized: "
                        "1 = the largest machine)")
                continue
            if LAST_TIME_US < t < AFTER_TRACE:
                log.bad(n, f"time beyond {MAX_SECONDS:g} s")
                continue
            if typ not in _NAMES:
                log.filter(n, f"event type {typ} (not ADD, REMOVE or UPDATE)")
                continue
            if t >= AFTER_TRACE:
                log.filter(n, "after the trace (time 2^63-1)")
                continue
            if cap is not None and cap[0] <= 0:
                cap = None  # a machine without cpus tells us nothing about its size
            rows.append((t, n, mid, typ, cap))
        rows.sort()  # by time, then file order

        win = common.window
        duration = win.duration if win.duration is not None else opts.default_duration
        ws = TRACE_START_US + round(win.start * 1e6)
        we = math.inf if duration is None else ws + duration * 1e6
        common_cap = Counter(c for *_, c in rows if c is not None).most_common(1)
        fallback: Cap = common_cap[0][0] if common_cap else (1.0, 1.0)
        first_cap: dict[str, Cap] = {}
        for *_, mid, _, c in rows:
            if c is not None:
                first_cap.setdefault(mid, c)

        # -- replay to the window start; collect the window's events -------------------------
        up: set[str] = set()
        cap_now: dict[str, Cap] = {}
        in_window: list[tuple[int, int, str, int, Cap | None]] = []
        before: list[tuple[int, str]] = []  # (line, machine) of events that shape the start
        for row in rows:
            t, n, mid, typ, c = row
            if t >= we:
                log.filter(n, "after the window")
                continue
            if t > ws:
                in_window.append(row)
                continue
            if typ == ADD and mid in up:
                log.filter(n, "ADD of a machine that is already up")
                continue
            if typ == REMOVE and mid not in up:
                log.filter(n, "REMOVE of a machine that is not up")
                continue
            if typ == ADD:
                up.add(mid)
            elif typ == REMOVE:
                up.discard(mid)
            cap_now[mid] = c or cap_now.get(mid) or first_cap.get(mid) or fallback
            before.append((n, mid))
        start_up = set(up)
        seen = start_up | {mid for _, _, mid, typ, _ in in_window if typ == ADD}

        # -- sample machines ------------------------------------------------------------------
        ids = sorted(seen, key=lambda m: (len(m), m))  # numeric order for digit ids
        want = common.machines if common.machines is not None else opts.default_machines
        if want is not None and want < len(ids):
            rng = np.random.default_rng(common.seed)
            chosen = {ids[i] for i in rng.choice(len(ids), size=want, replace=False)}
        else:
            chosen = set(ids)
        for n, mid in before:
            if mid in chosen:
                log.use()
            else:
                log.filter(n, "machine not up in the window" if mid not in seen
                           else "machine not in the sample")

        # -- the window's events for the chosen machines ---------------------------------------
        declared: dict[str, Cap] = {m: cap_now[m] for m in chosen if m in start_up}
        scale = dict.fromkeys(chosen, 1.0)
        timeline: list[dict[str, Any]] = []
        for t, n, mid, typ, c in in_window:
            if mid not in seen:
                log.filter(n, "machine not up in the window")
                continue
            if mid not in chosen:
                log.filter(n, "machine not in the sample")
                continue
            c = c or cap_now.get(mid) or first_cap.get(mid) or fallback
            at = round((t - ws) / 1e6, 6)
            if typ == ADD:
                if mid in up:
                    log.filter(n, "ADD of a machine that is already up")
                    continue
                up.add(mid)
                timeline.append({"at": at, "action": "join", "machines": f"m{mid}"})
            elif typ == REMOVE:
                if mid not in up:
                    log.filter(n, "REMOVE of a machine that is not up")
                    continue
                up.discard(mid)
                timeline.append({"at": at, "action": "leave", "machines": f"m{mid}"})
            declared.setdefault(mid, c)  # first capacity in the window
            cap_now[mid] = c
            factor = round(c[0] / declared[mid][0], 6)
            if factor != scale[mid]:
                scale[mid] = factor
                timeline.append({"at": at, "action": "scale", "machines": f"m{mid}",
                                 "factor": factor})
            elif typ == UPDATE:
                log.filter(n, "UPDATE that leaves cpus unchanged")
                continue
            log.use()
        log.finish("machine events")

        machines: list[dict[str, Any]] = []
        for mid in sorted(chosen, key=lambda m: (len(m), m)):
            cpus, mem = declared[mid]
            m: dict[str, Any] = {"id": f"m{mid}", "capacity": {
                "cpu": cpus, "mem": mem,
                "slots": max(1, round(cpus * opts.slots_per_unit))}}
            if mid not in start_up:
                m["down"] = True
            machines.append(m)

        span = "to the end" if duration is None else f"{duration:g} s"
        prov = Provenance(
            real=["machine ids, ADD/REMOVE/UPDATE times and normalized cpu/memory capacity "
                  "(Google clusterdata-2019 cell a, machine_events)"],
            assumed=[
                f"window: trace start + {win.start:g} s for {span}"
                + (" (default_duration, no --duration given)" if win.duration is None else "")
                + "; machines up then are up at 0; later ADD = join, REMOVE = leave",
                f"{len(chosen)} of {len(ids)} machines up in the window"
                + (f", sampled with seed {common.seed}" if len(chosen) < len(ids) else ""),
                f"capacity: cpu and mem normalized (1 = largest machine), slots = max(1, "
                f"round(cpus x {opts.slots_per_unit:g}))",
                "a change of cpus (UPDATE or re-ADD) = scale event, factor = cpus / declared "
                "cpus, applied to every resource; memory-only changes are not replayed",
                "ADD rows without capacity use the machine's last known capacity, else its "
                f"next one, else the most common one {fallback}",
                "inconsistent events (ADD of an up machine, REMOVE of a down one) skipped",
            ])
        cluster = {"machines": machines, "capacity": timeline}
        stats = timeline_stats(machines, timeline)
        stats["machines_in_window"] = len(ids)
        stats["window_s"] = duration
        return TracePart(cluster=cluster, provenance=prov, stats=stats)
