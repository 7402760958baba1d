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
