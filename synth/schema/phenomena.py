"""The phenomenon registry of LABELS.md §4: ids, families, relations, laws and expected behaviour.

Seeds name phenomena by these ids, or a whole family by its name (``resolve_rates``); the
planner tags the events that realise them; the run statistics count them. LABELS.md says "42
items" but its list has 45; the registry follows the list.

Code-switching is a modifier on any event, not a phenomenon of its own: its five forms are in
``CODE_SWITCH`` (family ``code_switching``) and are found from the words' languages
(``code_switch_hits``), whoever planned them. ``routine_request`` marks the negatives of
delegation: a request the system answers directly, without a delegate span.
"""

from __future__ import annotations

from typing import NamedTuple


class Phenomenon(NamedTuple):
    """One item of LABELS.md §4.

    ``relation`` is the plan relation that realises it, ``law`` the LABELS.md §3 timing law the
    clock draws for it, ``expected`` the system behaviour (floor and marker sequence) that the
    labels must show.
    """

    id: str
    family: str
    definition: str
    relation: str
    law: str
    expected: str


_R, _C, _I, _B, _A, _D = "responds_to", "continues", "interrupts", "backchannels_on", "addresses_other", "during"
SYS_GAP, USER_GAP, PAUSE = "system_gap_ms", "user_gap_ms", "within_turn_pause_ms"
HES, LONG, BC, STOP = "hesitation_pause_ms", "long_pause_ms", "backchannel_onset_ms", "stop_latency_ms"
GATE, TOOL = "gate (both silent >= max(250, 800 - 0.05 wait))", "tool_latency_ms"

