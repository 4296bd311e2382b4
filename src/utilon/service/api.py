"""The HTTP API of ``utilon serve`` (FastAPI): versioned under ``/v1``, OpenAPI at ``/docs``.

Every request but ``/v1/health`` carries ``Authorization: Bearer <token>``; a tenant's token
sees and changes only that tenant's jobs, an admin's sees all.  Every error is a JSON body
``{"error": "<one line naming the field>", "field": ..., "fix": ...}`` with a 4xx status (5xx
only if the service itself is broken).  A request body larger than its sender's
``max_body_kb`` is refused (413) before it is parsed (``BodyLimit``).  An ordinary
``POST /v1/jobs`` is answered before FastAPI's per-request layers (``ServiceApp``,
``service.fastpath``): a burst of submissions is the service's hottest path.

A job is named by its id (``pi-1``, its tenant's own name for it) or by ``TENANT:ID``, which is
how an admin names one tenant's job when several tenants have jobs with that id.

A standby server (``service.lease``), one taking over, or one that lost the lease answers every
``/v1`` request but ``/v1/health`` with 503, a ``Retry-After`` and the active server's address
(``StandbyGate``): clients retry there.
"""


import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Body, Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from utilon.service.engine import ServiceEngine
from utilon.service.errors import RequestError
from utilon.service.fastpath import FastSubmit
from utilon.service.heap import server_gc
from utilon.service.metrics import Metrics, own_series
from utilon.service.runs import ReportError, list_runs, read_run, resolve
from utilon.service.store import STATES, JobRecord, LeaseLost
from utilon.service.tenants import Principal, TenantBook

API_VERSION = "v1"
STATIC = Path(__file__).resolve().parent / "static"
ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}


class ErrorOut(BaseModel):
    error: str
    field: str = ""
    fix: str = ""
    active: str = Field("", description="in a 503 of a standby server: the active server's "
                        "address")


STORY_RECENT = 20  # the most recent story entries a job view shows (a job keeps up to 32)


class JobOut(BaseModel):
    id: str = Field(description="the id its tenant gave it (ids are per tenant)")
    ref: str = Field("", description="TENANT:ID, the name that is unique across tenants")
    tenant: str
    state: Literal["queued", "running", "finished", "cancelled", "failed"]
    submitted: float = Field(description="service time (s since the store's epoch)")
    goal: float | None = Field(None, description="the utility's goal (deadline), service time")
    started: float | None = None
    finished: float | None = None
    cancel_requested: bool = False
    reason: str = ""
    missed: bool | None = Field(None, description="once finished: after its goal")
    utility: float | None = Field(None, description="once finished: the utility it earned")
    live: dict[str, Any] | None = Field(
        None, description="while the scheduler holds it: tasks done/running, estimated "
        "completion, current utility, deadline status (list: with live=true)")


class JobDetail(JobOut):
    spec: dict[str, Any]
    result: dict[str, Any] | None = Field(
        None, description="once finished: its jobs.csv row, output directory, verification")
    events: list[dict[str, Any]] = Field(default_factory=list)
    attempts: list[dict[str, Any]] = Field(default_factory=list)
    story: list[dict[str, Any]] = Field(
        default_factory=list, description="the scheduler's recent story of the job: grants, "
        "the policy's reasons, kills and re-queues, each with the id of its cause "
        "(docs/explain.md); empty once the job's story was dropped or the server restarted")


class JobPage(BaseModel):
    jobs: list[JobOut]
    total: int
    limit: int
    offset: int


class Health(BaseModel):
    status: Literal["ok", "stopped", "error", "standby"]
    error: str = ""
    role: Literal["active", "standby", "starting", "deposed", "stopped"] = Field(
        "active", description="with a standby server on the store: which one this is "
        "(starting: taking over)")
    active: str = Field("", description="the active server's address, as this one last saw "
                        "the lease ('' without a standby, or when none holds it)")
    version: str = API_VERSION
    epoch: float = Field(description="wall-clock second (Unix) of service time 0")
    now: float = Field(description="service time now")
    incarnation: int
    uptime_s: float
    backend: str
    policy: str
    jobs: dict[str, int]


def job_out(rec: JobRecord) -> JobOut:
    row = (rec.result or {}).get("row") or {}
    # constructed, not validated: every field comes from the store as the service wrote it
    # (validation was a twentieth of a submission's CPU)
    return JobOut.model_construct(
        id=rec.name, ref=f"{rec.tenant}:{rec.name}", tenant=rec.tenant, state=rec.state,
        submitted=rec.submitted, goal=rec.goal, started=rec.started, finished=rec.finished,
        cancel_requested=rec.cancel_requested, reason=rec.reason, missed=row.get("missed"),
        utility=row.get("utility"), live=None)


