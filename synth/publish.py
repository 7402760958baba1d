"""``synth publish``: a Hugging Face dataset folder (card + shards) and its upload.

The folder is exactly what is uploaded::

    README.md                      dataset card: YAML metadata + label table, settings, statistics, licences
    data/part-RRRRR.parquet        the run's Parquet shards (the ``default`` config) plus an ``alignments``
                                   column: every spoken word in seconds
    webdataset/part-RRRRR.tar      the same sessions as WebDataset shards
    meta/run.json  meta/stats.json  meta/rejects.jsonl  meta/report.json

``datasets.load_dataset(folder)`` reads the ``configs`` entry of the card (Parquet only), with
``user_audio``/``system_audio`` as ``Audio`` features (FLAC bytes). The upload uses
``huggingface_hub``: ``upload_large_folder`` where the installed version has it, otherwise
``upload_folder``, which in huggingface_hub 2.x is the resumable one (re-running skips committed
files). The token comes only from the environment (``HF_TOKEN``) or ``hf auth login``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .errors import UserError
from .inspection.runfolder import RunFolder
from .schema.licence import hub_licence

DEFAULT_LICENSE = "cc-by-4.0"
TASK_CATEGORIES = ["audio-to-audio", "voice-activity-detection", "automatic-speech-recognition"]
LABEL_TABLE = """| column | values | meaning |
|---|---|---|
| `sys_action` | 0 listen, 1 speak, 2 turn_eos, 3 delegate | one action per frame: delegate > turn_eos (RELEASE frame) > speak > listen |
| `sys_floor` | 0 NOT_HOLD, 1 TAKE, 2 HOLD, 3 RELEASE | the system's turns (chains of `continues` events) |
| `usr_floor` | same | the user's turns; backchannels and side talk never take the floor |
| `sys_vad`, `usr_vad` | 0/1 | energy VAD of the clean system / user stems |
| `markers` | `(frame, type, ref)` | `turn_eos`, `yield`, `delegate_open`, `delegate_close`, `backend_inject`, `deliver_start`, `stale_drop`, `cancel` |
| `events` | speaker, act, text, lang, sample times, words, attachment | the master timeline (integer samples) |
| `delegations` | work items with state times | QUEUED → RUNNING → COMPLETED → DELIVERING → DELIVERED (FAILED, CANCELLING → CANCELLED) |
"""


def noise_licences(records) -> list[dict]:
    """Every noise/sound-bank source named in the records' ``scene``, with its licence.

    The scene is free-form; any mapping in it with a ``licence``/``license`` key is one used file,
    grouped by its bank (``bank``, else ``source``/``name``/``id``) and licence, counting distinct
    files (``path``/``id``) and sessions. Sessions without such entries contribute nothing.
    """
    found: dict[tuple, dict] = {}

    def walk(x, sid: str) -> None:
        if isinstance(x, dict):
            lic = x.get("licence", x.get("license"))
            if isinstance(lic, str) and lic:
                name = str(x.get("bank") or x.get("source") or x.get("name") or x.get("id") or "unnamed")
                origin = str(x.get("url") or (x.get("source") if x.get("source") not in (None, name) else "") or "")
                e = found.setdefault((name, lic, origin), {"source": name, "licence": lic, "origin": origin,
                                                           "files": set(), "sessions": set()})
                e["files"].add(str(x.get("path") or x.get("id") or name))
                e["sessions"].add(sid)
            for v in x.values():
                walk(v, sid)
        elif isinstance(x, list):
            for v in x:
                walk(v, sid)

    for rec in records:
        walk(rec.scene, rec.session_id)
    return [{**e, "files": len(e["files"]), "sessions": len(e["sessions"])}
            for _, e in sorted(found.items())]


def _size_category(n: int) -> str:
    for limit, name in ((1000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def card_data(run: RunFolder, rep: dict, licence: str, parquet: Path | None = None):
    """The card's YAML metadata: licence, languages, task categories, ``configs``, features (of
    ``parquet``, the published shard, by default the run's first)."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, Features
    from huggingface_hub import DatasetCardData

    features = Features.from_arrow_schema(pq.read_schema(parquet or run.parquet_files[0]))  # Audio from the metadata
    langs = sorted({p for lang in rep["hours_by_language"] for p in lang.split("-")})
    return DatasetCardData(
        license=licence, language=langs, task_categories=TASK_CATEGORIES,
        tags=["full-duplex", "spoken-dialogue", "synthetic", "turn-taking", "code-switching"],
        size_categories=[_size_category(rep["sessions"])], pretty_name=f"duplexsynth {run.name}",
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/*.parquet"}]}],
        dataset_info=DatasetInfo(features=features)._to_yaml_dict(),
    )


def _statistics_md(rep: dict) -> str:
    hours = "".join(f"| {k} | {v:.3f} | {rep['sessions_by_language'].get(k, 0)} |\n"
                    for k, v in rep["hours_by_language"].items())
    timing = "".join(f"| {lang} | {q} | {s['n']} | {s['median']:.0f} |\n"
                     for lang, d in rep["timing"].items() for q, s in d.items() if s.get("n"))
    flat = {pid: n for fam in rep["phenomena"].values() for pid, n in fam.items()}
    phen = ", ".join(f"`{p}` {n}" for p, n in flat.items() if n) or "none"
    rejects = ", ".join(f"{k} {v}" for k, v in rep["rejects_by_reason"].items()) or "none"
    actions = ", ".join(f"{k} {v:.1%}" for k, v in rep["action_balance"].items())
    return (f"| language | hours | sessions |\n|---|---|---|\n{hours}\n"
            f"Rejected sessions: {rep['rejects']} ({rejects}).\n\n"
            f"Action balance (share of frames): {actions}.\n\nPhenomena (events): {phen}.\n\n"
            f"| language | quantity | n | median ms |\n|---|---|---|---|\n{timing}")


def _licences_md(run: RunFolder) -> str:
    lics = noise_licences(run.records)
    if not lics:
        return "No noise-bank audio with a recorded licence was used in this run (the records' `scene` names none).\n"
    return "| bank / source | licence | origin | files | sessions |\n|---|---|---|---|---|\n" + "".join(
        f"| {e['source']} | {e['licence']} | {e['origin']} | {e['files']} | {e['sessions']} |\n" for e in lics)


def card_text(run: RunFolder, rep: dict, repo_id: str, licence: str, parquet: Path | None = None) -> str:
    """The dataset card (README.md) as text, YAML metadata first."""
    import yaml
    from huggingface_hub import DatasetCard

    hours = sum(rep["hours_by_language"].values())
    period = run.config.get("labels", {}).get("frame_period_ms", 80)
    cfg = {k: v for k, v in run.config.items() if k != "executor"}
    body = f"""
# duplexsynth: {run.name}

Synthetic two-channel conversations for training full-duplex spoken dialogue models, made by
duplexsynth: scenario seeds → planned relational events → TTS → one shared sample clock → frame
labels. {rep['sessions']} sessions, {hours:.3f} h of audio.

## Loading

```python
from datasets import load_dataset, Audio
ds = load_dataset("{repo_id}", split="train")
for column in ("user_audio", "system_audio", "voice_prompt_audio"):  # FLAC bytes, read with soundfile
    ds = ds.cast_column(column, Audio(decode=False))
```

Decoding the `Audio` columns with current `datasets` (4 and later) needs `torchcodec` and FFmpeg
(`pip install torchcodec`, FFmpeg from your system's packages); with `decode=False` as above you get
the FLAC bytes and can read them with `soundfile`. The two channels are two mono columns on purpose: a
stereo `Audio` column is down-mixed to mono by `datasets` when it decodes.

`system_prompt` is the assistant's system prompt and `voice_prompt_audio` a few seconds of its
voice rendered apart from the session (for persona and speaker conditioning).

`alignments` lists every spoken word in seconds (`word`, `start_s`, `end_s`, `speaker`, `lang`),
sorted by start; `events` holds the same words in samples with the event they belong to.

The same sessions are in `webdataset/*.tar` (`<key>.user.flac`, `<key>.system.flac`, `<key>.json`,
`<key>.voice.flac`).

**Channel order:** `user_audio` is ch0, the user side (what the system's microphone hears);
`system_audio` is ch1, the system's own clean speech. Moshi-style trainers put the assistant first.

## Labels (frame period {period} ms)

{LABEL_TABLE}
## Statistics

{_statistics_md(rep)}
## Noise-bank sources and licences

{_licences_md(run)}
## Generation settings

Fingerprint `{run.info.get('fingerprint', '')}`, versions {json.dumps(run.info.get('versions', {}))}.

```yaml
{yaml.safe_dump(cfg, sort_keys=True, allow_unicode=True).strip()}
```
"""
    return str(DatasetCard("---\n" + card_data(run, rep, licence, parquet).to_yaml() + "\n---\n" + body))


def alignments_of(events: list[dict], sample_rate: int) -> list[dict]:
    """Every audible spoken word of a Parquet row's ``events`` in seconds, sorted by start: the
    column a Hub user reads without converting samples (``speaker`` as in the events)."""
    words = [{"word": w["word"], "start_s": w["on_sample"] / sample_rate, "end_s": w["off_sample"] / sample_rate,
              "speaker": e["speaker"], "lang": w["lang"]}
             for e in events if e["speaker"] != "backend" for w in e["words"] or []
             if w["off_sample"] > w["on_sample"]]
    return sorted(words, key=lambda w: (w["start_s"], w["end_s"]))


def with_alignments(src: Path, dst: Path) -> None:
    """Copy a Parquet shard adding the ``alignments`` column; the schema's metadata (the Audio
    features ``datasets`` reads) is kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .io.files import write_atomic_with

    word = pa.struct([("word", pa.string()), ("start_s", pa.float64()), ("end_s", pa.float64()),
                      ("speaker", pa.string()), ("lang", pa.string())])
    table = pq.read_table(src)
    col = pa.array([alignments_of(ev, sr) for ev, sr in zip(table.column("events").to_pylist(),
                                                             table.column("sample_rate").to_pylist())],
                   type=pa.list_(word))
    table = table.append_column(pa.field("alignments", col.type), col).replace_schema_metadata(table.schema.metadata)
    write_atomic_with(dst, lambda p: pq.write_table(table, p, compression="zstd"))


def build_folder(run_dir: str | Path, out: str | Path, repo_id: str, licence: str = DEFAULT_LICENSE) -> Path:
    """Write the folder that ``publish`` uploads; returns its path."""
    from .inspection.report import build_report
    from .io.files import write_text_atomic

    run = RunFolder(run_dir)
    if not run.parquet_files:
        raise UserError(f"{run.path}: no Parquet shards to publish (shards/parquet is empty)")
    run.require_unique_ids("publish")
    if "/" not in repo_id or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UserError(f"--repo-id: must be ORG/NAME (got {repo_id!r})")
    try:
        licence = hub_licence(licence)
    except ValueError as e:
        raise UserError(str(e)) from None
    out = Path(out)
    if out.resolve() == run.path.resolve():
        raise UserError(f"-o: {out} is the run folder itself; choose another folder")
    if out.exists() and any(out.iterdir()) and not (out / "meta" / "run.json").exists():
        raise UserError(f"-o: {out} is a non-empty folder not made by synth publish; choose an empty or new one")
    for sub in ("data", "webdataset", "meta"):
        if (out / sub).exists():
            shutil.rmtree(out / sub)  # only the sub-folders this command itself writes
    (out / "data").mkdir(parents=True, exist_ok=True)
    for p in run.parquet_files:
        with_alignments(p, out / "data" / p.name)
    for p in run.webdataset_files:
        (out / "webdataset").mkdir(exist_ok=True)
        shutil.copy2(p, out / "webdataset" / p.name)
    (out / "meta").mkdir(exist_ok=True)
    for name in ("run.json", "stats.json", "rejects.jsonl"):
        if (run.path / name).exists():
            shutil.copy2(run.path / name, out / "meta" / name)
    rep = build_report(run)
    write_text_atomic(out / "meta" / "report.json", json.dumps(rep, indent=1, ensure_ascii=False))
    parquet = out / "data" / run.parquet_files[0].name
    write_text_atomic(out / "README.md", card_text(run, rep, repo_id, licence, parquet))
    return out


def upload(folder: Path, repo_id: str, private: bool = False) -> str:
    """Create the dataset repo if needed and upload ``folder`` (resumable); returns the repo URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()  # token from HF_TOKEN or the saved login, never from the command line
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        large = getattr(api, "upload_large_folder", None)
        if large is not None:
            large(repo_id=repo_id, folder_path=str(folder), repo_type="dataset")
        else:
            api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset",
                              commit_message="duplexsynth publish")
    except HfHubHTTPError as e:
        raise UserError(f"--repo-id {repo_id}: the Hub refused the upload ({str(e).splitlines()[0]})") from None
    except Exception as e:  # connection errors differ by HTTP client (httpx, requests): name it, one line
        if type(e).__name__ not in ("ConnectError", "ConnectTimeout", "ConnectionError", "ReadTimeout", "TimeoutException") \
                and not isinstance(e, OSError):
            raise
        raise UserError(f"--repo-id {repo_id}: cannot reach the Hub ({type(e).__name__}: {e})") from None
    return f"https://huggingface.co/datasets/{repo_id}"
