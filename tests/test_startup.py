"""Issue 47: ``utilon --help`` and ``utilon validate`` start fast because each command imports
only what it needs.  These tests hold *what is imported*, in a fresh interpreter each; how fast
that is on a machine is ``benchmarks/bench_startup.py``'s to measure (no timings here).

And the lazy parts answer as the eager ones did: the CLI's routed apps print what the whole
app prints, the lazy packages and the policy registry give the same objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples" / "facebook-mix.yaml"  # its policy: fair

#: libraries no command needs to start: solvers, plots, HTTP servers, clusters, statistics
HEAVY = ("scipy", "highspy", "matplotlib", "plotly", "ray", "fastapi", "uvicorn", "starlette",
         "sqlalchemy", "statsmodels", "pandas", "httpx", "hypothesis", "pygments", "markdown_it")
#: utilon's machinery that only running (not describing or checking) a scenario needs
RUNNING = ("utilon.sim.engine", "utilon.sim.fluid", "utilon.core.scheduler",
           "utilon.core.dispatch", "utilon.core.state", "utilon.runner", "utilon.live",
           "utilon.plan", "utilon.report", "utilon.metrics", "utilon.league", "utilon.traces",
           "utilon.parallel", "utilon.cloud", "utilon.repro.cora", "utilon.jobs.kinds",
           "utilon.service.engine", "utilon.service.app", "utilon.service.store",
           "multiprocessing", "concurrent.futures")


def loaded_by(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code`` (the command's own
    output goes to a pipe and is dropped)."""
    script = (f"import sys\n{code}\n"
              "sys.__stderr__.write('\\nMODULES ' + __import__('json').dumps(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, check=False, env=None)
    marker = proc.stderr.rfind("MODULES ")
    assert marker >= 0, proc.stderr
    mods: list[str] = json.loads(proc.stderr[marker + len("MODULES "):])
    return set(mods)


def under(mods: set[str], prefixes: tuple[str, ...] | list[str]) -> set[str]:
    return {m for m in mods for p in prefixes if m == p or m.startswith(p + ".")}


def run_main(*argv: str) -> str:
    return (f"from utilon.cli import main\n"
            f"try:\n    main({list(argv)!r})\nexcept SystemExit as e:\n"
            f"    assert not e.code, e.code\n")


def test_importing_the_cli_loads_no_library_a_command_may_not_need() -> None:
    mods = loaded_by("import utilon.cli")
    assert not under(mods, [*HEAVY, *RUNNING])
    # nor what reading a scenario needs: numpy, pydantic, YAML, the model, any policy
    assert not under(mods, ["numpy", "pydantic", "yaml", "utilon.model", "utilon.core",
                            "utilon.scenario", "utilon.policies", "utilon.jobs", "utilon.sim"])
    # rich's progress bars, markdown and tracebacks come with the commands that draw them
    assert not under(mods, ["rich.progress", "rich.markdown", "rich.traceback", "rich.table"])
    assert not under(mods, ["importlib.metadata", "importlib.resources", "tempfile"])


def test_the_root_help_loads_what_typer_renders_help_with_and_nothing_of_utilon() -> None:
    mods = loaded_by(run_main("--help"))
    assert "rich.console" in mods  # typer draws the help with rich
    assert not under(mods, [*HEAVY, *RUNNING])
    assert not under(mods, ["numpy", "pydantic", "yaml", "utilon.model", "utilon.core",
                            "utilon.scenario", "utilon.policies", "utilon.jobs", "utilon.sim"])


def test_validate_loads_the_scenario_format_and_the_one_policy_it_names() -> None:
    mods = loaded_by(run_main("validate", str(SCENARIO)))
    # what checking a scenario needs: the format (pydantic, YAML), the model (numpy's
    # seeded sampling builds the jobs), the feasibility checks and the policy it names
    assert {"numpy", "pydantic", "yaml", "utilon.scenario.spec", "utilon.core.feasibility",
            "utilon.policies.fair"} <= mods
    assert not under(mods, [*HEAVY, *RUNNING])
    assert under(mods, ["utilon.policies"]) == {"utilon.policies", "utilon.policies.base",
                                                "utilon.policies.fair"}
    # no help was drawn: typer's rich help module (markdown, syntax highlighting) stays out
    assert "typer.rich_utils" not in mods


#: what only running a cloud scenario needs (validating one reads the fleet, the profiles,
#: the jobs and the service it names: utilon.cloud's model, profile, scenario and policy)
CLOUD_RUNNING = ("utilon.cloud.sim", "utilon.cloud.outputs", "utilon.cloud.metrics",
                 "utilon.cloud.live", "utilon.cloud.provider", "utilon.cloud.ray_provider")


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_validating_an_example_loads_no_solver_and_none_of_the_running_machinery(
        path: Path) -> None:
    """Every example (issue 47: ``validate`` on each under 0.5 s): alsched's exact solvers
    (HiGHS, scipy) load with their first solve, and a cloud scenario's check goes without
    the runner (the simulators, the live backends)."""
    text = path.read_text(encoding="utf-8")
    cloud = "cloud:" in text
    mods = loaded_by(run_main("validate", str(path)))
    assert "utilon.scenario.spec" in mods and ("utilon.cloud.scenario" in mods) == cloud
    assert not under(mods, HEAVY)
    # a cloud scenario is Cura's world (utilon.cloud), and a SWIM-shaped one reads its trace;
    # real jobs (run:) are planned by their kinds, which validate checks
    allowed = (("utilon.cloud", "utilon.traces") if cloud else ()) + (
        ("utilon.jobs.kinds",) if "run:" in text else ())
    assert not under(mods, [m for m in RUNNING if m not in allowed])
    assert not under(mods, CLOUD_RUNNING)


def test_listing_and_naming_policies_imports_none_of_them() -> None:
    mods = loaded_by("from utilon.policies import policy_names, world_of\n"
                     "assert 'fifo' in policy_names() and world_of('cura') == 'cloud'")
    assert not under(mods, ["utilon.policies"]) - {"utilon.policies", "utilon.policies.base"}
    assert not under(mods, [*HEAVY, "utilon.cloud", "utilon.sim.engine"])


# ------------------------------------------------------------- the lazy parts answer the same
ARGVS = [[], ["--help"], ["-v", "--help"], ["--debug", "--help", "--verbose"],
         ["validate", "--help"], ["validate"], ["--debug", "validate", "--help"],
         ["simulate", "--help"], ["reproduce"], ["reproduce", "--help"],
         ["reproduce", "cora", "--help"], ["trace", "kinds", "--help"], ["token", "--help"],
         ["solve", "--help"], ["policies", "--bogus"], ["valdate"], ["--help", "validate"],
         ["-v"], ["validate", str(SCENARIO), "--seed", "x"]]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(a) or "(none)")
