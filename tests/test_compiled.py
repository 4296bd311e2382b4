"""The compiled simulator (``setup.py``, mypyc) and its pure-Python sources give the same runs.

``make test`` installs utilon compiled when a C compiler is there, so the rest of the suite
(the golden traces among it) runs the compiled modules; these tests run the same scenarios on
the pure-Python sources (``UTILON_PURE_PYTHON=1``, in a subprocess) and compare every output,
check that a stale build is never used, that the build list is one list, and that a failed
compilation still installs utilon, pure-Python.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from utilon import native
from utilon.policies import make_policy
from utilon.sim import Simulation

ROOT = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
POLICIES = ("fifo", "fair", "edf-p", "rrh", "alsched", "rds")


def digest() -> str:
    """Every output of a few runs: attempts, timeline columns, job times, counters, usage."""
    from test_sim_fast_path import outputs, workload

    h = hashlib.sha256()
    for seed, policy in enumerate(POLICIES, 1):
        cluster, jobs = workload(seed, n_jobs=20, shared_durations=seed % 2 == 0)
        res = Simulation(cluster, jobs, make_policy(policy)).run()
        h.update(repr((policy, outputs(res))).encode())
    return h.hexdigest()


def pure_python(code: str) -> str:
    env = {**os.environ, "UTILON_PURE_PYTHON": "1", "PYTHONPATH": str(TESTS)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300, cwd=TESTS)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_build_list_is_the_runtime_list() -> None:
    """``setup.py`` compiles exactly the modules ``utilon.native`` treats as compiled."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    (paths,) = [ast.literal_eval(node.value) for node in ast.walk(tree)
                if isinstance(node, ast.Assign)
                and any(getattr(t, "id", "") == "HOT_MODULES" for t in node.targets)]
    as_modules = tuple(p.removeprefix("src/").removesuffix(".py").replace("/", ".")
                       for p in paths)
    assert as_modules == native.HOT_MODULES


def test_the_makefile_rebuilds_when_a_compiled_module_changes() -> None:
    """The Makefile's ``HOT`` list (its install stamps depend on it, so editing a compiled
    module reinstalls and rebuilds) names the same modules as ``utilon.native``."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("HOT") and ":=" in ln]
    paths = line.split(":=", 1)[1].split()
    assert tuple(p.removeprefix("src/").removesuffix(".py").replace("/", ".")
                 for p in paths) == native.HOT_MODULES


@pytest.mark.skipif(not native.compiled(), reason="utilon is installed pure-Python here "
                    "(no C compiler at install time): there is no compiled build to compare")
def test_compiled_and_pure_python_runs_are_identical() -> None:
    assert pure_python("import utilon.native as n; print(n.compiled())") == "False"
    assert pure_python("from test_compiled import digest; print(digest())") == digest()


def test_a_compiled_result_pickles() -> None:
    """Parallel runs send results between processes: the core travels with them."""
    from test_sim_fast_path import outputs, workload

    cluster, jobs = workload(7, n_jobs=10)
    res = Simulation(cluster, jobs, make_policy("fair")).run()
    back = pickle.loads(pickle.dumps(res))
    assert outputs(back) == outputs(res)
    assert back.core.jobs.keys() == res.core.jobs.keys()
    assert dataclasses.asdict(back.core.stats) == dataclasses.asdict(res.core.stats)


def _package(tmp_path: Path, *, build_age: float) -> Path:
    """A copy of the hot modules' layout: sources, and a fake build ``build_age`` s old."""
    for name in native.HOT_MODULES:
        src = tmp_path.joinpath(*name.split(".")[1:]).with_suffix(".py")
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text("")
        so = src.with_name(src.stem + ".cpython-311-x86_64-linux-gnu.so")
        so.write_bytes(b"")
        now = time.time()
        os.utime(src, (now, now))
        os.utime(so, (now - build_age, now - build_age))
    return tmp_path


def test_a_build_older_than_its_source_is_stale(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if ".cpython-311-x86_64-linux-gnu.so" not in native.importlib.machinery.EXTENSION_SUFFIXES:
        monkeypatch.setattr(native.importlib.machinery, "EXTENSION_SUFFIXES",
                            [".cpython-311-x86_64-linux-gnu.so"])
    monkeypatch.setattr(native, "_PACKAGE", _package(tmp_path, build_age=60.0))
    assert native.stale() == list(native.HOT_MODULES)
    monkeypatch.setattr(native, "_PACKAGE", _package(tmp_path, build_age=-60.0))
    assert native.stale() == []
    shutil.rmtree(tmp_path / "core")
    assert native.stale() == []  # no build at all: nothing is stale


OK_C = """#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "ok", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_ok(void) { return PyModule_Create(&def); }
"""


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None,
                    reason="no C compiler here: the fallback is what every install does")
def test_a_failed_build_installs_no_compiled_module(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``setup.py``'s build step: one extension builds, the next fails to compile, and the build
    still succeeds, without either (a compiled module without its group's library could not
    be imported), saying why."""
    from setuptools import Distribution, Extension

    spec = importlib.util.spec_from_file_location("utilon_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)  # (not as __main__: defines, does not build)
    (tmp_path / "ok.c").write_text(OK_C)
    (tmp_path / "broken.c").write_text("#error this extension does not compile\n")
    dist = Distribution({"name": "probe", "ext_modules": [
        Extension("ok", [str(tmp_path / "ok.c")]),
        Extension("broken", [str(tmp_path / "broken.c")])]})
    cmd = setup_py.OptionalBuildExt(dist)
    cmd.build_lib = str(tmp_path / "lib")
    cmd.build_temp = str(tmp_path / "tmp")
    cmd.ensure_finalized()
    cmd.run()
    assert "installing the pure-Python simulator (compiling failed" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.so"))
