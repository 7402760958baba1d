"""The embedded offline planner: bilingual phrase banks, seeded, relational events only.

It realises a fixed set of phenomena; a seed asking for any other is refused at load time.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from importlib import resources

import numpy as np
import yaml

from ..errors import UserError
from ..schema.plan import Plan, PlannedEvent, PlannedWork, PlannedWord
from ..schema.seed import ScenarioSeed

SUPPORTED = {
    "smooth_exchange", "latched_start", "phrase_boundary_pause", "long_thinking_pause",
    "filled_pause", "barge_in_new_request", "correction_negation", "continuer",
    "user_to_third_party", "third_party_to_user", "readdress_after_side_talk",
    "delegate_with_ack", "continue_while_working", "result_at_silence_gap", "result_deferred",
    "closing_sequence",
}
_CJK = re.compile(r"([\u3000-\u303f\u3400-\u9fff\uff00-\uffef]+)")
_PUNCT = set(",.?!;:，。？！；：、…-'")


@lru_cache(maxsize=None)
def phrase_bank(domain: str) -> dict:
    try:
        text = resources.files("synth.data.phrases").joinpath(f"{domain}.yaml").read_text("utf-8")
    except FileNotFoundError:
        raise UserError(f"domain: no phrase bank for domain {domain!r}") from None
    return yaml.safe_load(text)


@lru_cache(maxsize=None)
def common_bank() -> dict:
    return yaml.safe_load(resources.files("synth.data.phrases").joinpath("_common.yaml").read_text("utf-8"))


def tokenize(text: str) -> list[PlannedWord]:
    """Words with their language: jieba for Chinese runs, whitespace for the rest."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    words: list[PlannedWord] = []
    for part in _CJK.split(text):
        if not part.strip():
            continue
        if _CJK.fullmatch(part):
            tokens, lang = [t for t in jieba.lcut(part) if t.strip()], "zh"
        else:
            tokens, lang = part.split(), "en"
        for tok in tokens:
            if words and all(c in _PUNCT for c in tok):
                words[-1] = PlannedWord(text=words[-1].text + tok, lang=words[-1].lang)
            elif not all(c in _PUNCT for c in tok):
                words.append(PlannedWord(text=tok, lang=lang))
    return words


class ScriptedPlanner:
    name = "scripted-v1"

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        for pid, rate in seed.phenomena.items():
            if rate > 0 and pid not in SUPPORTED:
                raise UserError(f"{where}phenomena.{pid}: not realised by the scripted planner (got rate {rate})")
        phrase_bank(seed.domain)

    def plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        return _Builder(seed, session_id, rng).build()


