"""Record the planner's exact requests of the replay cases in ``cases/``, one step at a time.

    .venv/bin/python tests/data/llm/record.py plan-en fill-zh ...

Each run replays what is recorded and stops at the first request without a reply, naming the
file to write: the reply a capable model would write for that request, written from the request
alone (``NN.reply.json``; ``NN.reply.txt`` plus an empty ``NN.cut`` for a reply cut at max_tokens).
Fill cases first store the offline planner's structure (``structure.json``) so that later
changes to the offline planner do not change the recorded requests.
"""

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from chat_server import ChatServer, Replay  # noqa: E402
from test_llm_planner import record_structure, run_case  # noqa: E402


def main(names: list[str]) -> int:
    for name in names:
        folder = HERE / "cases" / name
        record_structure(folder)
        replay = Replay(folder, record=True)
        with ChatServer(replay) as srv, tempfile.TemporaryDirectory() as cache:
            try:
                result = run_case(folder, srv.url, Path(cache))
            except Exception as e:  # noqa: BLE001 - a missing reply ends the run with an endpoint error
                result = e
        if replay.missing:
            print(f"{name}: write {replay.missing}")
            return 1
        print(f"{name}: {type(result).__name__} {getattr(result, 'planner_meta', '') or result}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