_FAMILIES: dict[str, list[tuple[str, str, str, str, str]]] = {
    "turn_transitions": [
        ("smooth_exchange", "the system answers after a normal gap", _R, SYS_GAP,
         "user RELEASE, gap, system TAKE..RELEASE, turn_eos"),
        ("latched_start", "the system starts in the last syllable of the user turn", _R,
         "system_early_start_ms", "system TAKE up to 200 ms before the user's last frame (whitelisted overlap)"),
        ("dispreferred_answer", "a delayed answer, filler first", _R, SYS_GAP + " + dispreferred_extra_ms",
         "long gap, then a system turn that starts with a filler"),
        ("system_question_back", "the system answers with a question", _R, SYS_GAP,
         "system turn_eos, then listen until the user's answer"),
        ("proactive_opening", "the system opens the session", "none", "lead_in_ms",
         "first TAKE is the system's"),
        ("closing_sequence", "thanks and goodbye", _R, SYS_GAP, "last system turn ends with turn_eos"),
    ],
    "pauses": [
        ("phrase_boundary_pause", "the user pauses at a phrase boundary and goes on", _C, PAUSE,
         "one user turn across the pause; no system TAKE inside"),
        ("long_thinking_pause", "a long mid-turn pause", _C, LONG, "keep listening: no system TAKE inside"),
        ("trailing_conjunction", "the user trails off on 'and...' / '然后...' and goes on", _C, HES,
         "keep listening: no system TAKE inside"),
        ("list_dictation", "the user dictates a list or a number in chunks", _C, PAUSE,
         "keep listening across every chunk"),
        ("complete_sounding_pause", "a pause after a complete-sounding clause, then more", _C, LONG,
         "keep listening: no system TAKE inside"),
        ("silence_after_system_question", "the user is silent for a while after a system question", _R,
         USER_GAP + " + long_pause_ms", "system RELEASE, no system TAKE in the silence"),
    ],
    "overlaps": [
        ("barge_in_new_request", "the user cuts in with a new request", _I, STOP,
         "yield within the stop latency; next system TAKE after the user's turn"),
        ("correction_negation", "the user cuts in to correct the system", _I, STOP,
         "yield; next system turn answers the correction"),
        ("topic_switch", "the user cuts in with another topic", _I, STOP, "yield; answer the new topic"),
        ("stop_command", "the user tells the system to stop", _I, STOP,
         "yield, stay silent until the user speaks again"),
        ("repeat_request", "the user cuts in to ask for a repeat", _I, STOP, "yield, then say it again"),
        ("cooperative_completion", "the user completes the system's sentence in overlap", _B, BC,
         "keep speaking: no yield, system HOLD across the overlap"),
        ("simultaneous_start", "user and system start at the same moment", _I, "interrupt_onset_ms + " + STOP,
         "the system yields; it answers after the user's turn"),
    ],
    "backchannels": [
        ("continuer", "mm-hm / 嗯 during system speech", _B, BC, "floor unchanged: no yield, system HOLD"),
        ("assessment", "wow / 真的啊 during system speech", _B, BC, "floor unchanged: no yield, system HOLD"),
        ("agreement", "yeah / 对对对 during system speech", _B, BC, "floor unchanged: no yield, system HOLD"),
        ("question_backchannel", "really? / 真的吗？ after a system turn, needing a brief reply", _R, USER_GAP,
         "a short user turn, then a brief system reply"),
        ("system_backchannel", "the system says mm-hm during a long user turn", _B, BC,
         "floor unchanged: user keeps the floor, system NOT_HOLD, sys_vad 1"),
    ],
    "disfluencies": [
        ("filled_pause", "um / 那个 inside a user turn", _C, HES, "keep listening"),
        ("self_repair", "the user repairs their own words", _C, PAUSE, "keep listening; use the repaired value"),
        ("false_start", "the user restarts a turn", _C, PAUSE, "keep listening"),
        ("repetition_prolongation", "a repeated or drawn-out word", _C, PAUSE, "keep listening"),
        ("other_initiated_repair", "the system asks the user to repeat", _R, SYS_GAP,
         "system question turn_eos, user repeats, system answers"),
        ("system_self_repair", "the system corrects itself in its own turn", "none", "-",
         "one system turn with turn_eos, no yield"),
    ],
    "nonverbal": [
        ("laughter", "user laughter", _B, "laughter_ms", "floor unchanged"),
        ("breath_sigh", "an audible breath or sigh before speaking", _R, USER_GAP, "floor unchanged"),
        ("cough", "a cough or throat clear", _R, USER_GAP, "floor unchanged"),
        ("thinking_sounds", "hmm / 嗯…… before speaking", _R, USER_GAP, "keep listening"),
    ],
    "other_directed": [
        ("user_to_third_party", "the user talks to someone in the room", _A, USER_GAP,
         "ignore: no system TAKE, no yield"),
        ("third_party_to_user", "someone in the room talks to the user", _R, USER_GAP, "ignore"),
        ("background_media", "TV or radio speech during system speech", _D, "media_s",
         "ignore: no yield, system HOLD"),
        ("user_self_talk", "the user talks to themselves", _A, USER_GAP, "ignore: no system TAKE"),
        ("readdress_after_side_talk", "the user turns back to the system", _R, USER_GAP,
         "answer after the readdress"),
    ],
    "group": [  # README "Group conversations": seeds with people (2-4 humans on the user side)
        ("human_exchange", "people in the room talk to each other, not to the system", _A, USER_GAP,
         "ignore: no system TAKE until someone addresses the system"),
        ("request_by_other_person", "another person of the group asks the system; the answer serves them",
         _R, SYS_GAP, "answer after that person's turn, addressed to them"),
        ("answer_for_other", "one person answers or corrects for another", _R, USER_GAP,
         "take the answer whoever gives it; the reply follows it"),
        ("people_overlap", "two people talk over each other", _I, "interrupt_onset_ms",
         "keep listening: no system TAKE inside"),
        ("name_in_human_exchange", "someone calls the system by name in the middle of a human exchange", _R,
         USER_GAP, "answer the one who called, after their turn"),
        ("group_decision_wait", "the system asks the group and waits while they decide", _R, USER_GAP,
         "listen through the discussion; TAKE after the decision is said to it"),
        ("long_range_reference", "minutes later, someone asks the system for a value the group settled early",
         _R, SYS_GAP, "answer the asker with the value said earlier (README \"Long group sessions\")"),
    ],
    "delegation": [
        ("delegate_with_ack", "spoken acknowledgement, then a private delegate span", "delegates_for",
         "ack_delay_ms", "ack turn_eos, delegate_open/close right after it"),
        ("continue_while_working", "the conversation goes on while the tool runs", _R, TOOL,
         "other turns between delegate_close and deliver_start"),
        ("result_at_silence_gap", "the result is spoken at a silence gap", "delivers_result_of", GATE,
         "backend_inject after both channels were silent for the gate window, deliver_start at TAKE"),
        ("result_deferred", "the result is ready while the user speaks", "delivers_result_of", GATE,
         "backend_inject only after the user stops"),
        ("stale_result_dropped", "the user cancels or supersedes a request", "supersedes", TOOL,
         "cancel, stale_drop, never deliver_start"),
        ("progress_question", "the user asks how it is going; answered from a progress message",
         _R, SYS_GAP, "backend_inject of the progress note, then a system answer; the work still runs"),
    ],
}

DELEGATION = frozenset(pid for pid, *_ in _FAMILIES["delegation"])
"""The delegation phenomena: each needs a tool catalogue and a work item."""

REGISTRY: dict[str, Phenomenon] = {
    pid: Phenomenon(pid, family, definition, relation, law, expected)
    for family, items in _FAMILIES.items()
    for pid, definition, relation, law, expected in items
}
FAMILIES: tuple[str, ...] = tuple(_FAMILIES)