class _Builder:
    def __init__(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator):
        self.seed, self.session_id, self.rng = seed, session_id, rng
        self.bank = phrase_bank(seed.domain)[seed.language]
        self.common = common_bank()[seed.language]
        self.events: list[PlannedEvent] = []
        self.work: list[PlannedWork] = []
        self.counts: dict[str, int] = {}

    def rate(self, pid: str) -> bool:
        return bool(self.rng.random() < self.seed.phenomena.get(pid, 0.0))

    def pick(self, key: str):
        items = self.bank[key]
        return items[int(self.rng.integers(len(items)))]

    def add(self, speaker: str, act: str, text_or_words, floor: str, relation=None, attach=None,
            phenomena=(), **kw) -> PlannedEvent:
        prefix = {"user": "u", "system": "s", "third_party": "t"}[speaker]
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        words = tokenize(text_or_words) if isinstance(text_or_words, str) else text_or_words
        ev = PlannedEvent(id=f"{prefix}{self.counts[prefix]}", speaker=speaker, act=act, floor_intent=floor,
                          relation=relation, attach_to=attach, words=words, phenomena=list(phenomena), **kw)
        self.events.append(ev)
        return ev

    @property
    def last(self) -> PlannedEvent:
        return self.events[-1]

    def user_turn(self, act: str, key: str, after: PlannedEvent | None, relation="responds_to") -> PlannedEvent:
        """A user turn, possibly said in two parts with a pause and a filler."""
        attach = after.id if after else None
        rel = relation if after else None
        filler = self.rate("filled_pause")
        long_pause = self.rate("long_thinking_pause")
        split = long_pause or self.rate("phrase_boundary_pause")
        if split:
            head, tail = self.pick("request_split")
            head_words = tokenize(head)
            tags = ["long_thinking_pause" if long_pause else "phrase_boundary_pause"]
            if filler:
                f = self.common["filler"][int(self.rng.integers(len(self.common["filler"])))]
                head_words = head_words + tokenize(f + ("," if f.isascii() else "，"))
                tags.append("filled_pause")
            first = self.add("user", act, head_words, "take", rel, attach)
            kind = "long" if long_pause else ("hesitation" if filler else "within_turn")
            return self.add("user", act, tail, "hold", "continues", first.id, tags, pause_before=kind)
        words = tokenize(self.pick(key))
        tags = []
        if filler:
            f = self.common["filler"][int(self.rng.integers(len(self.common["filler"])))]
            words = tokenize(f + ("," if f.isascii() else "，")) + words
            tags.append("filled_pause")
        return self.add("user", act, words, "take", rel, attach, tags)

    def system_answer(self, user_ev: PlannedEvent) -> PlannedEvent:
        bc, barge = self.rate("continuer"), self.rate("barge_in_new_request") or self.rate("correction_negation")
        long = bc or barge or self.rng.random() < 0.5
        ans = self.add("system", "answer", self.pick("answer_long" if long else "answer_short"), "take",
                       "responds_to", user_ev.id, ["smooth_exchange"])
        n = len(ans.words)
        if bc and n >= 6:
            k = self._boundary_word(ans, 2, max(3, n // 2))
            cont = self.common["continuer"][int(self.rng.integers(len(self.common["continuer"])))]
            self.add("user", "backchannel", cont, "none", "backchannels_on", ans.id, ["continuer"], attach_word=k)
        if barge and n >= 6:
            kind = "correction" if self.rng.random() < 0.5 else "new_request"
            pid = "correction_negation" if kind == "correction" else "barge_in_new_request"
            k = int(self.rng.integers(max(n // 2, 3), n - 1))
            cut = self.add("user", kind, self.pick(kind), "take", "interrupts", ans.id, [pid], attach_word=k)
            return self.add("system", "answer", self.pick("answer_short"), "take", "responds_to", cut.id)
        return ans

    def _boundary_word(self, ev: PlannedEvent, lo: int, hi: int) -> int:
        ends = [i for i in range(lo, hi) if ev.words[i].text[-1] in ",，、"]
        if ends and (self.seed.language == "en" or self.rng.random() < 0.5):
            return int(ends[int(self.rng.integers(len(ends)))])
        return int(self.rng.integers(lo, hi))

    def side_talk(self, after: PlannedEvent) -> PlannedEvent:
        side = self.add("user", "side_talk", self.pick("side_talk"), "none", "addresses_other", after.id,
                        ["user_to_third_party"])
        reply = self.add("third_party", "third_party_reply", self.pick("third_party_reply"), "none",
                         "responds_to", side.id, ["third_party_to_user"])
        return self.user_turn_from(reply, "readdress", ["readdress_after_side_talk"])

    def user_turn_from(self, after: PlannedEvent, key: str, tags) -> PlannedEvent:
        return self.add("user", key, self.pick(key), "take", "responds_to", after.id, tags)

    def delegation(self, after: PlannedEvent) -> PlannedEvent:
        d = self.pick("delegation")
        req = self.add("user", "delegate_request", d["request"], "take", "responds_to", after.id)
        ack = self.add("system", "acknowledge", d["ack"], "take", "responds_to", req.id, ["delegate_with_ack"])
        wid = f"w{len(self.work) + 1}"
        self.work.append(PlannedWork(work_id=wid, tool=d["tool"], objective=d["objective"],
                                     result_text=d["result"], opened_by=ack.id))
        last = ack
        if self.rate("continue_while_working"):
            if self.seed.personas.third_party is not None and self.rng.random() < 0.5:
                last = self.add("user", "side_talk", self.pick("side_talk"), "none", "addresses_other",
                                ack.id, ["user_to_third_party", "continue_while_working"])
            else:
                q = self.add("user", "followup", self.pick("followup"), "take", "responds_to", ack.id,
                             ["continue_while_working"])
                last = self.add("system", "answer", self.pick("answer_short"), "take", "responds_to", q.id)
        return self.add("system", "deliver_result", d["result"], "take", "delivers_result_of", wid,
                        ["result_at_silence_gap"], work_id=wid)

    def build(self) -> Plan:
        n = max(2, int(self.seed.exchanges.sample(self.rng)))
        delegate_at = int(self.rng.integers(1, n)) if self.rate("delegate_with_ack") else -1
        last = self.system_answer(self.user_turn("request", "request", None))
        for i in range(1, n):
            if i == delegate_at:
                last = self.delegation(last)
                continue
            if self.seed.personas.third_party is not None and self.rate("user_to_third_party"):
                user = self.side_talk(last)
            else:
                user = self.user_turn("followup", "followup", last)
            last = self.system_answer(user)
        if self.rate("closing_sequence"):
            bye = self.add("user", "closing", self.pick("closing_user"), "take", "responds_to", last.id)
            self.add("system", "closing", self.pick("closing_system"), "take", "responds_to", bye.id,
                     ["closing_sequence"])
        return Plan(session_id=self.session_id, scenario_id=self.seed.id, language=self.seed.language,
                    planner=ScriptedPlanner.name, events=self.events, work=self.work)
