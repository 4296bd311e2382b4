"""Command-line startup benchmark: how long ``utilon --help``, ``validate`` and ``policies`` take.

Run ``.venv/bin/python benchmarks/bench_startup.py`` (part of ``make bench``; ``--runs 3`` for a
smoke run).  Each command is started ``--runs`` times as its own process (``subprocess.run``,
output discarded, wall clock with ``time.perf_counter``, the way hyperfine times a command),
after one untimed warm-up run; the median, the fastest and the slowest run are reported, with
the machine's load average before and after (other processes on a shared machine slow every
run down: compare medians taken at similar loads).

Commands (the console script next to this interpreter, ``.venv/bin/utilon``):

* ``help``: ``utilon --help`` (typer + rich render every command's one-line help);
* ``validate``: ``utilon validate examples/facebook-mix.yaml`` (reads, checks and builds a
  300-job scenario of 27,419 sampled tasks; imports numpy, pydantic and the one policy the
  scenario names);
* ``validate-small``: ``utilon validate examples/small-mapreduce.yaml`` (five explicit jobs:
  what validating costs beyond the imports, by difference with ``validate``);
* ``policies``: ``utilon policies`` (imports every built-in policy to describe it);
* ``import``: ``python -c "import utilon.cli"`` (what every command pays before it runs).

Besides wall time, each run's CPU time (user + system, of the child process) is reported: it
is what the command costs, and a busy machine changes it much less than the wall time.

Bytecode: Python compiles a module's source each time it is imported unless it can read a
cached ``.pyc``.  ``--bytecode cached`` (the default) gives the runs a private bytecode cache
in a temporary folder (``PYTHONPYCACHEPREFIX``, written by the warm-up run): what a user sees
from the second run on.  ``--bytecode none`` sets ``PYTHONDONTWRITEBYTECODE`` and no prefix:
installed libraries use the bytecode pip wrote, and utilon's own modules (an editable install)
are compiled on every start unless a ``src/utilon/**/__pycache__`` exists -- the case of a
shell or CI job that sets ``PYTHONDONTWRITEBYTECODE``.  ``both`` times each.

Issue 47's goal is ``--help`` and ``validate`` under 0.5 s; the script prints whether each
median meets it and exits 0 either way (tests hold what is imported, not how fast: see
``tests/test_startup.py``).  ``--json FILE`` also writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOAL_S = 0.5
GOALS = {"help": GOAL_S, "validate": GOAL_S, "validate-small": GOAL_S}
SMALL = ROOT / "examples" / "small-mapreduce.yaml"


def commands(scenario: Path) -> dict[str, list[str]]:
    utilon = BIN / "utilon"
    exe = [str(utilon)] if utilon.exists() else [sys.executable, "-m", "utilon.cli"]
    return {"help": [*exe, "--help"],
            "validate": [*exe, "validate", str(scenario)],
            "validate-small": [*exe, "validate", str(SMALL)],
            "policies": [*exe, "policies"],
            "import": [sys.executable, "-c", "import utilon.cli"]}


def environment(mode: str, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    if mode == "cached":
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("COLUMNS", "100")
    return env


def time_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n"
                         f"{proc.stderr.decode(errors='replace')}")
    return elapsed, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="timed runs per command (default 10)")
    ap.add_argument("--bytecode", choices=("cached", "none", "both"), default="cached",
                    help="time with a warm bytecode cache, with none, or both (see above)")
    ap.add_argument("--scenario", type=Path, default=ROOT / "examples" / "facebook-mix.yaml")
    ap.add_argument("--only", default="help,validate,validate-small,policies,import",
                    help="comma-separated commands to time")
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    cmds = commands(args.scenario)
    wanted = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = sorted(set(wanted) - set(cmds))
    if unknown:
        ap.error(f"unknown command(s) {', '.join(unknown)}; known: {', '.join(cmds)}")
    modes = ("cached", "none") if args.bytecode == "both" else (args.bytecode,)
    rows: list[dict[str, Any]] = []
    print(f"{args.runs} runs each: median (min-max) wall seconds, median CPU seconds; load = "
          f"1-minute load average on {os.cpu_count()} cores")
    if any(ROOT.glob("src/utilon/**/__pycache__")):
        print("note: src/utilon has __pycache__ folders; --bytecode none reads them")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="utilon-pyc-") as tmp:
            env = environment(mode, Path(tmp))
            for name in wanted:
                argv_ = cmds[name]
                time_once(argv_, env)  # warm-up: fills the bytecode cache and the OS's
                before = load()
                runs = [time_once(argv_, env) for _ in range(args.runs)]
                after = load()
                times = [w for w, _ in runs]
                med = statistics.median(times)
                cpu = statistics.median(c for _, c in runs)
                goal = GOALS.get(name)
                verdict = "" if goal is None else (
                    f"  goal < {goal:g} s: {'met' if med < goal else 'NOT met'}")
                print(f"{name:>14} [{mode:>6} bytecode]: {med:5.3f} s ({min(times):.3f}-"
                      f"{max(times):.3f}), CPU {cpu:5.3f} s, load {before} -> {after}{verdict}")
                rows.append({"command": name, "argv": [Path(argv_[0]).name, *argv_[1:]],
                             "bytecode": mode, "runs": args.runs, "median_s": round(med, 4),
                             "min_s": round(min(times), 4), "max_s": round(max(times), 4),
                             "cpu_median_s": round(cpu, 4),
                             "goal_s": goal, "met": None if goal is None else med < goal,
                             "load_before": before, "load_after": after})
    if args.json is not None:
        report = {"results": rows,
                  "machine": {"python": platform.python_version(),
                              "platform": platform.platform(), "cores": os.cpu_count()}}
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
