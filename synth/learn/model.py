"""A small causal turn-taking model and its training loop (torch, imported lazily by callers).

Input at frame ``k``: the user side's log-mel stack of frame ``k`` and the system channel's of
frame ``k - 1``. The system channel is seen one frame late so that a TAKE cannot be read off the
system's own speech onset: the start-speaking decision has to come from the user side and the
past, as it would in a duplex model deciding whether to start talking. A linear projection, a
causal 3-frame convolution and a one-layer GRU (~0.23 M parameters at 80 ms) feed five heads:
the 4-way ``sys_floor``, the 4-way ``sys_action``, the voice activity of each channel at frame
``k`` and the voice-activity-projection target (activity of each channel in four future bins:
0-0.2, 0.2-0.6, 0.6-1.2, 1.2-2 s after the frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .data import RELEASE, TAKE, LearnSession

VAP_BINS_S = ((0.0, 0.2), (0.2, 0.6), (0.6, 1.2), (1.2, 2.0))
N_VAP = 2 * len(VAP_BINS_S)
SOON_S = 0.24  # the event heads: "a TAKE / RELEASE frame within the next 0.24 s (this frame included)"
N_OUT = 4 + 4 + 2 + N_VAP + 2


@dataclass(frozen=True)
class TrainSettings:
    """One training run: inputs, size, optimisation, and the label permutation of the control."""

    inputs: str = "audio"          # "audio" (log-mel of both channels) or "vad" (reference VAD only)
    hidden: int = 128
    epochs: int = 12
    chunk_frames: int = 200        # 16 s at 80 ms
    batch: int = 16
    lr: float = 2e-3
    seed: int = 0
    shuffle_labels: bool = False   # control: each session's labels circularly shifted by a random offset
    device: str = "cpu"


def model_inputs(s: LearnSession, inputs: str, swap: bool = False, dtype=np.float32) -> np.ndarray:
    """``(n, D)`` float32: the user side at ``k`` and the system channel at ``k - 1``.

    ``swap`` exchanges the two channels first (the channel-swap control).
    """
    if inputs == "vad":
        user, system = s.usr_vad[:, None].astype(np.float32), s.sys_vad[:, None].astype(np.float32)
    else:
        user, system = s.user_feat.astype(np.float32), s.system_feat.astype(np.float32)
    if swap:
        user, system = system, user
    late = np.concatenate([np.full_like(system[:1], system.min() if inputs == "audio" else 0.0), system[:-1]])
    return np.concatenate([user, late], axis=1).astype(dtype, copy=False)


def vap_targets(s: LearnSession) -> tuple[np.ndarray, np.ndarray]:
    """``(n, 8)`` future-activity targets (user bins then system bins) and their validity mask."""
    n, p = s.n_frames, s.frame_period_s
    va = np.stack([s.usr_vad, s.sys_vad], axis=1).astype(np.float32)
    cum = np.concatenate([np.zeros((1, 2), np.float32), np.cumsum(va, axis=0)])
    k = np.arange(n)
    tgt = np.zeros((n, N_VAP), np.float32)
    valid = np.ones((n, N_VAP), np.float32)
    for b, (lo_s, hi_s) in enumerate(VAP_BINS_S):
        lo = k + 1 + int(round(lo_s / p))
        hi = k + 1 + max(int(round(hi_s / p)), int(round(lo_s / p)) + 1)
        frac = (cum[np.minimum(hi, n)] - cum[np.minimum(lo, n)]) / (hi - lo)[:, None]
        tgt[:, b], tgt[:, len(VAP_BINS_S) + b] = frac[:, 0] > 0.5, frac[:, 1] > 0.5
        valid[:, b] = valid[:, len(VAP_BINS_S) + b] = hi <= n
    return tgt, valid


class TurnTakingNet(nn.Module):
    """Causal: frame ``k``'s outputs depend on inputs ``<= k`` only (tested)."""

    def __init__(self, in_dim: int, hidden: int = 128, dropout: float = 0.2):
        super().__init__()
        self.register_buffer("mean", torch.zeros(in_dim))
        self.register_buffer("std", torch.ones(in_dim))
        self.proj = nn.Linear(in_dim, hidden)
        self.drop = nn.Dropout(dropout)
        self.conv = nn.Conv1d(hidden, hidden, kernel_size=3)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, N_OUT)

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None):
        z = self.drop(torch.relu(self.proj((x - self.mean) / self.std)))  # (B, T, H)
        z = nn.functional.pad(z.transpose(1, 2), (2, 0))                   # left pad only: causal
        z = torch.relu(self.conv(z)).transpose(1, 2)
        z, h = self.gru(z, h)
        return self.head(z), h


def parameter_count(model: nn.Module) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def soon_targets(s: LearnSession) -> np.ndarray:
    """``(n, 2)``: a TAKE (col 0) / RELEASE (col 1) frame within the next ``SOON_S`` (frame included)."""
    h = max(1, int(round(SOON_S / s.frame_period_s)))
    out = np.zeros((s.n_frames, 2), np.float32)
    for col, cls in ((0, TAKE), (1, RELEASE)):
        for f in np.flatnonzero(s.sys_floor == cls):
            out[max(0, f - h + 1):f + 1, col] = 1.0
    return out


