"""The learnability report: terminal tables and one self-contained HTML page.

The report is a plain JSON dict (``kind: synth-learn-report``) that ``experiment`` builds; this
module only reads it. A score is a CI dict ``{"value": 0.81, "lo": 0.77, "hi": 0.85}`` where any
of the three may be ``None`` (no events, no bootstrap). :func:`summary_table` and
:func:`print_summary` are the terminal view (rich), :func:`write_html` the page (plots as base64
PNG, matplotlib imported lazily), :func:`write_json` / :func:`load_report` the file.

>>> fmt_ci("start_speaking_f1", {"value": 0.812, "lo": 0.771, "hi": 0.853})
'0.81 [0.77, 0.85]'
"""

from __future__ import annotations

import json
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import UserError

KIND, VERSION = "synth-learn-report", 1

METRICS = (
    "start_speaking_f1", "start_listening_f1", "start_speaking_latency_ms", "start_listening_latency_ms",
    "floor_macro_f1", "floor_precision", "shift_hold_bacc", "shift_prediction_auc",
    "backchannel_prediction_auc", "takeover_user_pause", "takeover_backchannel", "takeover_side_talk",
    "takeover_background",
)
"""Known metric names in display order; other names follow them, sorted."""

HEADLINE = ("start_speaking_f1", "start_listening_f1")
CURVE_METRICS = ("start_speaking_f1", "start_listening_f1", "floor_macro_f1")
SYSTEMS = ("model", "prior", "silence_rule", "vad_only", "shuffled_labels", "channel_swap")

_LABELS = {  # metric: (long label, short label for narrow terminals)
    "start_speaking_f1": ("start speaking F1", "start-spk F1"),
    "start_listening_f1": ("start listening F1", "start-lst F1"),
    "start_speaking_latency_ms": ("start speaking latency ms", "start-spk ms"),
    "start_listening_latency_ms": ("start listening latency ms", "start-lst ms"),
    "floor_macro_f1": ("floor macro F1", "floor F1"), "floor_precision": ("floor precision", "floor prec"),
    "shift_hold_bacc": ("shift/hold bal. acc.", "shift/hold"),
    "shift_prediction_auc": ("shift prediction AUC", "shift pred"),
    "backchannel_prediction_auc": ("backchannel prediction AUC", "bc pred"),
    "takeover_user_pause": ("take-over: user pause", "t/o pause"),
    "takeover_backchannel": ("take-over: backchannel", "t/o bc"),
    "takeover_side_talk": ("take-over: side talk", "t/o side"),
    "takeover_background": ("take-over: background", "t/o backgr"),
}
_SYSTEM_NAMES = {"model": "model", "prior": "prior", "silence_rule": "silence rule", "vad_only": "VAD only",
                 "shuffled_labels": "shuffled labels", "channel_swap": "channel swap"}
_COLOURS = {"model": "#1f77b4", "prior": "#9e9e9e", "silence_rule": "#ff7f0e", "vad_only": "#2ca02c",
            "shuffled_labels": "#c5b0d5", "channel_swap": "#8c564b"}
_DASH = "–"


# -- numbers -------------------------------------------------------------------------------
def is_latency(metric: str) -> bool:
    """Latencies are in ms: lower is better, and they may be negative (early)."""
    return metric.endswith("_ms")


