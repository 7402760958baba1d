"""A plan as a transcript to read: one line per event, who, act, tags, and what is said."""

from __future__ import annotations

SPEAKER = {"user": "U", "system": "S", "third_party": "T", "background": "B"}


def who(e) -> str:
    """``U``/``S``/...; in a group session the person and to whom: ``maya>system``, ``S>leo``."""
    if getattr(e, "addressee", None) is None and getattr(e, "person", None) is None:
        return SPEAKER.get(e.speaker, e.speaker)
    return f"{e.person or SPEAKER.get(e.speaker, e.speaker)}>{e.addressee or '-'}"


def transcript(plan) -> str:
    lines = [f"# {plan.session_id}  {plan.scenario_id}  ({plan.language})"]
    for e in plan.events:
        how = e.relation or "start"
        if e.relation in ("interrupts", "backchannels_on") and e.attach_word is not None:
            how += f"@{e.attach_to}:{e.attach_word}"
        elif e.attach_to:
            how += f"@{e.attach_to}"
        tags = f" [{', '.join(e.phenomena)}]" if e.phenomena else ""
        lines.append(f"{e.id:>4} {who(e)} {e.act:<20} {how:<24} {e.text}{tags}")
    for w in plan.work:
        state = "cancelled" if w.cancelled_by else w.outcome
        lines.append(f"  work {w.work_id} {w.tool} ({state}): {w.objective} -> {w.result_text}")
    return "\n".join(lines)
