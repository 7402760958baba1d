"""Hesitations, disfluencies and non-verbal sounds, added to any plan before rendering.

This stage works on the relational plan of any planner (scripted or LLM), so the rates of
LABELS.md §3 hold whoever wrote the words: filled pauses per 100 user words, laughter per
minute, and our own per-turn defaults for breaths, sighs, coughs, thinking sounds, false
starts, self-repairs, repetitions and prolongations. Every addition is its own event with its
own act (``filler``, ``laughter``, ``breath``, ``false_start`` ...), so the clock places it with
the usual laws and the labels and statistics see it. A filler splits a user event into a
``continues`` chain (words, filler, words); the last piece keeps the original id, so later
events that attach to it still attach to the end of what the user said.
"""

from __future__ import annotations

import numpy as np

from ..schema.config import ParalinguisticsConfig
from ..schema.plan import Plan, PlannedEvent, PlannedWord
from ..schema.seed import ScenarioSeed

SPLITTABLE = {None, "responds_to", "continues"}
EDIT_TERMS = {"en": ["sorry,", "I mean,", "no wait,"], "zh": ["不对，", "我是说，", "哦不，"]}
THINKING = {"en": ["hmm", "hmm..."], "zh": ["嗯……", "唔"]}
SECONDS_PER_WORD = {"en": 0.38, "zh": 0.22}  # per English word / per Chinese character
PHENOMENON_OF = {
    "filler": "filled_pause", "laughter": "laughter", "breath": "breath_sigh", "sigh": "breath_sigh",
    "cough": "cough", "throat_clear": "cough", "thinking_sound": "thinking_sounds",
    "false_start": "false_start", "self_repair": "self_repair", "repetition": "repetition_prolongation",
    "prolongation": "repetition_prolongation", "media": "background_media",
}


def estimated_minutes(events) -> float:
    """Rough spoken length of a plan from its words (used to turn per-minute rates into counts)."""
    s = 0.0
    for e in events:
        for w in e.words:
            s += SECONDS_PER_WORD[w.lang] * (len(w.text) if w.lang == "zh" else 1)
        s += 0.5
    return s / 60


def decorate(plan: Plan, seed: ScenarioSeed, cfg: ParalinguisticsConfig, rng: np.random.Generator) -> Plan:
    """``plan`` with paralinguistic events added; a seed rate of 0 switches a phenomenon off."""
    return _Decorator(plan, seed, cfg, rng).run()


