"""A small client of the service's API (what ``utilon submit/jobs/job/cancel/cluster`` use)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from utilon.errors import UtilonError

if TYPE_CHECKING:  # httpx loads with the first client: the CLI starts without it
    import httpx

DEFAULT_SERVER = "http://127.0.0.1:8765"


def _segment(value: str) -> str:
    """A job id as one path segment: ``../cluster`` must name a job, not another endpoint
    (issue 46), so every character outside the unreserved set is percent-encoded."""
    return quote(value, safe="")


class ClientError(UtilonError):
    """The server refused a request, or could not be reached."""


class Client:
    def __init__(self, server: str = DEFAULT_SERVER, token: str | None = None,
                 timeout: float = 30.0) -> None:
        if not server.startswith(("http://", "https://")):
            raise ClientError(f"server {server!r} is not an http(s) URL", where="--server",
                              fix=f"e.g. --server {DEFAULT_SERVER}")
        self.server = server.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        import httpx

        self._httpx = httpx
        self.http: httpx.Client = httpx.Client(base_url=self.server + "/v1", headers=headers,
                                 timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        try:
            r = self.http.request(method, path, **kw)
        except self._httpx.HTTPError as e:
            raise ClientError(f"cannot reach the server: {type(e).__name__}: {e}",
                              where=self.server,
                              fix="start it with `utilon serve`, or set --server / "
                                  "UTILON_SERVER") from None
        if r.status_code >= 400:
            try:
                body = r.json()
                msg, fix = str(body.get("error", r.text)), str(body.get("fix", "") or "")
            except ValueError:
                msg, fix = r.text.strip() or r.reason_phrase, ""
            raise ClientError(f"{r.status_code}: {msg}", where=self.server, fix=fix)
        return r.json()

    def health(self) -> dict[str, Any]:
        return dict(self._call("GET", "/health"))

    def submit(self, job: dict[str, Any]) -> dict[str, Any]:
        return dict(self._call("POST", "/jobs", json=job))

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
