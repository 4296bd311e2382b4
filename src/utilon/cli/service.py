"""``utilon serve`` and its clients: submit, jobs, job, cancel, cluster, token, export."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from utilon.cli.common import err, key_values, out
from utilon.cli.common import errors as _errors
from utilon.errors import ScenarioError, UtilonError
from utilon.service.client import DEFAULT_SERVER, Client

if TYPE_CHECKING:
    from rich.table import Table

ServerOpt = Annotated[list[str] | None, typer.Option(
    "--server", envvar="UTILON_SERVER", show_default=DEFAULT_SERVER,
    help="the service's URL (env UTILON_SERVER); for an active server and its standby give "
    "both (repeat --server, or separate with commas): requests go to whichever is active")]
TokenOpt = Annotated[str | None, typer.Option(
    "--token", envvar="UTILON_TOKEN", help="your API token (env UTILON_TOKEN)",
    show_default=False)]
TenantsOpt = Annotated[Path, typer.Option(
    "--tenants", help="the tenants file: token hashes and weights")]

token_app = typer.Typer(help="API tokens of the service's tenants and admins.",
                        no_args_is_help=True)


def default_cluster() -> dict[str, Any]:
    """This machine as one logical machine per core, one slot each (as examples/live-mix)."""
    return {"machines": [{"id": "local", "count": max(1, os.cpu_count() or 1),
                          "capacity": {"slots": 1, "mem": 4}}]}


def serve(
    scenario: Annotated[Path | None, typer.Argument(
        help="scenario whose cluster: (and policies:) the service owns; its jobs are not "
        "submitted (default: this machine, one slot per core)", show_default=False)] = None,
    policy: Annotated[str, typer.Option(
        "--policy", "-p", help="policy name (`default`: triage, utilon's own)")] = "default",
    param: Annotated[list[str] | None, typer.Option("--param", help="policy parameter "
                                                    "KEY=VALUE (repeatable)")] = None,
    db: Annotated[str, typer.Option("--db", help="the store: a SQLite file, or a database "
                                    "URL (postgresql://...)")] = "utilon.db",
    tenants: TenantsOpt = Path("tenants.yaml"),
    state_dir: Annotated[Path | None, typer.Option(
        "--state-dir", help="where job inputs and outputs go (default: next to the db)",
        show_default=False)] = None,
    host: Annotated[str, typer.Option("--host")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8765,
    backend: Annotated[str, typer.Option("--backend", "-b", help="local | ray")] = "local",
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster to "
                                                    "connect to (default: start one here)")]
    = None,
    runs: Annotated[Path, typer.Option(
        "--runs", help="folder of past runs the dashboard can open (what utilon report reads)")]
    = Path("runs"),
    admission: Annotated[str, typer.Option(
        "--admission", help="reject: refuse a job whose deadline it cannot meet even alone "
        "on the whole cluster; accept: take it anyway (a job may override with admission:)")]
    = "reject",
    prep_workers: Annotated[int, typer.Option(
        "--prep-workers", min=1, max=64, help="inputs prepared at once (word count's text, "
        "sort's records), fairly across tenants")] = 2,
    public_metrics: Annotated[bool, typer.Option(
        "--public-metrics", help="serve /metrics to anyone (default: it needs a token; an "
        "admin's shows every tenant, a tenant's only its own series)")] = False,
    advertise: Annotated[str | None, typer.Option(
        "--advertise", help="this server's URL as clients reach it, which a standby names "
        "in its 503s (default: http://HOST:PORT)", show_default=False)] = None,
    lease_ttl: Annotated[float, typer.Option(
        "--lease-ttl", min=1.0, max=600.0, help="PostgreSQL store: seconds the active "
        "server's lease lasts unless renewed; a standby takes over about this long after the "
        "active one dies")] = 5.0,
) -> None:
    """Run utilon as a long-running scheduler service: an HTTP API (OpenAPI at /docs) that
    takes jobs at any time and schedules them live under POLICY, with durable state."""
    with _errors():
        import uvicorn

        from utilon.policies import make_policy, policy_class
        from utilon.runner import make_backend, scenario_params
        from utilon.scenario import build_cluster, parse_scenario, read_scenario
        from utilon.service.api import create_app
        from utilon.service.engine import ServiceEngine
        from utilon.service.lease import Lease, holder_id, lock_sqlite
        from utilon.service.store import Store
        from utilon.service.tenants import TenantBook

        book = TenantBook.load(tenants)
        if scenario is not None:
            spec = read_scenario(scenario)
            where = f"{scenario}: "
            if spec.cluster.capacity:
                raise UtilonError("the service's cluster has no capacity timeline: its "
                                  "machines are what it starts with", where=f"{where}"
                                  "cluster.capacity", fix="serve a copy without capacity:")
        else:
            spec = parse_scenario({"name": "service", "cluster": default_cluster(),
                                   "workload": {}}, "<default cluster>")
            where = ""
        policy_class(policy)
        params = {**scenario_params(spec, policy), **key_values(param, "--param", "k=4")}
        pol = make_policy(policy, params, where=f"{where}policies.{policy}")
        cluster = build_cluster(spec.cluster, where)
        be = make_backend(backend, ray_address=ray_address)
        store = Store(db)
        sdir = state_dir or (Path(db).resolve().parent / "utilon-state"
                             if "://" not in db else Path("utilon-state"))
        address = (advertise or _address(host, port)).rstrip("/")
        # one server per SQLite store (a second is refused); on PostgreSQL a lease makes a
        # second server the standby (docs/service.md#a-standby-server)
        lease = None
        sqlite_lock = lock_sqlite(store, address) if store.sqlite else None
        if not store.sqlite:
            lease = Lease(store, holder_id(), address, ttl=lease_ttl)
        engine = ServiceEngine(store, spec, cluster, pol, be, sdir, weights=book.weight,
                               admission=admission, seed=spec.seed, limits=book.limits,
                               caps_running=book.caps_running, prep_workers=prep_workers,
                               lease=lease, on_deposed=_exit_deposed,
                               # a standby's local workers are its own, idle until it takes
                               # over; on Ray they would hold the active server's CPUs
                               warm_standby=backend == "local")
        app = create_app(engine, book, runs_dir=runs, public_metrics=public_metrics)
        err.print(f"utilon serve: {policy} on {len(cluster.machines)} machines ({backend}), "
                  f"store {store.safe_url}; dashboard {address}/, API {address}/docs, "
                  f"metrics {address}/metrics"
                  + ("; active once it holds the store's lease, the standby until then"
                     if lease is not None else ""))
        # no X-Forwarded-For rewriting (nothing uses a client's address) and no access log (not
        # shown at this level): per-request work a burst of submissions paid for nothing
        uvicorn.run(app, host=host, port=port, log_level="warning", proxy_headers=False,
                    access_log=False)
        del sqlite_lock  # held until here: the server's life


def _address(host: str, port: int) -> str:
    """This server's URL as others reach it: a wildcard host is this machine's name."""
    import socket

    if host in ("0.0.0.0", "::", ""):
        host = socket.getfqdn()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _exit_deposed(reason: str) -> None:
    """This server lost the lease (its engine has stopped dispatching and killed its tasks):
    exit at once, writing nothing more; a supervisor restarts it, as the standby."""
    err.print(f"utilon serve: no longer the active server ({reason}); exiting with status 3 "
              "(restarted, it is the standby)")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(3)


def _jobs_in(path: Path) -> list[dict[str, Any]]:
    """A job file: one job mapping, a list of them, or a mapping with ``jobs:``."""
    from utilon.scenario.load import read_data

    data = read_data(path)
    if isinstance(data, dict) and "jobs" in data:
        data = data["jobs"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data or not all(isinstance(j, dict) for j in data):
        raise ScenarioError("expected a job (a mapping), a list of jobs, or jobs: [...]",
                            where=str(path), fix="see docs/service.md#submitting-jobs")
    return data


def submit(
    job_file: Annotated[Path, typer.Argument(help="a job (YAML/JSON): the scenario's job "
                                             "format without submit; or a list of jobs")],
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """Submit jobs to a running service."""
    with _errors(), Client(server, token) as c:
        jobs = _jobs_in(job_file)
        t = _job_table("submitted")
        for j in jobs:
            t.add_row(*_job_cells(c.submit(j)))
        out.print(t)


def jobs_cmd(
    state: Annotated[list[str] | None, typer.Option("--state", help="queued, running, "
                                                    "finished, cancelled, failed")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="(admins) one tenant")] = None,
    limit: Annotated[int, typer.Option("--limit")] = 50,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """List jobs (yours; an admin's token lists every tenant's), newest first."""
    with _errors(), Client(server, token) as c:
        page = c.jobs(states=state, tenant=tenant, limit=limit)
        t = _job_table(f"{page['total']} job(s)" + (f", newest {len(page['jobs'])}"
                                                    if page["total"] > len(page["jobs"])
                                                    else ""))
        for j in page["jobs"]:
            t.add_row(*_job_cells(j))
        out.print(t)


def job_cmd(job_id: Annotated[str, typer.Argument(help="job id")],
            server: ServerOpt = None, token: TokenOpt = None,
            as_json: Annotated[bool, typer.Option("--json", help="the API's answer as JSON")]
            = False) -> None:
    """One job: its state, tasks, estimated completion, utility and deadline status."""
    from rich.table import Table

    with _errors(), Client(server, token) as c:
        j = c.job(job_id)
        if as_json:
            out.print_json(json.dumps(j))
            return
        t = Table(title=f"job {j['id']}", title_justify="left", show_header=False)
        live = j.get("live") or {}
        row = (j.get("result") or {}).get("row") or {}
        prep = live.get("preparation") or {}
        for k, v in (("tenant", j["tenant"]), ("state", j["state"]),
                     ("submitted", _t(j["submitted"])), ("goal", _t(j["goal"])),
                     ("started", _t(j["started"])), ("finished", _t(j["finished"])),
                     ("input", _prep(prep)),
                     ("tasks", f"{live.get('tasks_done', '–')} done, "
                               f"{live.get('tasks_running', '–')} running of "
                               f"{live.get('tasks', '–')}" if live else "–"),
                     ("estimated completion", _t(live.get("estimated_completion"))),
                     ("deadline", live.get("deadline_status", "–") if live else
                      ("missed" if row.get("missed") else "met" if row else "–")),
                     ("utility", f"{live.get('utility_now', row.get('utility', '–'))}"),
                     ("verification", json.dumps((j.get("result") or {})
                                                 .get("verification"))),
                     ("reason", j["reason"] or "–")):
            t.add_row(k, str(v))
        out.print(t)


def cancel_cmd(job_id: Annotated[str, typer.Argument(help="job id")],
               server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Cancel a job: its running tasks are killed and it never finishes."""
    with _errors(), Client(server, token) as c:
        j = c.cancel(job_id)
        out.print(f"{j['id']}: {j['state']}"
                  + (" (cancel requested)" if j["state"] in ("queued", "running") else ""))


