"""N-body gravity, alsched's NBODY job: one stage per time step, each task a slice of bodies.

Real: direct-sum Newtonian gravity (G = 1) with Plummer softening ``SOFTENING``, vectorised
in numpy, integrated with semi-implicit (symplectic) Euler: ``v += a(x) dt`` then
``x += v dt``.  Task i of step s reads the whole state before step s, computes the
accelerations of bodies ``[i*N//T, (i+1)*N//T)`` against all N bodies and writes their next
positions and velocities to ``step-s/slice-i.npz``.  Every task of step s+1 reads all slices
of step s itself (nothing is assembled in between, so no task waits on or races another).
No task runs after the last step: ``final_state`` assembles its slices.
Assumed: the initial state is synthetic - a Gaussian blob of unit scale with small random
velocities and masses summing to about 1 (``input/state-00000.npz``, from the seed).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from utilon.jobs.common import guarded, load_npz, rng, save_npz
from utilon.jobs.plan import TaskContext, Verification

STATE0 = Path("input") / "state-00000.npz"
SOFTENING = 0.01  # Plummer softening length: bounds the force of close pairs
PAIRS_PER_CHUNK = 1 << 18  # body pairs evaluated at a time (about 6 MB of differences)


def stage_name(step: int) -> str:
    return f"step-{step}"


def slice_path(job_dir: Path, step: int, index: int) -> Path:
    return job_dir / f"step-{step:05d}" / f"slice-{index:05d}.npz"


def body_range(bodies: int, tasks: int, index: int) -> tuple[int, int]:
    return index * bodies // tasks, (index + 1) * bodies // tasks


def prepare(job_dir: Path, seed: int, bodies: int) -> None:
    gen = rng(seed, "nbody")
    save_npz(job_dir / STATE0,
             pos=gen.normal(0.0, 1.0, (bodies, 3)),
             vel=gen.normal(0.0, 0.1, (bodies, 3)),
             mass=gen.uniform(0.5, 1.5, bodies) / bodies)


def load_state(job_dir: Path, step: int, tasks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions, velocities and masses before ``step`` (after step - 1's slices)."""
    state = load_npz(job_dir / STATE0)
    pos, vel, mass = state["pos"], state["vel"], state["mass"]
    if step == 0:
        return pos, vel, mass
    for i in range(tasks):
        lo, hi = body_range(len(mass), tasks, i)
        part = load_npz(slice_path(job_dir, step - 1, i))
        if part["pos"].shape != (hi - lo, 3):
            raise ValueError(f"slice {i} of step {step - 1} has {len(part['pos'])} bodies, "
                             f"expected {hi - lo}")
        pos[lo:hi], vel[lo:hi] = part["pos"], part["vel"]
    return pos, vel, mass


def accelerations(pos: np.ndarray, mass: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Acceleration of bodies ``lo..hi-1`` due to all bodies (self-terms vanish: d = 0)."""
    out = np.empty((hi - lo, 3))
    rows = max(1, PAIRS_PER_CHUNK // len(pos))
    for a in range(lo, hi, rows):
        b = min(hi, a + rows)
        d = pos[None, :, :] - pos[a:b, None, :]  # (rows, N, 3): from each body to every body
        r2 = np.einsum("ijk,ijk->ij", d, d) + SOFTENING**2
        w = mass[None, :] / (r2 * np.sqrt(r2))
        out[a - lo:b - lo] = np.einsum("ij,ijk->ik", w, d)
    return out


def advance(pos: np.ndarray, vel: np.ndarray, mass: np.ndarray, lo: int, hi: int,
            dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Next positions and velocities of bodies ``lo..hi-1`` (semi-implicit Euler)."""
    v = vel[lo:hi] + accelerations(pos, mass, lo, hi) * dt
    return pos[lo:hi] + v * dt, v


def step_task(ctx: TaskContext) -> dict[str, Any]:
    """Advance this task's slice of bodies by one step.

    With a co-location speedup ``f`` (alsched's NBODY, §5.1), a step whose tasks do not all
    run on one machine pays an emulated exchange of the other slices over the network:
    ``(f - 1)`` times its compute time, so that a spread step takes ``f`` times a co-located
    one, as in the simulator.  (The logical machines of a local run share this host's memory,
    so the exchange is emulated, not measured.)"""
    step, dt = int(ctx.args["step"]), float(ctx.args["dt"])
    t0 = time.perf_counter()
    pos, vel, mass = load_state(ctx.job_dir, step, ctx.tasks)
    lo, hi = body_range(len(mass), ctx.tasks, ctx.index)
    p, v = advance(pos, vel, mass, lo, hi, dt)
    save_npz(slice_path(ctx.job_dir, step, ctx.index), pos=p, vel=v)
    out: dict[str, Any] = {"bodies": hi - lo, "pairs": (hi - lo) * len(mass)}
    f = float(ctx.args.get("colocate_speedup", 1.0))
    if f != 1.0:
        together = bool(ctx.args.get("colocated", False))
        exchange = 0.0 if together else (f - 1.0) * (time.perf_counter() - t0)
        time.sleep(exchange)
        out |= {"colocated": together, "exchange_s": round(exchange, 6)}
    return out


def final_state(job_dir: Path, steps: int, tasks: int) -> tuple[np.ndarray, np.ndarray]:
    pos, vel, _ = load_state(job_dir, steps, tasks)
    return pos, vel


def direct(job_dir: Path, steps: int, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """All steps on all bodies in one process, from the initial state."""
    pos, vel, mass = load_state(job_dir, 0, 1)
    for _ in range(steps):
        pos, vel = advance(pos, vel, mass, 0, len(mass), dt)
    return pos, vel


@guarded
def verify(job_dir: Path, steps: int, tasks: int, dt: float) -> Verification:
    pos, vel = final_state(job_dir, steps, tasks)
    want_pos, want_vel = direct(job_dir, steps, dt)
    # the same formula row by row: only the summation order may differ, hence tight bounds
    ok = bool(np.allclose(pos, want_pos, rtol=1e-9, atol=1e-12)
              and np.allclose(vel, want_vel, rtol=1e-9, atol=1e-12))
    diff = max(float(np.abs(pos - want_pos).max()), float(np.abs(vel - want_vel).max()))
    return Verification(ok, f"{len(pos)} bodies after {steps} steps; max |difference| from a "
                            f"direct computation {diff:.1e}")
