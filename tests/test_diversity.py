"""The scale-aware diversity figures (issue 32): de-slotted templates, the fixed-size sample, the
growth of the bigrams, and the lines ``synth plan --text`` prints."""

from __future__ import annotations

import re

import numpy as np

from helpers import synth
from synth.backends.frames import LANGS, _texts, block, domains, slot_pool
from synth.backends.script import _line
from synth.inspection.diversity import SessionText, diversity, diversity_lines
from synth.inspection.templates import slot_values, template, template_key

BALANCE = "Your {account} ending {last4} has {balance} available, and nothing is pending."
DRAWS = [  # (account, last4, balance) as a session would draw them
    ("joint account", "four two one seven", "three hundred and eighteen pounds"),
    ("savings account", "eight eight zero three", "eighty four pounds fifty"),
    ("student account", "one nine five six", "six hundred and twelve pounds"),
    ("holiday savings pot", "six three four zero", "two thousand and sixty pounds"),
]


def session(i: int, *system: str, values=(), user: str = "Hi.") -> SessionText:
    return SessionText(f"t-{i:06d}", [("user", user), *(("system", s) for s in system)], tuple(values))


# -- templates ------------------------------------------------------------------------------------
def test_one_sentence_with_other_slot_values_is_one_template_with_its_share():
    runs = []
    for i, (acc, last4, bal) in enumerate(DRAWS):
        meta = {"frames": [{"id": "balance", "slots": {"account": acc, "last4": last4, "balance": bal,
                                                        "topic": f"the {acc}"}}]}
        line = BALANCE.format(account=acc, last4=last4, balance=bal)
        runs.append(session(i, line, f"Anything else about account number {i}?", f"Goodbye {'x' * (i + 1)}.",
                            values=slot_values(meta)))
    d = diversity(runs)
    assert d["system_utterances"] == 12
    assert d["top_template_share"] == round(4 / 12, 4) and d["top_templates"][0]["count"] == 4
    assert d["top_template"] == "Your {account} ending {last4} has {balance} available, and nothing is pending."
    # "account number {i}" differs only in a number: one template; the goodbyes are four
    assert d["top_templates"][1]["count"] == 4 and d["system_templates"] == 2 + 4
    assert d["distinct_system_utterances"] == 1.0  # the raw lines are all different


def test_values_without_planner_meta_numbers_days_and_chinese_numerals():
    en = ["Table for two at seven thirty on Friday, that's forty five pounds.",
          "Table for five at 8:15 on Monday, that's ninety pounds."]
    zh = ["好的，二十五号下午两点半，三个人，星期五见。", "好的，十二号下午四点，八个人，周一见。"]
    assert template_key(template(en[0])) == template_key(template(en[1]))
    assert template_key(template(zh[0])) == template_key(template(zh[1]))
    assert "{n}" in template(zh[0]) and "{day}" in template(zh[0])


def test_words_that_are_not_values_stay():
    # a lone "one", "first", 一下 are words; an article agrees with the value, not the template
    assert template("Which one? First, wait a second, 等一下。") == "Which one? First, wait a second, 等一下。"
    assert template_key(template("I can book it.")) != template_key(template("I can't book it."))
    a = template("An Italian place is free.", [("cuisine", "Italian")])
    b = template("A Thai place is free.", [("cuisine", "Thai")])
    assert a == b == "A {cuisine} place is free."
    # a value matches whole words only, never inside a longer word or a placeholder
    assert template("Cardiff, your card is fine, Sam's card too.", [("card", "card"), ("who", "Sam")]) \
        == "Cardiff, your {card} is fine, {who}'s {card} too."


def test_slot_values_read_every_kind_of_planner_meta_entry():
    meta = {"content": "frames-v1",
            "frames": [{"id": "f", "slots": {"city": "JB", "topic": "the card in JB"}}],
            "work": {"w1": {"until": "next Friday", "card": "travel card"}},
            "corrections": [{"event": "u3", "slot": "city", "old": "JB", "new": "Penang"}],
            "supersedes": [{"event": "u5", "work_id": "w1", "by": "w2", "slot": "until", "old": "a", "new": "Monday"}]}
    got = set(slot_values(meta))
    assert {("city", "JB"), ("topic", "the card in JB"), ("until", "next Friday"), ("card", "travel card"),
            ("city", "Penang"), ("until", "Monday")} <= got
    assert slot_values({"mode": "fill", "anchors": {"x": 1}}) == []  # an LLM plan's meta: nothing to take
    # longest value first: the topic that contains the city is one placeholder
    assert template("About the card in JB: it works in JB and Penang now.", got) \
        == "About {topic}: it works in {city} and {city} now."


