"""The learnability report as one self-contained HTML page: matplotlib charts (base64 PNG,
imported lazily), colour-coded tables, warnings first. Reads the dict :mod:`.experiment` builds."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

from .report import (
    _reference_line,
    CURVE_METRICS,
    HEADLINE,
    _COLOURS,
    _DASH,
    _ci,
    _hours,
    _row_best,
    _signed,
    best_baseline,
    compare,
    eval_line,
    excludes_zero,
    fmt_interval,
    fmt_value,
    higher_is_better,
    is_latency,
    is_rate,
    metric_label,
    ordered_metrics,
    ordered_systems,
    system_label,
    system_metrics,
    train_line,
    trained_on_line,
)


def _png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (the Agg renderer; no pyplot, so no global state)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _errors(cis: list[dict | None]) -> tuple[list[float], list[list[float]]]:
    """Bar heights and asymmetric error sizes; a missing value is NaN, a missing interval 0."""
    nan = float("nan")
    values = [ci["value"] if ci and ci.get("value") is not None else nan for ci in cis]
    lows = [max(v - ci["lo"], 0.0) if ci and ci.get("lo") is not None and v == v else 0.0
            for v, ci in zip(values, cis)]
    highs = [max(ci["hi"] - v, 0.0) if ci and ci.get("hi") is not None and v == v else 0.0
             for v, ci in zip(values, cis)]
    return values, [lows, highs]


def _grouped_bars(ax, metrics: list[str], systems: dict[str, dict], names: list[str]) -> None:
    """Bars of ``metrics`` (groups) by system (bars in a group) with their intervals."""
    import textwrap

    width = 0.8 / max(len(names), 1)
    for i, n in enumerate(names):
        values, yerr = _errors([_ci(systems[n], m) for m in metrics])
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(metrics))]
        keep = [k for k, v in enumerate(values) if v == v]  # NaN (no value) bars would upset the limits
        ax.bar([xs[k] for k in keep], [values[k] for k in keep], width, label=system_label(n),
               yerr=[[yerr[0][k] for k in keep], [yerr[1][k] for k in keep]], capsize=2,
               color=_COLOURS.get(n, f"C{i}"), edgecolor="#333" if n == "model" else "none",
               linewidth=1.0, error_kw={"elinewidth": 0.9, "ecolor": "#333"})
        for k in sorted(set(range(len(values))) - set(keep)):
            ax.text(xs[k], 0.02, "n/a", rotation=90, ha="center", va="bottom", fontsize=7, color="#777",
                    transform=ax.get_xaxis_transform())
    ax.set_xlim(-0.5, len(metrics) - 0.5)
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels([textwrap.fill(metric_label(m), 14) for m in metrics], fontsize=8)
    ax.axhline(0, color="#444", lw=0.6)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def eval_figure(ev: dict) -> bytes:
    """One eval: scores (higher is better) on top; latency and take-over rates (lower is better) below."""
    from matplotlib.figure import Figure

    systems = ev.get("systems") or {}
    names = ordered_systems(systems)
    metrics = system_metrics(systems, defined=True)  # a metric no system has: in the table only
    groups = [("higher is better", [m for m in metrics if higher_is_better(m)]),
              ("latency, ms (lower is better)", [m for m in metrics if is_latency(m)]),
              ("take-over rate (lower is better)", [m for m in metrics if is_rate(m)])]
    top, bottom = [g for g in groups[:1] if g[1]], [g for g in groups[1:] if g[1]]
    fig = Figure(figsize=(11, 3.4 * len(top) + 3.0 * bool(bottom)))
    if not top and not bottom:
        fig.set_size_inches(6, 0.6)
        fig.text(0.5, 0.5, "no system has a value to plot", ha="center", va="center")
        return _png(fig)
    grid = fig.add_gridspec(len(top) + bool(bottom), max(len(bottom), 1),
                            width_ratios=[max(len(g[1]), 2) for g in bottom] or None)
    panels = [(fig.add_subplot(grid[0, :]), g) for g in top] + \
        [(fig.add_subplot(grid[len(top), i]), g) for i, g in enumerate(bottom)]
    for ax, (title, ms) in panels:
        _grouped_bars(ax, ms, systems, names)
        ax.set_title(title, fontsize=9, loc="left")
        if title == "higher is better":
            ax.set_ylim(0, 1.05)
    handles, labels = panels[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(names), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 1.04))
    fig.tight_layout()
    return _png(fig)


def curve_figure(curve: list[dict]) -> bytes:
    """F1 against training hours (log scale), one line per metric, intervals shaded."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullLocator

    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot()
    points = sorted(curve, key=lambda p: p["hours"])
    hours = [p["hours"] for p in points]
    for i, m in enumerate(CURVE_METRICS):
        values, (lows, highs) = _errors([(p.get("metrics") or {}).get(m) for p in points])
        if all(v != v for v in values):
            continue
        ax.plot(hours, values, marker="o", color=f"C{i}", label=metric_label(m))
        lo = [v - d for v, d in zip(values, lows)]
        hi = [v + d for v, d in zip(values, highs)]
        ax.fill_between(hours, lo, hi, color=f"C{i}", alpha=0.18, linewidth=0)
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(hours))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([f"{h:g}" for h in hours])
    ax.set_xlabel("training hours (log scale)")
    ax.set_ylabel("F1 on held-out runs")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _png(fig)