def test_a_routed_command_line_prints_what_the_whole_app_prints(argv: list[str]) -> None:
    """``main`` builds only the part of the app a command line runs (``routed``); typer's
    output -- help, usage errors, suggestions -- is the whole app's, word for word."""
    from utilon.cli.app import app, routed

    runner = CliRunner()
    whole = runner.invoke(app, argv, prog_name="utilon", env={"COLUMNS": "100"})
    part = runner.invoke(routed(argv), argv, prog_name="utilon", env={"COLUMNS": "100"})
    assert (part.exit_code, part.output) == (whole.exit_code, whole.output)


HELP_ARGVS = [[], ["--help"], ["validate", "--help"], ["reproduce"], ["simulate", "--help"],
              ["solve", "cora", "--help"]]


def test_help_drawn_without_rich_markdown_is_the_help_drawn_with_it() -> None:
    """``main`` imports typer's help renderer with stand-ins for rich's Markdown and Traceback
    (``_import_help_renderer``): the help it draws is the one typer draws with the real ones,
    and the stand-ins never outlive the import."""
    code = ("import sys\n{pre}\nfrom utilon.cli import main\n"
            "for argv in {argvs!r}:\n"
            "    print('=== ' + ' '.join(argv))\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "import rich.markdown, rich.traceback\n"
            "assert type(rich.markdown.Markdown) is type, 'a stand-in outlived the import'\n")
    outs = []
    for pre in ("import typer.rich_utils", ""):
        proc = subprocess.run([sys.executable, "-c", code.format(pre=pre, argvs=HELP_ARGVS)],
                              cwd=ROOT, capture_output=True, text=True, check=True,
                              env={**os.environ, "COLUMNS": "100", "TERM": "dumb"})
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    assert outs[0].count("Usage: utilon") == len(HELP_ARGVS)


def test_routing_builds_one_command_for_a_command_and_none_for_the_root_help() -> None:
    from utilon.cli.app import app, routed

    one = routed(["--debug", "validate", "x.yaml"])
    assert [c.callback.__name__ for c in one.registered_commands] == ["validate"]
    assert not one.registered_groups
    assert [g.name for g in routed(["reproduce", "cora"]).registered_groups] == ["reproduce"]
    root = routed(["--help"])
    assert len(root.registered_commands) == len(app.registered_commands)
    assert all(not g.typer_instance.registered_commands for g in root.registered_groups)
    assert routed(["frobnicate"]) is app and routed(["--help", "validate"]) is app
    # the whole app is untouched
    assert all(g.typer_instance.registered_commands for g in app.registered_groups
               if g.name != "token") and len(app.registered_commands) > 10


def test_lazy_packages_give_the_same_objects() -> None:
    import utilon.jobs
    import utilon.sim
    from utilon.cloud.policy import CloudPolicy
    from utilon.jobs import RunSpec, plan_job
    from utilon.jobs.kinds import plan_job as kinds_plan_job
    from utilon.jobs.specs import RunSpec as specs_run_spec
    from utilon.policies import CloudPolicy as from_package
    from utilon.policies.base import CloudPolicy as from_base
    from utilon.sim import Simulation, usage
    from utilon.sim.engine import Simulation as engine_simulation

    assert Simulation is engine_simulation and usage.__name__ == "utilon.sim.usage"
    assert plan_job is kinds_plan_job and RunSpec is specs_run_spec
    assert from_package is from_base is CloudPolicy
    for module in (utilon.sim, utilon.jobs):
        assert all(hasattr(module, name) for name in module.__all__)
        with pytest.raises(AttributeError):
            module.no_such_name  # noqa: B018
