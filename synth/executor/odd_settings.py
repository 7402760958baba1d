"""Settings that are valid but make odd data: said as one-line warnings when a run starts and
counted in ``stats.json`` (``config_warnings``), so a reader of the run sees them too."""

from __future__ import annotations

import numpy as np

from .task import RunSpec

SOUND_LAWS = (("laughter", "laughter_ms", 1000.0), ("media", "media_s", 1.0))
"""Bank category, the paralinguistic law of its clip length, and that law's unit per second."""
PROBE_DRAWS = 4000  # draws of a law (a fixed generator) to estimate how often it outruns the clips
PAST_SHARE = 0.05  # from this share of draws longer than every clip, the law is not what the data shows


def odd_settings(spec: RunSpec) -> list[str]:
    """``field: what will look odd in the data`` for each such setting of the run."""
    return _shared_voices(spec) + _laws_past_the_clips(spec)


def _shared_voices(spec: RunSpec) -> list[str]:
    tts = spec.config.tts
    variants = getattr(tts, "variants", None)
    if tts.engine == "routed" or not variants:
        return []
    third = any(s.personas.third_party is not None for s in spec.seeds)
    speakers = ["user", "system"] + (["third party"] if third else [])
    distinct = len(set(variants))
    if distinct >= len(speakers):
        return []
    return [f"tts.variants: {distinct} distinct voice{'s' * (distinct != 1)} for {len(speakers)} speakers "
            f"({', '.join(speakers)}): speakers of one session share a voice"]


def _laws_past_the_clips(spec: RunSpec) -> list[str]:
    if spec.bank is None:
        return []
    out = []
    para = spec.config.paralinguistics
    for category, field, per_s in SOUND_LAWS:
        clips = spec.bank.of(category)
        if not clips:
            continue
        longest = max(f.entry.duration_s for f in clips)
        law = getattr(para, field)
        draws = np.array([law.sample(rng) for rng in [np.random.default_rng(0)] for _ in range(PROBE_DRAWS)]) / per_s
        past = float(np.mean(draws > longest))
        if past >= PAST_SHARE:
            out.append(f"paralinguistics.{field}: {past:.0%} of its draws are longer than the longest {category} "
                       f"clip in the banks ({longest:.1f} s): those are cut to the clip")
    return out
