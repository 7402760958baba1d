"""Benchmark: cost of the room step per session, hybrid tracer vs. image sources at full order.

    .venv/bin/python bench/room_step.py [--rooms 20]

Draws rooms the way sessions do (every seed's environment, user + third party + TV sources),
times ``room_irs`` (cache cleared) and the RT60 error of each method, and the convolution of a
90 s user-side mix. Prints one table; numbers go into the README's performance section.
"""

from __future__ import annotations

import argparse
import glob
import time
from pathlib import Path

import numpy as np
from scipy.signal import oaconvolve

from synth.backends import room as R
from synth.io.config_files import load_seed
from synth.rng import stream

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rooms", type=int, default=20)
    ap.add_argument("--sample-rate", type=int, default=16000)
    a = ap.parse_args()
    from synth.backends.cpu import describe

    print(f"cpu: {describe()}")
    seeds = [load_seed(p) for p in sorted(glob.glob(str(ROOT / "scenario_seeds" / "*.yaml")))]
    envs = [s.environment for s in seeds if s.environment.room is not None]
    rows = {"hybrid (order 3 + 4000 rays)": (3, 4000), "image sources, full order": (None, 0)}
    sr = a.sample_rate
    x = np.random.default_rng(0).standard_normal(90 * sr).astype(np.float32)
    for name, (order, rays) in rows.items():
        times, errs, conv = [], [], []
        for i in range(a.rooms):
            env = envs[i % len(envs)]
            spec = R.draw_room(env, ["user", "third_party", "background"], stream(1, "bench", str(i)), 3, rays)
            if order is None:  # what pyroomacoustics' inverse_sabine asks for to reach the RT60
                import pyroomacoustics as pra

                _, need = pra.inverse_sabine(spec.rt60_s, list(spec.dims_m))
                spec = spec.model_copy(update={"max_order": int(need), "ray_tracing": False, "n_rays": 0})
            R._CACHE.clear()
            t0 = time.perf_counter()
            irs = R.room_irs(spec, sr)
            times.append(time.perf_counter() - t0)
            errs.append(abs(R.measure_rt60(irs["user"], sr) / spec.rt60_s - 1))
            t0 = time.perf_counter()
            for ir in irs.values():
                oaconvolve(x, ir)
            conv.append(time.perf_counter() - t0)
        print(f"{name:32s} RIRs {np.mean(times):.3f} s/session (max {np.max(times):.3f}), "
              f"convolution {np.mean(conv):.3f} s, RT60 error mean {100 * np.mean(errs):.1f} % "
              f"max {100 * np.max(errs):.1f} %")


if __name__ == "__main__":
    main()
