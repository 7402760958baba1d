"""Turns (LABELS.md R1): one speaker's floor-taking events chained by ``continues``.

The one home of turn chaining, for the scripted planner, the clock, the labels and the report.
Both functions work on planned and placed events alike (anything with ``id``, ``speaker``,
``floor_intent``, ``relation`` and ``attach_to``).
"""

from __future__ import annotations

from typing import Mapping, Sequence, TypeVar

E = TypeVar("E")


def turn_up_to(ev: E, by_id: Mapping[str, E]) -> list[E]:
    """``ev``'s turn from its first event up to ``ev`` itself: the ``continues`` links followed
    back while the event each one attaches to is in ``by_id``."""
    chain = [ev]
    while chain[0].relation == "continues" and chain[0].attach_to in by_id:
        chain.insert(0, by_id[chain[0].attach_to])
    return chain


def chain_turns(events: Sequence[E], speaker: str) -> list[list[E]]:
    """The turns of ``speaker`` among ``events`` (taken in the order given): its floor events
    (``floor_intent`` not ``none``), an event that ``continues`` the last event of a turn joining
    that turn, any other starting a new one."""
    chains: list[list[E]] = []
    chain_of: dict[str, int] = {}
    for ev in events:
        if ev.speaker != speaker or ev.floor_intent == "none":
            continue
        idx = chain_of.get(ev.attach_to or "") if ev.relation == "continues" else None
        if idx is not None and chains[idx][-1].id == ev.attach_to:
            chains[idx].append(ev)
        else:
            chains.append([ev])
            idx = len(chains) - 1
        chain_of[ev.id] = idx
    return chains
