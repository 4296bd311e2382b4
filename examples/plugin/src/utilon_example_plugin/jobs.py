"""``sum-squares``: a real job whose result is known in closed form.

Map task i adds up k**2 for its slice of k = 0 .. n-1 and writes the partial sum; the reduce
adds the partial sums and writes ``output/sum.json``; the verifier compares it with
(n - 1) n (2n - 1) / 6.  There is no input to prepare.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from utilon.jobs.kinds import JobKind
from utilon.jobs.plan import JobPlan, StagePlan, TaskContext, Verification, atomic_write

SECONDS_PER_MILLION = 0.1  # a prior: the policies' estimate before a task has run
OVERHEAD = 0.2  # seconds to start a task in a worker


class SumSquares(JobKind):
    kind: Literal["sum-squares"] = Field(description="sum of k**2 for k < n, checked exactly")
    n: int = Field(1_000_000, ge=1, le=10**9, description="numbers to square and add")
    maps: int = Field(2, ge=1, le=1000, description="map tasks (slices of 0 .. n-1)")

    summary = "sum of k**2 for k < n over map tasks, checked against the closed form"

    def plan(self, job_id: str, seed: int, base_dir: Path) -> JobPlan:
        if self.maps > self.n:
            raise ValueError(f"maps: {self.maps} maps for n={self.n} leaves a map without "
                             "numbers; lower maps")
        estimate = OVERHEAD + SECONDS_PER_MILLION * self.n / self.maps / 1e6
        return JobPlan(
            kind=self.kind,
            stages=(
                StagePlan(name="map", kind="map", tasks=self.maps, estimate=estimate,
                          call="utilon_example_plugin.jobs:map_task",
                          args={"n": self.n, "maps": self.maps}),
                StagePlan(name="reduce", kind="reduce", tasks=1, estimate=OVERHEAD,
                          call="utilon_example_plugin.jobs:reduce_task",
                          args={"maps": self.maps}, after=("map",)),
            ),
            verify=partial(verify, n=self.n),
            notes=(f"prior: map {OVERHEAD} s + {SECONDS_PER_MILLION} s per million numbers",))


def _part(job_dir: Path, i: int) -> Path:
    return job_dir / "shuffle" / f"part-{i:05d}.json"


def map_task(ctx: TaskContext) -> dict[str, Any]:
    n, maps = int(ctx.args["n"]), int(ctx.args["maps"])
    lo, hi = ctx.index * n // maps, (ctx.index + 1) * n // maps
    total = sum(k * k for k in range(lo, hi))
    atomic_write(_part(ctx.job_dir, ctx.index), json.dumps({"sum": total}))
    return {"numbers": hi - lo}


def reduce_task(ctx: TaskContext) -> dict[str, Any]:
    total = sum(json.loads(_part(ctx.job_dir, i).read_text())["sum"]
                for i in range(int(ctx.args["maps"])))
    atomic_write(ctx.path("output", "sum.json"), json.dumps({"sum": total}))
    return {"sum": total}


def verify(job_dir: Path, n: int) -> Verification:
    try:
        got = json.loads((job_dir / "output" / "sum.json").read_text())["sum"]
    except (OSError, ValueError, KeyError) as e:
        return Verification(False, f"no result: {e}")
    want = (n - 1) * n * (2 * n - 1) // 6
    return Verification(got == want, f"sum {got}, closed form {want}")
