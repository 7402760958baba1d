"""The one retry loop of the LLM planner's requests (outline, plan, fill).

Each request kind is a ``Conversation``: how to ``ask`` with what it knows now, how to ``judge``
a reply (a result, or the errors to send back), how to ask again ``shorter`` after a reply cut at
``max_tokens`` (a cut reply is lost JSON: the same request would be cut again), and how to
``repair`` after a complete reply that failed (the reply goes back with its errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from .client import Reply

T = TypeVar("T")


class Conversation(Protocol[T]):
    def ask(self) -> Reply: ...

    def judge(self, reply: Reply) -> tuple[T | None, list[str]]: ...

    def shorter(self, reply: Reply) -> None: ...

    def repair(self, reply: Reply, errors: list[str]) -> None: ...


@dataclass
class Outcome(Generic[T]):
    """What a conversation ended with: its ``result`` (None: every attempt failed, ``errors`` are
    the last reply's), how many requests it took, how many replies were cut, the last reply."""

    result: T | None
    errors: list[str] = field(default_factory=list)
    attempts: int = 0
    cuts: int = 0
    reply: Reply | None = None


def converse(conversation: Conversation[T], attempts: int) -> Outcome[T]:
    """Ask until a reply is judged good or ``attempts`` requests were made."""
    errors: list[str] = []
    cuts, reply = 0, None
    for attempt in range(1, attempts + 1):
        reply = conversation.ask()
        result, errors = conversation.judge(reply)
        if result is not None:
            return Outcome(result, [], attempt, cuts, reply)
        if reply.finish_reason == "length":
            cuts += 1
            conversation.shorter(reply)
        else:
            conversation.repair(reply, errors)
    return Outcome(None, errors, attempts, cuts, reply)