CODE_SWITCH: dict[str, Phenomenon] = {
    p.id: p for p in (
        Phenomenon("cs_en_in_zh", "code_switching", "English words inside a Chinese sentence", "-", "-",
                   "labels unchanged by language"),
        Phenomenon("cs_zh_in_en", "code_switching", "Chinese words inside an English sentence", "-", "-",
                   "labels unchanged by language"),
        Phenomenon("cs_between_sentences", "code_switching", "one sentence in each language", "-", "-",
                   "labels unchanged by language"),
        Phenomenon("cs_turn_boundary", "code_switching", "the next turn is in the other language", "-", "-",
                   "labels unchanged by language"),
        Phenomenon("cs_at_repair", "code_switching", "the language changes at a repair", "-", "-",
                   "labels unchanged by language"),
    )
}
ROUTINE = Phenomenon("routine_request", "delegation_negative", "a routine request answered directly",
                     _R, SYS_GAP, "answer without a delegate span")
ALL: dict[str, Phenomenon] = {**REGISTRY, **CODE_SWITCH, ROUTINE.id: ROUTINE}
"""Everything a session's ``phenomena`` hits may name."""


def family_of(phenomenon_id: str) -> str:
    return ALL[phenomenon_id].family


def resolve_rates(requested: dict[str, float]) -> dict[str, float]:
    """Per-id rates from a seed's mix of family names and ids; an id overrides its family.

    >>> resolve_rates({"backchannels": 0.2, "continuer": 0.5})["assessment"]
    0.2
    """
    out: dict[str, float] = {}
    for key, rate in requested.items():
        if key in _FAMILIES:
            for pid, *_ in _FAMILIES[key]:
                out[pid] = rate
    for key, rate in requested.items():
        if key in REGISTRY:
            out[key] = rate
    return out


SETTLED_BY_PIPELINE = frozenset({
    # added to any plan by the paralinguistic pass (synth/stages/paraling.py) ...
    "filled_pause", "laughter", "breath_sigh", "cough", "thinking_sounds", "false_start", "self_repair",
    "repetition_prolongation", "background_media",
    # ... or decided by the clock from the rendered audio
    "latched_start", "result_deferred",
})
"""Phenomena a planner may tag but need not author: later stages realise them at their rates."""


def requested(rates: dict[str, float]) -> list[Phenomenon]:
    """The registry items a seed asks for (rate > 0), in registry order: what a planner must
    realise, with the definition and expected behaviour to put in an LLM prompt."""
    r = resolve_rates(rates)
    return [p for pid, p in REGISTRY.items() if r.get(pid, 0) > 0]


def unknown_name(key: str) -> bool:
    return key not in REGISTRY and key not in _FAMILIES


REPAIR_ACTS = {"self_repair", "correction", "system_self_repair", "clarify", "repair_repeat"}
_SENTENCE_END = set(".?!。？！")


def code_switch_hits(events) -> list[tuple[str, str]]:
    """``(form, event_id)`` for the code-switching in placed or planned events (from word langs).

    Events need ``id``, ``speaker``, ``act`` and words with ``lang`` and a text (``word`` or
    ``text``). A sentence is a run of words up to ``.?!。？！``.
    """
    hits: list[tuple[str, str]] = []
    prev_main: dict[str, str] = {}
    last_floor_speaker, last_main = None, None
    for e in events:
        words = [(getattr(w, "word", None) or getattr(w, "text", ""), w.lang) for w in e.words]
        if not words or e.speaker not in ("user", "system") or words[0][0].startswith("["):
            continue
        langs = [lang for _, lang in words]
        main = max(("en", "zh"), key=langs.count)
        sentences, cur = [], []
        for text, lang in words:
            cur.append(lang)
            if text and text[-1] in _SENTENCE_END:
                sentences.append(cur)
                cur = []
        if cur:
            sentences.append(cur)
        mixed = [s for s in sentences if len(set(s)) > 1]
        for s in mixed:
            form = "cs_en_in_zh" if s.count("zh") >= s.count("en") else "cs_zh_in_en"
            if (form, e.id) not in hits:
                hits.append((form, e.id))
        pure = {s[0] for s in sentences if len(set(s)) == 1}
        if len(sentences) > 1 and len(pure) > 1:
            hits.append(("cs_between_sentences", e.id))
        if e.act in REPAIR_ACTS and len(set(langs)) > 1:
            hits.append(("cs_at_repair", e.id))
        if getattr(e, "floor_intent", "take") == "take" and e.act not in ("filler",):
            if last_floor_speaker not in (None, e.speaker) and last_main not in (None, main):
                hits.append(("cs_turn_boundary", e.id))
            last_floor_speaker, last_main = e.speaker, main
        prev_main[e.speaker] = main
    return hits
