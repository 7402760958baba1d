"""Turn-taking metrics per session, pooled with a session-level bootstrap.

Definitions (frames of period P; ``tol`` = the stated tolerance in frames):

- **start-speaking events** are the system's TAKE frames, **start-listening events** its RELEASE
  frames (a turn end, yielded or not; the family ``barge_in_yield`` holds the yields alone). A
  system predicts an event where its score for that class rises through its threshold (tuned on
  held-back training sessions), at most one per ``tol`` frames, and only while the decision is
  open (:func:`events`: start speaking while silent, stop while speaking, as heard one frame
  late; otherwise a late "prediction" could be read off the system's own channel). A prediction within ``tol`` frames of a reference event is a hit (one-to-one, nearest
  first); latency = predicted minus reference frame, in ms (negative: early).
- **floor macro-F1**: the argmax of the 4-way floor over every frame, macro-averaged F1;
  **floor precision**: precision of "the system holds the floor" (TAKE, HOLD or RELEASE).
- **VAP-style** (only per-channel activity needed): *shift/hold* — at each mutual silence of
  ≥ 2 frames after one speaker talked alone, is the next speaker the other one? scored from the
  model's near-future activity of the two channels at the silence's second frame (balanced
  accuracy); *shift prediction* — the last 0.5 s of speech before a shift vs before a hold (AUC of
  the other channel's near-future activity); *backchannel prediction* — the 0.5 s before a short
  (≤ 1 s) listener burst inside the other's speech vs speech frames ≥ 1 s from any listener
  activity (AUC of the listener's near-future activity).
- **take-over rates**: of the user pauses, side talk and background-speech spans with no
  reference TAKE in them, the share in which the system predicts a start-speaking event; of the
  user backchannels, the share the system treats as a turn (a start-listening event while it holds
  the floor, a start-speaking event while it does not) that the reference does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .data import HOLD, RELEASE, TAKE, LearnSession, spans_of

COUNT_KEYS = ("ss_tp", "ss_fp", "ss_fn", "sl_tp", "sl_fp", "sl_fn", "shift_ok", "shift_n", "hold_ok", "hold_n",
              *(f"to_{c}_{k}" for c in ("user_pause", "backchannel", "side_talk", "background") for k in ("hit", "n")),
              *(f"cm{i}{j}" for i in range(4) for j in range(4)))
LIST_KEYS = ("ss_lat", "sl_lat", "spred_pos", "spred_neg", "bc_pos", "bc_neg")
METRICS = ("start_speaking_f1", "start_listening_f1", "start_speaking_latency_ms", "start_listening_latency_ms",
           "floor_macro_f1", "floor_precision", "shift_hold_bacc", "shift_prediction_auc",
           "backchannel_prediction_auc", "takeover_user_pause", "takeover_backchannel", "takeover_side_talk",
           "takeover_background")


@dataclass(frozen=True)
class Prediction:
    """What a system says about one session, per frame.

    ``take``/``release``: scores of a start-speaking / start-listening event at that frame;
    ``floor``: ``(n, 4)`` floor class scores (argmax used) or None; ``near``: ``(n, 2)`` probability
    that the user (0) / system (1) is active in the next ~0.6 s, or None.
    """

    take: np.ndarray
    release: np.ndarray
    floor: np.ndarray | None = None
    near: np.ndarray | None = None


def onsets(score: np.ndarray, threshold: float, refractory: int) -> np.ndarray:
    """Frames where ``score`` rises to ``threshold`` or above, at most one per ``refractory`` frames."""
    above = np.asarray(score) >= threshold
    rise = np.flatnonzero(above & ~np.concatenate([[False], above[:-1]]))
    out, last = [], -10**9
    for f in rise:
        if f - last >= refractory:
            out.append(int(f))
            last = f
    return np.asarray(out, dtype=np.int64)


def events(s: LearnSession, score: np.ndarray, kind: str, threshold: float, tol: int) -> np.ndarray:
    """Predicted ``take``/``release`` events, counted only where the decision is still open.

    A system decides to start speaking while it is silent and to stop while it speaks, as far as
    it has heard itself (its own channel one frame late): an event after it has already heard
    its own onset (or end) would be an observation, not a decision, and is not counted.
    """
    own = np.concatenate([[0], np.asarray(s.sys_vad[:-1])]) > 0
    open_ = ~own if kind == "take" else own
    return onsets(np.where(open_, score, 0.0), threshold, tol)


def match(ref: np.ndarray, pred: np.ndarray, tol: int) -> tuple[int, int, int, list[int]]:
    """One-to-one matching within ``tol`` frames, nearest pairs first: ``(tp, fp, fn, lags)``."""
    if len(ref) == 0 or len(pred) == 0:
        return 0, len(pred), len(ref), []
    d = pred[None, :] - ref[:, None]
    pairs = sorted((abs(int(d[i, j])), i, j) for i, j in zip(*np.nonzero(np.abs(d) <= tol)))
    used_r, used_p, lags = set(), set(), []
    for _, i, j in pairs:
        if i not in used_r and j not in used_p:
            used_r.add(i)
            used_p.add(j)
            lags.append(int(d[i, j]))
    tp = len(lags)
    return tp, len(pred) - tp, len(ref) - tp, lags


def _in_spans(frames: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    if not spans:
        return np.zeros(len(frames), dtype=bool)
    a = np.asarray(spans)
    f = np.asarray(frames)[:, None]
    return ((f >= a[None, :, 0]) & (f < a[None, :, 1])).any(axis=1)


def _vap_events(s: LearnSession, near: np.ndarray, period_s: float):
    """Shift/hold counts and the shift-prediction / backchannel-prediction score lists."""
    va = np.stack([s.usr_vad, s.sys_vad], axis=1).astype(bool)
    n = len(va)
    out = {k: 0 for k in ("shift_ok", "shift_n", "hold_ok", "hold_n")}
    spos, sneg, bpos, bneg = [], [], [], []
    half = max(1, int(round(0.5 / period_s)))
    for a, b in spans_of(~va.any(axis=1), min_len=2):
        if a == 0 or b >= n:
            continue
        prev = va[a - 1]
        nxt = va[b]
        if prev.sum() != 1 or nxt.sum() != 1:
            continue
        who, after = int(np.argmax(prev)), int(np.argmax(nxt))
        shift = who != after
        p = near[a + 1]
        guess_shift = p[1 - who] > p[who]
        key = "shift" if shift else "hold"
        out[f"{key}_n"] += 1
        out[f"{key}_ok"] += int(guess_shift == shift)
        lo = max(0, a - half)
        (spos if shift else sneg).extend(near[lo:a, 1 - who].tolist())
    for listener in (0, 1):
        speaker = 1 - listener
        for a, b in spans_of(va[:, listener]):
            if b - a > round(1.0 / period_s) or a < half or not va[a - 1, speaker] or b >= n or not va[b, speaker]:
                continue
            bpos.extend(near[a - half:a, listener].tolist())
        far = np.convolve(va[:, listener].astype(float), np.ones(2 * round(1.0 / period_s) + 1), "same") == 0
        neg = np.flatnonzero(va[:, speaker] & far)[::half]
        bneg.extend(near[neg, listener].tolist())
    return out, spos, sneg, bpos, bneg


def _takeovers(s: LearnSession, ref_take, pred_take, pred_rel, tol: int) -> dict[str, int]:
    out = {}
    holds = np.isin(s.sys_floor, (TAKE, HOLD, RELEASE))
    for ctx in ("user_pause", "side_talk", "background", "backchannel"):
        hit = n = 0
        for a, b in s.contexts.get(ctx, []):
            if ctx == "backchannel":
                events = pred_rel if holds[min(a, len(holds) - 1)] else pred_take
                ref = np.flatnonzero(s.sys_floor == (RELEASE if holds[min(a, len(holds) - 1)] else TAKE))
                window = (a, b + tol)
            else:
                events, ref, window = pred_take, ref_take, (a, b)
            if ((ref >= window[0]) & (ref < window[1])).any():
                continue
            n += 1
            hit += int(((events >= window[0]) & (events < window[1])).any())
        out[f"to_{ctx}_hit"], out[f"to_{ctx}_n"] = hit, n
    return out


def session_stats(s: LearnSession, pred: Prediction, thresholds: tuple[float, float], tol: int,
                  families: tuple[str, ...] = ()) -> dict:
    """Counts and score lists of one session (pooled and bootstrapped by :func:`bootstrap`)."""
    ref_take = np.flatnonzero(s.sys_floor == TAKE)
    ref_rel = np.flatnonzero(s.sys_floor == RELEASE)
    pred_take = events(s, pred.take, "take", thresholds[0], tol)
    pred_rel = events(s, pred.release, "release", thresholds[1], tol)
    st: dict = {k: 0 for k in COUNT_KEYS}
    ms = s.frame_period_s * 1000.0
    for key, ref, hyp in (("ss", ref_take, pred_take), ("sl", ref_rel, pred_rel)):
        tp, fp, fn, lags = match(ref, hyp, tol)
        st[f"{key}_tp"], st[f"{key}_fp"], st[f"{key}_fn"] = tp, fp, fn
        st[f"{key}_lat"] = [lag * ms for lag in lags]
        for fam in families:
            spans = s.families.get(fam, [])
            r, h = ref[_in_spans(ref, spans)], hyp[_in_spans(hyp, spans)]
            ftp, ffp, ffn, _ = match(r, h, tol)
            st[f"{key}_tp@{fam}"], st[f"{key}_fp@{fam}"], st[f"{key}_fn@{fam}"] = ftp, ffp, ffn
    if pred.floor is not None:
        cm = np.zeros((4, 4), dtype=np.int64)
        np.add.at(cm, (s.sys_floor.astype(int), np.argmax(pred.floor, axis=1)), 1)
        for i in range(4):
            for j in range(4):
                st[f"cm{i}{j}"] = int(cm[i, j])
    if pred.near is not None:
        vap, spos, sneg, bpos, bneg = _vap_events(s, pred.near, s.frame_period_s)
        st.update(vap)
        st["spred_pos"], st["spred_neg"], st["bc_pos"], st["bc_neg"] = spos, sneg, bpos, bneg
    else:
        st.update({k: [] for k in ("spred_pos", "spred_neg", "bc_pos", "bc_neg")})
        st["_no_vap"] = 1
    st.update(_takeovers(s, ref_take, pred_take, pred_rel, tol))
    st["_no_floor"] = int(pred.floor is None)
    return st


def _f1(tp, fp, fn):
    d = 2 * tp + fp + fn
    return np.where(d > 0, 2 * tp / np.maximum(d, 1e-12), np.nan)


def _auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Mann-Whitney AUC (ties count half); NaN without both classes."""
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    from scipy.stats import rankdata

    r = rankdata(np.concatenate([pos, neg]))
    return float((r[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def count_metrics(c: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Metrics computable from pooled counts (arrays over bootstrap resamples)."""
    out = {"start_speaking_f1": _f1(c["ss_tp"], c["ss_fp"], c["ss_fn"]),
           "start_listening_f1": _f1(c["sl_tp"], c["sl_fp"], c["sl_fn"])}
    cm = np.stack([np.stack([c[f"cm{i}{j}"] for j in range(4)], -1) for i in range(4)], -2)  # (..., 4, 4)
    tp = np.diagonal(cm, axis1=-2, axis2=-1)
    f1 = _f1(tp, cm.sum(-2) - tp, cm.sum(-1) - tp)
    out["floor_macro_f1"] = np.nanmean(np.where(np.isnan(f1), 0.0, f1), axis=-1)
    pred_hold = cm[..., :, 1:].sum((-2, -1))
    true_hold = cm[..., 1:, 1:].sum((-2, -1))
    out["floor_precision"] = np.where(pred_hold > 0, true_hold / np.maximum(pred_hold, 1), np.nan)
    sn, hn = c["shift_n"], c["hold_n"]
    out["shift_hold_bacc"] = np.where((sn > 0) & (hn > 0),
                                      0.5 * (c["shift_ok"] / np.maximum(sn, 1) + c["hold_ok"] / np.maximum(hn, 1)),
                                      np.nan)
    for ctx in ("user_pause", "backchannel", "side_talk", "background"):
        n = c[f"to_{ctx}_n"]
        out[f"takeover_{ctx}"] = np.where(n > 0, c[f"to_{ctx}_hit"] / np.maximum(n, 1), np.nan)
    for key in [k for k in c if "@" in k and k.startswith("ss_tp")]:
        fam = key.split("@", 1)[1]
        for ev in ("ss", "sl"):
            name = "start_speaking_f1" if ev == "ss" else "start_listening_f1"
            out[f"{name}@{fam}"] = _f1(c[f"{ev}_tp@{fam}"], c[f"{ev}_fp@{fam}"], c[f"{ev}_fn@{fam}"])
    return out


def list_metrics(lists: dict[str, np.ndarray]) -> dict[str, float]:
    med = lambda x: float(np.median(x)) if len(x) else float("nan")  # noqa: E731
    return {"start_speaking_latency_ms": med(lists["ss_lat"]), "start_listening_latency_ms": med(lists["sl_lat"]),
            "shift_prediction_auc": _auc(lists["spred_pos"], lists["spred_neg"]),
            "backchannel_prediction_auc": _auc(lists["bc_pos"], lists["bc_neg"])}


def _ci(point: float, samples: np.ndarray) -> dict:
    ok = samples[~np.isnan(samples)]
    val = None if np.isnan(point) else round(float(point), 4)
    if val is None or len(ok) < 0.5 * len(samples):
        return {"value": val, "lo": None, "hi": None}
    lo, hi = np.percentile(ok, [2.5, 97.5])
    return {"value": val, "lo": round(float(lo), 4), "hi": round(float(hi), 4)}


def _counts(stats: list[list[dict]], idx: np.ndarray) -> tuple[list[str], np.ndarray]:
    keys = sorted(k for k, v in stats[0][0].items() if isinstance(v, (int, np.integer)) and not k.startswith("_"))
    c = np.array([[[st[i].get(k, 0) for k in keys] for i in idx] for st in stats], dtype=np.float64)
    return keys, c  # (seeds, sessions, keys)


def _pooled_lists(stats: list[list[dict]], idx: np.ndarray, weights: np.ndarray) -> list[dict[str, np.ndarray]]:
    out = []
    for st in stats:
        d = {}
        for k in LIST_KEYS:
            vals = [np.asarray(st[i][k], dtype=np.float64) for i in idx]
            lens = np.array([len(v) for v in vals])
            flat = np.concatenate(vals) if vals else np.zeros(0)
            d[k] = np.repeat(flat, np.repeat(weights.astype(np.int64), lens))
        out.append(d)
    return out


def summarize(stats: list[list[dict]], idx: np.ndarray | None = None, n_boot: int = 1000, seed: int = 0,
              lists: bool = True) -> dict[str, dict]:
    """Metric -> ``{"value", "lo", "hi"}`` over the sessions ``idx`` of ``stats[seed][session]``.

    The value is the mean over model seeds; the interval is the 2.5-97.5 percentile of that mean
    over ``n_boot`` resamples of sessions (the same resample for every model seed).
    """
    n_all = len(stats[0])
    idx = np.arange(n_all) if idx is None else np.asarray(idx)
    if len(idx) == 0:
        return {}
    rng = np.random.default_rng(seed)
    w = np.stack([np.bincount(rng.integers(0, len(idx), len(idx)), minlength=len(idx)) for _ in range(n_boot)])
    keys, c = _counts(stats, idx)
    point = {k: v for k, v in zip(keys, c.sum(axis=1).T)}                      # key -> (seeds,)
    boot = np.einsum("bn,snk->bsk", w.astype(np.float64), c)
    boot_d = {k: boot[..., i] for i, k in enumerate(keys)}                     # key -> (B, seeds)
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        pm, bm = count_metrics(point), count_metrics(boot_d)
        for name in pm:
            if name in ("floor_macro_f1", "floor_precision") and stats[0][0].get("_no_floor"):
                continue
            if name == "shift_hold_bacc" and stats[0][0].get("_no_vap"):
                continue
            out[name] = _ci(_nanmean(pm[name]), np.array([_nanmean(r) for r in bm[name]]))
        if lists:
            ones = np.ones(len(idx))
            p = [list_metrics(d) for d in _pooled_lists(stats, idx, ones)]
            b = [[list_metrics(d) for d in _pooled_lists(stats, idx, wi)] for wi in w[: max(1, n_boot // 5)]]
            for name in p[0]:
                if name.endswith("_auc") and stats[0][0].get("_no_vap"):
                    continue
                out[name] = _ci(_nanmean([x[name] for x in p]),
                                np.array([_nanmean([x[name] for x in r]) for r in b]))
    return out


def _nanmean(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float("nan") if np.isnan(x).all() else float(np.nanmean(x))


def paired_difference(a: list[list[dict]], b: list[list[dict]], metric: str, n_boot: int = 1000,
                      seed: int = 0) -> dict:
    """``metric(a) - metric(b)`` on the same sessions (lists aligned), each averaged over its model
    seeds, with the interval of one shared session resample: the paired effect of an ablation."""
    n = len(a[0])
    rng = np.random.default_rng(seed)
    w = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(n_boot)]).astype(np.float64)
    vals = []
    for stats in (a, b):
        keys, c = _counts(stats, np.arange(n))
        point = count_metrics({k: v for k, v in zip(keys, c.sum(axis=1).T)})[metric]
        boot = np.einsum("bn,snk->bsk", w, c)
        bm = count_metrics({k: boot[..., i] for i, k in enumerate(keys)})[metric]
        vals.append((_nanmean(point), np.array([_nanmean(r) for r in bm])))
    return _ci(vals[0][0] - vals[1][0], vals[0][1] - vals[1][1])
