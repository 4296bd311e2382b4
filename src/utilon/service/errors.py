"""The service's refusals: a request it will not serve is a ``RequestError`` with the HTTP
status (4xx) the API answers, and one line naming the field and the fix."""

from __future__ import annotations

from utilon.errors import UtilonError


class RequestError(UtilonError):
    """A request the service refuses (HTTP 4xx): ``status`` says which."""

    def __init__(self, message: str, *, status: int = 422, where: str = "",
                 fix: str = "") -> None:
        super().__init__(message, where=where, fix=fix)
        self.status = status
