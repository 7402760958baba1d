"""Blind coherence items for dyadic sessions (issue 32): one plan per seed, context and one reply, one in six a
decoy.  .venv/bin/python bench/dyadic_blind.py . 1 OUTDIR  (repo root, plans per seed, folder)"""
import json, random, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[1])
from synth.backends.scripted_planner import ScriptedPlanner
from synth.io.config_files import load_seed
root = Path(sys.argv[1]); per = int(sys.argv[2]); out = Path(sys.argv[3])
rng = random.Random(11)
items, pools = [], {}
for sf in sorted((root / "scenario_seeds").glob("*.yaml")):
    seed = load_seed(sf)
    for i in range(per):
        p = ScriptedPlanner().plan(seed, f"d-{sf.stem}-{i}", np.random.default_rng(5000 + i))
        evs = [e for e in p.events if e.text and e.speaker in ("user", "system", "third_party")]
        who = lambda e: {"user": "User", "system": "Assistant", "third_party": "Other person"}[e.speaker]
        cands = [k for k, e in enumerate(evs) if k >= 2 and e.relation == "responds_to" and e.speaker in ("system", "user")]
        if not cands: continue
        k = rng.choice(cands)
        items.append(dict(lang=seed.language, seed=sf.stem, ctx=[f"{who(e)}: {e.text}" for e in evs[max(0, k - 5):k]],
                          reply=f"{who(evs[k])}: {evs[k].text}", spk=evs[k].speaker, decoy=False))
        pools.setdefault((seed.language, evs[k].speaker), []).append(evs[k].text)
for it in items:
    if rng.random() < 1/6:
        other = rng.choice([t for t in pools[(it["lang"], it["spk"])] if t not in it["reply"]])
        it["reply"] = it["reply"].split(": ", 1)[0] + ": " + other; it["decoy"] = True
rng.shuffle(items)
out.mkdir(exist_ok=True, parents=True)
with open(out / "items.md", "w") as f:
    for j, it in enumerate(items, 1):
        f.write(f"## item {j} ({it['lang']})\n" + "\n".join(it["ctx"]) + f"\n>>> REPLY: {it['reply']}\n\n")
json.dump(items, open(out / "key.json", "w"), ensure_ascii=False, indent=1)
print(len(items), sum(i["decoy"] for i in items))