def test_frame_lines_filled_with_two_draws_de_slot_alike():
    """Every system line of the content, filled as a session fills it with two independent draws
    of its slot values (recorded as planner_meta records them), gives one template: the figure
    counts sentences, not values. A few lines say a value's words literally ("an hour" where
    {length} may be "an hour"), so not all of them can."""
    rng = np.random.default_rng(7)
    same = total = 0
    for d in domains():
        for lang in LANGS:
            for f in block(d, lang).frames:
                slots = {**f.slots, **{k: v for dl in f.delegations for k, v in dl.slots.items()}}
                slots = {k: list(dict.fromkeys(slot_pool(v, lang))) for k, v in slots.items()}  # generated: samples
                first = {k: int(rng.integers(len(v))) for k, v in slots.items()}
                other = {k: (i + 1 + int(rng.integers(len(slots[k]) - 1))) % len(slots[k]) for k, i in first.items()}
                draws = []  # two sessions' values, each drawn once for the session, every value different
                for pick in (first, other):
                    vals = {k: slots[k][i] for k, i in pick.items()}
                    draws.append({**vals, "topic": _line(f.topic, vals, start=False)})
                for where, text in _texts(f.model_dump()):
                    key = re.sub(r"\[\d+\]", "", where).split(".")[-1]
                    if key not in ("system", "short", "repair", "then", "ack", "result", "failure") \
                            or ".slots" in where or re.search(r"\{(old|new)\}", text):
                        continue
                    keys = {template_key(template(_line(text, vals), vals.items())) for vals in draws}
                    total += 1
                    same += len(keys) == 1
    assert total > 15_000 and same / total >= 0.97, (same, total)  # 0.98 measured


# -- the fixed-size sample ------------------------------------------------------------------------
def chatter(n: int, prefix: str = "t", lines: int = 60, seed: int = 0) -> list[SessionText]:
    """``n`` sessions each saying two lines drawn from ``lines`` fixed sentences of six words
    (drawn from 300 words)."""
    rng = np.random.default_rng(seed)
    pool = [" ".join(f"w{int(k)}" for k in np.random.default_rng(i).integers(300, size=6)) for i in range(lines)]
    return [SessionText(f"{prefix}-{i:06d}", [("user", f"hi {i}"), *(("system", pool[int(j)])
                                                                     for j in rng.integers(lines, size=2))])
            for i in range(n)]


def test_fixed_size_figure_of_a_run_and_of_that_run_doubled():
    run = chatter(40, lines=10_000)  # nearly every line said once
    d = diversity(run, sample=40)
    assert d["distinct_system_utterances"] > 0.95
    assert d["sample_distinct_system_utterances"] == d["distinct_system_utterances"]  # its own sample
    assert d["sample_distinct_system_bigrams"] == d["distinct_system_bigrams"]
    again = [SessionText(s.session_id.replace("t-", "u-"), s.utterances) for s in run]  # planned twice
    doubled = diversity(run + again, sample=40)
    assert doubled["sample_distinct_system_utterances"] < d["sample_distinct_system_utterances"]
    assert doubled["sample_distinct_system_bigrams"] < d["sample_distinct_system_bigrams"]
    assert diversity(run[:39], sample=40)["sample_distinct_system_utterances"] is None


def test_fixed_size_figure_holds_still_while_the_whole_run_figure_falls():
    small, big = diversity(chatter(50), sample=50), diversity(chatter(1000, seed=1), sample=50)
    assert big["distinct_system_utterances"] < small["distinct_system_utterances"] - 0.3
    assert abs(big["sample_distinct_system_utterances"] - small["sample_distinct_system_utterances"]) < 0.1


def test_sample_is_the_same_sessions_whatever_the_input_order():
    run = chatter(100)
    a, b = diversity(run, sample=30), diversity(run[::-1], sample=30)
    assert a["sample_distinct_system_bigrams"] == b["sample_distinct_system_bigrams"]
    assert a["new_bigrams_per_block"] == b["new_bigrams_per_block"]


# -- growth -------------------------------------------------------------------------------------------
def test_new_bigrams_per_block_in_session_id_order():
    runs = [session(3, "c d"), session(0, "a b c"), session(2, "a b c d"), session(1, "a b d"),
            session(4, "e f g"), session(5, "a b")]  # given out of order: counted by id
    d = diversity(runs, block=2)
    # 0-1: ab bc bd -> 3; 2-3: cd -> 1; 4-5: ef fg -> 2
    assert d["new_bigrams_per_block"] == [3, 1, 2] and d["growth_block_sessions"] == 2
    assert diversity(runs[:5], block=2)["new_bigrams_per_block"] == [3, 1]  # whole blocks only
    lines = diversity_lines(d)
    assert lines[-1].endswith("per 2 sessions (in session-id order): 3, 1, 2")


# -- synth plan --text -----------------------------------------------------------------------------
def test_plan_text_prints_the_scale_aware_figures():
    r = synth("plan", "pipelines/phenomena.yaml", "-n", "1000", "--text")
    whole = re.search(r"1,000 plans, whole run: distinct system utterances ([\d.]+), distinct system bigrams "
                      r"([\d.]+), most common opening in ([\d.]+)%", r.stderr)
    fixed = re.search(r"fixed size, 1,000 sessions drawn by session id: distinct system utterances ([\d.]+), "
                      r"distinct system bigrams ([\d.]+)", r.stderr)
    tmpl = re.search(r"most used de-slotted system template: ([\d.]+)% of ([\d,]+) system lines \(([\d,]+) "
                     r"templates\): '(.+)'", r.stderr)
    assert whole and fixed and tmpl, r.stderr[-2000:]
    assert fixed.groups() == whole.groups()[:2]  # a run of exactly the sample size is its own sample
    assert 0.5 < float(whole[1]) <= 1 and 0.1 < float(whole[2]) < 1
    lines, templates = int(tmpl[2].replace(",", "")), int(tmpl[3].replace(",", ""))
    assert lines > 5_000 and 0.2 * lines < templates < lines
    assert 0 < float(tmpl[1]) < 5 and not re.search(r"\d", tmpl[4])
    assert "new distinct system bigrams" not in r.stderr  # one block of 1,000: no curve yet