class _Decorator:
    def __init__(self, plan: Plan, seed: ScenarioSeed, cfg: ParalinguisticsConfig, rng):
        self.plan, self.cfg, self.rng = plan, cfg, rng
        self.off = {pid for pid, r in seed.rates.items() if r == 0}
        self.filler_p = {lang: law.sample(rng) / 100 for lang, law in cfg.filler_per_100_words.items()}
        self.n = 0
        self.moved: dict[str, list[tuple[str, int]]] = {}

    def on(self, kind: str) -> bool:
        return PHENOMENON_OF[kind] not in self.off

    def new_id(self, base: str, tag: str) -> str:
        self.n += 1
        return f"{base}-{tag}{self.n}"

    def event(self, base: PlannedEvent, act: str, words, floor: str, relation, attach, speaker=None,
              **kw) -> PlannedEvent:
        if (relation, attach) == (base.relation, base.attach_to):  # it opens the turn: same gap law
            kw.setdefault("gap_kind", base.gap_kind)
        if (speaker or base.speaker) == base.speaker:  # a group session: the same person, to the same one
            kw.setdefault("person", base.person)
            kw.setdefault("addressee", None if kw.get("sound") else base.addressee)
        return PlannedEvent(id=self.new_id(base.id, act[:2]), speaker=speaker or base.speaker, act=act,
                            floor_intent=floor,
                            relation=relation, attach_to=attach, words=words, phenomena=[PHENOMENON_OF[act]], **kw)

    def sound(self, base: PlannedEvent, kind: str, relation, attach, **kw) -> PlannedEvent:
        lang = base.words[0].lang
        return self.event(base, kind, [PlannedWord(text=f"[{kind}]", lang=lang)], "none", relation, attach,
                          sound=kind, **kw)

    # -- the pass --------------------------------------------------------------------------
    def run(self) -> Plan:
        out: list[PlannedEvent] = []
        events = self.plan.events
        minutes = estimated_minutes(events)
        laughs = self._laughter_slots(events, minutes) if self.on("laughter") else {}
        coughs = self._slots(events, self.cfg.cough_per_min.sample(self.rng) * minutes) if self.on("cough") else set()
        person = next((e.person for e in events if e.person), None)  # who laughs along, in a group
        for i, ev in enumerate(events):
            prev = events[i - 1] if i else None
            if ev.speaker == "user" and ev.person:
                person = ev.person
            if ev.speaker == "user" and ev.floor_intent == "take" and ev.relation in SPLITTABLE:
                out += self._before_turn(ev, prev, laughs.get(i) == "before", i in coughs)
                out += self._turn(ev)
            elif ev.speaker == "user" and ev.floor_intent == "hold" and ev.relation in SPLITTABLE:
                out += self._turn(ev)
            else:
                out.append(self._follow(ev))
            if laughs.get(i) == "during":
                k = int(self.rng.integers(len(ev.words) // 3, max(len(ev.words) // 3 + 1, len(ev.words) - 4)))
                out.append(self.sound(ev, "laughter", "backchannels_on", ev.id, attach_word=k, speaker="user",
                                      person=person))
        if self.on("media") and self.rng.random() < self.cfg.media_per_session:
            out = self._media(out)
        return Plan.model_validate({**dict(self.plan), "events": out})  # re-checks attachments

    def _slots(self, events, expected: float) -> set[int]:
        """Indices of user turn starts that get one sound, ``Poisson(expected)`` of them."""
        starts = [i for i, e in enumerate(events) if e.speaker == "user" and e.floor_intent == "take"
                  and e.relation in SPLITTABLE]
        k = min(len(starts), int(self.rng.poisson(expected)))
        return {int(x) for x in self.rng.choice(starts, size=k, replace=False)} if k else set()

    def _laughter_slots(self, events, minutes: float) -> dict[int, str]:
        """Laughs per minute from the law: during a long system turn, or before a user turn."""
        k = int(self.rng.poisson(self.cfg.laughter_per_min.sample(self.rng) * minutes))
        busy = {e.attach_to for e in events if e.relation in ("interrupts", "backchannels_on")}
        during = [i for i, e in enumerate(events) if e.speaker == "system" and len(e.words) >= 10
                  and e.floor_intent != "none" and e.id not in busy]
        before = [i for i, e in enumerate(events) if e.speaker == "user" and e.floor_intent == "take"
                  and e.relation in SPLITTABLE]
        slots: dict[int, str] = {}
        for _ in range(k):
            pool = [(i, "during") for i in during if i not in slots] if self.rng.random() < 0.4 else []
            pool = pool or [(i, "before") for i in before if i not in slots]
            if not pool:
                break
            i, where = pool[int(self.rng.integers(len(pool)))]
            slots[i] = where
        return slots

    def _before_turn(self, ev: PlannedEvent, prev, laugh: bool, cough: bool) -> list[PlannedEvent]:
        """Sounds the user makes just before speaking: they attach where the turn attaches."""
        cfg, rng, pre = self.cfg, self.rng, []
        rel, att = ev.relation, ev.attach_to
        if laugh:
            pre.append(self.sound(ev, "laughter", rel, att))
        if cough:
            pre.append(self.sound(ev, "cough" if rng.random() < 0.7 else "throat_clear", rel, att))
        if self.on("breath") and rng.random() < cfg.breath_per_turn:
            pre.append(self.sound(ev, "breath", rel, att))
        elif self.on("sigh") and rng.random() < cfg.sigh_per_turn:
            pre.append(self.sound(ev, "sigh", rel, att))
        return pre

    def _turn(self, ev: PlannedEvent) -> list[PlannedEvent]:
        """The user's event, possibly preceded by a restart and split around fillers."""
        cfg, rng = self.cfg, self.rng
        words = list(ev.words)
        head: list[PlannedEvent] = []
        lang = words[0].lang
        if ev.floor_intent == "take" and len(words) >= 4:
            r = rng.random()
            if self.on("false_start") and r < cfg.false_start_per_turn:
                k = int(rng.integers(1, 3))
                head.append(self.event(ev, "false_start", words[:k], ev.floor_intent, ev.relation, ev.attach_to,
                                       prolong_ms=self._maybe_prolong(0.5)))
            elif self.on("self_repair") and r < cfg.false_start_per_turn + cfg.self_repair_per_turn:
                k = int(rng.integers(2, min(5, len(words))))
                term = EDIT_TERMS[lang][int(rng.integers(len(EDIT_TERMS[lang])))]
                if self.plan.language == "en-zh":  # en-zh writes "，" after English words too: "I mean，"
                    term = term.replace(",", "，")
                from ..text import tokenize

                head.append(self.event(ev, "self_repair", words[:k] + tokenize(term), ev.floor_intent,
                                       ev.relation, ev.attach_to))
            elif self.on("thinking_sound") and r < (cfg.false_start_per_turn + cfg.self_repair_per_turn
                                                     + cfg.thinking_sound_per_turn):
                t = THINKING[lang][int(rng.integers(len(THINKING[lang])))]
                head.append(self.event(ev, "thinking_sound", [PlannedWord(text=t, lang=lang)], ev.floor_intent,
                                       ev.relation, ev.attach_to))
        tags = list(ev.phenomena)
        index = list(range(len(words)))  # where each planned word is now
        if self.on("repetition") and len(words) >= 3 and rng.random() < cfg.repetition_per_turn:
            j = int(rng.integers(0, min(3, len(words) - 1)))
            words.insert(j, words[j])
            index = [i if i < j else i + 1 for i in index]
            tags.append("repetition_prolongation")
        cuts = self._filler_positions(words, allow_start=not head) if self.on("filler") else []
        pieces, last = [], 0
        for j in cuts:
            if j > last:
                pieces.append(("words", words[last:j]))
            pieces.append(("filler", words[j].lang))
            last = j
        pieces.append(("words", words[last:]))
        return self._chain(ev, head, pieces, tags, index)

    def _filler_positions(self, words: list[PlannedWord], allow_start: bool) -> list[int]:
        """Word indices a filler goes before: ``p * len(words)`` expected, a share at the start."""
        n = len(words)
        lam = float(np.mean([self.filler_p[w.lang] for w in words])) * n
        share = self.cfg.filler_at_turn_start if allow_start else 0.0
        cuts = [0] if allow_start and self.rng.random() < min(1.0, share * lam) else []
        if n > 1:
            p_mid = (1 - share) * lam / (n - 1)
            cuts += [j for j in range(1, n) if self.rng.random() < p_mid]
        return cuts

    def _maybe_prolong(self, p: float) -> float | None:
        """A drawn prolongation (ms) with probability ``p``, else None."""
        if self.on("prolongation") and self.rng.random() < p:
            return round(float(self.cfg.prolongation_ms.sample(self.rng)), 1)
        return None

    def _filler_word(self, lang: str) -> PlannedWord:
        table = self.cfg.fillers[lang]
        names = sorted(table)
        p = np.array([table[n] for n in names], dtype=float)
        return PlannedWord(text=names[int(self.rng.choice(len(names), p=p / p.sum()))], lang=lang)

    def _chain(self, ev: PlannedEvent, head, pieces, tags, index: list[int]) -> list[PlannedEvent]:
        """``head`` + pieces as a ``continues`` chain; the last piece keeps ``ev``'s id. Where each
        planned word went (piece id, word) is kept, so events attached to a word follow it."""
        out = list(head)
        prev_id = head[-1].id if head else None
        spans: list[tuple[str, int, int]] = []
        at = 0
        for n, (kind, val) in enumerate(pieces):
            first = prev_id is None
            rel, att = (ev.relation, ev.attach_to) if first else ("continues", prev_id)
            floor = ev.floor_intent if first else "hold"
            if kind == "filler":
                pl = self._maybe_prolong(self.cfg.prolongation_per_turn * 4)
                e = self.event(ev, "filler", [self._filler_word(val)], floor, rel, att, prolong_ms=pl,
                               pause_before=ev.pause_before if first else "within_turn",
                               gap_kind=ev.gap_kind if first else "normal")
                if pl:
                    e = e.model_copy(update={"phenomena": e.phenomena + ["repetition_prolongation"]})
            else:
                last = n == len(pieces) - 1
                after_filler = bool(out) and out[-1].act == "filler"
                pause = ev.pause_before if first else ("hesitation" if after_filler else "within_turn")
                e = PlannedEvent(
                    id=ev.id if last else self.new_id(ev.id, "p"), speaker=ev.speaker, act=ev.act,
                    floor_intent=floor, relation=rel, attach_to=att, attach_word=ev.attach_word if first else None,
                    words=val, pause_before=pause if rel == "continues" else None,
                    gap_kind=ev.gap_kind if first else "normal", work_id=ev.work_id,
                    phenomena=tags if last else [], prolong_ms=ev.prolong_ms if last else None,
                    person=ev.person, addressee=ev.addressee,
                )
                spans.append((e.id, at, len(val)))
                at += len(val)
            out.append(e)
            prev_id = e.id
        self.moved[ev.id] = [next((pid, m - a) for pid, a, n in spans if a <= m < a + n) for m in index]
        return out

    def _follow(self, ev: PlannedEvent) -> PlannedEvent:
        """An event attached to a word of a turn that was split: attach it to the piece holding the word."""
        where = self.moved.get(ev.attach_to)
        if where is None or ev.attach_word is None or ev.relation not in ("backchannels_on", "interrupts"):
            return ev
        if ev.attach_word >= len(where):  # the plan rule refuses it, with the event id
            return ev
        pid, k = where[ev.attach_word]
        return ev.model_copy(update={"attach_to": pid, "attach_word": k})

    def _media(self, events: list[PlannedEvent]) -> list[PlannedEvent]:
        """TV or radio speech in the room, during one of the system's turns."""
        sys = [i for i, e in enumerate(events) if e.speaker == "system" and e.floor_intent != "none"]
        if not sys:
            return events
        i = sys[int(self.rng.integers(len(sys)))]
        target = events[i]
        lang = target.words[0].lang
        media = PlannedEvent(id=self.new_id("b", "media"), speaker="background", act="media", floor_intent="none",
                             relation="during", attach_to=target.id, words=[PlannedWord(text="[media]", lang=lang)],
                             phenomena=["background_media"], sound="media")
        return events[: i + 1] + [media] + events[i + 1:]
