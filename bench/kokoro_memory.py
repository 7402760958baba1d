"""Peak RSS of one Kokoro process per memory lever, on the same lines: which lever pays.

    .venv/bin/python bench/kokoro_memory.py --plans plans.jsonl [--lines 12] [--precision float32]
        [--levers default,noshrink,noheap,noarena,nopattern,same]

``plans.jsonl`` is ``synth plan PIPELINE -n N -o plans.jsonl``. Each lever set runs in a fresh
process that loads the engine, then synthesises the ``--lines`` longest one-language lines of the
plans (in voice ``pool-00`` at 170 wpm), then one long call: the longest lines of one language
joined up to Kokoro's 500-token limit. It prints the high-water RSS (``VmHWM``) after loading,
after the lines, and after the long call, with the long call's audio seconds: what a line costs
beyond the loaded model. A full pipeline's per-worker peak is ``bench/memwatch.py``'s.

Levers (``+`` joins them; ``default`` is the engine as it is):
``noshrink`` no arena shrinkage after each call; ``noheap`` glibc's dynamic mmap threshold;
``noarena`` ``enable_cpu_mem_arena = False``; ``nopattern`` ``enable_mem_pattern = False``;
``same`` the CPU arena grows by what is asked (``kSameAsRequested``) instead of powers of two.
Not a test: Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEVERS = {"default", "noshrink", "noheap", "noarena", "nopattern", "same"}


def hwm_mb() -> float:
    with open("/proc/self/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def lines_of(plans: Path) -> list[list]:
    """Every spoken event's words, one language per line (a mixed line is one call per run)."""
    from synth.backends.tts import runs_by
    from synth.schema.plan import PlannedWord

    out = []
    for row in plans.read_text(encoding="utf-8").splitlines():
        for ev in json.loads(row)["plan"]["events"]:
            if ev.get("sound") or not ev.get("words"):
                continue
            words = [PlannedWord(**w) for w in ev["words"]]
            out.extend(runs_by(words, lambda w: w.lang))
    return out


def patch(levers: set[str]) -> None:
    """Put the levers into onnxruntime's session and run options and into malloc."""
    import onnxruntime as ort

    from synth.backends import kokoro

    if "noshrink" in levers:
        kokoro.shrinking_run_options = lambda ort: ort.RunOptions()
    if "same" in levers:  # an environment arena that grows by what is asked, shared by the session
        cfg = ort.OrtArenaCfg(0, 1, -1, -1)  # max_mem, arena_extend_strategy 1 = kSameAsRequested, defaults
        info = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
        ort.create_and_register_allocator(info, cfg)
    plain = ort.InferenceSession

    def session(graph, opts, providers=None):
        if "noarena" in levers:
            opts.enable_cpu_mem_arena = False
        if "nopattern" in levers:
            opts.enable_mem_pattern = False
        if "same" in levers:
            opts.add_session_config_entry("session.use_env_allocators", "1")
        return plain(graph, opts, providers=providers)

    ort.InferenceSession = session
    if "noheap" not in levers:
        from synth.executor.heap import return_big_blocks

        return_big_blocks()  # as run_task does


def child(plans: Path, n_lines: int, precision: str, levers: set[str]) -> dict:
    from synth.backends.kokoro import MAX_TOKENS, KokoroTTS
    from synth.schema.voice import Voice

    patch(levers)
    tts = KokoroTTS(precision=precision).load()
    loaded = hwm_mb()
    voice = Voice("pool-00", 170, 50, 50)
    tokens = tts._g2p.tokens
    lines = sorted(lines_of(plans), key=lambda ws: -sum(len(tokens(w)) + 1 for w in ws))
    for words in lines[:n_lines]:
        tts.synthesize(words, voice, 24000)
    after_lines = hwm_mb()
    longest_lang = lines[0][0].lang
    long_call, n = [], 0
    for words in (ws for ws in lines if ws[0].lang == longest_lang):
        size = sum(len(tokens(w)) + 1 for w in words)
        if n + size <= MAX_TOKENS - 2:
            long_call.extend(words)
            n += size
    r = tts.synthesize(long_call, voice, 24000)
    return {"graph": tts.graph, "loaded_mb": loaded, "lines_mb": after_lines, "long_mb": hwm_mb(),
            "long_s": len(r.audio) / 24000, "long_tokens": n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--plans", type=Path, required=True)
    ap.add_argument("--lines", type=int, default=12)
    ap.add_argument("--precision", default="float32", choices=["float32", "int8"])
    ap.add_argument("--levers", default="default,noshrink,noheap,noarena,nopattern,same")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if not 0 <= a.lines <= 1000:
        sys.exit(f"--lines: must be 0-1000 (got {a.lines})")
    sys.path.insert(0, str(ROOT))
    if a.child is not None:
        print(json.dumps(child(a.plans, a.lines, a.precision, set(a.child.split("+")) - {"default"})))
        return
    from synth.backends.cpu import describe

    print(f"cpu: {describe()}")
    print(f"{a.lines} longest lines of {a.plans}, precision {a.precision}; high-water RSS of one process")
    for lever in a.levers.split(","):
        unknown = set(lever.split("+")) - LEVERS
        if unknown:
            sys.exit(f"--levers: unknown lever {sorted(unknown)[0]!r} (have {', '.join(sorted(LEVERS))})")
        out = subprocess.run([sys.executable, __file__, "--plans", str(a.plans), "--lines", str(a.lines),
                              "--precision", a.precision, "--child", lever], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            print(f"{lever:<20} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{lever:<20} {r['graph']}: loaded {r['loaded_mb']:6.0f} MB, after lines {r['lines_mb']:6.0f} MB, "
              f"after one {r['long_s']:.1f} s call ({r['long_tokens']} tokens) {r['long_mb']:6.0f} MB", flush=True)


if __name__ == "__main__":
    main()