def is_rate(metric: str) -> bool:
    """Take-over rates are fractions of opportunities where the model took the floor: lower is better."""
    return metric.startswith("takeover_")


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is the better one."""
    return not (is_latency(metric) or is_rate(metric))


def metric_label(metric: str, short: bool = False) -> str:
    """The human name of a metric (``short`` for narrow terminals); unknown names de-underscored."""
    return _LABELS[metric][short] if metric in _LABELS else metric.replace("_", " ")


def system_label(system: str) -> str:
    """The human name of a system (the model or a baseline)."""
    return _SYSTEM_NAMES.get(system) or system.replace("_", " ")


def ordered_metrics(names) -> list[str]:
    """``names`` in :data:`METRICS` order, unknown ones after them, sorted."""
    names = set(names)
    return [m for m in METRICS if m in names] + sorted(names - set(METRICS))


def system_metrics(systems: dict[str, dict], defined: bool = False) -> list[str]:
    """The metrics any of ``systems`` has (only those with a value where ``defined``), in order."""
    return ordered_metrics({m for s in systems.values() for m, ci in (s.get("metrics") or {}).items()
                            if not defined or (ci or {}).get("value") is not None})


def ordered_systems(names) -> list[str]:
    """``names`` with the model first, then the baselines of :data:`SYSTEMS`, then any others."""
    names = set(names)
    return [s for s in SYSTEMS if s in names] + sorted(names - set(SYSTEMS))


def fmt_value(metric: str, x: float | None) -> str:
    """One number: ms as whole numbers, everything else with two decimals; ``None`` as a dash."""
    if x is None:
        return _DASH
    return f"{x:.0f}" if is_latency(metric) else f"{x:.2f}"


def fmt_interval(metric: str, ci: dict | None) -> str:
    """``[lo, hi]``, or ``""`` where the interval is unknown."""
    if not ci or ci.get("lo") is None or ci.get("hi") is None:
        return ""
    return f"[{fmt_value(metric, ci['lo'])}, {fmt_value(metric, ci['hi'])}]"


def fmt_ci(metric: str, ci: dict | None) -> str:
    """A CI dict as ``0.81 [0.77, 0.85]``; ``–`` for a missing or undefined value."""
    if not ci or ci.get("value") is None:
        return _DASH
    interval = fmt_interval(metric, ci)
    return f"{fmt_value(metric, ci['value'])} {interval}".rstrip()


def best_baseline(systems: dict[str, dict], metric: str) -> tuple[str, dict] | None:
    """The non-model system with the best value of ``metric`` (its name and CI), or ``None``."""
    scored = [(name, _ci(s, metric)) for name, s in systems.items()
              if name != "model" and _ci(s, metric).get("value") is not None]
    if not scored:
        return None
    sign = 1.0 if higher_is_better(metric) else -1.0
    return max(scored, key=lambda item: sign * item[1]["value"])


def compare(metric: str, model: dict | None, other: dict | None) -> str:
    """``better``, ``worse`` or ``overlap``: whether the model's interval clears the other's."""
    if not model or not other or model.get("value") is None or other.get("value") is None:
        return "overlap"
    lo_m, hi_m = model.get("lo", model["value"]), model.get("hi", model["value"])
    lo_o, hi_o = other.get("lo", other["value"]), other.get("hi", other["value"])
    if None in (lo_m, hi_m, lo_o, hi_o):
        return "overlap"
    if lo_m > hi_o:
        return "better" if higher_is_better(metric) else "worse"
    if hi_m < lo_o:
        return "worse" if higher_is_better(metric) else "better"
    return "overlap"


def excludes_zero(ci: dict | None) -> bool:
    """Whether an effect's interval lies wholly on one side of 0."""
    return bool(ci) and ci.get("lo") is not None and ci.get("hi") is not None and (ci["lo"] > 0 or ci["hi"] < 0)


def _row_best(systems: dict[str, dict], metric: str) -> set[str]:
    """The systems holding a row's best value (none where all values are equal)."""
    values = {n: _ci(s, metric).get("value") for n, s in systems.items()}
    values = {n: v for n, v in values.items() if v is not None}
    if len(set(values.values())) < 2:
        return set()
    best = (max if higher_is_better(metric) else min)(values.values())
    return {n for n, v in values.items() if v == best}


def _ci(system: dict, metric: str) -> dict:
    """A system's CI dict of ``metric``; ``{}`` where it has none."""
    return (system.get("metrics") or {}).get(metric) or {}