def ablation_figure(ablations: list[dict]) -> bytes:
    """Each ablation's effect (ablated minus full) per metric as a horizontal bar with its
    interval; bars whose interval excludes 0 are coloured, the rest grey."""
    import textwrap

    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    metrics = ordered_metrics({m for a in ablations for m, ci in (a.get("effects") or {}).items()
                               if ci and ci.get("value") is not None})
    fig = Figure(figsize=(11, max(2.0, 0.9 + 0.45 * len(ablations))))
    axes = fig.subplots(1, max(len(metrics), 1), sharey=True, squeeze=False)[0]
    ys = list(range(len(ablations)))[::-1]
    for ax, m in zip(axes, metrics):
        cis = [(a.get("effects") or {}).get(m) for a in ablations]
        values, xerr = _errors(cis)
        colours = [_effect_colour(m, ci) for ci in cis]
        ax.barh(ys, values, xerr=xerr, color=colours, capsize=2, height=0.6,
                error_kw={"elinewidth": 0.9, "ecolor": "#333"})
        ax.axvline(0, color="#222", lw=0.9)
        ax.set_title(metric_label(m), fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(ys)
    axes[0].set_yticklabels([textwrap.fill(a["name"], 28) for a in ablations], fontsize=8)
    fig.legend(handles=[Patch(color="#d62728", label="worse without it (interval excludes 0)"),
                        Patch(color="#1f77b4", label="better without it (interval excludes 0)"),
                        Patch(color="#bdbdbd", label="interval includes 0")],
               loc="upper center", ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 1.1))
    fig.tight_layout()
    return _png(fig)


def _effect_colour(metric: str, ci: dict | None) -> str:
    if not excludes_zero(ci):
        return "#bdbdbd"
    worse = (ci["hi"] < 0) == higher_is_better(metric)
    return "#d62728" if worse else "#1f77b4"


# -- the page ------------------------------------------------------------------------------
def _e(x: Any) -> str:
    return html.escape(str(x))


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'


def _colour(metric: str, ci: dict | None) -> str:
    """A pale background for a value: red (bad) to green (good) for scores and take-over rates;
    latencies, whose good value depends on the task, stay white."""
    if not ci or ci.get("value") is None or is_latency(metric):
        return "#fff"
    v = min(max(float(ci["value"]), 0.0), 1.0)
    hue = 120 * (v if higher_is_better(metric) else 1 - v)
    return f"hsl({hue:.0f},70%,88%)"


def _ci_html(metric: str, ci: dict | None, bold: bool = False) -> str:
    """A value (bold if ``bold``) with its interval after it, small; a dash when undefined."""
    if not ci or ci.get("value") is None:
        return f'<span class="na">{_DASH}</span>'
    value = _e(fmt_value(metric, ci["value"]))
    interval = fmt_interval(metric, ci)
    return (f'<span class="v">{f"<b>{value}</b>" if bold else value}</span>'
            + (f' <span class="iv">{_e(interval)}</span>' if interval else ""))


