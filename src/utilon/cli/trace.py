"""``utilon trace``: import real traces into scenarios (``import``) and list the kinds."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from utilon.cli.common import err, errors, key_values, out
from utilon.errors import UtilonError
from utilon.readers import parse_seconds

trace_app = typer.Typer(help="Import real workload and capacity traces into scenarios.",
                        no_args_is_help=True)

@trace_app.command("import")
def trace_import(
    kind: Annotated[str, typer.Argument(help="trace kind (see `utilon trace kinds`)")],
    file: Annotated[Path, typer.Argument(help="the trace file (plain or .gz)")],
    out_file: Annotated[Path | None, typer.Option(
        "--out", "-o", help="scenario (or cluster) YAML to write [default: <kind>-<file>.yaml]")]
    = None,
    start: Annotated[str | None, typer.Option(
        "--start", help="skip the trace before this time (seconds, or 30m, 6h, 1d)")] = None,
    duration: Annotated[str | None, typer.Option(
        "--duration", help="keep this much trace time after --start (e.g. 1h)")] = None,
    max_jobs: Annotated[int | None, typer.Option(
        "--max-jobs", help="keep at most this many jobs (the first ones)")] = None,
    arrival_scale: Annotated[float, typer.Option(
        "--arrival-scale", help="multiply the arrival rate (2 = jobs come twice as fast)")]
    = 1.0,
    machines: Annotated[int | None, typer.Option(
        "--machines", help="cluster size: machines to build, or to sample from a machine trace")]
    = None,
    load: Annotated[float | None, typer.Option(
        "--load", help="size the proposed cluster for this offered load (default 0.7 when "
        "the trace has no cluster; ignored with --machines)")] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of every random choice")] = 0,
    with_scenario: Annotated[Path | None, typer.Option(
        "--with", help="take the other half from this scenario: its cluster for a workload "
        "trace, its jobs for a capacity trace")] = None,
    slack: Annotated[float | None, typer.Option(
        "--slack", help="deadline = submit + SLACK x standalone runtime [2]")] = None,
    utility: Annotated[str | None, typer.Option(
        "--utility", help="cora (sigmoid per class) or deadline (a step at the deadline)")]
    = None,
    setting: Annotated[list[str] | None, typer.Option(
        "--set", help="importer option KEY=VALUE (repeatable; see `utilon trace kinds`)")]
    = None,
    max_bad: Annotated[float, typer.Option(
        "--max-bad", help="fail if more than this share of rows is malformed")] = 0.01,
    name: Annotated[str | None, typer.Option("--name", help="scenario name")] = None,
) -> None:
    """Turn a real trace into a scenario (jobs) or a cluster (capacity over time)."""
    from utilon.traces import ClassRule, Window, import_trace, write_scenario

    with errors():
        window = Window(parse_seconds(start, "--start") or 0.0,
                        parse_seconds(duration, "--duration"), max_jobs, arrival_scale)
        rule: dict[str, Any] = {}
        if slack is not None:
            if not slack > 0:
                raise UtilonError("--slack must be > 0", where="--slack")
            rule["slack"] = slack
        if utility is not None:
            if utility not in ("cora", "deadline"):
                from utilon.errors import UnknownNameError

                raise UnknownNameError("utility", utility, ["cora", "deadline"],
                                       where="--utility")
            rule["utility"] = utility
        options = key_values(setting, "--set", "block_size=128MiB")
        with err.status(f"importing {file} as {kind}", spinner="dots"):
            result = import_trace(kind, file, window=window, seed=seed, machines=machines,
                                  load=load, classes=ClassRule(**rule), options=options,
                                  with_scenario=with_scenario, name=name, max_bad=max_bad)
        target = out_file or Path(f"{kind}-{file.name.split('.')[0]}.yaml")
        command = "utilon " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        write_scenario(result, target, command if "trace" in sys.argv else "")
        for line in result.summary_lines():
            err.print(f"  {line}", highlight=False)
        what = "scenario" if result.is_scenario else "cluster (use it with --capacity FILE)"
        out.print(f"wrote {what}: {target}")


@trace_app.command("kinds")
def trace_kinds() -> None:
    """List the trace kinds with what they produce, their --set options and where they come
    from: utilon, or the installed package of a plugin (docs/plugins.md)."""
    from rich.table import Table

    from utilon.traces import importer, importer_kinds
    from utilon.traces.kinds import plugin_importers

    t = Table(title="trace kinds")
    t.add_column("kind")
    t.add_column("produces")
    t.add_column("what")
    t.add_column("options (--set KEY=VALUE)")
    t.add_column("from")
    plugins = plugin_importers()
    for k in importer_kinds():
        cls, origin = plugins.get(k) or (importer(k), "utilon")
        opts = ", ".join(f"{n}={f.default!r}" for n, f in cls.Options.model_fields.items())
        t.add_row(k, cls.produces, cls.summary, opts or "-", origin)
    out.print(t)
