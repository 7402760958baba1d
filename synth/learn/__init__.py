"""Learnability: train a small causal turn-taking model on runs, score it on held-out runs.

``synth learn TRAIN_RUN --eval RUN`` (the ``learn`` extra: torch). Modules:

- ``features``: log-mel features of both channels (16 kHz, 10 ms hop), stacked per label frame.
- ``data``: :class:`LearnSession` (features + frame labels + phenomenon spans of one session),
  streamed from run shards (Parquet or WebDataset) and cached per run.
- ``real``: readers for real two-channel conversations (VAP activity lists, RTTM, TextGrid).
- ``model``: the causal conv + GRU model and its training loop (torch, imported lazily).
- ``metrics``: event F1 and latency, frame floor F1, VAP-style shift/hold, take-over rates,
  session-level bootstrap intervals.
- ``baselines``: prior, silence-timeout rule, reference-VAD model, shuffled labels, channel swap.
- ``experiment``: one train/eval comparison, the JSON report; ``report``: terminal and HTML.
"""
