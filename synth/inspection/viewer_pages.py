"""The HTML of ``synth view``: the paged, filtered index and the page of one session.

The session page holds one ``<audio>`` element playing the stereo mix (ch0 user side left, ch1
system right), a channel strip (mute/solo, applied by ``viewer.js`` with Web Audio gains), an SVG
timeline drawn from the record (events per speaker lane coloured by act, work items, the
``sys_action`` lane, a playhead) and the transcript, one line per event with its speaker, act,
relation and phenomenon tags; a click on a line or on the timeline seeks the player.
"""

from __future__ import annotations

import hashlib
from html import escape
from urllib.parse import urlencode

from ..schema.labels import SYS_ACTIONS
from ..schema.plan import people_of, talker
from .viewer_data import Catalogue, Filters, Page

LANES = ("user", "system", "third_party", "background", "backend")
LANE_NAMES = {"user": "ch0 user", "system": "ch1 system", "third_party": "third party",
              "background": "background", "backend": "backend"}
ACTION_COLOURS = ("#e6e6e6", "#4c9be8", "#e8a33c", "#9b59b6")
# tab20, as the preview picture uses for acts
PALETTE = ("#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896",
           "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2", "#7f7f7f", "#c7c7c7",
           "#bcbd22", "#dbdb8d", "#17becf", "#9edae5")
W = 1000.0  # timeline user units across the whole session
LANE_H = 18


def _head(title: str) -> str:
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
            '<link rel="stylesheet" href="/static/viewer.css"><script defer src="/static/viewer.js"></script>'
            "</head><body>")


def act_colour(act: str) -> str:
    """A stable colour per act name (the same act has the same colour on every page)."""
    return PALETTE[int.from_bytes(hashlib.blake2b(act.encode(), digest_size=2).digest(), "big") % len(PALETTE)]


def clock(t: float) -> str:
    m, s = divmod(max(0.0, t), 60)
    return f"{int(m)}:{s:04.1f}"


# -- index ------------------------------------------------------------------------------------
def _select(name: str, label: str, current: str, counts) -> str:
    opts = [f'<option value=""{" selected" if not current else ""}>any</option>']
    for value, n in sorted(counts.items()):
        sel = " selected" if value == current else ""
        opts.append(f'<option value="{escape(value)}"{sel}>{escape(value)} ({n})</option>')
    return f'<label>{label} <select name="{name}">{"".join(opts)}</select></label>'


def _query(f: Filters, page: int, per: int) -> str:
    q = {"lang": f.language, "scenario": f.scenario, "phen": f.phenomenon, "page": page, "per": per}
    return "?" + urlencode({k: v for k, v in q.items() if v not in ("", None)})


def index_page(cat: Catalogue, run_name: str, f: Filters, pg: Page) -> str:
    fac = cat.facets()
    form = ('<form class="filters" method="get" action="/">'
            + _select("lang", "language", f.language, fac["language"])
            + _select("scenario", "scenario", f.scenario, fac["scenario"])
            + _select("phen", "phenomenon", f.phenomenon, fac["phenomenon"])
            + f'<input type="hidden" name="per" value="{pg.per}"><button type="submit">filter</button>'
            + ' <a href="/">clear</a></form>')
    rows = []
    for e in pg.entries:
        sid = escape(e.session_id)
        tags = "".join(f'<span class="tag">{escape(p)}</span>' for p in e.phenomena)
        rows.append(f'<tr class="session" data-session="{sid}"><td><a href="/session/{sid}">{sid}</a></td>'
                    f"<td>{escape(e.scenario_id)}</td><td>{escape(e.language)}</td>"
                    f'<td class="num">{e.duration_s:.1f}</td><td class="num">{e.num_events}</td><td>{tags}</td></tr>')
    nav = []
    if pg.number > 1:
        nav.append(f'<a rel="prev" href="/{_query(f, pg.number - 1, pg.per)}">&larr; previous</a>')
    nav.append(f'<span class="pageno">page {pg.number} of {pg.pages}</span>')
    if pg.number < pg.pages:
        nav.append(f'<a rel="next" href="/{_query(f, pg.number + 1, pg.per)}">next &rarr;</a>')
    first = (pg.number - 1) * pg.per + 1 if pg.matched else 0
    last = min(pg.number * pg.per, pg.matched)
    return (_head(f"{run_name} sessions")
            + f'<h1>{escape(run_name)}</h1><p class="summary"><span id="matched">{pg.matched}</span> of '
            f"{len(cat.entries)} sessions match · showing {first}–{last} · "
            '<a href="/report">statistics report</a></p>' + form
            + '<table class="sessions"><thead><tr><th>session</th><th>scenario</th><th>language</th>'
            '<th>duration (s)</th><th>events</th><th>phenomena</th></tr></thead><tbody>'
            + "".join(rows) + f'</tbody></table><nav class="pager">{" ".join(nav)}</nav></body></html>')


