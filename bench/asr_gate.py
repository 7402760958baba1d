"""ASR round-trip bench: error rate per engine, language and Kokoro code-switch variant, and the
gate's cost per audio second beside the TTS cost.

    python bench/asr_gate.py --engine kokoro --lines 30 --variants whole:espeak,whole:misaki,runs:espeak,runs:misaki
    python bench/asr_gate.py --engine kokoro --lines 30 --variants runs:misaki:int8,runs:misaki:float32
    python bench/asr_gate.py --lines 20 --split-only --variants runs:misaki:int8:500,runs:misaki:int8:100

The variants after the first are compared with it line by line (paired bootstrap).

Lines are the speech events (at least 3 scored tokens) of scripted-planner sessions of every
scenario seed, by language; CPU seconds are process time on one thread each.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def lines_by_lang(per_lang: int, split_only: bool = False) -> dict[str, list[list]]:
    from synth.backends.scripted_planner import ScriptedPlanner
    from synth.io.config_files import load_seed
    from synth.rng import stream
    from synth.stages.asr import event_lang, tokens

    out: dict[str, list] = {"en": [], "zh": [], "en-zh": []}
    splitter = None
    if split_only:  # lines that calls of whole sentences (tts.call_tokens 100) say in 2+ calls
        from synth.backends.kokoro import KokoroTTS

        splitter = KokoroTTS(call_tokens=100).load()
    for k in range(200 if split_only else 20):
        for p in sorted((ROOT / "scenario_seeds").glob("*.yaml")):
            seed = load_seed(p)
            sid = f"bench-{seed.id}-{k}"
            for ev in ScriptedPlanner().plan(seed, sid, stream(1, sid, "plan")).events:
                if ev.sound is None and ev.words and ev.speaker in ("user", "system"):
                    lang = event_lang(ev.words)
                    ref = " ".join(w.text for w in ev.words)
                    if splitter is not None and len(splitter._chunks(ev.words)) < 2:
                        continue
                    if len(tokens(ref, lang)) >= 3 and len(out[lang]) < per_lang:
                        out[lang].append(list(ev.words))
        if all(len(v) >= per_lang for v in out.values()):
            break
    return out


def engine(name: str, variant: str):
    if name == "espeak":
        from synth.backends.espeak import EspeakTTS

        return EspeakTTS({"en": "en-us", "zh": "cmn"}), ["en-us", "en-us+m3", "en-us+f2"]
    from synth.backends.kokoro import KokoroTTS

    cs, g2p, *rest = variant.split(":")
    precision = rest[0] if rest else "float32"
    call_tokens = int(rest[1]) if len(rest) > 1 else 500
    return (KokoroTTS(code_switch=cs, english_g2p=g2p, precision=precision, call_tokens=call_tokens).load(),
            [f"pool-{i:02d}" for i in range(20)])


def run(args) -> dict:
    from synth.backends.tts import Voice
    from synth.backends.whisper import WhisperASR
    from synth.stages.asr import hear
    from synth.schema.config import AsrGateConfig

    cfg = AsrGateConfig(cache_dir=args.cache_dir)
    asr = WhisperASR(cache_dir=args.cache_dir).load()
    lines = lines_by_lang(args.lines, args.split_only)
    results = {}
    for variant in args.variants.split(","):
        tts, voices = engine(args.engine, variant)
        for lang, items in lines.items():
            first = args.variants.split(",")[0]
            if variant != first and lang == "zh" and variant.split(":")[2:] == first.split(":")[2:]:
                continue  # zh lines have no English span: the same audio in every variant of one graph
            errs, tts_cpu, asr_cpu, audio_s, worst = [], 0.0, 0.0, 0.0, []
            for i, words in enumerate(items):
                v = Voice(voices[i % len(voices)], 170, 50, 60)
                c0 = time.process_time()
                r = tts.synthesize(words, v, 16000)
                c1 = time.process_time()
                ref = " ".join(w.text for w in words)
                h = hear(asr, r, ref, lang, cfg, 0)
                asr_cpu += time.process_time() - c1
                tts_cpu += c1 - c0
                audio_s += len(r.audio) / 16000
                e, hyp = h.error, h.hyp
                errs.append(e)
                worst.append((e, ref, hyp))
            worst.sort(key=lambda t: -t[0])
            key = f"{args.engine}/{variant}/{lang}"
            results[key] = {"lines": len(errs), "errors": [round(e, 4) for e in errs],
                            "mean_error": round(float(np.mean(errs)), 4),
                            "median_error": round(float(np.median(errs)), 4),
                            "share_over_0.3": round(float(np.mean(np.array(errs) > 0.3)), 3),
                            "audio_s": round(audio_s, 1), "tts_cpu_per_audio_s": round(tts_cpu / audio_s, 3),
                            "asr_cpu_per_audio_s": round(asr_cpu / audio_s, 3), "worst": worst[:3]}
            print(key, json.dumps({k: v for k, v in results[key].items() if k not in ("worst", "errors")}), flush=True)
    paired(results)
    return results


def paired(results: dict, draws: int = 5000) -> None:
    """Each variant against the first on the same lines: mean difference of the error and its 95 %
    paired-bootstrap interval (an interval that excludes 0 is a difference the sample shows)."""
    rng = np.random.default_rng(0)
    by_lang: dict[str, list[str]] = {}
    for key in results:
        by_lang.setdefault(key.rsplit("/", 1)[1], []).append(key)
    for lang, keys in by_lang.items():
        base = np.array(results[keys[0]]["errors"])
        for key in keys[1:]:
            d = np.array(results[key]["errors"]) - base
            boot = d[rng.integers(0, len(d), (draws, len(d)))].mean(axis=1)
            lo, hi = np.percentile(boot, [2.5, 97.5])
            print(f"{key} - {keys[0]}: mean {d.mean():+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["kokoro", "espeak"], default="kokoro")
    ap.add_argument("--variants", default="runs:misaki", help="kokoro: code_switch:english_g2p[:precision[:call_tokens]], comma separated")
    ap.add_argument("--lines", type=int, default=20, help="lines per language")
    ap.add_argument("--split-only", action="store_true", help="only lines that tts.call_tokens 100 says in 2+ calls")
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    from synth.backends.cpu import describe

    print("cpu:", describe(), flush=True)
    res = run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(res, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
