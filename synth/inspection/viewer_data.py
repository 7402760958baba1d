"""What ``synth view`` reads from a run: a light catalogue of the sessions and one session at a time.

The catalogue holds only what the index page lists and filters on (id, scenario, language,
duration, event count, phenomena, shard), read column by column from the Parquet shards, so a run
of thousands of sessions opens without loading any audio or label arrays. One session (record and
audio) is read from its own shard only when its page or its audio is asked for.

>>> cat = Catalogue.of(RunFolder("outputs/demo"))               # doctest: +SKIP
>>> page = cat.select(Filters(language="zh"), page=1, per=50)   # doctest: +SKIP
"""

from __future__ import annotations

import io
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .runfolder import AUDIO_COLUMNS, RunFolder, Session, pop_flac, record_from_row

_LIGHT = ("session_id", "scenario_id", "language", "duration_s", "phenomena")


@dataclass(frozen=True)
class Entry:
    """One session as the index lists it."""

    session_id: str
    scenario_id: str
    language: str
    duration_s: float
    num_events: int
    phenomena: tuple[str, ...]  # distinct phenomenon ids, sorted
    shard: Path | None  # its Parquet file; None for a WebDataset-only run


@dataclass(frozen=True)
class Filters:
    """The index filters; an empty string means 'any'."""

    language: str = ""
    scenario: str = ""
    phenomenon: str = ""

    def keep(self, e: Entry) -> bool:
        return ((not self.language or e.language == self.language)
                and (not self.scenario or e.scenario_id == self.scenario)
                and (not self.phenomenon or self.phenomenon in e.phenomena))


@dataclass(frozen=True)
class Page:
    """One page of the filtered sessions (``number`` is 1-based, clamped into ``1..pages``)."""

    entries: list[Entry]
    number: int
    pages: int
    matched: int
    per: int


class Catalogue:
    """Every session of a run as an :class:`Entry`, in shard order, with facet counts."""

    def __init__(self, run: RunFolder, entries: list[Entry]):
        self.run = run
        self.entries = entries
        self.by_id = {e.session_id: i for i, e in enumerate(entries)}

    @classmethod
    def of(cls, run: RunFolder) -> "Catalogue":
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if not run.parquet_files:
            return cls(run, [_entry(r, None) for r in run.records])
        entries = []
        for pf in run.parquet_files:
            t = pq.read_table(pf, columns=[*_LIGHT, "events"])
            n_events = pc.list_value_length(t["events"]).to_pylist()
            t = t.drop_columns(["events"])
            for row, n in zip(t.to_pylist(), n_events):
                entries.append(Entry(row["session_id"], row["scenario_id"], row["language"],
                                     float(row["duration_s"]), int(n or 0),
                                     tuple(sorted({h["id"] for h in row["phenomena"] or []})), pf))
        return cls(run, entries)

    def facets(self) -> dict[str, Counter]:
        """Counts per value of each filter over the whole run (the filter menus)."""
        out = {"language": Counter(), "scenario": Counter(), "phenomenon": Counter()}
        for e in self.entries:
            out["language"][e.language] += 1
            out["scenario"][e.scenario_id] += 1
            out["phenomenon"].update(e.phenomena)
        return out

    def select(self, filters: Filters, page: int = 1, per: int = 50) -> Page:
        hits = [e for e in self.entries if filters.keep(e)]
        pages = max(1, math.ceil(len(hits) / per))
        number = min(max(1, page), pages)
        return Page(hits[(number - 1) * per: number * per], number, pages, len(hits), per)

    def neighbours(self, session_id: str) -> tuple[str | None, str | None]:
        """The sessions before and after this one in run order."""
        i = self.by_id[session_id]
        before = self.entries[i - 1].session_id if i > 0 else None
        after = self.entries[i + 1].session_id if i + 1 < len(self.entries) else None
        return before, after

    def session(self, session_id: str, with_audio: bool = True) -> Session:
        """One session, read from its own shard only (row filter pushed into the Parquet reader)."""
        import pyarrow.parquet as pq

        entry = self.entries[self.by_id[session_id]]
        if entry.shard is None:
            return self.run.session(session_id)
        schema = pq.read_schema(entry.shard)
        cols = [c for c in schema.names if with_audio or c not in AUDIO_COLUMNS]
        t = pq.read_table(entry.shard, columns=cols, filters=[("session_id", "==", session_id)])
        row = t.slice(0, 1).to_pylist()[0]
        user, system, voice = (pop_flac(row, c) for c in AUDIO_COLUMNS)
        return Session(record_from_row(row), user, system, entry.shard.name, voice)


def _entry(rec, shard: Path | None) -> Entry:
    return Entry(rec.session_id, rec.scenario_id, rec.language, rec.duration_s, len(rec.events),
                 tuple(sorted({h.id for h in rec.phenomena})), shard)


def stereo_flac(session: Session) -> bytes:
    """The two channels as one stereo FLAC: left ch0 (user side), right ch1 (system).

    Built on request from the stored mono FLACs (int16, lossless both ways), so the browser plays
    both sides on one clock; a missing or shorter channel is padded with silence.
    """
    import numpy as np
    import soundfile as sf

    rec = session.record
    chans = []
    for data in (session.user_flac, session.system_flac):
        x = np.zeros(rec.num_samples, dtype=np.int16)
        if data:
            y, _ = sf.read(io.BytesIO(data), dtype="int16")
            y = y if y.ndim == 1 else y[:, 0]
            x[: min(len(y), len(x))] = y[: len(x)]
        chans.append(x)
    buf = io.BytesIO()
    sf.write(buf, np.stack(chans, axis=1), rec.sample_rate, format="FLAC", subtype="PCM_16")
    return buf.getvalue()