def _targets(s: LearnSession, rng: np.random.Generator | None):
    floor = s.sys_floor.astype(np.int64)
    action = s.sys_action.astype(np.int64) if s.sys_action is not None else np.full(s.n_frames, -100, np.int64)
    vad = np.concatenate([np.stack([s.usr_vad, s.sys_vad], axis=1).astype(np.float32), soon_targets(s)], axis=1)
    vap, vmask = vap_targets(s)
    if rng is not None:  # shuffled-labels control: audio and labels no longer line up
        shift = int(rng.integers(s.n_frames // 4, max(s.n_frames // 4 + 1, 3 * s.n_frames // 4)))
        floor, action, vad, vap, vmask = (np.roll(a, shift, axis=0) for a in (floor, action, vad, vap, vmask))
    return floor, action, vad, vap, vmask


def _class_weights(sessions: list[LearnSession]) -> torch.Tensor:
    counts = np.bincount(np.concatenate([s.sys_floor for s in sessions]).astype(np.int64), minlength=4) + 1.0
    w = (counts.sum() / counts) ** 0.5
    return torch.tensor(w / w.mean(), dtype=torch.float32)


def _loss(out, batch, floor_w):
    floor, action, vad, vap, vmask = batch
    ce = nn.functional.cross_entropy
    loss = ce(out[..., :4].reshape(-1, 4), floor.reshape(-1), weight=floor_w)
    if (action >= 0).any():
        loss = loss + 0.5 * ce(out[..., 4:8].reshape(-1, 4), action.reshape(-1), ignore_index=-100)
    bce = nn.functional.binary_cross_entropy_with_logits
    loss = loss + 0.5 * bce(out[..., 8:10], vad[..., :2]) + bce(out[..., -2:], vad[..., 2:])
    return loss + 0.5 * (bce(out[..., 10:10 + N_VAP], vap, reduction="none") * vmask).sum() / vmask.sum().clamp(min=1)


def train(sessions: list[LearnSession], settings: TrainSettings) -> TurnTakingNet:
    """Train on random ``chunk_frames`` crops; deterministic for a seed on one thread."""
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    xs = [model_inputs(s, settings.inputs, dtype=np.float16) for s in sessions]  # half the memory; crops widen
    label_rng = np.random.default_rng(settings.seed + 1) if settings.shuffle_labels else None
    ys = [_targets(s, label_rng) for s in sessions]
    mean, std = _moments(xs)
    model = TurnTakingNet(xs[0].shape[1], settings.hidden)
    model.mean.copy_(torch.from_numpy(mean))
    model.std.copy_(torch.from_numpy(std))
    dev = torch.device(settings.device)
    model.to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=1e-2)
    floor_w = _class_weights(sessions).to(dev)
    lengths = np.array([len(x) for x in xs])
    total = int(lengths.sum())
    steps = max(1, total // (settings.chunk_frames * settings.batch))
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=settings.lr, total_steps=steps * settings.epochs)
    p = lengths / total
    model.train()
    for _ in range(settings.epochs):
        for _ in range(steps):
            batch_x, batch_y = _crop_batch(xs, ys, lengths, p, settings, rng)
            batch_x, batch_y = batch_x.to(dev), tuple(t.to(dev) for t in batch_y)
            out, _ = model(batch_x)
            loss = _loss(out, batch_y, floor_w)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
    model.eval()
    return model.cpu()


def _moments(xs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension mean and std over every frame, one session at a time (float64 sums)."""
    n = sum(len(x) for x in xs)
    s1 = sum(x.astype(np.float64).sum(0) for x in xs)
    s2 = sum((x.astype(np.float64) ** 2).sum(0) for x in xs)
    mean = s1 / n
    std = np.sqrt(np.maximum(s2 / n - mean ** 2, 0.0)) + 1e-3
    return mean.astype(np.float32), std.astype(np.float32)


def _crop_batch(xs, ys, lengths, p, settings: TrainSettings, rng: np.random.Generator):
    L = settings.chunk_frames
    picks = rng.choice(len(xs), size=settings.batch, p=p)
    bx = np.zeros((settings.batch, L, xs[0].shape[1]), np.float32)
    by = [np.zeros((settings.batch, L), np.int64), np.full((settings.batch, L), -100, np.int64),
          np.zeros((settings.batch, L, 4), np.float32), np.zeros((settings.batch, L, N_VAP), np.float32),
          np.zeros((settings.batch, L, N_VAP), np.float32)]
    floor_mask = np.zeros((settings.batch, L), bool)
    for b, i in enumerate(picks):
        start = int(rng.integers(0, max(1, lengths[i] - L + 1)))
        n = min(L, lengths[i] - start)
        bx[b, :n] = xs[i][start:start + n]
        for arr, src in zip(by, ys[i]):
            arr[b, :n] = src[start:start + n]
        floor_mask[b, :n] = True
    by[0][~floor_mask] = -100  # padding frames carry no floor label
    return torch.from_numpy(bx), tuple(torch.from_numpy(a) for a in by)


@torch.no_grad()
def predict(model: TurnTakingNet, s: LearnSession, inputs: str, swap: bool = False,
            device: str = "cpu") -> dict[str, np.ndarray]:
    """Per-frame probabilities of one whole session (causal, so the same as streaming it)."""
    del device  # predictions run on the CPU copy train() returns: whole sessions, batch 1, cheap
    x = torch.from_numpy(model_inputs(s, inputs, swap))[None]
    out = model(x)[0][0]
    floor = torch.softmax(out[:, :4], dim=-1).numpy()
    vap = torch.sigmoid(out[:, 10:10 + N_VAP]).numpy()
    soon = torch.sigmoid(out[:, -2:]).numpy()
    nb = len(VAP_BINS_S)
    near = np.stack([vap[:, :2].mean(1), vap[:, nb:nb + 2].mean(1)], axis=1)  # 0-0.6 s
    return {"floor": floor, "near": near, "soon": soon}
