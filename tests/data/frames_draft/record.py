"""Record the exact request of ``synth frames draft`` for a replay case, and replay it.

    .venv/bin/python tests/data/frames_draft/record.py pharmacy-en

Runs the command of the case (``case.yaml``: domain, language, n) against a local server that
records each request (``NN.request.json``) and answers it with ``NN.reply.json``; a request
without a reply is named: write the reply a capable model would write for that request, from the
request alone, then run this again.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from chat_server import ChatServer, Replay  # noqa: E402
from helpers import synth  # noqa: E402


def draft_args(case: dict, url: str, out: Path, cache: Path) -> list[str]:
    return ["frames", "draft", case["domain"], "--language", case["language"], "-n", str(case["n"]), "-o", str(out),
            "--llm-base-url", url, "--llm-model", "replay-model", "--llm-cache-dir", str(cache)]


def main(names: list[str]) -> int:
    for name in names:
        folder = HERE / name
        case = yaml.safe_load((folder / "case.yaml").read_text("utf-8"))
        replay = Replay(folder, record=True)
        with ChatServer(replay) as srv, tempfile.TemporaryDirectory() as tmp:
            r = synth(*draft_args(case, srv.url, Path(tmp) / "content", Path(tmp) / "cache"), check=False)
        if replay.missing:
            print(f"{name}: write {replay.missing}")
            return 1
        print(f"{name}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
