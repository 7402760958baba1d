"""The worked example of LABELS.md: timeline -> frame arrays at 80 ms and 1 s, exactly."""

import json
from pathlib import Path

import pytest

from synth.schema.timeline import PlacedEvent, Timeline, WorkItem
from synth.stages.label import frame_channels

GOLDEN = Path(__file__).parent / "data" / "labels-basic.json"


def golden_timeline(g: dict) -> Timeline:
    events = [
        PlacedEvent(
            id=e["id"], speaker=e["speaker"], act=e["act"], floor_intent=e["floor_intent"],
            relation=e["relation"], attach_to=e["attach_to"], text=e["text"],
            text_after_cut=e.get("text_after_cut", ""), lang="en", on_sample=e["on"],
            off_sample=e["off"], completion=e["completion"],
        )
        for e in g["events"]
    ]
    work = [
        WorkItem(
            work_id=d["work_id"], tool="search", objective=d["objective"], result_text="",
            opened_by="s2", open_sample=d["open"], close_sample=d["close"],
            complete_sample=d["complete"], inject_sample=d["inject"],
            deliver_sample=d["deliver"], delivered_sample=d["delivered"], stale=d["stale"],
        )
        for d in g["delegations"]
    ]
    return Timeline(sample_rate=g["sample_rate"], num_samples=g["num_samples"], events=events, work=work)


@pytest.mark.parametrize("key,period_ms", [("80ms", 80), ("1s", 1000)])
def test_golden_labels(key, period_ms):
    g = json.loads(GOLDEN.read_text())
    want = g["expected"][key]
    got = frame_channels(golden_timeline(g), period_ms)
    assert got["num_frames"] == want["num_frames"]
    assert got["frame_period_s"] == want["frame_period_s"]
    for name in ("sys_action", "sys_floor", "usr_floor"):
        assert got[name].tolist() == want[name], name
    assert [[m.frame, m.type, m.ref] for m in got["markers"]] == want["markers"]
