"""The embedded offline planner: bilingual phrase banks, seeded, relational events only.

It realises every phenomenon of the registry (``synth.schema.phenomena``), at the seed's rates
per exchange (a family name sets the rate of each of its items). Hesitations, non-verbal sounds
and background media are added afterwards by the paralinguistic pass (``stages.paraling``),
for any planner. A seed asking for something the planner does not realise is refused at load
time. Domain phrases come from ``synth/data/phrases/<domain>.yaml``, domain-independent ones
(backchannels, stop commands, dictated lists, progress notes ...) from ``_common.yaml``.
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
from ..schema.phenomena import REGISTRY
from ..schema.seed import ScenarioSeed

SUPPORTED = set(REGISTRY)
"""Every registry item: planned here, or added by the paralinguistic pass, or (latched start,
deferred result) decided by the clock from the plan's request and the drawn times."""
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
    name = "scripted-v2"

    def check_seed(self, seed: ScenarioSeed, source: str = "") -> None:
        where = f"{source}: " if source else ""
        for pid, rate in seed.rates.items():
            if rate > 0 and pid not in SUPPORTED:
                raise UserError(f"{where}phenomena.{pid}: not realised by the scripted planner (got rate {rate})")
        bank = phrase_bank(seed.domain)
        if seed.rates.get("delegate_with_ack", 0) > 0 and not delegations(bank[seed.language], seed):
            tools = [t.name for t in seed.tools]
            raise UserError(f"{where}tools: no tool of the catalogue has delegation phrases in domain "
                            f"{seed.domain!r} (got {tools})")

    def plan(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator) -> Plan:
        return _Builder(seed, session_id, rng).build()


def delegations(bank: dict, seed: ScenarioSeed) -> list[dict]:
    """The phrase bank's delegations whose tool is in the seed's tool catalogue."""
    tools = {t.name for t in seed.tools}
    return [d for d in bank.get("delegation", []) if d["tool"] in tools]


# answer variants: one of those whose rate fires is realised per system answer
ANSWER_VARIANTS = (
    "barge_in_new_request", "correction_negation", "topic_switch", "stop_command", "repeat_request",
    "simultaneous_start", "cooperative_completion", "continuer", "assessment", "agreement",
    "question_backchannel", "system_question_back", "silence_after_system_question", "system_self_repair",
)
# user-turn shapes that split a turn around a pause
SPLIT_VARIANTS = ("long_thinking_pause", "trailing_conjunction", "list_dictation", "complete_sounding_pause",
                  "phrase_boundary_pause")
INTERRUPTS = {"barge_in_new_request": "new_request", "correction_negation": "correction"}
ROUTINE_P = 0.25  # share of later exchanges that are routine requests (negatives for delegation)
FAILURE_P = 0.12  # share of work items whose backend fails
SILENT_P = 0.15  # share of delegations opened silently, without a spoken acknowledgement
CS_ANSWER_P = 0.3  # en-zh: share of answers from the code-switching list


