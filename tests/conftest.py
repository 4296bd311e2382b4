"""Shared pytest configuration: a small, deterministic hypothesis profile.

The whole suite must stay fast on two cores, so property tests run few examples by default;
set ``HYPOTHESIS_PROFILE=thorough`` for a longer local run.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "utilon",
    max_examples=40,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "utilon")
settings.load_profile(PROFILE)
THOROUGH = PROFILE == "thorough"


def examples(n: int) -> int:
    """``n`` examples under the default profile (for a property that costs seconds per
    example), the profile's own count under ``thorough``."""
    return settings().max_examples if THOROUGH else n


# -- real traces in ../shared/data (CI clones the repo with ../shared beside it) -------------
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: the real traces.  Missing data is a setup error, not a skip."""
    assert SHARED_DATA.is_dir(), f"real traces not found at {SHARED_DATA} (clone ../shared)"
    return SHARED_DATA


def head_lines(src: Path, n: int, dest: Path, extra: list[str] | None = None) -> Path:
    """The first ``n`` lines of a real trace (plus ``extra`` lines) as a small test file."""
    import gzip

    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rt", encoding="utf-8", newline="") as fh:
        lines = [next(fh) for _ in range(n)]
    lines += [x + "\n" for x in extra or []]
    dest.write_text("".join(lines), encoding="utf-8")
    return dest


def run_fifo(document: dict) -> tuple:
    """Build an imported scenario document and run FIFO to the end: (workload, jobs finished)."""
    from utilon.policies import make_policy
    from utilon.scenario.build import build_workload
    from utilon.scenario.load import parse_scenario
    from utilon.sim.engine import Simulation

    workload = build_workload(parse_scenario(document, "imported"))
    res = Simulation(workload.cluster, workload.jobs, make_policy("fifo")).run()
    assert not res.stopped_early
    return workload, sum(1 for j in res.core.jobs.values() if j.finish is not None)


# -- one local Ray at a time -----------------------------------------------------------------
# `make test` runs files on several pytest-xdist workers.  Local Ray clusters started at the same
# moment on one machine share /tmp/ray, and the second `ray.init` can attach to the first's
# cluster and hang when that one shuts down (seen in a fresh-clone run).  A module with a test
# marked `ray` holds a machine-wide lock for its whole run (its Ray may be a module fixture).
@pytest.fixture(scope="module", autouse=True)
def _one_ray_at_a_time(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    import fcntl
    import tempfile

    module = request.module
    if not any(item.get_closest_marker("ray") is not None and item.module is module
               for item in request.session.items):
        yield
        return
    with open(Path(tempfile.gettempdir()) / "utilon-tests-ray.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
