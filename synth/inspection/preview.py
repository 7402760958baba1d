"""``synth preview``: one picture of one session on one time axis.

From the top: ch0 (user side) and ch1 (system) as waveforms or spectrograms, the events as
boxes per speaker lane coloured by act with their words at their onsets, the frame lanes
``sys_action``, ``sys_floor``, ``usr_floor`` (recomputed nowhere: the stored arrays), the markers,
and the delegation work items with their state times. ``start_s``/``end_s`` zoom into a window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..schema.labels import FLOORS, SYS_ACTIONS
from ..schema.plan import people_of, talker
from .runfolder import Session

WIDTH_IN, HEIGHT_IN, DPI = 16.0, 10.0, 100
"""The picture is ``WIDTH_IN*DPI`` x ``HEIGHT_IN*DPI`` pixels (1600 x 1000)."""

SPEAKER_LANES = ("user", "third_party", "background", "system")
ACTION_COLOURS = ("#eeeeee", "#4c9be8", "#e8a33c", "#9b59b6")
FLOOR_COLOURS = ("#eeeeee", "#2ecc71", "#a9dfbf", "#e74c3c")
MARKER_COLOURS = {"turn_eos": "#e67e22", "yield": "#c0392b", "delegate_open": "#8e44ad",
                  "delegate_close": "#8e44ad", "backend_inject": "#16a085", "deliver_start": "#27ae60",
                  "stale_drop": "#7f8c8d", "cancel": "#34495e"}
STATE_MARKS = {"QUEUED": "o", "RUNNING": ">", "COMPLETED": "s", "DELIVERING": "^", "DELIVERED": "*",
               "FAILED": "x", "CANCELLING": "v", "CANCELLED": "X"}


CJK_FILES = ["/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
             "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"]
CJK_FONTS = ["DejaVu Sans", "WenQuanYi Micro Hei", "Noto Sans CJK SC", "Noto Sans CJK JP"]


def use_fonts() -> None:
    """Latin text in DejaVu, Chinese from a CJK font where one is installed (Debian's
    ``fonts-wqy-microhei``, which ``make test`` installs); without one, CJK glyphs show as boxes."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import font_manager

    have = {f.name for f in font_manager.fontManager.ttflist}
    if not have.intersection(CJK_FONTS[1:]):  # installed after matplotlib built its font cache
        for path in CJK_FILES:
            if Path(path).exists():
                font_manager.fontManager.addfont(path)
        have = {f.name for f in font_manager.fontManager.ttflist}
    matplotlib.rcParams["font.family"] = [f for f in CJK_FONTS if f in have] or ["DejaVu Sans"]
    warnings.filterwarnings("ignore", message="Glyph .* missing from font")


def _act_colour(act: str, cache: dict) -> str:
    import matplotlib

    if act not in cache:
        cache[act] = matplotlib.colormaps["tab20"](len(cache) % 20)
    return cache[act]


def _envelope(ax, x: np.ndarray, sr: int, t0: float, t1: float, colour: str) -> None:
    """Min/max envelope, one column per output pixel (fast for long sessions)."""
    a, b = int(t0 * sr), min(len(x), int(t1 * sr))
    seg = x[a:b]
    cols = 2000
    if len(seg) == 0:
        return
    per = max(1, len(seg) // cols)
    n = len(seg) // per
    blocks = seg[: n * per].reshape(n, per)
    t = t0 + (np.arange(n) * per + per / 2) / sr
    ax.fill_between(t, blocks.min(axis=1), blocks.max(axis=1), color=colour, lw=0)
    ax.set_ylim(-1, 1)


def _lane(ax, values: list[int], period_s: float, colours, names, t0: float, t1: float, label: str) -> None:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    arr = np.asarray(values, dtype=float)[None, :]
    ax.imshow(arr, aspect="auto", cmap=ListedColormap(colours), vmin=-0.5, vmax=len(colours) - 0.5,
              extent=(0, len(values) * period_s, 0, 1), interpolation="nearest")
    ax.set_yticks([0.5], [label])
    ax.set_xlim(t0, t1)
    ax.legend(handles=[Patch(color=c, label=n) for c, n in zip(colours, names)], loc="center left",
              bbox_to_anchor=(1.0, 0.5), fontsize=7, ncol=2, frameon=False)


def window(duration_s: float, start_s: float | None, end_s: float | None) -> tuple[float, float]:
    """The drawn span ``(t0, t1)``; a window that is empty or outside the session is a UserError."""
    from ..errors import UserError

    t0 = 0.0 if start_s is None else start_s
    t1 = duration_s if end_s is None else end_s
    if not (np.isfinite(t0) and np.isfinite(t1)) or t0 < 0 or t1 <= t0 or t0 >= duration_s:
        raise UserError(f"--start/--end: the window {t0:g}-{t1:g} s is empty or outside the session "
                        f"(0-{duration_s:.2f} s)")
    return t0, min(t1, duration_s)


def draw(session: Session, out_png: Path, kind: str = "wave", start_s: float | None = None,
         end_s: float | None = None) -> Path:
    """Write the picture of ``session`` to ``out_png`` (PNG, ``WIDTH_IN*DPI`` x ``HEIGHT_IN*DPI``)."""
    use_fonts()
    import matplotlib.pyplot as plt

    rec = session.record
    sr = rec.sample_rate
    t0, t1 = window(rec.duration_s, start_s, end_s)
    user, _ = session.decode("user")
    system, _ = session.decode("system")
    fig = plt.figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    gs = fig.add_gridspec(8, 1, height_ratios=[1.3, 1.3, 2.6, 0.35, 0.35, 0.35, 0.7, 1.0], hspace=0.35,
                          left=0.07, right=0.86, top=0.94, bottom=0.05)
    axes = [fig.add_subplot(gs[i]) for i in range(8)]
    for ax in axes[1:]:
        ax.sharex(axes[0])
    for ax, x, name, colour in ((axes[0], user, "ch0 user side", "#2c7fb8"), (axes[1], system, "ch1 system", "#d95f0e")):
        if kind == "spec":
            a, b = int(t0 * sr), int(t1 * sr)
            with np.errstate(divide="ignore"):
                ax.specgram(x[a:b], NFFT=512, Fs=sr, noverlap=384, xextent=(t0, t1), cmap="magma",
                            vmin=-130, vmax=-20)
            ax.set_ylim(0, min(sr / 2, 8000))
        else:
            _envelope(ax, x, sr, t0, t1, colour)
        ax.set_ylabel(name, fontsize=8)
    _events(axes[2], rec, t0, t1)
    period = rec.frame_period_s
    _lane(axes[3], rec.sys_action, period, ACTION_COLOURS, SYS_ACTIONS, t0, t1, "sys_action")
    _lane(axes[4], rec.sys_floor, period, FLOOR_COLOURS, FLOORS, t0, t1, "sys_floor")
    _lane(axes[5], rec.usr_floor, period, FLOOR_COLOURS, FLOORS, t0, t1, "usr_floor")
    _markers(axes[6], rec, t0, t1)
    _work(axes[7], rec, t0, t1)
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    axes[-1].set_xlabel("time (s)")
    axes[0].set_xlim(t0, t1)
    fig.suptitle(f"{rec.session_id}  ·  {rec.scenario_id}  ·  {rec.language}  ·  {rec.duration_s:.1f} s  ·  "
                 f"frame {rec.frame_period_s * 1000:.0f} ms", fontsize=11)
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=DPI)
    plt.close(fig)
    return out_png


