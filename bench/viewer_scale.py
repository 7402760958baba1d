"""Is ``synth view`` usable on a run of 1,000 sessions? Time to open, page sizes and latencies, RSS.

    python bench/viewer_scale.py RUN_DIR [--sessions 1000] [--work DIR]

RUN_DIR is a real run (e.g. the 5-session eSpeak run of the tests). Its Parquet rows, audio
included, are repeated under new session ids (``big-000000``...) into a 1,000-session run folder,
100 per shard, one row group per session as the run writer does: the *content* repeats, but sizes, shard layout and what the viewer reads are those
of a real run of that many sessions. The viewer is then served in this process on 127.0.0.1 and
asked over HTTP for: the first index page, a filtered index page, the last page, one session
page, its stereo mix (cold, then cached). Peak RSS is this process's (server included).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))

from synth.inspection.runfolder import RunFolder  # noqa: E402
from synth.inspection.viewer import make_server  # noqa: E402


def replicate(src: Path, dst: Path, sessions: int, per_shard: int = 100) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = RunFolder(src)
    table = pa.concat_tables([pq.read_table(p) for p in run.parquet_files])
    (dst / "shards" / "parquet").mkdir(parents=True)
    shutil.copy(src / "run.json", dst / "run.json")
    for shard, start in enumerate(range(0, sessions, per_shard)):
        n = min(per_shard, sessions - start)
        idx = [(start + i) % table.num_rows for i in range(n)]
        part = table.take(idx)
        ids = pa.array([f"big-{start + i:06d}" for i in range(n)], type=part.schema.field("session_id").type)
        part = part.set_column(part.schema.get_field_index("session_id"), "session_id", ids)
        # as synth/io/shards.py writes: zstd, one row group per session (so one session reads alone)
        pq.write_table(part, dst / "shards" / "parquet" / f"part-{shard:05d}.parquet", row_group_size=1,
                       compression="zstd", use_dictionary=False)


def get(url: str) -> tuple[float, int]:
    t = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=120).read()
    return time.perf_counter() - t, len(body)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--work", type=Path, default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="viewer-scale-"))
    big = work / "big"
    if not big.exists():
        replicate(a.run_dir, big, a.sessions)
    disk_mb = sum(p.stat().st_size for p in big.rglob("*.parquet")) / 2**20
    t = time.perf_counter()
    server = make_server(big, 0)
    open_s = time.perf_counter() - t
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    lang = RunFolder(a.run_dir).records[0].language
    out = {"sessions": a.sessions, "parquet_mb": round(disk_mb, 1), "open_s": round(open_s, 3)}
    mid = f"big-{a.sessions // 2:06d}"
    for name, path in [("index_page1", ""), ("index_filtered", f"?lang={lang}"),
                       ("index_last", f"?page={a.sessions}"), ("session_page", f"session/{mid}"),
                       ("mix_cold", f"audio/{mid}/mix.flac"), ("mix_cached", f"audio/{mid}/mix.flac")]:
        s, n = get(url + path)
        out[name] = {"s": round(s, 3), "kb": round(n / 1024, 1)}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    server.shutdown()
    from synth.backends.cpu import describe

    out["cpu"] = describe()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