# -- one session --------------------------------------------------------------------------------
def _runs(values: list[int]):
    """``(start_frame, end_frame, value)`` for each run of equal values."""
    start = 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            yield start, i, values[start]
            start = i


def _who(e) -> str:
    """Who speaks, and in a group to whom (``maya → system``)."""
    name = LANE_NAMES.get(talker(e), talker(e))
    return f"{name} → {e.addressee}" if e.addressee and e.speaker != "background" else name


def timeline_svg(rec) -> str:
    """Lanes per speaker present (events coloured by act), work items and ``sys_action``."""
    sr, total = rec.sample_rate, max(1, rec.num_samples)
    x = lambda sample: W * sample / total  # noqa: E731
    people = people_of(rec.events)
    lanes = [p for s in LANES for p in (people if s == "user" and people else [s])
             if any(talker(e) == p for e in rec.events)]  # a group: one lane per person
    rows, labels = [], []
    for li, spk in enumerate(lanes):
        y = li * LANE_H
        labels.append(LANE_NAMES.get(spk, spk))
        for e in rec.events:
            if talker(e) != spk:
                continue
            t0, t1 = e.on_sample / sr, e.off_sample / sr
            rows.append(f'<rect class="ev" data-event="{escape(e.id)}" data-start="{t0:.3f}" x="{x(e.on_sample):.2f}" '
                        f'y="{y + 2}" width="{max(0.6, x(e.off_sample) - x(e.on_sample)):.2f}" height="{LANE_H - 4}" '
                        f'fill="{act_colour(e.act)}"><title>{clock(t0)}–{clock(t1)} {escape(spk)} '
                        f"{escape(e.act)}: {escape(e.text)}</title></rect>")
    y = len(lanes) * LANE_H
    if rec.delegations:
        labels.append("work")
        for w in rec.delegations:
            rows.append(f'<rect class="work" x="{x(w.open_sample):.2f}" y="{y + 4}" '
                        f'width="{max(0.6, x(w.close_sample) - x(w.open_sample)):.2f}" height="{LANE_H - 8}" '
                        f'fill="{"#c0392b" if w.outcome == "failure" or w.cancel_sample is not None else "#16a085"}">'
                        f"<title>{escape(w.tool)} ({w.outcome}): {escape(w.objective)}</title></rect>")
        y += LANE_H
    labels.append("sys_action")
    spf = total / max(1, len(rec.sys_action))
    for a, b, v in _runs(rec.sys_action):
        rows.append(f'<rect x="{x(a * spf):.2f}" y="{y + 4}" width="{x((b - a) * spf):.2f}" height="{LANE_H - 8}" '
                    f'fill="{ACTION_COLOURS[v % 4]}"><title>{SYS_ACTIONS[v] if v < len(SYS_ACTIONS) else v}</title></rect>')
    height = y + LANE_H
    ticks = "".join(f'<span style="left:{100 * t / rec.duration_s:.3f}%">{clock(t)}</span>'
                    for t in _tick_times(rec.duration_s))
    lane_labels = "".join(f'<div style="height:{LANE_H}px">{escape(n)}</div>' for n in labels)
    return (f'<div class="timeline"><div class="lanes">{lane_labels}</div><div class="plot">'
            f'<svg id="timeline" viewBox="0 0 {W:.0f} {height}" preserveAspectRatio="none" '
            f'style="height:{height}px" data-duration="{rec.duration_s:.3f}">{"".join(rows)}'
            f'<line id="playhead" x1="0" x2="0" y1="0" y2="{height}" vector-effect="non-scaling-stroke"/></svg>'
            f'<div class="ticks">{ticks}</div></div></div>')


