"""Build hook: compile the simulator's hot modules with mypyc when this machine can.

Everything else about the package is declared in ``pyproject.toml``.  The modules below run
once or more per simulated task (the event loop, the fluid model, the scheduler core's state,
dispatch and bookkeeping); compiled, a run takes about a fifth less time
(``benchmarks/bench_sim.py``).  The same sources are the pure-Python fallback: with
``UTILON_PURE_PYTHON=1``, without mypyc, or when the C compiler is missing or fails, utilon
installs as pure Python, with the same results (``tests/test_compiled.py``), only slower.
``python -c "import utilon; print(utilon.compiled())"`` says which one is installed.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HOT_MODULES = [
    "src/utilon/core/vec_native.py",
    "src/utilon/core/make.py",
    "src/utilon/core/state.py",
    "src/utilon/core/ledger.py",
    "src/utilon/core/grants.py",
    "src/utilon/core/dispatch.py",
    "src/utilon/core/views.py",
    "src/utilon/core/transitions.py",
    "src/utilon/core/scheduler.py",
    "src/utilon/sim/fluid.py",
    "src/utilon/sim/loop.py",
    "src/utilon/sim/engine.py",
]


def _warn(why: str) -> None:
    print(f"utilon: installing the pure-Python simulator ({why}); results are the same, "
          "runs are slower", file=sys.stderr)


class OptionalBuildExt(build_ext):
    """Compile the extensions, or install without any of them when that fails: a compiled
    module needs the group's shared library, so it is all or nothing."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler, no Python headers, a failed build
            for path in self.get_outputs():
                if os.path.exists(path):
                    os.remove(path)
            self.extensions = []
            _warn(f"compiling failed: {exc}")


def ext_modules() -> list:  # type: ignore[type-arg]
    if os.environ.get("UTILON_PURE_PYTHON", "") not in ("", "0"):
        _warn("UTILON_PURE_PYTHON is set")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not installed")
        return []
    try:
        # one group: the modules call each other natively; -O3 is mypyc's default
        return mypycify(HOT_MODULES, group_name="utilon_native")
    except Exception as exc:  # a mypy error in the hot modules (caught by `make lint`)
        _warn(f"mypyc failed: {exc}")
        return []


if __name__ == "__main__":  # (setuptools runs this file as __main__; tests import it)
    setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