_BADGES = {"better": ("model ahead", "good"), "worse": ("model behind", "bad"),
           "overlap": ("intervals overlap", "even")}


def _headline_card(name: str, ev: dict) -> str:
    """One eval's headline: the model's start-speaking/-listening F1 next to the best baseline."""
    systems = ev.get("systems") or {}
    model = (systems.get("model") or {}).get("metrics") or {}
    rows = []
    for m in HEADLINE:
        best = best_baseline(systems, m)
        badge = ""
        if best and (model.get(m) or {}).get("value") is not None:
            text, cls = _BADGES[compare(m, model.get(m), best[1])]
            badge = f'<span class="badge {cls}">{text}</span>'
        base = (f'{_e(system_label(best[0]))}: {_ci_html(m, best[1])}' if best else _DASH)
        rows.append(f'<div class="hl"><div class="hlm">{_e(metric_label(m))}</div>'
                    f'<div class="big">{_ci_html(m, model.get(m))}</div>'
                    f'<div class="base">best baseline — {base}</div>{badge}</div>')
    return (f'<div class="card"><h3>{_e(name)}</h3><div class="sub">{_e(eval_line(ev))}</div>'
            f'{"".join(rows)}</div>')


def _header_html(report: dict) -> str:
    cards = "".join(_headline_card(n, ev) for n, ev in (report.get("evals") or {}).items())
    created = report.get("created_by")
    return ("<header><h1>Turn-taking learnability</h1>"
            f'<p class="sub">{_e(train_line(report))}</p>'
            + (f"<p class=\"sub\"><code>{_e(created)}</code></p>" if created else "")
            + f'<div class="cards">{cards}</div></header>')


def _warnings_html(report: dict) -> str:
    warnings = report.get("warnings") or []
    if not warnings:
        return ""
    items = "".join(f"<li>{_e(w)}</li>" for w in warnings)
    return f'<section class="warn"><h2>⚠ {len(warnings)} warning{"s" * (len(warnings) != 1)}</h2><ul>{items}</ul></section>'


def _systems_table(ev: dict) -> str:
    """All metrics × all systems, cells coloured by value, each row's best in bold."""
    systems = ev.get("systems") or {}
    names = ordered_systems(systems)
    metrics = system_metrics(systems)
    head = "".join(f'<th class="{"model" if n == "model" else ""}">{_e(system_label(n))}'
                   + (f'<br><small>{_e(systems[n]["seeds"])} seed{"s" * (systems[n]["seeds"] != 1)}</small>'
                      if isinstance(systems[n].get("seeds"), int) else "") + "</th>" for n in names)
    rows = []
    for m in metrics:
        best = _row_best(systems, m)
        tds = "".join(f'<td style="background:{_colour(m, ci)}" class="{"model" if n == "model" else ""}">'
                      f"{_ci_html(m, ci, n in best)}</td>"
                      for n in names for ci in [_ci(systems[n], m)])
        rows.append(f"<tr><th class=\"row\">{_e(metric_label(m))}</th>{tds}</tr>")
    return f'<div class="scroll"><table><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'


