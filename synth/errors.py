"""Errors a user can cause. The CLI prints them as one line and exits non-zero."""

from __future__ import annotations


class UserError(Exception):
    """A problem with the user's input: the message names the file, field and value."""


class SessionReject(Exception):
    """An expected failure of one session: it becomes a reject row, the run goes on."""

    def __init__(self, stage: str, reason: str, detail: str = ""):
        super().__init__(f"{stage}: {reason}" + (f" ({detail})" if detail else ""))
        self.stage = stage
        self.reason = reason
        self.detail = detail


def short_error(e: Exception) -> str:
    """One line for an error: a pydantic ``ValidationError`` as ``field: message`` of its first
    error (its text ends in a documentation link, not in what went wrong); anything else, the last
    line of its text."""
    errors = getattr(e, "errors", None)
    if callable(errors) and type(e).__name__ == "ValidationError":
        first = errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        msg = first.get("msg", "").removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    lines = [x for x in str(e).splitlines() if x.strip()]
    return lines[-1].strip() if lines else type(e).__name__
