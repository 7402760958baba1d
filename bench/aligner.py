"""How far the fallback aligner's word boundaries land from Kokoro's own (per-token durations).

    python bench/aligner.py

Kokoro speaks 4 sentences per language (en, zh, en-zh) with different pool voices; the aligner
(``synth/backends/aligner.py``) places the same words on that audio; every word's onset and
offset error is reported as median, 90th percentile and the share within 100 ms.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]  # bench/coverage.py
sys.path.insert(0, str(ROOT))

from synth.backends.aligner import align_words  # noqa: E402
from synth.backends.routed import build_engine  # noqa: E402
from synth.backends.scripted_planner import tokenize  # noqa: E402
from synth.backends.tts import Voice  # noqa: E402
from synth.schema.config import KokoroConfig  # noqa: E402

SENTENCES = {
    "en": ["Sure, I will check the flights to Shanghai tomorrow morning.",
           "Could you tell me what time the museum opens on Sunday?",
           "I think we should leave a bit earlier, because the traffic is terrible after five.",
           "Okay, that sounds good to me."],
    "zh": ["我明天上午有个会议，下午可以吗？", "请帮我查一下去北京的航班。", "今天天气不错，我们出去走走吧。",
           "这个价格有点贵，能便宜一点吗？"],
    "en-zh": ["我明天有个 meeting，下午再说吧。", "这个 project 的 deadline 是下周五。", "你可以帮我 check 一下 email 吗？",
              "我们用 Zoom 开会好不好？"],
}


def main() -> None:
    from synth.backends.cpu import describe

    print(f"cpu: {describe()}")
    kokoro = build_engine(KokoroConfig(engine="kokoro"), -40.0)
    print(f"{'lang':6} {'bounds':>6} {'median ms':>9} {'p90 ms':>7} {'<=100 ms':>8} {'audio s':>7} {'align cpu s':>11}")
    for lang, texts in SENTENCES.items():
        errors, audio, cpu = [], 0.0, 0.0
        for i, text in enumerate(texts):
            words = tokenize(text)
            r = kokoro.synthesize(words, Voice(f"pool-{i:02d}", 170, 0, 0), 16000)
            audio += len(r.audio) / 16000
            c0 = time.process_time()
            spans = align_words(r.audio, 16000, words)
            cpu += time.process_time() - c0
            for t, (a, b) in zip(r.words, spans):
                errors += [abs(a - t.on) / 16, abs(b - t.off) / 16]
        e = np.array(errors)
        print(f"{lang:6} {len(e):6d} {np.median(e):9.0f} {np.percentile(e, 90):7.0f} {100 * np.mean(e <= 100):7.0f}% "
              f"{audio:7.1f} {cpu:11.2f}")


if __name__ == "__main__":
    main()
