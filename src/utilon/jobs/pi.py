"""Pi by quasi-Monte Carlo, Hadoop's QuasiMonteCarlo example (the HADOOP-PI job).

As in Hadoop, the points are the 2-D Halton sequence (radical inverses in bases 2 and 3), map
task i takes the ``samples`` points after index ``i * samples`` (Hadoop's HaltonSequence
advances before it returns a point, so indices ``i*samples + 1 .. (i+1)*samples``), and a point
is inside when ``(x - 0.5)**2 + (y - 0.5)**2 <= 0.25``.  Together the maps cover the first
``maps * samples`` points, so the estimate depends only on that total.  Map i writes its counts
to ``shuffle/map-i.json``; the reduce writes ``output/pi.json``: inside, total, estimate.

Tolerance of the check: the error of a Halton estimate falls roughly like (log N)**2 / N.  A
disc's boundary is not axis-aligned, so theory gives no small constant; measured over every N
from 1 to 4 * 10**6, |error| * N / ln(N + 1)**2 never exceeded 1.8 (about 1 for large N) and
|error| never exceeded 7.6e-4 once N >= 10**5.  ``tolerance`` accepts 3 ln(N + 1)**2 / N below
N = 10**5 and 1e-3 from there on: at least 1.3 times every measured error.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from utilon.jobs.common import guarded, output_path, read_json, write_json
from utilon.jobs.plan import TaskContext, Verification

CHUNK = 1 << 20  # points evaluated at a time (keeps a map's memory near 50 MB)


def halton(indices: np.ndarray, base: int) -> np.ndarray:
    """Radical inverse of each index in ``base``: that coordinate of the Halton sequence."""
    k = indices.astype(np.int64)
    x = np.zeros(len(k))
    scale = 1.0 / base
    while k.any():
        k, digit = np.divmod(k, base)
        x += digit * scale
        scale /= base
    return x


def count_inside(first: int, n: int) -> int:
    """How many of the Halton points ``first .. first + n - 1`` lie in the disc."""
    inside = 0
    for a in range(first, first + n, CHUNK):
        idx = np.arange(a, min(a + CHUNK, first + n), dtype=np.int64)
        x, y = halton(idx, 2) - 0.5, halton(idx, 3) - 0.5
        inside += int(np.count_nonzero(x * x + y * y <= 0.25))
    return inside


def shuffle_file(job_dir: Path, index: int) -> Path:
    return job_dir / "shuffle" / f"map-{index:05d}.json"


def map_task(ctx: TaskContext) -> dict[str, Any]:
    samples = int(ctx.args["samples"])
    inside = count_inside(ctx.index * samples + 1, samples)
    write_json(shuffle_file(ctx.job_dir, ctx.index), {"inside": inside, "total": samples})
    return {"inside": inside, "total": samples}


def reduce_task(ctx: TaskContext) -> dict[str, Any]:
    counts = [read_json(shuffle_file(ctx.job_dir, m)) for m in range(int(ctx.args["maps"]))]
    inside, total = sum(c["inside"] for c in counts), sum(c["total"] for c in counts)
    result = {"inside": inside, "total": total, "estimate": 4 * inside / total}
    write_json(output_path(ctx.job_dir, "pi.json"), result)
    return result


def tolerance(total: int) -> float:
    """Largest accepted |estimate - pi| for ``total`` points (see the module docstring)."""
    return 1e-3 if total >= 100_000 else 3 * math.log(total + 1) ** 2 / total


@guarded
def verify(job_dir: Path, maps: int, samples: int) -> Verification:
    out = read_json(output_path(job_dir, "pi.json"))
    if out["total"] != maps * samples:
        return Verification(False, f"total {out['total']} != maps x samples = {maps * samples}")
    if out["estimate"] != 4 * out["inside"] / out["total"]:
        return Verification(False, "estimate is not 4 x inside / total")
    err, tol = abs(out["estimate"] - math.pi), tolerance(out["total"])
    return Verification(err <= tol, f"estimate {out['estimate']:.7f} from {out['total']} "
                                    f"points; |error| {err:.2e} (tolerance {tol:.1e})")