# -- the file ------------------------------------------------------------------------------
def write_json(report: dict, path: Path) -> None:
    """Write the report as JSON (sorted keys) atomically: a temp file beside it, then a rename."""
    from ..io.files import write_text_atomic

    write_text_atomic(Path(path), json.dumps(report, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def load_report(path: Path) -> dict:
    """Read a report written by :func:`write_json`; a :class:`UserError` names the file otherwise."""
    path = Path(path)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no such file (expected a synth-learn report)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a synth-learn report ({type(e).__name__}: {e})") from None
    kind = report.get("kind") if isinstance(report, dict) else None
    if kind != KIND:
        raise UserError(f"{path}: not a synth-learn report (kind {kind!r}, expected {KIND!r})")
    if not isinstance(report.get("version"), int) or report["version"] > VERSION:
        raise UserError(f"{path}: synth-learn report version {report.get('version')!r} is not one this "
                        f"duplexsynth reads (up to {VERSION})")
    return report


# -- terminal ------------------------------------------------------------------------------
def _cells(metrics: list[str], systems: dict[str, dict], names: list[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(metric, system) -> (value text, interval text)."""
    return {(m, n): (fmt_value(m, _ci(systems[n], m).get("value")), fmt_interval(m, _ci(systems[n], m)))
            for m in metrics for n in names}


def _plain_table(title: str, caption: str | None = None) -> Table:
    """A rich table of the terminal view: a rule under the header, no edges, one space between
    columns (so a column costs its width plus 2)."""
    return Table(title=Text(title, style="bold"), caption=caption, title_justify="left", caption_justify="left",
                 box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)


_LAYOUTS = ((False, False, False), (True, False, False), (False, True, False), (True, True, False),
            (True, True, True))
"""(short labels, two-line cells, intervals without the space), most readable first."""


def _cell_text(value: str, interval: str, two_lines: bool, compact: bool) -> tuple[str, str]:
    """The cell's value and what follows it (a space or a line break, then the interval)."""
    if not interval or value == _DASH:
        return value, ""
    return value, ("\n" if two_lines else " ") + (interval.replace(", ", ",") if compact else interval)


def _layout(metrics: list[str], names: list[str], cells: dict, width: int) -> tuple[bool, bool, bool]:
    """The first of :data:`_LAYOUTS` whose table fits ``width`` columns (else the narrowest)."""
    for short, two_lines, compact in _LAYOUTS:
        label_w = max([len(metric_label(m, short)) for m in metrics] + [6])
        col_ws = []
        for n in names:
            parts = [_cell_text(*cells[m, n], two_lines, compact) for m in metrics]
            cell_w = max(max(len(line) for line in (v + rest).split("\n")) for v, rest in parts)
            col_ws.append(max(cell_w, min(len(system_label(n)), 8)))
        if label_w + sum(col_ws) + 2 * len(col_ws) <= width:
            return short, two_lines, compact
    return _LAYOUTS[-1]


def eval_table(name: str, ev: dict, width: int = 100) -> Table:
    """One eval as a rich table: metrics down, systems across (the model first), ``value [lo, hi]``
    cells; the best value of each row is bold. Labels shorten and intervals go below their
    values only where the table would not fit ``width`` columns otherwise."""
    systems = ev.get("systems") or {}
    names = ordered_systems(systems)
    metrics = system_metrics(systems)
    cells = _cells(metrics, systems, names)
    short, two_lines, compact = _layout(metrics, names, cells, width)
    caption = "\n".join(x for x in (trained_on_line(ev), "latency (ms) and take-over rates: lower is better") if x)
    table = _plain_table(f"{name}: {eval_line(ev)}", caption=caption)
    table.add_column("metric", no_wrap=True)
    for n in names:
        table.add_column(Text(system_label(n)), justify="right", style="cyan" if n == "model" else None)
    for m in metrics:
        best = _row_best(systems, m)
        row = []
        for n in names:
            value, rest = _cell_text(*cells[m, n], two_lines, compact)
            row.append(Text.assemble((value, "bold" if n in best else ""), (rest, "dim")))
        table.add_row(Text(metric_label(m, short)), *row)
    return table


def summary_table(report: dict, width: int = 100) -> list[Table]:
    """One rich table per eval of ``report`` (metrics × systems), laid out to fit ``width``."""
    return [eval_table(name, ev, width) for name, ev in (report.get("evals") or {}).items()]


def _curve_table(curve: list[dict]) -> Table:
    table = _plain_table("learning curve (the model, by training hours)")
    table.add_column("hours", justify="right")
    table.add_column("seeds", justify="right")
    for m in CURVE_METRICS:
        table.add_column(metric_label(m), justify="right")
    for point in curve:
        table.add_row(f"{point['hours']:g}", str(point.get("seeds", "?")),
                      *[Text(fmt_ci(m, (point.get("metrics") or {}).get(m))) for m in CURVE_METRICS])
    return table


def _reference_line(ref: dict | None) -> str:
    """The everything-on model the ablations are measured against, as one line."""
    if not ref:
        return ""
    metrics = (ref.get("metrics") or {})
    hours = _hours(ref.get("train_hours", ref.get("hours")))
    return (f"{ref.get('name', 'reference')}, {hours}: "
            + ", ".join(f"{metric_label(m)} {fmt_ci(m, metrics[m])}" for m in ordered_metrics(metrics)))


def _ablation_table(ablations: list[dict], ref: dict | None = None) -> Table:
    metrics = ordered_metrics({m for a in ablations for m in (a.get("effects") or {})})
    table = _plain_table("ablations: ablated minus full (* the interval excludes 0)", caption=_reference_line(ref) or None)
    table.add_column("ablation")
    for m in metrics:
        table.add_column(Text(metric_label(m)), justify="right")
    for a in ablations:
        effects = a.get("effects") or {}
        table.add_row(Text(a["name"]), *[Text(_signed(m, effects.get(m)) + " *", "bold")
                                        if excludes_zero(effects.get(m)) else Text(_signed(m, effects.get(m)))
                                        for m in metrics])
    return table


def _signed(metric: str, ci: dict | None) -> str:
    text = fmt_ci(metric, ci)
    return "+" + text if ci and ci.get("value") is not None and ci["value"] > 0 else text


def _hours(h: float | None) -> str:
    return f"{h:.2f} h" if isinstance(h, (int, float)) else "? h"


def eval_line(ev: dict) -> str:
    """``30 sessions, 1.00 h (en 10, zh 20)``: the size of one eval."""
    langs = ", ".join(f"{k} {v}" for k, v in (ev.get("languages") or {}).items())
    return f"{ev.get('sessions', '?')} sessions, {_hours(ev.get('hours'))}" + (f" ({langs})" if langs else "")


def trained_on_line(ev: dict) -> str:
    """Where an eval was scored by a model of its own (``trained_on``), what that model learnt from."""
    t = ev.get("trained_on") or {}
    if not t:
        return ""
    size = f"{t.get('sessions', '?')} sessions, {_hours(t.get('hours'))}"
    return f"scored by a model trained on {t['note']} ({size})" if t.get("note") else f"scored by a model trained on {size}"


def train_line(report: dict) -> str:
    """One line on what the model was trained on."""
    train, model, config = report.get("train") or {}, report.get("model") or {}, report.get("config") or {}
    langs = ", ".join(f"{k} {v}" for k, v in (train.get("languages") or {}).items())
    params = model.get("parameters")
    return (f"trained on {train.get('sessions', '?')} sessions, {_hours(train.get('hours'))}"
            + (f" ({langs})" if langs else "")
            + (f"; {params / 1000:.0f}k parameters" if isinstance(params, (int, float)) else "")
            + (f"; {config['seeds']} seeds" if "seeds" in config else ""))


def print_summary(report: dict, console: Console) -> None:
    """The terminal view: what was trained, a table per eval, the curve and ablations when
    present, and the warnings in yellow."""
    console.print(Text(train_line(report)))
    for table in summary_table(report, width=console.width):
        console.print(table)
    if report.get("learning_curve"):
        console.print(_curve_table(report["learning_curve"]))
    if report.get("ablations"):
        console.print(_ablation_table(report["ablations"], report.get("ablation_reference")))
    for w in report.get("warnings") or []:
        console.print(Text(f"warning: {w}", style="yellow"))


# -- figures -------------------------------------------------------------------------------


def write_html(report: dict, path: Path) -> None:
    """The HTML page (see :mod:`.report_html`), written atomically."""
    from .report_html import write_html as _write

    _write(report, path)


def render_html(report: dict) -> str:
    from .report_html import render_html as _render

    return _render(report)
