"""A small client of the service's API (what ``utilon submit/jobs/job/cancel/cluster`` use).

**Several servers.**  Given the addresses of an active server and its standby
(``service.lease``), a request goes to the one that answered last and, while none answers it
(the connection is refused, or a 503 with ``Retry-After``: a standby, or a server taking
over), to the others in turn, a 503's ``active`` address first, for up to ``failover_wait``
seconds: longer than a takeover takes.  With one address there is one try, as before.

**A submission is sent twice only when that is safe.**  A request that never reached a server
(connection refused) goes to the next.  One that was sent and got no answer (the server died
in between) may have been accepted: it is sent again only if the job has an ``id``, and a
409 on that retry means the first one was, so the job is fetched and returned.  A job without
an id gets an error that says so.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from utilon.errors import UtilonError

if TYPE_CHECKING:  # httpx loads with the first client: the CLI starts without it
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8765"
FAILOVER_WAIT = 20.0
"""seconds a request keeps trying the servers while none is active (a takeover takes < 10)"""


def _segment(value: str) -> str:
    """A job id as one path segment: ``../cluster`` must name a job, not another endpoint
    (issue 46), so every character outside the unreserved set is percent-encoded."""
    return quote(value, safe="")


class ClientError(UtilonError):
    """The server refused a request, or could not be reached."""


def servers_of(server: str | Sequence[str] | None) -> list[str]:
    """The server addresses a ``--server`` value gives (repeated, or separated by commas)."""
    items = [server] if isinstance(server, str) else list(server or ())
    out: list[str] = []
    for item in items:
        for s in item.split(","):
            s = s.strip().rstrip("/")
            if not s:
                continue
            if not s.startswith(("http://", "https://")):
                raise ClientError(f"server {s!r} is not an http(s) URL", where="--server",
                                  fix=f"e.g. --server {DEFAULT_SERVER}")
            out.append(s)
    return list(dict.fromkeys(out)) or [DEFAULT_SERVER]


class _Sent(Exception):
    """A request was sent and no answer came back: it may have been acted on."""


class Client:
    def __init__(self, server: str | Sequence[str] | None = DEFAULT_SERVER,
                 token: str | None = None, timeout: float = 30.0, *,
                 failover_wait: float = FAILOVER_WAIT) -> None:
        self.servers = servers_of(server)
        self.failover_wait = failover_wait if len(self.servers) > 1 else 0.0
        self._at = 0  # the server that answered last: the active one
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        import httpx

        self._httpx = httpx
        # a short connect timeout: a dead host must not hold up trying its standby
        self.http: httpx.Client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)))

    @property
    def server(self) -> str:
        """The server that answered last (the first given, before any answered)."""
        return self.servers[self._at]

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, *, resend: bool, **kw: Any) -> httpx.Response:
        """The answer of the active server; ``_Sent`` when a request that must not be sent
        twice (``resend`` False) got no answer."""
        httpx = self._httpx
        end = time.monotonic() + self.failover_wait
        several = len(self.servers) > 1
        problem = ""
        while True:
            pause = 0.5
            order = [self._at] + [i for i in range(len(self.servers)) if i != self._at]
            k = 0
            while k < len(order):
                i = order[k]
                k += 1
                base = self.servers[i]
                try:
                    r = self.http.request(method, f"{base}/v1{path}", **kw)
                except (httpx.ConnectError, httpx.ConnectTimeout) as e:  # never sent
                    problem = f"{base}: {type(e).__name__}: {e}" if several else (
                        f"{type(e).__name__}: {e}")
                    continue
                except httpx.HTTPError as e:
                    if not resend:
                        raise _Sent(f"{base} went away before it answered: "
                                    f"{type(e).__name__}: {e}") from None
                    problem = f"{base} went away before it answered: {type(e).__name__}"
                    continue
                if several and r.status_code == 503 and "retry-after" in r.headers:
                    # a standby, or a server taking over: the active one is elsewhere
                    problem = f"{base}: 503: {_message(r)[0]}"
                    # at most half a second: a takeover is a matter of seconds, and a
                    # client that asks again soon sees the new active server soon
                    pause = min(max(_seconds(r.headers["retry-after"]), 0.1), 0.5)
                    hint = _active(r)
                    if hint in self.servers and self.servers.index(hint) in order[k:]:
                        j = self.servers.index(hint)  # try the active one next
                        order = order[:k] + [j] + [x for x in order[k:] if x != j]
                    continue
                self._at = i
                return r
            left = end - time.monotonic()
            if left <= 0:
                tried = ", ".join(self.servers)
                raise ClientError(
                    f"no active server among {tried} for {self.failover_wait:g} s "
                    f"(last: {problem})" if several else f"cannot reach the server: {problem}",
                    where=self.server, fix="start it with `utilon serve`, or set --server / "
                    "UTILON_SERVER (several: --server A --server B)")
            time.sleep(min(pause, left))

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self._send(method, path, resend=True, **kw)
        except _Sent as e:  # (only for requests that must not be resent)
            raise ClientError(str(e), where=self.server) from None
        return self._answer(r)

    def _answer(self, r: httpx.Response) -> Any:
        if r.status_code >= 400:
            msg, fix = _message(r)
            raise ClientError(f"{r.status_code}: {msg}", where=self.server, fix=fix)
        return r.json()

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/health"))

    def submit(self, job: dict[str, Any]) -> dict[str, Any]:
        job_id = job.get("id")
        try:
            r = self._send("POST", "/jobs", resend=False, json=job)
        except _Sent as e:
            if not isinstance(job_id, str) or not job_id:
                raise ClientError(f"{e}; the job may have been accepted", where=self.server,
                                  fix="look for it with `utilon jobs`; give jobs an id, and "
                                  "a submission is retried safely") from None
            r = self._send("POST", "/jobs", resend=True, json=job)
            if r.status_code == 409:  # the first one was accepted
                return self.job(job_id)
        return dict(self._answer(r))

    def jobs(self, *, states: list[str] | None = None, tenant: str | None = None,
             limit: int = 100, offset: int = 0) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if states:
            params["state"] = states
        if tenant:
            params["tenant"] = tenant
        return dict(self._call("GET", "/jobs", params=params))

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/jobs/{_segment(job_id)}"))

    def cancel(self, job_id: str) -> dict[str, Any]:
        return dict(self._call("DELETE", f"/jobs/{_segment(job_id)}"))

    def cluster(self) -> dict[str, Any]:
        return dict(self._call("GET", "/cluster"))

    def policy(self) -> dict[str, Any]:
        return dict(self._call("GET", "/policy"))


def _message(r: httpx.Response) -> tuple[str, str]:
    try:
        body = r.json()
        return str(body.get("error", r.text)), str(body.get("fix", "") or "")
    except (ValueError, AttributeError):
        return r.text.strip() or r.reason_phrase, ""


def _active(r: httpx.Response) -> str:
    try:
        return str(r.json().get("active") or "").rstrip("/")
    except (ValueError, AttributeError):
        return ""


def _seconds(value: str) -> float:
    try:
        return float(value)
    except ValueError:  # an HTTP date: not worth parsing
        return 1.0
