"""The phenomenon registry of LABELS.md §4: ids, families and the expected system behaviour.

Seeds name phenomena by these ids; the planner tags the events that realise them; the run
statistics count them. LABELS.md says "42 items" but its list has 45; the registry follows the
list.
"""

from __future__ import annotations

from typing import NamedTuple


class Phenomenon(NamedTuple):
    id: str
    family: str
    expected: str


_FAMILIES: dict[str, list[tuple[str, str]]] = {
    "turn_transitions": [
        ("smooth_exchange", "answer after a gap"),
        ("latched_start", "start in the last syllable of the user turn"),
        ("dispreferred_answer", "long gap or filler first"),
        ("system_question_back", "ask back, then listen"),
        ("proactive_opening", "system opens the session"),
        ("closing_sequence", "close and release"),
    ],
    "pauses": [
        ("phrase_boundary_pause", "keep listening"),
        ("long_thinking_pause", "keep listening"),
        ("trailing_conjunction", "keep listening"),
        ("list_dictation", "keep listening"),
        ("complete_sounding_pause", "keep listening"),
        ("silence_after_system_question", "keep listening"),
    ],
    "overlaps": [
        ("barge_in_new_request", "yield, then answer the new request"),
        ("correction_negation", "yield, then use the corrected value"),
        ("topic_switch", "yield"),
        ("stop_command", "yield, stay silent"),
        ("repeat_request", "yield, then repeat"),
        ("cooperative_completion", "keep speaking"),
        ("simultaneous_start", "one yields"),
    ],
    "backchannels": [
        ("continuer", "floor unchanged"),
        ("assessment", "floor unchanged"),
        ("agreement", "floor unchanged"),
        ("question_backchannel", "brief reply"),
        ("system_backchannel", "floor unchanged"),
    ],
    "disfluencies": [
        ("filled_pause", "keep listening"),
        ("self_repair", "use the repaired value"),
        ("false_start", "keep listening"),
        ("repetition_prolongation", "keep listening"),
        ("other_initiated_repair", "repair"),
        ("system_self_repair", "repair own speech"),
    ],
    "nonverbal": [
        ("laughter", "floor unchanged"),
        ("breath_sigh", "floor unchanged"),
        ("cough", "floor unchanged"),
        ("thinking_sounds", "keep listening"),
    ],
    "other_directed": [
        ("user_to_third_party", "ignore"),
        ("third_party_to_user", "ignore"),
        ("background_media", "ignore"),
        ("user_self_talk", "ignore"),
        ("readdress_after_side_talk", "answer"),
    ],
    "delegation": [
        ("delegate_with_ack", "acknowledge, open a delegate span"),
        ("continue_while_working", "keep talking while work runs"),
        ("result_at_silence_gap", "deliver at a silence gap"),
        ("result_deferred", "defer delivery while the user speaks"),
        ("stale_result_dropped", "drop, never deliver"),
        ("progress_question", "answer from progress"),
    ],
}

REGISTRY: dict[str, Phenomenon] = {
    pid: Phenomenon(pid, family, expected)
    for family, items in _FAMILIES.items()
    for pid, expected in items
}
FAMILIES: tuple[str, ...] = tuple(_FAMILIES)


def family_of(phenomenon_id: str) -> str:
    return REGISTRY[phenomenon_id].family