def _tick_times(duration_s: float) -> list[float]:
    step = next(s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1e9) if duration_s / s <= 12)
    return [i * step for i in range(int(duration_s // step) + 1)]


def transcript_html(rec) -> str:
    sr = rec.sample_rate
    tags_of: dict[str, set[str]] = {}
    for h in rec.phenomena:
        tags_of.setdefault(h.event_id, set()).add(h.id)
    lines = []
    for e in sorted(rec.events, key=lambda e: (e.on_sample, e.id)):
        t0, t1 = e.on_sample / sr, e.off_sample / sr
        tags = sorted(set(e.phenomena) | tags_of.get(e.id, set()))
        rel = f"{e.relation}@{e.attach_to}" if e.relation and e.attach_to else (e.relation or "")
        cut = f' <span class="cut" title="not said (cut)">{escape(e.text_after_cut)}</span>' if e.text_after_cut else ""
        lines.append(
            f'<li class="line spk-{e.speaker}" data-event="{escape(e.id)}" data-start="{t0:.3f}" data-end="{t1:.3f}">'
            f'<span class="t">{clock(t0)}</span><span class="spk">{escape(_who(e))}</span>'
            f'<span class="act" style="border-color:{act_colour(e.act)}">{escape(e.act)}</span>'
            f'<span class="text">{escape(e.text)}{cut}</span>'
            + (f'<span class="rel">{escape(rel)}</span>' if rel else "")
            + "".join(f'<span class="tag">{escape(t)}</span>' for t in tags) + "</li>")
    work = []
    for w in rec.delegations:
        state = "cancelled" if w.cancel_sample is not None else ("stale" if w.stale else w.outcome)
        work.append(f'<li class="line work" data-start="{w.open_sample / sr:.3f}">'
                    f'<span class="t">{clock(w.open_sample / sr)}</span><span class="spk">work</span>'
                    f'<span class="act">{escape(w.tool)} · {state}</span>'
                    f'<span class="text">{escape(w.objective)} → {escape(w.result_text)}</span></li>')
    out = f'<ol id="transcript">{"".join(lines)}</ol>'
    return out + (f'<h3>work items</h3><ol class="work">{"".join(work)}</ol>' if work else "")


def session_page(session, cat: Catalogue) -> str:
    rec = session.record
    sid = escape(rec.session_id)
    before, after = cat.neighbours(rec.session_id)
    nav = ['<a href="/">&uarr; all sessions</a>']
    if before:
        nav.append(f'<a rel="prev" href="/session/{escape(before)}">&larr; {escape(before)}</a>')
    if after:
        nav.append(f'<a rel="next" href="/session/{escape(after)}">{escape(after)} &rarr;</a>')
    phen = "".join(f'<span class="tag">{escape(p)}</span>' for p in sorted({h.id for h in rec.phenomena}))
    acts = sorted({e.act for e in rec.events})
    legend = "".join(f'<span class="key"><i style="background:{act_colour(a)}"></i>{escape(a)}</span>' for a in acts)
    strip = "".join(
        f'<div class="chan" data-channel="{i}" data-gain="1"><span class="name">{name}</span>'
        f'<button class="mute" aria-pressed="false">mute</button><button class="solo" aria-pressed="false">solo</button>'
        f'<meter min="0" max="1" value="0"></meter></div>'
        for i, name in enumerate(("ch0 user side (left)", "ch1 system (right)")))
    return (_head(f"{rec.session_id} · {run_title(cat)}")
            + f'<nav class="top">{" ".join(nav)}</nav><h1>{sid}</h1>'
            f'<p class="summary">{escape(rec.scenario_id)} · {rec.language} · {rec.duration_s:.1f} s · '
            f"{len(rec.events)} events · {len(rec.delegations)} work items · {escape(session.shard)}</p>"
            f'<p class="phen">{phen}</p>'
            f'<div class="player"><audio id="player" controls preload="auto" src="/audio/{sid}/mix.flac" '
            f'data-duration="{rec.duration_s:.3f}"></audio><span id="now">0:00.0</span>'
            f'<div class="strip">{strip}</div></div>'
            + timeline_svg(rec) + f'<p class="legend">{legend}</p>'
            + '<h2>transcript</h2>' + transcript_html(rec)
            + f'<details><summary>preview picture</summary><img loading="lazy" alt="{sid}" '
            f'src="/preview/{sid}.png"></details></body></html>')


def run_title(cat: Catalogue) -> str:
    return cat.run.name
