"""The one exception hierarchy of utilon.

Every error a user can cause carries enough context to be printed as a single line that names
the file, the field and the fix (``UtilonError.one_line``); the CLI prints exactly that line and
never a traceback.  Errors that can only come from a bug in utilon or in a policy
(``IllegalTransition``, ``InvalidDecision``) are still ``UtilonError``s so that a policy author
gets a precise message, but they indicate code to fix rather than input to fix.
"""

from __future__ import annotations


class UtilonError(Exception):
    """Base class: ``where`` is a file and/or field path, ``fix`` a hint for the user."""

    def __init__(self, message: str, *, where: str = "", fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where
        self.fix = fix

    def one_line(self) -> str:
        parts = [p for p in (self.where, self.message) if p]
        text = ": ".join(parts)
        if self.fix:
            text += f" (fix: {self.fix})"
        return " ".join(text.split())

    def __str__(self) -> str:
        return self.one_line()

    def __reduce__(self) -> tuple[object, ...]:
        # rebuilt without __init__ (subclasses take other arguments): an error raised in a
        # worker process of a parallel run must reach the CLI whole
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(cls: type[UtilonError], args: tuple[object, ...],
             state: dict[str, object]) -> UtilonError:
    e = cls.__new__(cls)
    e.args = args
    e.__dict__.update(state)
    return e


class ModelError(UtilonError):
    """A domain value is invalid (a utility that increases, a negative duration, ...)."""


class ScenarioError(UtilonError):
    """A scenario file is missing, malformed or inconsistent."""


class UnknownNameError(UtilonError):
    """A name (policy, distribution, utility kind, ...) is not registered."""

    def __init__(self, kind: str, name: str, valid: list[str] | tuple[str, ...], **kw: str) -> None:
        listing = ", ".join(sorted(valid))
        super().__init__(f"unknown {kind} {name!r}; valid: {listing}", **kw)
        self.kind = kind
        self.name = name
        self.valid = tuple(sorted(valid))


class ParameterError(UtilonError):
    """A policy (or other registered component) got a parameter it does not accept."""


class IllegalTransition(UtilonError):
    """A lifecycle (job, task, machine) was asked to make a move its table forbids."""


class InvalidDecision(UtilonError):
    """A policy returned a decision that violates the decision contract."""