def _breakdown_table(ev: dict, key: str, title: str) -> str:
    """The model's metrics per language or per family (``key``), with the best baseline of the
    same group below each cell (▲/▼ where the intervals separate)."""
    systems = ev.get("systems") or {}
    main = "model" if "model" in systems else next(iter(ordered_systems(systems)), None)
    by = (systems.get(main) or {}).get(key) or {}
    if not by:
        return ""
    groups = list(by)
    metrics = ordered_metrics({m for g in by.values() for m in g})
    rows = []
    for m in metrics:
        tds = []
        for g in groups:
            ci = by[g].get(m)
            others = {n: {"metrics": (s.get(key) or {}).get(g) or {}} for n, s in systems.items() if n != main}
            best = best_baseline(others, m)
            vs = ""
            if best:
                mark = {"better": "▲ ", "worse": "▼ ", "overlap": ""}[compare(m, ci, best[1])]
                vs = (f'<div class="vs" title="{_e(system_label(best[0]))}">{mark}vs '
                      f'{_e(fmt_value(m, best[1]["value"]))} {_e(system_label(best[0]))}</div>')
            tds.append(f'<td style="background:{_colour(m, ci)}">{_ci_html(m, ci)}{vs}</td>')
        rows.append(f"<tr><th class=\"row\">{_e(metric_label(m))}</th>{''.join(tds)}</tr>")
    head = "".join(f"<th>{_e(g)}</th>" for g in groups)
    return (f"<h3>{_e(title)} <small>({_e(system_label(main))})</small></h3><div class=\"scroll\"><table>"
            f"<thead><tr><th></th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


def _eval_html(name: str, ev: dict) -> str:
    runs = "".join(f"<li><code>{_e(r)}</code></li>" for r in ev.get("runs") or [])
    notes = "".join(f"<li><b>{_e(system_label(n))}</b>: {_e(s['note'])}</li>"
                    for n, s in (ev.get("systems") or {}).items() if s.get("note"))
    return (f'<section class="eval"><h2>{_e(name)}</h2>'
            f'<p class="sub">{_e(eval_line(ev))}</p>'
            + (f'<p class="note">{_e(trained_on_line(ev))}</p>' if ev.get("trained_on") else "")
            + (_img(eval_figure(ev), f"{name}: model and baselines") if ev.get("systems") else "")
            + _systems_table(ev)
            + (f'<ul class="notes">{notes}</ul>' if notes else "")
            + _breakdown_table(ev, "per_language", "Per language")
            + _breakdown_table(ev, "per_family", "Per phenomenon family")
            + (f"<details><summary>runs</summary><ul>{runs}</ul></details>" if runs else "")
            + "</section>")


def _curve_html(curve: list[dict]) -> str:
    rows = "".join(f"<tr><td>{p['hours']:g}</td><td>{_e(_hours(p.get('train_hours', p['hours'])))}</td>"
                   f"<td>{_e(p.get('seeds', '?'))}</td>"
                   + "".join(f"<td style=\"background:{_colour(m, ci)}\">{_ci_html(m, ci)}</td>"
                             for m in CURVE_METRICS for ci in [(p.get("metrics") or {}).get(m)])
                   + "</tr>" for p in sorted(curve, key=lambda p: p["hours"]))
    head = "".join(f"<th>{_e(metric_label(m))}</th>" for m in CURVE_METRICS)
    return ('<section><h2>Learning curve</h2>' + _img(curve_figure(curve), "learning curve")
            + f"<table><thead><tr><th>hours</th><th>trained on</th><th>seeds</th>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table></section>")


def _ablations_html(ablations: list[dict], ref: dict | None = None) -> str:
    metrics = ordered_metrics({m for a in ablations for m in (a.get("effects") or {})})
    head = "".join(f"<th>{_e(metric_label(m))}</th>" for m in metrics)
    rows = []
    for a in ablations:
        effects = a.get("effects") or {}
        tds = "".join(f'<td class="{_effect_class(m, effects.get(m))}">{_e(_signed(m, effects.get(m)))}</td>'
                      for m in metrics)
        rows.append(f"<tr><th class=\"row\">{_e(a['name'])}</th><td>{_e(_hours(a.get('train_hours', a.get('hours'))))}</td>"
                    f"<td>{_e(a.get('seeds', '?'))}</td>{tds}</tr>")
    return ("<section><h2>Ablations</h2><p class=\"sub\">Effect = ablated minus full, paired over seeds and "
            "sessions; highlighted where the interval excludes 0.</p>"
            + (f'<p class="note">{_e(_reference_line(ref))}</p>' if ref else "") + _img(ablation_figure(ablations), "ablations")
            + f"<table><thead><tr><th>ablation</th><th>trained on</th><th>seeds</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _effect_class(metric: str, ci: dict | None) -> str:
    """``worse``/``better`` (without the ablated part) where the interval excludes 0, else ``""``."""
    return {"#d62728": "sig worse", "#1f77b4": "sig better"}.get(_effect_colour(metric, ci), "")


def _kv_table(title: str, d: dict) -> str:
    rows = "".join(f"<tr><th class=\"row\">{_e(k)}</th><td>{_e(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))}</td></tr>"
                   for k, v in d.items())
    return f"<div><h3>{_e(title)}</h3><table class=\"kv\">{rows}</table></div>" if d else ""


def _footer_html(report: dict) -> str:
    tables = [_kv_table(title, report.get(key) or {}) for title, key in
              (("config", "config"), ("machine", "machine"), ("model", "model"), ("training data", "train"))]
    return "<footer><h2>Setup</h2><div class=\"setup\">" + "".join(tables) + "</div></footer>"


_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1150px;margin:1.5em auto;padding:0 1em;color:#222}
h1{margin:.2em 0}h2{margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:.2em}
.sub{color:#555;margin:.2em 0}code{font-size:12px;background:#f3f3f3;padding:1px 4px;border-radius:3px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:1em 0}
.card{flex:1 1 320px;border:1px solid #ccd;border-radius:8px;padding:10px 14px;background:#fafbff}
.card h3{margin:0 0 2px}.hl{margin-top:10px}.hlm{font-size:13px;color:#444}
.big{font-size:26px}.big .iv{font-size:15px;color:#555}.base{font-size:13px;color:#555}
.badge{display:inline-block;font-size:12px;padding:1px 8px;border-radius:10px;margin-top:3px}
.good{background:#d4f0d4;color:#185c18}.bad{background:#f7d4d4;color:#7a1717}.even{background:#eee;color:#444}
.warn{background:#fff4d6;border:2px solid #e0a800;border-radius:8px;padding:4px 16px;margin:1em 0}
.warn h2{border:0;margin:.4em 0;color:#7a5600}.warn li{margin:.3em 0}
table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px;text-align:right}
th{background:#eef}th.row{text-align:left;background:#f6f6fa;font-weight:normal}
td.model,th.model{border-left:2px solid #1f77b4;border-right:2px solid #1f77b4}
.note{color:#6a4a00;font-size:14px}th small{font-weight:normal;color:#555}.iv{color:#555;font-size:11px}.na{color:#999}.vs{font-size:11px;color:#555}
td.sig{font-weight:bold}td.worse{background:#f9d0d0}td.better{background:#d3e3f6}
thead th:first-child{text-align:left}
.scroll{overflow-x:auto}img{max-width:100%;display:block;margin:.5em 0}
.kv td{text-align:left;font-family:monospace;font-size:12px;max-width:560px;overflow-wrap:anywhere}.notes{font-size:13px;color:#444}
footer{margin-top:2em;color:#444}.setup{display:flex;flex-wrap:wrap;gap:0 28px}.setup h3{margin:.4em 0 0}
"""


def render_html(report: dict) -> str:
    """The whole page as one string: headline, warnings, one section per eval, the learning curve
    and ablations when present, the setup; every plot inline, every text escaped."""
    # the per-session statistics (``raw``) serve paired comparisons, not readers: left out of the page
    data = json.dumps({k: v for k, v in report.items() if k != "raw"}, sort_keys=True, ensure_ascii=False)
    data = data.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    parts = [_header_html(report), _warnings_html(report),
             *[_eval_html(n, ev) for n, ev in (report.get("evals") or {}).items()],
             _curve_html(report["learning_curve"]) if report.get("learning_curve") else "",
             _ablations_html(report["ablations"], report.get("ablation_reference")) if report.get("ablations") else "",
             _footer_html(report),
             f'<script type="application/json" id="report-data">{data}</script>']
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>synth learn report</title>'
            f"<style>{_STYLE}</style></head><body>{''.join(parts)}</body></html>")


def write_html(report: dict, path: Path) -> None:
    """Write :func:`render_html` of ``report`` to ``path`` atomically."""
    from ..io.files import write_text_atomic

    write_text_atomic(Path(path), render_html(report))
