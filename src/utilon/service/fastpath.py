"""``POST /v1/jobs`` without FastAPI's machinery for each request.

A burst of submissions is the service's hottest path, and on two cores shared by the server,
its scheduler and the clients, FastAPI's per-request work (solving dependencies, validating
the body against ``dict[str, Any]``, validating and encoding the response model) cost about as
much CPU as checking and building the job itself.  ``FastSubmit`` answers an ordinary
submission -- a JSON object sent as ``application/json`` -- by calling ``handle`` directly; any
other body (not JSON, not an object, another content type) goes on to the FastAPI route, which
answers it as it always did.  The route stays the API's documented definition (OpenAPI), and
``handle`` is the route's own code, so both give the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

Handle = Callable[[str | None, dict[str, Any]], Awaitable[bytes | Response]]
"""(the Authorization header, the job) -> the 201's JSON body, or another answer"""


class FastSubmit:
    def __init__(self, app: ASGIApp, path: str, handle: Handle) -> None:
        self.app = app
        self.path = path
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST"
                or scope["path"] != self.path):
            await self.app(scope, receive, send)
            return
        authorization = content_type = None
        for k, v in scope["headers"]:
            if k == b"authorization":
                authorization = v.decode("latin-1")
            elif k == b"content-type":
                content_type = v
        body = b""
        more = True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":  # the client went away
                return
            body += msg.get("body", b"")
            more = bool(msg.get("more_body", False))
        job: Any = None
        if content_type is not None and content_type.split(b";")[0].strip().lower() == (
                b"application/json"):
            try:
                job = json.loads(body)
            except ValueError:  # (also bad UTF-8): the route says what is wrong
                job = None
        if not isinstance(job, dict):
            await self.app(scope, _replay(body, receive), send)
            return
        answer = await self.handle(authorization, job)
        if isinstance(answer, Response):
            await answer(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(answer)).encode())]})
        await send({"type": "http.response.body", "body": answer})


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` that gives ``body`` once more (it was read already)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
