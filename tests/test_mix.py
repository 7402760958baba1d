"""Room convolution of long tracks: chunked overlap-add equals one convolution of the whole track."""

import numpy as np
import pytest
from scipy.signal import oaconvolve

from synth.stages.mix import convolve


def test_chunked_convolution_equals_one_convolution_of_the_whole_track():
    rng = np.random.default_rng(7)
    n = 50_000
    x = rng.standard_normal(n).astype(np.float32)
    x[12_000:30_000] = 0  # a silent stretch: whole chunks of it are skipped
    ir = rng.standard_normal(3_001) * np.exp(-np.arange(3_001) / 500)
    whole = oaconvolve(x, ir)[:n].astype(np.float32)
    chunked = convolve(x, ir, n, chunk=4_096, whole=4_096)
    assert chunked.dtype == np.float32 and len(chunked) == n
    assert np.max(np.abs(chunked - whole)) < 1e-5 * np.max(np.abs(whole))
    # the tail of each chunk rings into the next one: without the overlap-add this would fail
    assert np.abs(chunked[4_096:4_096 + 3_000]).max() > 0.1


def test_a_track_within_one_chunk_is_one_convolution():
    rng = np.random.default_rng(8)
    x = rng.standard_normal(9_000).astype(np.float32)
    ir = rng.standard_normal(700)
    assert np.array_equal(convolve(x, ir, 9_000, chunk=1_000, whole=9_000), oaconvolve(x, ir)[:9_000].astype(np.float32))


@pytest.mark.parametrize("up,down", [(320, 441), (2, 3), (160, 147), (3, 2), (1, 3)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_polyphase_gives_resample_polys_samples(up, down, dtype):
    """The filter designed once per rate pair gives the samples scipy's own design gives."""
    from scipy.signal import resample_poly

    from synth.audio import polyphase

    x = np.random.default_rng(up * down).standard_normal(4001).astype(dtype)
    for _ in range(2):  # the second call uses the cached filter
        y = polyphase(x, up, down)
        ref = resample_poly(x, up, down)
        assert y.dtype == ref.dtype and np.array_equal(y, ref)