def cluster_cmd(server: ServerOpt = None, token: TokenOpt = None) -> None:
    """The cluster: machines, capacity and use, allocation per job and tenant; the policy."""
    from rich.table import Table

    with _errors(), Client(server, token) as c:
        cl = c.cluster()
        pol = c.policy()
        slot = cl["slot_resource"]
        t = Table(title=f"machines ({slot} in use / capacity)", title_justify="left")
        for col in ("machine", "up", slot, "tasks"):
            t.add_column(col)
        for m in cl["machines"]:
            t.add_row(m["id"], "yes" if m["up"] else "no",
                      f"{m['used'].get(slot, 0):g} / {m['capacity'].get(slot, 0):g}",
                      str(m["tasks"]))
        out.print(t)
        for title, alloc in (("tenants", cl["allocation"]["tenants"]),
                             ("jobs", cl["allocation"]["jobs"])):
            a = Table(title=f"allocation per {title[:-1]} ({slot})", title_justify="left")
            a.add_column(title[:-1])
            a.add_column(slot, justify="right")
            for k, v in sorted(alloc.items(), key=lambda kv: -kv[1]):
                a.add_row(k, f"{v:g}")
            out.print(a)
        p50, p95 = pol["decide_ms_p50"], pol["decide_ms_p95"]
        out.print(f"policy {pol['name']}: {pol['decisions']} decisions, decide p50 "
                  f"{_ms(p50)} / p95 {_ms(p95)} (last {pol['window']})")


