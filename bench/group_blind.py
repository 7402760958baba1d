"""Blind coherence items for group sessions (issue 33): a few lines of context and one reply, one in six a decoy
moved from another session of the same language and speaker kind. Writes items.md (for the reader) and key.json
(kept from the reader).  .venv/bin/python bench/group_blind.py . 3 OUTDIR  (repo root, plans per seed, folder)"""
import json, random, sys
from pathlib import Path
import numpy as np, yaml
sys.path.insert(0, sys.argv[1])
from synth.backends.scripted_planner import ScriptedPlanner
from synth.schema.seed import ScenarioSeed
root = Path(sys.argv[1]); n_per_seed = int(sys.argv[2]); out = Path(sys.argv[3])
rng = random.Random(7)
seeds = sorted((root / "scenario_seeds" / "groups").glob("*.yaml"))
items, pools = [], {}
for sf in seeds:
    seed = ScenarioSeed.model_validate(yaml.safe_load(sf.read_text()))
    for i in range(n_per_seed):
        p = ScriptedPlanner().plan(seed, f"b-{sf.stem}-{i}", np.random.default_rng(1000 + i))
        evs = [e for e in p.events if e.text]
        names = {(pp.id or pp.name.lower()): pp.name for pp in seed.people} if seed.people else {}
        def who(e):
            if e.speaker == "system": return "Assistant"
            return names.get(getattr(e, "person", None), e.speaker)
        def to(e):
            a = getattr(e, "addressee", None)
            return "" if not a else f" (to {'Assistant' if a == 'system' else 'everyone' if a == 'group' else names.get(a, a)})"
        cands = [k for k, e in enumerate(evs) if k >= 2 and e.relation == "responds_to"]
        if not cands: continue
        k = rng.choice(cands)
        ctx = [f"{who(e)}{to(e)}: {e.text}" for e in evs[max(0, k - 5):k]]
        reply = f"{who(evs[k])}{to(evs[k])}: {evs[k].text}"
        items.append(dict(lang=seed.language, seed=sf.stem, ctx=ctx, reply=reply, speaker=who(evs[k]), decoy=False))
        pools.setdefault((seed.language, evs[k].speaker), []).append(evs[k].text)
        items[-1]['spk'] = evs[k].speaker
# decoys: 1 in 6 replies replaced by another session's reply text of the same language
for it in items:
    if rng.random() < 1/6:
        other = rng.choice([t for t in pools[(it["lang"], it["spk"])] if t not in it["reply"]])
        it["reply"] = it["reply"].split(": ", 1)[0] + ": " + other
        it["decoy"] = True
rng.shuffle(items)
out.mkdir(exist_ok=True, parents=True)
with open(out / "items.md", "w") as f:
    for j, it in enumerate(items, 1):
        f.write(f"## item {j} ({it['lang']})\n" + "\n".join(it["ctx"]) + f"\n>>> REPLY: {it['reply']}\n\n")
json.dump(items, open(out / "key.json", "w"), ensure_ascii=False, indent=1)
print(len(items), sum(i["decoy"] for i in items))
