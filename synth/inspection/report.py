"""``synth report``: run statistics against the targets of LABELS.md §3.

One :func:`build_report` gathers everything into a plain dict (JSON-ready); :func:`render_html`
turns it and the histograms into one self-contained HTML file (plots as base64 PNG);
:func:`print_summary` prints the terminal view with rich. Laws are read from the run's own
``run.json`` config, so an overridden law is drawn as the run used it.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections import Counter
from pathlib import Path

import numpy as np

from . import measures
from .group_measures import CLASSES, group_statistics
from .runfolder import RunFolder

_TITLES = {
    "system_gap": "system gap after a user turn",
    "system_gap_after_barge_in": "system reply after a barge-in (from the end of the interrupting turn)",
    "user_gap": "user gap after the system",
    "overlap": "overlap depth at overlapped transitions",
    "within_turn_pause": "within-turn pause", "hesitation_pause": "hesitation pause (filler)",
    "long_pause": "long mid-turn pause", "stop_latency": "system stop after barge-in",
    "tool_latency": "tool latency",
}


def build_report(run: RunFolder) -> dict:
    """Every number of the report, JSON-ready."""
    recs = run.records
    times = measures.timings_by_language(recs)
    rejects = run.rejects()
    laws = measures.laws_from_config(run.config)
    targets = {lang: {q: round(measures.target_median(q, laws, lang), 1) for q in measures.QUANTITIES}
               for lang in times}
    rep = {
        "run": run.name,
        "path": str(run.path),
        "sessions": len(recs),
        "rejects": len(rejects),
        "rejects_by_reason": dict(Counter(f"{r.get('stage', '?')}:{r.get('reason', '?')}" for r in rejects)),
        "hours_by_language": measures.hours_by_language(recs),
        "sessions_by_language": dict(sorted(Counter(r.language for r in recs).items())),
        "timing": {lang: {q: measures.summary_stats(xs) for q, xs in d.items()} for lang, d in times.items()},
        "target_median_ms": targets,
        "rates": measures.rates(recs),
        "rate_targets": {"backchannels_per_listener_min": measures.BACKCHANNEL_TARGET_PER_MIN,
                         "fillers_per_100_words": measures.FILLER_TARGET_PER_100},
        "action_balance": measures.action_balance(recs),
        "phenomena": measures.phenomenon_coverage(recs),
        "against_people": measures.against_people(times),
        "diversity": _diversity(recs),
        "citations": measures.CITATIONS,
        "asr": asr_errors(recs),
    }
    group = group_statistics(recs)
    if group:  # dyadic runs keep today's report: no empty group section
        rep["group"] = group
    return rep


def asr_errors(recs) -> dict:
    """ASR round-trip error per engine and language (``scene.asr`` of the records): events, mean,
    p90 and the share re-rendered."""
    by: dict[str, list] = {}
    for r in recs:
        asr = r.scene.get("asr") or {}
        for h in asr.get("events", {}).values():
            by.setdefault(f"{r.scene.get('tts_engine', '?')}/{h['lang']}", []).append(h)
    return {k: {"events": len(hs), "metric": hs[0]["metric"],
                "mean": round(float(np.mean([h["error"] for h in hs])), 4),
                "p90": round(float(np.percentile([h["error"] for h in hs], 90)), 4),
                "rerendered": round(float(np.mean([h["attempt"] > 0 for h in hs])), 3)}
            for k, hs in sorted(by.items())}


# -- plots ---------------------------------------------------------------------------------
def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def timing_figure(quantity: str, by_lang: dict[str, list[float]], laws: dict) -> bytes:
    """Histograms of one quantity, one panel per language, the target law drawn over them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    langs = sorted(by_lang) or ["en"]
    fig, axes = plt.subplots(1, len(langs), figsize=(4.2 * len(langs), 3.0), squeeze=False)
    law = laws[quantity]
    for ax, lang in zip(axes[0], langs):
        xs = np.asarray(by_lang.get(lang, []), dtype=float)
        lo = law.low if law.low is not None else min([-800.0] + xs.tolist()) if "gap" in quantity else 0.0
        hi_guess = {"tool_latency": 15000.0, "long_pause": 4000.0, "hesitation_pause": 3000.0, "system_gap": 1500.0,
                    "system_gap_after_barge_in": 1500.0, "stop_latency": 1200.0, "overlap": 1000.0}.get(quantity, 2500.0)
        hi = min(law.high, hi_guess) if law.high is not None else hi_guess
        hi = max(hi, float(xs.max()) if xs.size else hi)
        lo = min(lo, float(xs.min()) if xs.size else lo)
        grid = np.linspace(lo, hi, 600)
        if xs.size:
            ax.hist(xs, bins=min(60, max(20, xs.size // 2)), range=(lo, hi), density=True,
                    color="#7aa6c2", edgecolor="white", label=f"measured (n={xs.size})")
        ax.plot(grid, measures.target_pdf(quantity, laws, lang, grid), color="#c0392b", lw=2, label="target law")
        _draw_people(ax, quantity, xs)
        ax.set_title(f"{lang}", fontsize=10)
        ax.set_xlabel("ms")
        ax.legend(fontsize=7)
    fig.suptitle(_TITLES.get(quantity, quantity), fontsize=11)
    fig.tight_layout()
    return _png(fig)


def _draw_people(ax, quantity: str, xs: np.ndarray) -> None:
    """The published human figures of ``quantity`` (``measures.HUMAN``), labelled with their source."""
    for kind, value, label, cite in measures.HUMAN.get(quantity, []):
        who = measures.CITATIONS[cite].split(" (")[0].split(",")[0]
        year = measures.CITATIONS[cite].split("(")[1].split(")")[0] if "(" in measures.CITATIONS[cite] else ""
        text = f"{label} ({who} {year})".replace(" ()", "")
        if kind == "line":
            ax.axvline(value, color="#2c7a2c", ls="--", lw=1.5, label=text)
        elif kind == "band":
            ax.axvspan(value[0], value[1], color="#2c7a2c", alpha=0.12, label=text)
        elif kind == "share" and xs.size:
            ax.plot([], [], " ", label=f"{text}; here {float((xs < 0).mean()):.0%}")


def bar_figure(title: str, values: dict[str, float], xlabel: str = "", horizontal: bool = False) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(values)
    h = max(2.5, 0.22 * len(names)) if horizontal else 3.0
    fig, ax = plt.subplots(figsize=(7.5 if horizontal else 5.0, h))
    if horizontal:
        ax.barh(names, [values[n] for n in names], color="#5d8aa8")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
    else:
        ax.bar(names, [values[n] for n in names], color="#5d8aa8")
    ax.set_title(title, fontsize=11)
    if xlabel:
        (ax.set_xlabel if horizontal else ax.set_ylabel)(xlabel)
    fig.tight_layout()
    return _png(fig)


def figures(run: RunFolder, rep: dict) -> dict[str, bytes]:
    """All report plots as PNG bytes, by name."""
    laws = measures.laws_from_config(run.config)
    times = measures.timings_by_language(run.records)
    out: dict[str, bytes] = {}
    for q in measures.QUANTITIES:
        by_lang = {lang: d[q] for lang, d in times.items()}
        out[q] = timing_figure(q, by_lang, laws)
    out["hours"] = bar_figure("hours per language", rep["hours_by_language"], "h")
    out["actions"] = bar_figure("sys_action balance (share of frames)", rep["action_balance"], "share")
    flat = {pid: n for fam in rep["phenomena"].values() for pid, n in fam.items()}
    out["phenomena"] = bar_figure("phenomenon coverage (events)", flat, "count", horizontal=True)
    if rep["rejects_by_reason"]:
        out["rejects"] = bar_figure("rejects by reason", rep["rejects_by_reason"], "count", horizontal=True)
    return out


# -- HTML ----------------------------------------------------------------------------------
def _table(rows: list[list], head: list[str]) -> str:
    th = "".join(f"<th>{html.escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _fmt(x) -> str:
    return f"{x:.1f}" if isinstance(x, float) else str(x)


def _fmt3(x) -> str:
    """A ratio to three places; a figure not measured (``None``) as a dash."""
    return "–" if x is None else f"{x:.3f}"


def render_html(rep: dict, figs: dict[str, bytes]) -> str:
    """A self-contained page: tables and every plot embedded as a data URI."""
    def img(name: str) -> str:
        b64 = base64.b64encode(figs[name]).decode()
        return f'<img alt="{name}" src="data:image/png;base64,{b64}">'

    timing_rows = []
    for lang, d in rep["timing"].items():
        for q, s in d.items():
            timing_rows.append([lang, q, s.get("n", 0)] + [_fmt(s[k]) if k in s else "–"
                                                           for k in ("median", "p10", "p90")]
                               + [_fmt(rep["target_median_ms"][lang][q])])
    rate_rows = [[lang, f"{r['user_backchannels_per_min']:.2f}",
                  measures.BACKCHANNEL_TARGET_PER_MIN.get(lang.split("-")[-1], "–"),
                  f"{r['fillers_per_100_en_words']:.2f}", f"{r['fillers_per_100_zh_words']:.2f}", int(r["words"])]
                 for lang, r in rep["rates"].items()]
    cov_rows = [[fam, pid, n] for fam, items in rep["phenomena"].items() for pid, n in items.items()]
    covered = sum(1 for r in cov_rows if r[2] > 0)
    parts = [
        f"<h1>duplexsynth report — {html.escape(rep['run'])}</h1>",
        f"<p>{rep['sessions']} sessions, {sum(rep['hours_by_language'].values()):.3f} h, "
        f"{rep['rejects']} rejects; folder <code>{html.escape(rep['path'])}</code></p>",
        "<h2>Hours per language</h2>", img("hours"),
        _table([[k, f"{v:.3f}", rep["sessions_by_language"].get(k, 0)] for k, v in rep["hours_by_language"].items()],
               ["language", "hours", "sessions"]),
        "<h2>Timing against the targets (LABELS.md §3)</h2>",
        _table(timing_rows, ["language", "quantity", "n", "median ms", "p10 ms", "p90 ms", "target median ms"]),
        *[f"<h3>{html.escape(_TITLES[q])}</h3>{img(q)}" for q in measures.QUANTITIES],
        "<h2>Against people (published human figures)</h2>",
        _table([[r["language"], r["quantity"], r["figure"], _fmt(r["published"]), _fmt(r["measured"]),
                 r["measured_as"], r["source"]] for r in rep.get("against_people", [])],
               ["language", "quantity", "published figure", "published", "measured", "measured as", "source"]),
        "<h2>What the conversations say (CONTENT.md diversity)</h2>",
        _table([[k, d["sessions"], d["distinct_system_utterances"], d["distinct_system_bigrams"],
                 _fmt3(d.get("sample_distinct_system_utterances")), _fmt3(d.get("sample_distinct_system_bigrams")),
                 f"{d['top_opening_share']:.1%}", html.escape(d["top_opening"]),
                 f"{d.get('top_template_share', 0):.2%}", html.escape(d.get("top_template", ""))]
                for k, d in rep.get("diversity", {}).items() if k != "targets"],
               ["sessions", "n", "distinct system utterances, whole run", "distinct system bigrams, whole run",
                f"utterances, {_sample_size(rep)} sessions (≥ 0.6)", f"bigrams, {_sample_size(rep)} sessions (≥ 0.35)",
                "most common opening (≤ 1 %)", "that opening", "most used de-slotted system template (≤ 0.5 %)",
                "that template"]),
        _diversity_notes(rep),
        "<h2>Backchannel and filler rates</h2>",
        _table(rate_rows, ["language", "user backchannels / system-speech min", "target",
                           "fillers / 100 en words (target 1.5–3)", "fillers / 100 zh words (target ≈1.1)", "words"]),
        "<h2>Action balance</h2>", img("actions"),
        _table([[k, f"{v:.3f}"] for k, v in rep["action_balance"].items()], ["sys_action", "share of frames"]),
        f"<h2>Phenomenon coverage ({covered} of {len(cov_rows)} items seen)</h2>", img("phenomena"),
        _table(cov_rows, ["family", "phenomenon", "events"]),
        _group_html(rep.get("group")),
        "<h2>Rejects by reason</h2>",
        img("rejects") if "rejects" in figs else "<p>No rejects.</p>",
        _table([[k, v] for k, v in rep["rejects_by_reason"].items()], ["stage:reason", "count"]),
        "<h2>References</h2><ul>" + "".join(f"<li>[{html.escape(k)}] {html.escape(v)}</li>"
                                             for k, v in rep.get("citations", {}).items()) + "</ul>",
        f"<script type=\"application/json\" id=\"report-data\">{html.escape(json.dumps(rep))}</script>",
    ]
    style = ("body{font-family:sans-serif;max-width:1300px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 8px;"
             "font-size:13px}th{background:#eef}img{max-width:100%;display:block;margin:.5em 0}")
    return (f"<!doctype html><html><head><meta charset=\"utf-8\"><title>report {html.escape(rep['run'])}</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>")


def _group_html(group: dict | None) -> str:
    """The addressee statistics of group sessions (``group_measures``); nothing for a dyadic run."""
    if not group:
        return ""
    share = [[lang, g["sessions"], *[f"{g['utterance_share'][c]:.1%} ({g['utterances'][c]})" for c in CLASSES],
              *[f"{g['speech_time_share'][c]:.1%} ({g['speech_s'][c]:.1f} s)" for c in CLASSES],
              g["system_takes_on_other_addressed"], g["system_answers_who_did_not_ask"],
              g["system_onsets_inside_other_addressed_speech"]] for lang, g in group.items()]
    people = [[lang, p, f"{s:.1f}"] for lang, g in group.items() for p, s in g["person_speech_s"].items()]
    overlap = [[lang, f"{g['people_overlap_s']:.1f}", f"{g['people_overlap_share']:.1%}"] for lang, g in group.items()]
    langs = list(group)
    cov = [[pid, *[group[lang]["phenomena"][pid] for lang in langs]] for pid in next(iter(group.values()))["phenomena"]]
    return "".join([
        "<h2>Group sessions: whom the user side speaks to</h2>",
        _table(share, ["language", "sessions", *[f"utterances to {c}" for c in CLASSES],
                       *[f"speech time to {c}" for c in CLASSES], "system takes on other-addressed speech (must be 0)",
                       "system answers to someone who did not ask (must be 0)",
                       "system turn onsets inside other-addressed speech"]),
        "<h3>Speech time per person (person_vad)</h3>", _table(people, ["language", "person", "seconds"]),
        "<h3>People speaking at once (person_vad)</h3>",
        _table(overlap, ["language", "seconds with 2+ people", "share of people-speech time"]),
        "<h3>Group phenomena (events)</h3>", _table(cov, ["phenomenon", *langs]),
    ])


def print_group(group: dict, console) -> None:
    """The terminal view of the group section: addressees and takes per language, then the group
    phenomena per language, then each person's speech time."""
    from rich.table import Table

    t = Table(title="group sessions: user-side utterances / speech time by addressee; system takes (must be 0)")
    for c in ("language", "sessions", *[f"to {c}" for c in CLASSES], "takes on others' speech",
              "answers to non-askers", "onsets inside others' speech", "people overlap"):
        t.add_column(c)
    for lang, g in group.items():
        t.add_row(lang, str(g["sessions"]),
                  *[f"{g['utterance_share'][c]:.0%} / {g['speech_time_share'][c]:.0%}" for c in CLASSES],
                  str(g["system_takes_on_other_addressed"]), str(g["system_answers_who_did_not_ask"]),
                  str(g["system_onsets_inside_other_addressed_speech"]),
                  f"{g['people_overlap_s']:.1f} s ({g['people_overlap_share']:.1%})")
    console.print(t)
    t = Table(title="group phenomena (events)")
    t.add_column("phenomenon")
    for lang in group:
        t.add_column(lang)
    for pid in next(iter(group.values()))["phenomena"]:
        t.add_row(pid, *[str(g["phenomena"][pid]) for g in group.values()])
    console.print(t)
    for lang, g in group.items():
        people = ", ".join(f"{p} {s:.1f} s" for p, s in g["person_speech_s"].items())
        console.print(f"{lang} speech per person: {people}", highlight=False)


def _diversity(recs) -> dict:
    """CONTENT.md's diversity figures, over all sessions and per language, with the targets."""
    from .diversity import TARGETS, diversity, record_text

    texts = [record_text(r) for r in recs]
    out = {"all": diversity(texts)}
    for lang in sorted({r.language for r in recs}):
        out[lang] = diversity(t for t, r in zip(texts, recs) if r.language == lang)
    out["targets"] = TARGETS
    return out


def _sample_size(rep: dict) -> str:
    return f"{rep.get('diversity', {}).get('all', {}).get('sample_sessions', 1000):,}"


def _diversity_notes(rep: dict) -> str:
    """Under the diversity table: the most used templates of the run and the growth of its bigrams."""
    d = rep.get("diversity", {}).get("all")
    if not d or "top_templates" not in d:
        return ""
    rows = _table([[f"{t['share']:.2%}", t["count"], html.escape(t["template"])] for t in d["top_templates"]],
                  ["share of system lines", "lines", "de-slotted template"])
    growth = d["new_bigrams_per_block"]
    grown = (f"<p>New distinct system bigrams per {d['growth_block_sessions']:,} sessions (session-id order): "
             + ", ".join(f"{x:,}" for x in growth) + "</p>") if growth else ""
    return (f"<p>Fixed size: {d['sample_sessions']:,} sessions drawn by session id (empty below that run size); "
            f"{d['system_templates']:,} de-slotted templates over {d['system_utterances']:,} system lines.</p>"
            + rows + grown)


def write_report(run: RunFolder, html_path: Path) -> dict:
    """Build the report, write the HTML (and ``report.json`` beside it); returns the numbers."""
    from ..io.files import write_text_atomic

    rep = build_report(run)
    figs = figures(run, rep)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(html_path, render_html(rep, figs))
    write_text_atomic(html_path.with_suffix(".json"), json.dumps(rep, indent=1, ensure_ascii=False))
    return rep


def print_summary(rep: dict, console) -> None:
    """The terminal view: one table per topic."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title=f"{rep['run']}: {rep['sessions']} sessions, {rep['rejects']} rejects")
    for c in ("language", "sessions", "hours"):
        t.add_column(c)
    for lang, h in rep["hours_by_language"].items():
        t.add_row(lang, str(rep["sessions_by_language"].get(lang, 0)), f"{h:.3f}")
    console.print(t)
    t = Table(title=escape("timing (ms): median [p10, p90] (n)"))
    t.add_column("quantity")
    langs = list(rep["timing"])
    for lang in langs:
        t.add_column(lang)
    for q in measures.QUANTITIES:
        cells = []
        for lang in langs:
            s = rep["timing"][lang][q]
            cells.append(escape(f"{s['median']:.0f} [{s['p10']:.0f}, {s['p90']:.0f}] ({s['n']})") if s["n"] else "–")
        t.add_row(q, *cells)
    console.print(t)
    t = Table(title="rates (targets: backchannels en 3 / zh 1.5 per listener-min; fillers en 1.5-3, zh 1.1 per 100 words)")
    for c in ("language", "user bc / sys-speech min", "fillers / 100 en w", "fillers / 100 zh w"):
        t.add_column(c)
    for lang, r in rep["rates"].items():
        t.add_row(lang, f"{r['user_backchannels_per_min']:.2f}", f"{r['fillers_per_100_en_words']:.2f}",
                  f"{r['fillers_per_100_zh_words']:.2f}")
    console.print(t)
    t = Table(title="against people: published human figures beside the measured values")
    langs = sorted({r["language"] for r in rep.get("against_people", [])})
    for c in ("quantity", "published figure [source]", *langs):
        t.add_column(c)
    rows: dict[tuple, dict] = {}
    for r in rep.get("against_people", []):
        rows.setdefault((r["quantity"], r["figure"], r["source"], r["measured_as"]), {})[r["language"]] = r["measured"]
    for (q, figure, cite, how), by_lang in rows.items():
        fmt = (lambda v: f"{v:.0%}") if how == "share below 0" else (lambda v: f"{v:.0f} ms")
        t.add_row(q, escape(f"{figure} [{cite}]"), *[f"{fmt(by_lang[x])} ({how})" if x in by_lang else "–"
                                                    for x in langs])
    console.print(t)
    for k, v in rep.get("citations", {}).items():
        console.print(escape(f"[{k}] {v}"), highlight=False)
    t = Table(title=f"content diversity (CONTENT.md: utterances >= 0.6, bigrams >= 0.35, top opening <= 1 %, on "
                    f"{_sample_size(rep)} sessions; issue 32: top template <= 0.5 %)")
    for c in ("sessions", "n", "distinct system utterances, whole run", "distinct system bigrams, whole run",
              f"utterances, {_sample_size(rep)} sessions", f"bigrams, {_sample_size(rep)} sessions",
              "top template share", "top opening share"):
        t.add_column(c)
    for k, d in rep.get("diversity", {}).items():
        if k != "targets":
            t.add_row(k, str(d["sessions"]), f"{d['distinct_system_utterances']:.3f}",
                      f"{d['distinct_system_bigrams']:.3f}", _fmt3(d.get("sample_distinct_system_utterances")),
                      _fmt3(d.get("sample_distinct_system_bigrams")), f"{d.get('top_template_share', 0):.2%}",
                      f"{d['top_opening_share']:.1%}")
    console.print(t)
    d = rep.get("diversity", {}).get("all")
    if d and "top_templates" in d:
        from .diversity import diversity_lines

        for line in diversity_lines(d)[2:]:  # the template and the growth; the table has the rest
            console.print(escape(line), highlight=False)
    console.print("actions: " + ", ".join(f"{k} {v:.1%}" for k, v in rep["action_balance"].items()))
    flat = {pid: n for fam in rep["phenomena"].values() for pid, n in fam.items()}
    # a dyadic run has no group phenomena and a group run few dyadic ones: a family the run never
    # touched is named once, the misses listed are those of the families it did touch
    unseen = [fam for fam, items in rep["phenomena"].items() if not any(items.values())]
    missing = [p for fam, items in rep["phenomena"].items() if fam not in unseen for p, n in items.items() if not n]
    console.print(f"phenomena: {sum(1 for n in flat.values() if n)} of {len(flat)} items seen; missing: "
                  + (", ".join(missing) or "none") + (f"; families with no events: {', '.join(unseen)}" if unseen else ""))
    for k, a in rep.get("asr", {}).items():
        console.print(f"asr {k}: {a['metric']} mean {a['mean']:.3f}, p90 {a['p90']:.3f} over {a['events']} events, "
                      f"{a['rerendered']:.0%} re-rendered")
    if rep.get("group"):
        print_group(rep["group"], console)
    console.print("rejects: " + (", ".join(f"{k} {v}" for k, v in rep["rejects_by_reason"].items()) or "none"))
