"""Benchmark: how thin the group content is for long group sessions (plans only, no audio; seconds).

    .venv/bin/python bench/long_group_repeats.py [--minutes 30] [--sessions 5]

Plans each long seed (``scenario_seeds/groups/long/*.yaml``) at a fixed target length and prints,
per session, the estimate, the chapters, the scenes in chapter order, the requests asked a second
time or more (``planner_meta.repeats``) and the most times one request was asked; then the range
over the sessions. A request is one unit of a scene (``synth/data/groups/<domain>.yaml``), told
apart by its scene and index, whatever wording was drawn.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from synth.backends.scripted_planner import ScriptedPlanner
from synth.io.config_files import load_seed
from synth.schema.dist import Fixed

ROOT = Path(__file__).resolve().parents[1]


def asked_counts(plan) -> Counter:
    """How many times each request unit was asked: ``(domain/scene, unit) -> count``."""
    return Counter((r["scene"], r["unit"]) for r in plan.planner_meta["requests"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--sessions", type=int, default=5)
    args = ap.parse_args()
    planner = ScriptedPlanner()
    for path in sorted((ROOT / "scenario_seeds" / "groups" / "long").glob("*.yaml")):
        seed = load_seed(str(path))
        planner.check_seed(seed, str(path))
        seed = seed.model_copy(update={"long_form": seed.long_form.model_copy(
            update={"minutes": Fixed(value=args.minutes)})})
        print(f"{seed.id} ({seed.language}) at {args.minutes:g} min")
        reps, tops = [], []
        for i in range(args.sessions):
            plan = planner.plan(seed, f"lgr-{i:06d}", np.random.default_rng(i))
            meta = plan.planner_meta
            counts = asked_counts(plan)
            top = max(counts.values())
            reps.append(meta["repeats"])
            tops.append(top)
            scenes = " ".join(c["scene"] for c in meta["chapters"])
            print(f"  session {i}: estimate {meta['estimated_min']} min, {len(plan.events)} events, "
                  f"{len(meta['chapters'])} chapters over {len({c['scene'] for c in meta['chapters']})} scenes, "
                  f"repeats {meta['repeats']}, most asked {top}x, requests {len(meta['requests'])} "
                  f"of {len(counts)} units\n    {scenes}")
        print(f"  repeats {min(reps)}-{max(reps)}, most asked {min(tops)}-{max(tops)}x")


if __name__ == "__main__":
    main()
