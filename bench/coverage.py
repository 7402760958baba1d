"""Phenomenon coverage of a finished run: hits per phenomenon and language, families, gaps.

    python bench/coverage.py outputs/phenomena
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from synth.schema.phenomena import CODE_SWITCH, REGISTRY, ROUTINE


def main(out_dir: str) -> int:
    stats = json.loads((Path(out_dir) / "stats.json").read_text())
    by_lang = stats["phenomena_by_language"]
    langs = sorted(stats["languages"])
    print(f"{stats['sessions']} sessions ({stats['languages']}), {stats['rejects']} rejects "
          f"{stats['rejects_by_reason']}, {stats['audio_s'] / 3600:.2f} h")
    print(f"{'phenomenon':32s} {'family':20s} " + " ".join(f"{x:>6s}" for x in langs) + "  total")
    missing = []
    for pid, p in {**REGISTRY, **CODE_SWITCH, ROUTINE.id: ROUTINE}.items():
        row = [by_lang.get(f"{lang}/{pid}", 0) for lang in langs]
        print(f"{pid:32s} {p.family:20s} " + " ".join(f"{n:6d}" for n in row) + f"  {sum(row):5d}")
        wanted = ["en-zh"] if pid in CODE_SWITCH else langs
        missing += [f"{lang}/{pid}" for lang in wanted if by_lang.get(f"{lang}/{pid}", 0) == 0]
    print("families:", stats["families"])
    print("missing:", missing or "none")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
