"""Real-time factor of every TTS engine on this machine, and the cost of the fallback aligner.

    python bench/tts.py                       # eSpeak NG, Kokoro, Piper, Coqui on small random models
    python bench/tts.py --coqui-model /models/xtts_v2 --coqui-speaker-wav ref.wav
    python bench/tts.py --engines kokoro --repeat 3 [--kokoro-precision int8,float32]

RTF = seconds of compute per second of audio (CPU seconds of this process, and wall seconds),
over en / zh / en-zh sentences, after one warm-up call per engine and language (the sentences are
tokenised before timing: jieba's dictionary load once made Mandarin eSpeak look 30x slower than
English). The first line names the CPU and its speed flags: Kokoro's int8 graph is 4-6x slower
without VNNI. The Coqui rows without
``--coqui-model`` use the tiny random VITS/XTTS of ``tests/coqui_models.py``: they measure the
engine's overhead, not what a trained model costs (a trained XTTS-v2 has a 30-layer GPT).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# not bench/ itself: bench/coverage.py would shadow the coverage package numba looks for
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from synth.backends.routed import build_engine  # noqa: E402
from synth.backends.scripted_planner import tokenize  # noqa: E402
from synth.backends.tts import Voice  # noqa: E402
from synth.schema.config import CoquiConfig, EspeakConfig, KokoroConfig, PiperConfig  # noqa: E402

SENTENCES = {
    "en": ["Could you tell me what time the museum opens on Sunday?",
           "I think we should leave a bit earlier, because the traffic is terrible after five."],
    "zh": ["我明天上午有个会议，下午可以吗？", "这个价格有点贵，能便宜一点吗？"],
    "en-zh": ["这个 project 的 deadline 是下周五。", "你可以帮我 check 一下 email 吗？"],
}


def engines(args, tmp: Path) -> dict:
    out = {}
    want = set(args.engines.split(","))
    if "espeak" in want:
        out["espeak"] = (build_engine(EspeakConfig(), -40.0), "m1", ["en", "zh", "en-zh"])
    if "kokoro" in want:
        for precision in args.kokoro_precision.split(","):
            out[f"kokoro {precision}"] = (build_engine(KokoroConfig(engine="kokoro", precision=precision), -40.0),
                                          "pool-03", ["en", "zh", "en-zh"])
    if "piper" in want:
        out["piper"] = (build_engine(PiperConfig(engine="piper"), -40.0), "default", ["en"])
    if "coqui" in want:
        import soundfile as sf

        if args.coqui_model:
            wavs = {"ref": args.coqui_speaker_wav} if args.coqui_speaker_wav else {}
            cfg = CoquiConfig(engine="coqui", model_path=args.coqui_model, speaker_wavs={k: [v] for k, v in wavs.items()},
                              variants=[args.coqui_speaker or "ref"])
            out["coqui"] = (build_engine(cfg, -40.0), cfg.variants[0], ["en", "zh", "en-zh"])
        else:
            from coqui_models import tiny_vits, tiny_xtts

            ref = tmp / "ref.wav"
            sf.write(ref, (0.1 * np.random.default_rng(0).standard_normal(22050 * 3)).astype(np.float32), 22050)
            vits = CoquiConfig(engine="coqui", model_path=str(tiny_vits(tmp / "vits")), variants=["spk03"])
            xtts = CoquiConfig(engine="coqui", model_path=str(tiny_xtts(tmp / "xtts")), variants=["ref"],
                               speaker_wavs={"ref": [str(ref)]})
            out["coqui-vits (tiny random)"] = (build_engine(vits, -40.0), "spk03", ["en", "zh", "en-zh"])
            out["coqui-xtts (tiny random)"] = (build_engine(xtts, -40.0), "ref", ["en", "zh", "en-zh"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engines", default="espeak,kokoro,piper,coqui")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kokoro-precision", default="int8,float32", help="Kokoro graphs to time, comma separated")
    ap.add_argument("--coqui-model", help="a Coqui model folder (VITS or XTTS) instead of the tiny random ones")
    ap.add_argument("--coqui-speaker-wav", help="XTTS reference clip")
    ap.add_argument("--coqui-speaker", help="VITS speaker name")
    args = ap.parse_args()
    from synth.backends.cpu import describe

    print(f"cpu: {describe()}")
    words = {lang: [tokenize(t) for t in texts] for lang, texts in SENTENCES.items()}  # jieba loads here, untimed
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'engine':28} {'lang':6} {'audio s':>8} {'cpu RTF':>8} {'wall RTF':>8}")
        for name, (engine, variant, langs) in engines(args, Path(tmp)).items():
            voice = Voice(variant, 170, 50, 50)
            for lang in langs:  # warm-up: loading (model, G2P, dictionaries) is not synthesis
                engine.synthesize(words[lang][0][:2], voice, 16000)
            for lang in langs:
                audio = cpu = wall = 0.0
                for _ in range(args.repeat):
                    for text in words[lang]:
                        c0, w0 = time.process_time(), time.perf_counter()
                        r = engine.synthesize(text, voice, 16000)
                        cpu += time.process_time() - c0
                        wall += time.perf_counter() - w0
                        audio += len(r.audio) / 16000
                print(f"{name:28} {lang:6} {audio:8.1f} {cpu / audio:8.3f} {wall / audio:8.3f}", flush=True)
        aligner_row()


def aligner_row() -> None:
    """The aligner's own cost (two eSpeak renderings + MFCC + DTW) on Kokoro speech."""
    from synth.backends.aligner import align_words

    kokoro = build_engine(KokoroConfig(engine="kokoro"), -40.0)
    audio = cpu = 0.0
    for lang in SENTENCES:
        for text in SENTENCES[lang]:
            words = tokenize(text)
            r = kokoro.synthesize(words, Voice("pool-03", 170, 0, 0), 16000)
            c0 = time.process_time()
            align_words(r.audio, 16000, words)
            cpu += time.process_time() - c0
            audio += len(r.audio) / 16000
    print(f"{'aligner dtw-espeak':28} {'all':6} {audio:8.1f} {cpu / audio:8.3f}")


if __name__ == "__main__":
    main()
