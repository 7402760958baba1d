"""Benchmark: how the content holds up as a run grows (issue 32's table), from one planning run.

    .venv/bin/python bench/diversity.py [--sessions 10000] [--pipeline pipelines/phenomena.yaml]

Plans the sessions as ``synth plan PIPELINE -n N`` does (the paralinguistic pass included, no
audio) and prints, for the first 1k, 2k, 5k and N sessions (what a run of that size plans: a
session depends only on the run seed and its id), the figures of ``synth plan --text``: the
whole-run distinct system utterances and bigrams, the same on the fixed 1,000-session sample,
the share of the most used de-slotted system template, and the new bigrams the last 1,000
sessions brought; then the whole growth curve and the most used templates of the largest run.
Hours are estimated at the phenomena pipeline's rendered rate (issue 32: 1,000 sessions ≈ 33 h),
not measured. Not a test: the numbers move with the content.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECONDS_PER_SESSION = 33 * 3600 / 1000
"""Rendered audio per session of pipelines/phenomena.yaml (issue 32's table: 1,000 sessions ≈ 33 h)."""


def plan_texts(pipeline: Path, sessions: int) -> list:
    """:class:`SessionText` of sessions 0..N-1 of ``pipeline``, planned as ``synth plan`` plans them."""
    from synth.backends.planner import make_planner
    from synth.cli import _plan_inputs
    from synth.errors import SessionReject
    from synth.inspection.diversity import plan_text
    from synth.schema.common import session_id
    from synth.session import decorated_plan

    cfg, seeds, name, run_seed, pcfg = _plan_inputs(pipeline, 0)
    engine = make_planner(pcfg)
    out, rejected = [], 0
    for i in range(sessions):
        try:
            out.append(plan_text(decorated_plan(cfg, seeds[i % len(seeds)], run_seed, session_id(name, i), engine)))
        except SessionReject:
            rejected += 1
    if rejected:
        print(f"{rejected} sessions rejected by the planner")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pipeline", type=Path, default=ROOT / "pipelines" / "phenomena.yaml")
    ap.add_argument("--sessions", type=int, default=10_000)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from synth.backends.cpu import describe
    from synth.inspection.diversity import diversity

    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"# bench/diversity.py --sessions {a.sessions} --pipeline {a.pipeline.name}, {datetime.date.today()}, "
          f"commit {rev or '?'}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average {os.getloadavg()[0]:.1f} at start")
    print(f"cpu: {describe()}")
    t0 = time.perf_counter()
    texts = plan_texts(a.pipeline, a.sessions)
    print(f"planned {len(texts)} sessions in {time.perf_counter() - t0:.0f} s")
    sizes = sorted({n for n in (1000, 2000, 5000, 10_000) if n < len(texts)} | {len(texts)})
    head = ("sessions", "≈ hours", "distinct utt", "distinct bigrams", "utt (1k sample)",
            "bigrams (1k sample)", "top template", "templates", "new bigrams in last 1k")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    d = {}
    for n in sizes:
        t0 = time.perf_counter()
        d = diversity(texts[:n])
        growth = d["new_bigrams_per_block"]
        cells = [f"{n:,}", f"{n * SECONDS_PER_SESSION / 3600:.0f}", f"{d['distinct_system_utterances']:.3f}",
                 f"{d['distinct_system_bigrams']:.3f}", _fmt(d["sample_distinct_system_utterances"]),
                 _fmt(d["sample_distinct_system_bigrams"]), f"{d['top_template_share']:.2%}",
                 f"{d['system_templates']:,}", f"{growth[-1]:,}" if growth else "–"]
        print("| " + " | ".join(cells) + f" |  ({time.perf_counter() - t0:.1f} s)")
    print(f"\nnew distinct bigrams per 1,000 sessions, sessions in id order: "
          f"{', '.join(f'{x:,}' for x in d['new_bigrams_per_block'])}")
    print(f"system lines {d['system_utterances']:,}, bigrams {d['system_bigrams']:,}; most common opening in "
          f"{d['top_opening_share']:.2%} of sessions: {d['top_opening']!r}")
    print(f"most used de-slotted system templates over {d['sessions']:,} sessions:")
    for t in d["top_templates"]:
        print(f"  {t['share']:.2%} ({t['count']:,})  {t['template']}")


def _fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


if __name__ == "__main__":
    main()
