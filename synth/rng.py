"""The one place where randomness is made.

A session's output depends only on ``(run_seed, session_id)``. Every stage, and every event
inside a stage, asks for its own generator by name, so adding a draw in one stage never shifts
the draws of another::

    rng = stream(1234, "demo-000003", "place", "s4")

Names are hashed with blake2b (stable across processes and Python versions, unlike ``hash()``)
into the entropy of a ``numpy.random.SeedSequence``.
"""

from __future__ import annotations

import hashlib

import numpy as np


def _entropy(run_seed: int, names: tuple[str, ...]) -> list[int]:
    h = hashlib.blake2b(digest_size=16)
    h.update(str(int(run_seed)).encode())
    for name in names:
        h.update(b"\x1f")
        h.update(name.encode())
    digest = h.digest()
    return [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]


def stream(run_seed: int, *names: str) -> np.random.Generator:
    """An independent generator for ``names`` under ``run_seed``."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(_entropy(run_seed, names))))


def int_seed(run_seed: int, *names: str) -> int:
    """A 32-bit integer seed for libraries that take one (derived the same way as ``stream``)."""
    return int(stream(run_seed, *names).integers(0, 2**31 - 1))