class _Builder:
    def __init__(self, seed: ScenarioSeed, session_id: str, rng: np.random.Generator):
        self.seed, self.session_id, self.rng = seed, session_id, rng
        self.rates = seed.rates
        self.bank = phrase_bank(seed.domain)[seed.language]
        self.common = common_bank()[seed.language]
        self.events: list[PlannedEvent] = []
        self.work: list[dict] = []
        self.counts: dict[str, int] = {}
        self.tp = seed.personas.third_party is not None
        self.delegations = delegations(self.bank, seed)

    def rate(self, pid: str) -> bool:
        return bool(self.rng.random() < self.rates.get(pid, 0.0))

    def choose(self, items):
        return items[int(self.rng.integers(len(items)))]

    def pick(self, key: str):
        return self.choose(self.bank[key])

    def pickc(self, key: str):
        return self.choose(self.common[key])

    def add(self, speaker: str, act: str, text_or_words, floor: str, relation=None, attach=None,
            phenomena=(), **kw) -> PlannedEvent:
        prefix = {"user": "u", "system": "s", "third_party": "t"}[speaker]
        self.counts[prefix] = self.counts.get(prefix, 0) + 1
        words = tokenize(text_or_words) if isinstance(text_or_words, str) else list(text_or_words)
        ev = PlannedEvent(id=f"{prefix}{self.counts[prefix]}", speaker=speaker, act=act, floor_intent=floor,
                          relation=relation, attach_to=attach.id if isinstance(attach, PlannedEvent) else attach,
                          words=words, phenomena=list(phenomena), **kw)
        self.events.append(ev)
        return ev

    def filler(self) -> list[PlannedWord]:
        f = self.common["filler"][int(self.rng.integers(len(self.common["filler"])))]
        return tokenize(f + ("," if f.isascii() else "，"))

    # -- user turns ------------------------------------------------------------------------
    def user_turn(self, act: str, key: str, after: PlannedEvent | None) -> tuple[PlannedEvent, str | None]:
        """A user turn, possibly in pieces with pauses; returns its last event and the answer text
        the shape asks for (a dictated list wants 'noted', not a domain answer)."""
        rel = "responds_to" if after else None
        silence = (after is not None and after.act == "question_back"
                   and self.rate("silence_after_system_question"))
        gap = {"gap_kind": "silence"} if silence else {}
        first_tags = ["silence_after_system_question"] if silence else []
        filler = self.rate("filled_pause")
        shape = next((v for v in SPLIT_VARIANTS if self.rate(v)), None)
        if shape is None:
            words = tokenize(self.pick(key))
            tags = list(first_tags)
            if filler:
                words, tags = self.filler() + words, tags + ["filled_pause"]
            return self.add("user", act, words, "take", rel, after, tags, **gap), None
        if shape == "list_dictation":
            chunks = self.pickc("list_dictation")
            ev = self.add("user", act, chunks[0], "take", rel, after, first_tags, **gap)
            self.system_backchannel(ev)
            for i, chunk in enumerate(chunks[1:]):
                last = i == len(chunks) - 2
                ev = self.add("user", act, chunk, "hold", "continues", ev, ["list_dictation"] if last else [],
                              pause_before="within_turn")
            return ev, self.pickc("list_answer")
        if shape == "complete_sounding_pause":
            head, tail = self.pickc("complete_sounding")
        else:
            head, tail = self.pick("request_split")
        head_words, kind = tokenize(head), {"long_thinking_pause": "long", "complete_sounding_pause": "long",
                                            "trailing_conjunction": "hesitation"}.get(shape, "within_turn")
        if shape == "trailing_conjunction":
            head_words = tokenize(head.rstrip(",，、") + (" " if head.isascii() else "") + self.pickc("conjunction"))
        tags = [shape]
        if filler and shape != "trailing_conjunction":
            head_words = head_words + self.filler()
            tags.append("filled_pause")
            kind = "hesitation" if kind == "within_turn" else kind
        first = self.add("user", act, head_words, "take", rel, after, first_tags, **gap)
        self.system_backchannel(first)
        return self.add("user", act, tail, "hold", "continues", first, tags, pause_before=kind), None

    def system_backchannel(self, user_ev: PlannedEvent) -> None:
        """mm-hm from the system inside (or right after) the first piece of a long user turn."""
        if self.rate("system_backchannel"):
            k = max(0, len(user_ev.words) // 2)
            self.add("system", "backchannel", self.pickc("system_backchannel"), "none", "backchannels_on", user_ev,
                     ["system_backchannel"], attach_word=k)

    def side_talk(self, after: PlannedEvent) -> PlannedEvent:
        side = self.add("user", "side_talk", self.pick("side_talk"), "none", "addresses_other", after,
                        ["user_to_third_party"])
        reply = self.add("third_party", "third_party_reply", self.pick("third_party_reply"), "none",
                         "responds_to", side, ["third_party_to_user"])
        return self.add("user", "readdress", self.pick("readdress"), "take", "responds_to", reply,
                        ["readdress_after_side_talk"])

    def exchange(self, after: PlannedEvent | None, first: bool = False) -> PlannedEvent:
        """One user turn (of some shape) and the system's answer (of some variant)."""
        if self.seed.tools and not first and self.rng.random() < ROUTINE_P:
            r = self.pickc("routine")
            u = self.add("user", "routine_request", r["request"], "take", "responds_to", after, ["routine_request"])
            return self.add("system", "answer", r["answer"], "take", "responds_to", u, ["smooth_exchange"])
        answer = None
        if after is not None and after.speaker == "system" and self.tp and self.rate("user_to_third_party"):
            user = self.side_talk(after)
        else:
            if after is not None and self.rate("user_self_talk"):
                after = self.add("user", "self_talk", self.pickc("self_talk"), "none", "addresses_other", after,
                                 ["user_self_talk"])
            user, answer = self.user_turn("request" if first else "followup", "request" if first else "followup",
                                          after)
        if self.rate("other_initiated_repair"):
            clarify = self.add("system", "clarify", self.pickc("clarify"), "take", "responds_to", user,
                               ["other_initiated_repair"])
            user = self.add("user", "repair_repeat", user.words, "take", "responds_to", clarify)
        return self.system_answer(user, answer)

    # -- system answers --------------------------------------------------------------------
    def answer_text(self, long: bool) -> str:
        if self.seed.language == "en-zh" and not long and self.rng.random() < CS_ANSWER_P:
            return self.pickc("answer_cs")
        return self.pick("answer_long" if long else "answer_short")

    def system_answer(self, user_ev: PlannedEvent, text: str | None = None) -> PlannedEvent:
        fired = [v for v in ANSWER_VARIANTS if self.rate(v)]
        variant = self.choose(fired) if fired else None
        kw: dict = {}
        if self.rate("dispreferred_answer"):
            kw = {"gap_kind": "dispreferred"}
        elif self.rate("latched_start"):
            kw = {"gap_kind": "early"}
        needs_long = variant in ("barge_in_new_request", "correction_negation", "topic_switch", "stop_command",
                                 "repeat_request", "simultaneous_start", "continuer", "assessment", "agreement")
        if variant in ("system_question_back", "silence_after_system_question"):
            j = int(self.rng.integers(len(self.common["question_back"])))
            qb = self.add("system", "question_back", self.common["question_back"][j], "take", "responds_to", user_ev,
                          ["system_question_back"], **kw)
            ua, _ = self._question_answer(qb, j, variant == "silence_after_system_question")
            return self.add("system", "answer", self.answer_text(False), "take", "responds_to", ua, ["smooth_exchange"])
        if variant == "cooperative_completion":
            c = self.pickc("cooperative")
            a = self.add("system", "answer", c["head"], "take", "responds_to", user_ev, ["smooth_exchange"], **kw)
            self.add("user", "cooperative_completion", c["completion"], "none", "backchannels_on", a,
                     ["cooperative_completion"], attach_word=len(a.words) - 1)
            return self.add("system", "answer", c["tail"], "hold", "continues", a, pause_before="within_turn")
        words = tokenize(text or self.answer_text(needs_long or self.rng.random() < 0.5))
        tags = ["smooth_exchange"]
        act = "answer"
        if variant == "system_self_repair":
            words, act, tags = tokenize(self.pickc("system_self_repair")), "system_self_repair", tags + [variant]
        if kw.get("gap_kind") == "dispreferred":
            words, tags = tokenize(self.pickc("dispreferred_prefix")) + words, tags + ["dispreferred_answer"]
        ans = self.add("system", act, words, "take", "responds_to", user_ev, tags, **kw)
        n = len(ans.words)
        if variant in ("continuer", "assessment", "agreement") and n >= 6:
            k = self._boundary_word(ans, 2, max(3, n // 2))
            self.add("user", "backchannel", self.pickc(variant), "none", "backchannels_on", ans, [variant],
                     attach_word=k)
        elif variant == "question_backchannel":
            q = self.add("user", "question_backchannel", self.pickc("question_backchannel"), "take", "responds_to",
                         ans, ["question_backchannel"])
            return self.add("system", "brief_reply", self.pickc("brief_reply"), "take", "responds_to", q)
        elif needs_long and n >= 6:
            return self._interrupted(ans, variant)
        return ans

    def _question_answer(self, qb: PlannedEvent, j: int, silence: bool):
        tags = ["silence_after_system_question"] if silence else []
        return self.add("user", "answer", self.common["question_answer"][j], "take", "responds_to", qb, tags,
                        gap_kind="silence" if silence else "normal"), None

    def _interrupted(self, ans: PlannedEvent, variant: str) -> PlannedEvent:
        """The user cuts into ``ans``; what the system says next depends on why."""
        n = len(ans.words)
        k = 0 if variant == "simultaneous_start" else int(self.rng.integers(max(n // 2, 3), n - 1))
        if variant in INTERRUPTS:
            kind = INTERRUPTS[variant]
            cut = self.add("user", kind, self.pick(kind), "take", "interrupts", ans, [variant], attach_word=k)
            reply = self.pick("answer_short")
        elif variant == "topic_switch":
            j = int(self.rng.integers(len(self.common["topic_switch"])))
            cut = self.add("user", "topic_switch", self.common["topic_switch"][j], "take", "interrupts", ans,
                           [variant], attach_word=k)
            reply = self.common["topic_answer"][j]
        elif variant == "stop_command":
            # the system yields and stays silent: nothing answers the stop
            return self.add("user", "stop", self.pickc("stop"), "take", "interrupts", ans, [variant], attach_word=k)
        elif variant == "repeat_request":
            cut = self.add("user", "repeat_request", self.pickc("repeat"), "take", "interrupts", ans, [variant],
                           attach_word=k)
            return self.add("system", "repeat", ans.words, "take", "responds_to", cut)
        else:  # simultaneous start: both begin at once, the system yields
            cut = self.add("user", "followup", self.pick("followup"), "take", "interrupts", ans, [variant],
                           attach_word=0)
            reply = self.pick("answer_short")
        return self.add("system", "answer", reply, "take", "responds_to", cut, ["smooth_exchange"])

    def _boundary_word(self, ev: PlannedEvent, lo: int, hi: int) -> int:
        ends = [i for i in range(lo, hi) if ev.words[i].text[-1] in ",，、"]
        if ends and (self.seed.language == "en" or self.rng.random() < 0.5):
            return int(ends[int(self.rng.integers(len(ends)))])
        return int(self.rng.integers(lo, hi))

    # -- delegation ------------------------------------------------------------------------
    def new_work(self, d: dict, ack: PlannedEvent) -> dict:
        fails = self.rng.random() < FAILURE_P
        w = {"work_id": f"w{len(self.work) + 1}", "tool": d["tool"], "objective": d["objective"],
             "result_text": self.pickc("failure") if fails else d["result"], "opened_by": ack.id,
             "outcome": "failure" if fails else "success"}
        self.work.append(w)
        return w

    def delegate(self, d: dict, after: PlannedEvent, act="delegate_request", prefix="", tags=()):
        """Request, then the spoken ack that opens the work item (or, sometimes, no ack: the
        system opens the item silently after the request, R6)."""
        req = self.add("user", act, (prefix + " " if prefix else "") + d["request"], "take", "responds_to", after,
                       list(tags))
        if self.rng.random() < SILENT_P:
            return req, req, self.new_work(d, req)
        ack = self.add("system", "acknowledge", d["ack"], "take", "responds_to", req, ["delegate_with_ack"])
        return req, ack, self.new_work(d, ack)

    def other_delegation(self, used: list[dict]) -> dict | None:
        rest = [d for d in self.delegations if d not in used]
        return self.choose(rest) if rest else None

    def delegation(self, after: PlannedEvent) -> PlannedEvent:
        """Request, ack and private span; talk while it runs; maybe a progress question, a second
        request in flight, a cancel or a superseding request; then the results as they come."""
        d = self.choose(self.delegations)
        used = [d]
        _, last, w = self.delegate(d, after)
        pending = [w]
        if self.rate("progress_question"):
            p = self.pickc("progress")
            q = self.add("user", "progress_question", p["question"], "take", "responds_to", last, ["progress_question"])
            last = self.add("system", "progress_answer", p["answer"], "take", "responds_to", q, work_id=w["work_id"])
            w.update(progress_text=p["note"], progress_by=last.id)
        if self.rate("continue_while_working"):
            r = self.rng.random()
            d2 = self.other_delegation(used)
            if r < 0.35 and d2 is not None:  # a second request while the first runs
                used.append(d2)
                _, last, w2 = self.delegate(d2, last, tags=["continue_while_working"])
                pending.append(w2)
            elif r < 0.65 and self.tp:
                last = self.add("user", "side_talk", self.pick("side_talk"), "none", "addresses_other", last,
                                ["user_to_third_party", "continue_while_working"])
            else:
                q = self.add("user", "followup", self.pick("followup"), "take", "responds_to", last,
                             ["continue_while_working"])
                last = self.add("system", "answer", self.pick("answer_short"), "take", "responds_to", q)
        if self.rate("stale_result_dropped"):
            d3 = self.other_delegation(used)
            if self.rng.random() < 0.5 or d3 is None:
                c = self.add("user", "cancel_request", self.pickc("cancel"), "take", "responds_to", last,
                             ["stale_result_dropped"], work_id=w["work_id"])
                last = self.add("system", "cancel_ack", self.pickc("cancel_ack"), "take", "responds_to", c)
            else:
                c, last, w3 = self.delegate(d3, last, "supersede_request", self.pickc("supersede_prefix"),
                                            ["stale_result_dropped"])
                pending.append(w3)
            w["cancelled_by"] = c.id
            pending.remove(w)
        for item in pending:
            last = self.add("system", "deliver_result", item["result_text"], "take", "delivers_result_of",
                            item["work_id"], ["result_at_silence_gap"], work_id=item["work_id"])
        return last

    def build(self) -> Plan:
        n = max(2, int(self.seed.exchanges.sample(self.rng)))
        delegate_at = int(self.rng.integers(1, n)) if self.rate("delegate_with_ack") and self.delegations else -1
        opening = None
        if self.rate("proactive_opening"):
            opening = self.add("system", "opening", self.pickc("opening"), "take", phenomena=["proactive_opening"])
        last = self.exchange(opening, first=True)
        for i in range(1, n):
            last = self.delegation(last) if i == delegate_at else self.exchange(last)
        if self.rate("closing_sequence"):
            bye = self.add("user", "closing", self.pick("closing_user"), "take", "responds_to", last)
            self.add("system", "closing", self.pick("closing_system"), "take", "responds_to", bye,
                     ["closing_sequence"])
        return Plan(session_id=self.session_id, scenario_id=self.seed.id, language=self.seed.language,
                    planner=ScriptedPlanner.name, events=self.events, work=[PlannedWork(**w) for w in self.work])