def _error(status: int, message: str, field: str = "", fix: str = "",
           headers: dict[str, str] | None = None, **extra: str) -> JSONResponse:
    return JSONResponse(status_code=status, headers=headers,
                        content={"error": message, "field": field, "fix": fix, **extra})


RETRY_AFTER = "1"
"""seconds a client waits before it asks again when no server is active yet"""


def _not_active(role: str, active: str) -> JSONResponse:
    """The answer of a server that is not the active one: 503, where the active one is."""
    what = {"standby": "this server is the standby",
            "starting": "this server is taking over as the active one",
            "deposed": "this server lost its lease to another"}.get(role, "this server is "
                                                                    "not active")
    where = f"; the active server is {active}" if active else ""
    return _error(503, what + where, "server", "retry on the active server (the CLI does, "
                  "given every server's address: --server A --server B)",
                  headers={"Retry-After": RETRY_AFTER}, active=active)


class ServiceApp(FastAPI):
    """The API: a FastAPI app whose HTTP requests first pass ``front`` (``create_app`` sets
    it): the standby gate, the body limit and the fast submission path (``FastSubmit``) run
    before FastAPI's own per-request layers, which then serve the rest."""

    front: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is not None and scope["type"] == "http":
            await self.front(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


class StandbyGate:
    """Answer 503 (``_not_active``) to every ``/v1`` request but ``/v1/health`` while the
    engine is not the active server; the dashboard's page, ``/docs`` and ``/metrics`` are
    served by every server."""

    def __init__(self, app: ASGIApp, engine: ServiceEngine) -> None:
        self.app = app
        self.engine = engine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        engine = self.engine
        if (scope["type"] == "http" and engine.role in ("standby", "starting", "deposed")
                and scope["path"].startswith(f"/{API_VERSION}/")
                and scope["path"] != f"/{API_VERSION}/health"):
            await _not_active(engine.role, engine.active_address())(scope, receive, send)
            return
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuse (413) a request body larger than ``limit(authorization header)`` bytes, before
    anything parses it: at once when its Content-Length says so, else as soon as the bytes
    streamed in pass the limit (a chunked body has no length)."""

    def __init__(self, app: ASGIApp, limit: Callable[[str | None], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        auth = headers.get(b"authorization")
        limit = self.limit(auth.decode("latin-1") if auth is not None else None)
        declared = headers.get(b"content-length", b"")
        if declared.strip().isdigit() and int(declared) > limit:
            await self._refuse(limit, int(declared), scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":  # the client went away
                return
            body += msg.get("body", b"")
            if len(body) > limit:
                await self._refuse(limit, None, scope, receive, send)
                return
            more = bool(msg.get("more_body", False))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(limit: int, size: int | None, scope: Scope, receive: Receive,
                      send: Send) -> None:
        got = f"{size} bytes" if size is not None else "more"
        await _error(413, f"a request body of {got}; the limit max_body_kb is "
                     f"{limit // 1024} ({limit} bytes)", "body",
                     "send a smaller job (see docs/service.md#quotas-and-limits)")(
            scope, receive, send)


def create_app(engine: ServiceEngine, tenants: TenantBook, *, manage: bool = True,
               runs_dir: Path | None = None, public_metrics: bool = False) -> FastAPI:
    """The API over a built engine; with ``manage`` the app starts the engine when it starts
    and checkpoints it when it stops (SIGTERM through uvicorn).  ``runs_dir`` is where the
    dashboard finds past runs (the files ``utilon report`` reads).  ``/metrics`` needs a token
    (an admin's shows every tenant, a tenant's only its own series) unless
    ``public_metrics``."""
    metrics = Metrics(engine)
    runs_root = runs_dir if runs_dir is not None else Path("runs")

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if manage:
            engine.start()
        try:
            with server_gc() if manage else nullcontext():
                yield
        finally:
            if manage:
                engine.stop()

    app = ServiceApp(title="utilon", version=API_VERSION, lifespan=lifespan,
                     description="A scheduler service: submit jobs with deadlines or "
                     "utilities; utilon's policies schedule them on the cluster it owns.")

    def body_limit(authorization: str | None) -> int:
        token = authorization[7:].strip() if authorization and authorization.lower(
            ).startswith("bearer ") else None
        who = tenants.authenticate(token)
        return 1024 * tenants.limits(who.name if who is not None else "").max_body_kb


    @app.exception_handler(RequestError)
    async def _refused(_r: Request, e: RequestError) -> JSONResponse:
        return _error(e.status, e.one_line(), e.where, e.fix)

    @app.exception_handler(LeaseLost)
    async def _deposed(_r: Request, _e: LeaseLost) -> JSONResponse:
        # the transaction was refused before it wrote anything: safe to send again
        return _not_active("deposed", engine.active_address())

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        first = e.errors()[0] if e.errors() else {"loc": (), "msg": "invalid request"}
        loc = ".".join(str(x) for x in first.get("loc", ()) if x not in ("body",))
        return _error(422, f"{loc or 'request'}: {first.get('msg', 'invalid')}", loc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_r: Request, e: StarletteHTTPException) -> JSONResponse:
        detail = e.detail if isinstance(e.detail, str) else str(e.detail)
        return _error(e.status_code, detail)

    def who_is(authorization: str | None) -> Principal:
        token = None
        if authorization and authorization.lower().startswith("bearer "):
            token = authorization[7:].strip()
        who = tenants.authenticate(token)
        if who is None:
            raise RequestError("missing or unknown token", status=401,
                                  where="Authorization",
                                  fix="send Authorization: Bearer <token> (utilon token create)")
        return who

    async def principal(authorization: Annotated[str | None, Header()] = None) -> Principal:
        # async: a sync dependency would cost every request a hop to the thread pool
        return who_is(authorization)

    Who = Annotated[Principal, Depends(principal)]
    responses: dict[int | str, dict[str, Any]] = {
        s: {"model": ErrorOut} for s in (400, 401, 403, 404, 409, 413, 422, 429, 503)}

    @app.get(f"/{API_VERSION}/health", response_model=Health)
    def health() -> Health:
        status = "error" if engine.error else ("ok" if engine.running else "standby" if
                                                engine.role in ("standby", "starting")
                                                else "stopped")
        return Health(status=status, error=engine.error, epoch=engine.store.epoch,  # type: ignore[arg-type]
                      role=engine.role, active=engine.active_address(),  # type: ignore[arg-type]
                      now=engine.now() if engine.running else 0.0,
                      incarnation=engine.store.incarnation,
                      uptime_s=time.time() - engine.stats.started_wall
                      if engine.stats.started_wall else 0.0,
                      backend=engine.backend.name, policy=engine.policy.name,
                      jobs=engine.store.counts())

    @app.post(f"/{API_VERSION}/jobs", status_code=201, response_model=JobOut,
              responses=responses)
    async def submit(who: Who, job: Annotated[dict[str, Any], Body(
            description="one job in the scenario's job format (docs/scenario.md#jobs) "
            "without submit: id (optional), stages or run, utility, weight, priority, class, "
            "tenant (admins only), admission (reject|accept)",
            examples=[{"id": "pi-1", "run": {"kind": "pi", "samples": 2000000, "tasks": 4},
                       "utility": {"kind": "deadline", "deadline": 120}}])]) -> JobOut:
        return await accept(who, job)  # (most requests are answered by FastSubmit)

    async def accept(who: Principal, job: dict[str, Any]) -> JobOut:
        tenant = job.get("tenant")
        if who.admin and tenant is not None and tenant not in tenants.names:
            # issue 46: an admin could submit for a tenant no token belongs to
            raise RequestError(f"no tenant {str(tenant)[:80]!r}", status=422, where="tenant",
                               fix="one of the tenants file's names (utilon token create)")
        # on the event loop: checking and building a job is CPU work, and the store's
        # writer commits it with those of other requests (group commit) while the loop goes
        # on; the answer waits for that commit, so a 201 means durable
        return job_out(await asyncio.wrap_future(engine.submit_nowait(who, job)))

    async def fast_submit(authorization: str | None, job: dict[str, Any]) -> bytes | Response:
        """The route's answers (its exception handlers' included), for FastSubmit: the 201's
        JSON body, or the refusal."""
        try:
            out = await accept(who_is(authorization), job)
        except RequestError as e:
            return _error(e.status, e.one_line(), e.where, e.fix)
        except LeaseLost:
            return _not_active("deposed", engine.active_address())
        return out.model_dump_json().encode()

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "dashboard.html", media_type="text/html")

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> FileResponse:
        if name not in ASSETS:
            raise RequestError(f"no asset {name!r}", status=404, where="name")
        return FileResponse(STATIC / name, media_type=ASSETS[name])

    @app.get("/metrics", include_in_schema=False)
    def prometheus(authorization: Annotated[str | None, Header()] = None) -> Response:
        text = metrics.render()
        if not public_metrics:
            who = who_is(authorization)
            if not who.admin:
                text = own_series(text, who.name)
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    @app.get(f"/{API_VERSION}/timeline", responses=responses)
    def timeline(who: Who, since: Annotated[float, Query(ge=-1e12, le=1e12)] = -1e12
                 ) -> dict[str, Any]:
        """Allocation of the slot resource over time (per tenant, and the largest jobs),
        with the capacity: one sample a second at most, the last hour."""
        return {"slot_resource": engine.cluster.slot_resource,
                "samples": engine.timeline(who, since)}

    @app.get(f"/{API_VERSION}/runs", responses=responses)
    def runs(who: Who) -> dict[str, Any]:
        """Past runs (simulations, comparisons, batch live runs, exports) under the
        service's runs folder: an admin sees all, a tenant the runs with jobs of its own,
        counted over its own jobs."""
        return {"root": str(runs_root) if who.admin else "",
                "runs": list_runs(runs_root, who)}

    @app.get(f"/{API_VERSION}/runs/{{path:path}}", responses=responses)
    def run(who: Who, path: str, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
            offset: Annotated[int, Query(ge=0, le=10**9)] = 0) -> dict[str, Any]:
        d = resolve(runs_root, path)
        if d is None:
            raise RequestError(f"no run {path!r}", status=404, where="path")
        try:
            return read_run(d, who, limit, offset)
        except ReportError as e:
            raise RequestError(e.one_line(), status=422, where="path") from None

    @app.get(f"/{API_VERSION}/jobs", response_model=JobPage, responses=responses)
    def list_jobs(who: Who,
                  state: Annotated[list[Literal["queued", "running", "finished",
                                                "cancelled", "failed"]] | None,
                                   Query(description="filter by state (repeatable)")] = None,
                  tenant: Annotated[str | None, Query(max_length=64)] = None,
                  limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                  offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
                  live: Annotated[bool, Query(description="add each job's live view "
                                              "(estimated completion, utility now, "
                                              "deadline status)")] = False) -> JobPage:
        if tenant is not None and not who.may_see(tenant):
            raise RequestError(f"tenant {who.name!r} cannot see {tenant!r}'s jobs",
                                  status=403, where="tenant")
        scope = tenant if who.admin else who.name
        recs, total = engine.store.page(tenant=scope, states=tuple(state or ()), limit=limit,
                                        offset=offset)
        out = []
        for r in recs:
            j = job_out(r)
            if live and r.state in ("queued", "running"):
                j.live = engine.live_view(r.id)
            out.append(j)
        return JobPage(jobs=out, total=total, limit=limit, offset=offset)

    def _own(who: Principal, ref: str) -> JobRecord:
        """The job ``ref`` (``ID`` or ``TENANT:ID``) names among those ``who`` may see."""
        owner, sep, name = ref.partition(":")
        if not sep:
            owner, name = "", ref
        if owner:
            scope = [owner] if who.may_see(owner) else []
        else:
            scope = tenants.everyone if who.admin else [who.name]
        found = [r for r in engine.store.find([f"{t}:{name}" for t in scope] + [name])
                 if r.tenant in scope and r.name == name]
        if not found:
            raise RequestError(f"no job {ref[:200]!r}", status=404, where="id")
        if len(found) > 1:
            owners = ", ".join(r.tenant for r in found)
            raise RequestError(f"jobs of several tenants have id {name!r} ({owners})",
                               status=409, where="id", fix=f"name one as TENANT:{name}")
        return found[0]

    @app.get(f"/{API_VERSION}/jobs/{{job_id}}", response_model=JobDetail, responses=responses)
    def get_job(who: Who, job_id: str) -> JobDetail:
        rec = _own(who, job_id)
        return JobDetail(**job_out(rec).model_dump(exclude={"live"}), spec=rec.spec,
                         live=engine.live_view(rec.id), result=rec.result,
                         events=engine.store.events_of(rec.id),
                         attempts=engine.store.attempts_of(rec.id), story=_story(rec.id))

    def _story(job_id: str) -> list[dict[str, Any]]:
        """The job's last ``STORY_RECENT`` story entries, as the core holds them now."""
        core = engine.core
        if core is None:
            return []
        with engine.lock:
            return core.story.of(job_id)[-STORY_RECENT:]

    @app.delete(f"/{API_VERSION}/jobs/{{job_id}}", status_code=202, response_model=JobOut,
                responses=responses)
    def cancel_job(who: Who, job_id: str) -> JobOut:
        return job_out(engine.cancel(who, _own(who, job_id).id))

    @app.get(f"/{API_VERSION}/cluster", responses=responses)
    def cluster(who: Who) -> dict[str, Any]:
        return engine.cluster_view(who)

    @app.get(f"/{API_VERSION}/policy", responses=responses)
    def policy(who: Who) -> dict[str, Any]:
        del who
        return engine.policy_view()

    # a request is refused by the gate (before its body is read) or the size limit (before
    # it is parsed); an ordinary submission is then answered without FastAPI's per-request
    # work (a tenth of a submission's CPU); everything else goes on to FastAPI
    behind = super(ServiceApp, app).__call__
    app.front = StandbyGate(BodyLimit(FastSubmit(behind, f"/{API_VERSION}/jobs", fast_submit),
                                      body_limit), engine)
    app.state.engine = engine
    app.state.states = STATES
    return app
