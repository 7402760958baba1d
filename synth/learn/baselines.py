"""Baselines that need no training: the prior and the silence-timeout rule.

Both read only what a model would be allowed to read: the rule sees the reference voice activity
of the user side up to the current frame and the system's own activity one frame late, exactly
the inputs the VAD-only model gets.
"""

from __future__ import annotations

import numpy as np

from .data import HOLD, NOT_HOLD, RELEASE, TAKE, LearnSession
from .metrics import Prediction, events, match


def prior_prediction(s: LearnSession, priors: np.ndarray, activity: np.ndarray) -> Prediction:
    """The class frequencies of the training frames at every frame (no information)."""
    n = s.n_frames
    return Prediction(take=np.full(n, priors[TAKE]), release=np.full(n, priors[RELEASE]),
                      floor=np.tile(priors, (n, 1)), near=np.tile(activity, (n, 1)))


def _run_length(x: np.ndarray) -> np.ndarray:
    """Length of the run of True ending at each frame (0 where False)."""
    out = np.zeros(len(x), dtype=np.int64)
    run = 0
    for i, v in enumerate(x):
        run = run + 1 if v else 0
        out[i] = run
    return out


def silence_rule(s: LearnSession, wait_frames: int, barge_frames: int) -> Prediction:
    """Take the floor after ``wait_frames`` of user silence (after user speech, while the system is
    silent); stop when the system's own speech is seen to end, or after ``barge_frames`` of user
    speech over the system."""
    usr = s.usr_vad.astype(bool)
    sys_late = np.concatenate([[False], s.sys_vad.astype(bool)[:-1]])
    spoke = np.cumsum(usr) > 0
    quiet = _run_length(~usr)
    take = (quiet == wait_frames) & spoke & ~sys_late
    ended = ~sys_late & np.concatenate([[False], sys_late[:-1]])
    barge = (_run_length(usr & sys_late) == barge_frames) & sys_late
    release = ended | barge
    floor = np.zeros((s.n_frames, 4))
    state = NOT_HOLD
    for k in range(s.n_frames):
        if take[k] and state == NOT_HOLD:
            floor[k, TAKE], state = 1, HOLD
        elif release[k] and state == HOLD:
            floor[k, RELEASE], state = 1, NOT_HOLD
        else:
            floor[k, state] = 1
    return Prediction(take=take.astype(float), release=release.astype(float), floor=floor)


def tune_silence_rule(sessions: list[LearnSession], tol: int) -> tuple[int, int]:
    """``(wait_frames, barge_frames)`` with the best start-speaking / start-listening F1 on ``sessions``."""
    def f1(kind: str, wait: int, barge: int) -> float:
        tp = fp = fn = 0
        for s in sessions:
            p = silence_rule(s, wait, barge)
            ref = np.flatnonzero(s.sys_floor == (TAKE if kind == "take" else RELEASE))
            a, b, c, _ = match(ref, events(s, getattr(p, kind), kind, 0.5, tol), tol)
            tp, fp, fn = tp + a, fp + b, fn + c
        return 2 * tp / max(1, 2 * tp + fp + fn)

    wait = max(range(1, 26), key=lambda w: (f1("take", w, 3), -w))
    barge = max(range(1, 11), key=lambda b: (f1("release", wait, b), -b))
    return wait, barge