def _prep(p: dict[str, Any]) -> str:
    """A job's input preparation, as ``utilon job`` shows it."""
    phase = p.get("phase")
    if phase == "waiting":
        return f"waiting to be prepared ({p['waited_s']:.1f} s so far)"
    if phase == "preparing":
        return f"being prepared ({p['prep_s']:.1f} s so far, {p['written_mb']:.1f} MB " \
               f"of {p['input_mb']:.1f})"
    if phase == "done" and p.get("prep_s") is not None:
        return f"prepared in {p['prep_s']:.1f} s"
    return "–"


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f} ms"


def _t(x: float | None) -> str:
    return "–" if x is None else f"{x:.1f} s"


def _job_table(title: str) -> Table:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for col in ("id", "tenant", "state", "submitted s", "goal s", "finished s", "deadline"):
        t.add_column(col)
    return t


def _job_cells(j: dict[str, Any]) -> list[str]:
    deadline = "–"
    if j.get("missed") is not None:
        deadline = "[red]missed[/]" if j["missed"] else "[green]met[/]"
    return [j["id"], j["tenant"], j["state"], _t(j["submitted"]), _t(j.get("goal")),
            _t(j.get("finished")), deadline]


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Argument(help="tenant (or admin) name")],
    tenants: TenantsOpt = Path("tenants.yaml"),
    admin: Annotated[bool, typer.Option("--admin", help="an admin: sees every tenant")]
    = False,
    weight: Annotated[float, typer.Option("--weight", help="the tenant's weight (multiplies "
                                          "its jobs' weights)")] = 1.0,
) -> None:
    """Create (or replace) NAME's token; prints the token once and stores only its hash."""
    from utilon.service.tenants import create_token

    with _errors():
        token = create_token(tenants, name, admin=admin, weight=weight)
        err.print(f"{'admin' if admin else 'tenant'} {name}: token stored hashed in {tenants}; "
                  "it is shown only now:")
        out.print(token, highlight=False)


def export_cmd(
    db: Annotated[str, typer.Option("--db", help="the service's store")] = "utilon.db",
    out_dir: Annotated[Path, typer.Option("--out", help="directory to write")] = Path(
        "runs/service"),
) -> None:
    """Write the store's finished jobs as a batch run's files (jobs.csv, summary.json,
    provenance.json, verification.json), readable by `utilon report`."""
    from utilon.service.export import export

    with _errors():
        n = export(db, out_dir)
        out.print(f"{n} finished job(s): {out_dir}/jobs.csv, summary.json, provenance.json, "
                  "verification.json")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("submit")(submit)
    app.command("jobs")(jobs_cmd)
    app.command("job")(job_cmd)
    app.command("cancel")(cancel_cmd)
    app.command("cluster")(cluster_cmd)
    app.command("export")(export_cmd)
    app.add_typer(token_app, name="token")


__all__ = ["register"]
