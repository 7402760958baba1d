"""Run folders on object storage: a real S3 protocol server (moto) on 127.0.0.1."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def s3():
    from moto.server import ThreadedMotoServer
    import boto3

    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true"}
    boto3.client("s3", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                 aws_access_key_id="test", aws_secret_access_key="test").create_bucket(Bucket="data")
    yield f"endpoint_override={host}:{port}&scheme=http&region=us-east-1", env
    srv.stop()


def run(args, env):
    r = subprocess.run([sys.executable, "-m", "synth.cli", *map(str, args)], capture_output=True, text=True,
                       cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def test_a_run_on_s3_matches_the_local_run_byte_for_byte_and_resumes(s3, tmp_path):
    query, env = s3
    cfg = {"name": "s3run", "seeds": [str(ROOT / "scenario_seeds" / "*-zh.yaml")], "sessions": 3, "seed": 4,
           "output": {"sessions_per_shard": 2}}
    p = tmp_path / "pipe.yaml"
    p.write_text(yaml.safe_dump(cfg))
    local = tmp_path / "local"
    run(["run", p, "--out", local], env)
    uri = f"s3://data/runs/s3run?{query}"
    run(["run", p, "--out", uri], env)
    os.environ.update({k: env[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")})
    fs, base = pafs.FileSystem.from_uri(uri)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    remote = {i.path[len(base) + 1:]: i for i in infos if i.type == pafs.FileType.File}
    for rel in ("run.json", "stats.json", "tasks/00000.done.json", "tasks/00001.done.json"):
        assert rel in remote
    shards = sorted(k for k in remote if k.startswith("shards/"))
    assert shards == sorted(str(x.relative_to(local)) for x in (local / "shards").rglob("*") if x.is_file())
    for rel in shards:  # no temp names, and the same bytes as the local run
        with fs.open_input_stream(f"{base}/{rel}") as f:
            assert hashlib.sha256(f.read()).hexdigest() == hashlib.sha256((local / rel).read_bytes()).hexdigest()
    stats = json.loads(fs.open_input_stream(f"{base}/stats.json").read())
    assert stats["sessions"] + stats["rejects"] == 3
    # a rerun finds both markers and makes nothing
    before = {k: v.mtime for k, v in remote.items()}
    run(["run", p, "--out", uri], env)
    after = {i.path[len(base) + 1:]: i.mtime for i in fs.get_file_info(pafs.FileSelector(base, recursive=True))
             if i.type == pafs.FileType.File and "/shards/" in "/" + i.path[len(base) + 1:]}
    assert all(after[k] == before[k] for k in after)