def lane_names(rec) -> list[str]:
    """The event lanes: user, third party, background, system; in a group one per person instead of the user."""
    people = people_of(rec.events)
    return [p for s in SPEAKER_LANES for p in (people if s == "user" and people else [s])]


def _events(ax, rec, t0: float, t1: float) -> None:
    from matplotlib.patches import Patch, Rectangle

    sr = rec.sample_rate
    names = lane_names(rec)
    lanes = {s: i for i, s in enumerate(names)}
    colours: dict = {}
    for ev in rec.events:
        if talker(ev) not in lanes:
            continue
        y = lanes[talker(ev)]
        on, off = ev.on_sample / sr, ev.off_sample / sr
        if off < t0 or on > t1:
            continue
        colour = _act_colour(ev.act, colours)
        ax.add_patch(Rectangle((on, y + 0.08), max(off - on, 0.01), 0.84, facecolor=colour, alpha=0.55,
                               edgecolor="#c0392b" if ev.completion == "interrupted" else "#333", lw=0.6))
        for w in ev.words:
            wt = w.on_sample / sr
            if t0 <= wt <= t1:
                ax.text(wt, y + 0.12, w.word, rotation=90, fontsize=5.5, va="bottom", ha="left", clip_on=True)
    ax.set_yticks([i + 0.5 for i in range(len(names))], names, fontsize=8)
    ax.set_ylim(0, len(names))
    ax.legend(handles=[Patch(color=c, alpha=0.55, label=a) for a, c in colours.items()], loc="center left",
              bbox_to_anchor=(1.0, 0.5), fontsize=7, title="act", title_fontsize=8, frameon=False)


def _markers(ax, rec, t0: float, t1: float) -> None:
    types = list(MARKER_COLOURS)
    p = rec.frame_period_s
    for m in rec.markers:
        t = m.frame * p
        if t0 <= t <= t1:
            y = types.index(m.type) if m.type in types else len(types)
            ax.plot([t, t], [y, y + 0.8], color=MARKER_COLOURS.get(m.type, "k"), lw=1.5)
    ax.set_yticks([i + 0.4 for i in range(len(types))], types, fontsize=5.5)
    ax.set_ylim(0, len(types))


def _work(ax, rec, t0: float, t1: float) -> None:
    sr = rec.sample_rate
    for i, w in enumerate(rec.delegations):
        end = w.delivered_sample or w.deliver_sample or w.inject_sample or w.complete_sample
        ax.plot([w.open_sample / sr, end / sr], [i, i], color="#8e44ad", lw=3, alpha=0.4)
        for st in w.states:
            ax.plot(st.sample / sr, i, STATE_MARKS.get(st.state, "o"), color="#4a235a", ms=6)
        label = f"{w.work_id} {w.tool}" + (" (stale)" if w.stale else "")
        ax.text(max(t0, w.open_sample / sr), i + 0.25, label, fontsize=7, clip_on=True)
    ax.set_ylim(-0.6, max(1, len(rec.delegations)) - 0.2)
    ax.set_yticks([])
    ax.set_ylabel("work", fontsize=8)
    from matplotlib.lines import Line2D

    ax.legend(handles=[Line2D([], [], marker=m, ls="", color="#4a235a", label=s) for s, m in STATE_MARKS.items()],
              loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=6, ncol=2, frameon=False)
