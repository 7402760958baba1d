"""synth view in a real headless browser: Debian's Chromium driven by Playwright."""

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from inspect_helpers import ROOT, small_run
from synth.inspection.runfolder import RunFolder

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--autoplay-policy=no-user-gesture-required"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    run_dir = small_run(tmp_path_factory)
    proc = subprocess.Popen([sys.executable, "-m", "synth.cli", "view", str(run_dir), "--port", "0"],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True, env={**os.environ})
    url = None
    deadline = time.time() + 60
    while time.time() < deadline and url is None:
        line = proc.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        if m:
            url = m.group(0)
        elif proc.poll() is not None:
            break
    if url is None:
        proc.kill()
        raise AssertionError("synth view did not start")
    yield url, run_dir
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _rows(page):
    return page.eval_on_selector_all("tr.session", "els => els.map(e => e.dataset.session)")


def test_index_pages_and_filters(server, browser):
    url, run_dir = server
    recs = RunFolder(run_dir).records
    page = browser.new_page()
    page.goto(url + "?per=2")
    assert page.title().endswith("sessions")
    # paged on the server: 2 per page, the pages together are the run in shard order, once each
    seen = []
    while True:
        rows = _rows(page)
        assert 1 <= len(rows) <= 2
        seen += rows
        nxt = page.locator("a[rel=next]")
        if not nxt.count():
            break
        nxt.click()
        page.wait_for_load_state()
    assert seen == [r.session_id for r in recs]
    assert page.locator(".pageno").inner_text() == f"page {len(seen) // 2 + len(seen) % 2} of 3"
    # a language filter narrows the list to that language (the menu submits itself)
    lang = recs[-1].language
    want = [r.session_id for r in recs if r.language == lang]
    assert len(want) < len(recs)
    page.goto(url)
    page.select_option("select[name=lang]", lang)
    page.wait_for_url(f"**lang={lang}**")
    assert _rows(page) == want and page.locator("#matched").inner_text() == str(len(want))
    # filters combine: that language and a phenomenon only some of its sessions have
    phen = sorted({h.id for h in recs[-1].phenomena})[0]
    page.select_option("select[name=phen]", phen)
    page.wait_for_url(f"**phen={phen}**")
    assert _rows(page) == [r.session_id for r in recs if r.language == lang and phen in {h.id for h in r.phenomena}]
    page.close()


def test_stereo_mix_is_the_two_channels(server):
    import io

    import numpy as np
    import soundfile as sf

    url, run_dir = server
    s = next(RunFolder(run_dir).sessions())
    mix, sr = sf.read(io.BytesIO(urllib.request.urlopen(f"{url}audio/{s.record.session_id}/mix.flac").read()),
                      dtype="int16")
    user, _ = sf.read(io.BytesIO(s.user_flac), dtype="int16")
    system, _ = sf.read(io.BytesIO(s.system_flac), dtype="int16")
    assert sr == s.record.sample_rate and mix.shape == (s.record.num_samples, 2)
    assert np.array_equal(mix[:, 0], user) and np.array_equal(mix[:, 1], system)
    assert np.abs(system).max() > 0


def test_session_page_plays_seeks_and_mutes(server, browser, tmp_path):
    url, run_dir = server
    rec = RunFolder(run_dir).records[0]
    page = browser.new_page()
    page.goto(f"{url}session/{rec.session_id}")
    page.wait_for_function("() => { const a = document.getElementById('player');"
                           " return a.readyState >= 1 && a.duration > 0; }", timeout=30_000)
    assert abs(page.evaluate("() => document.getElementById('player').duration") - rec.duration_s) < 0.05
    # one transcript line per event, with speaker, act and tags
    assert page.locator("#transcript li.line").count() == len(rec.events)
    tagged = next(e for e in sorted(rec.events, key=lambda e: e.on_sample) if e.phenomena)
    line = page.locator(f"#transcript li[data-event='{tagged.id}']")
    assert tagged.act in line.inner_text() and tagged.phenomena[0] in line.inner_text()
    # playing moves the playhead over the timeline
    page.evaluate("() => document.getElementById('player').play()")
    page.wait_for_function("() => parseFloat(document.getElementById('playhead').getAttribute('x1')) > 5",
                           timeout=20_000)
    assert page.evaluate("() => document.getElementById('player').currentTime") > 0.1
    # a click on a later line seeks the player there and marks the line
    late = [e for e in rec.events if e.on_sample / rec.sample_rate > rec.duration_s / 2][0]
    t = late.on_sample / rec.sample_rate
    page.locator(f"#transcript li[data-event='{late.id}']").click()
    page.wait_for_function("t => Math.abs(document.getElementById('player').currentTime - t) < 0.6", arg=t,
                           timeout=10_000)
    x = float(page.get_attribute("#playhead", "x1"))
    assert abs(x - 1000 * t / rec.duration_s) < 15
    # mute and solo set the Web Audio gains of the two channels, and what comes out follows them
    gains = "() => window.duplexViewer.gains()"
    assert page.evaluate(gains) == [1, 1]
    page.wait_for_function("() => window.duplexViewer.levels()[0] > 1e-4", timeout=10_000)
    page.click(".chan[data-channel='1'] .solo")
    assert page.evaluate(gains) == [0, 1]
    page.wait_for_function("() => window.duplexViewer.levels()[0] === 0", timeout=10_000)
    page.click(".chan[data-channel='1'] .solo")
    page.click(".chan[data-channel='0'] .mute")
    assert page.evaluate(gains) == [0, 1]
    page.click(".chan[data-channel='1'] .mute")
    assert page.evaluate(gains) == [0, 0]
    page.click(".chan[data-channel='0'] .solo")  # solo wins over mute
    assert page.evaluate(gains) == [1, 0]
    assert page.eval_on_selector_all(".chan", "els => els.map(e => e.dataset.gain)") == ["1", "0"]
    page.wait_for_function("() => window.duplexViewer.levels()[1] === 0 && window.duplexViewer.levels()[0] > 0",
                           timeout=10_000)
    page.screenshot(path=str(tmp_path / "session.png"), full_page=True)
    assert (tmp_path / "session.png").stat().st_size > 10_000
    page.close()


def test_session_picture_and_neighbours(server, browser):
    url, run_dir = server
    ids = [r.session_id for r in RunFolder(run_dir).records]
    page = browser.new_page()
    page.goto(f"{url}session/{ids[1]}")
    assert page.get_attribute("a[rel=prev]", "href") == f"/session/{ids[0]}"
    assert page.get_attribute("a[rel=next]", "href") == f"/session/{ids[2]}"
    page.locator("details summary").first.click()
    page.wait_for_function("() => { const i = document.querySelector('details[open] img');"
                           " return i && i.complete && i.naturalWidth > 0; }", timeout=60_000)
    assert page.evaluate("() => document.querySelector('details[open] img').naturalWidth") == 1600
    page.close()


def test_report_page_and_unknown_paths(server, browser):
    url, _ = server
    page = browser.new_page()
    page.goto(url + "report")
    assert page.locator("img").count() >= 10
    assert page.evaluate("() => [...document.images].every(i => i.naturalWidth > 0)")
    page.close()
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "audio/../../etc/passwd")
    assert e.value.code == 404
    for bad in ("audio/nope/user.flac", "audio/nope/mix.flac", "session/nope", "static/../viewer.py"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + bad)
        assert e.value.code == 404
    # odd query values fall back to page 1 of 50, not to an error
    assert b'class="pageno">page 1 of 1<' in urllib.request.urlopen(url + "?page=x&per=-3&lang=xx").read()


def test_busy_port_is_a_one_line_error(tmp_path_factory):
    import socket

    from inspect_helpers import synth

    run_dir = small_run(tmp_path_factory)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = synth("view", run_dir, "--port", port, check=False, timeout=60)
    assert r.returncode == 2 and f"127.0.0.1:{port}" in r.stderr and "Traceback" not in r.stderr


def test_webdataset_only_run_and_page_clamping(tmp_path_factory, tmp_path):
    import shutil

    from synth.inspection.viewer_data import Catalogue, Filters

    run_dir = small_run(tmp_path_factory)
    (tmp_path / "shards").mkdir()
    shutil.copy(run_dir / "run.json", tmp_path / "run.json")
    shutil.copytree(run_dir / "shards" / "webdataset", tmp_path / "shards" / "webdataset")
    wds, pq = Catalogue.of(RunFolder(tmp_path)), Catalogue.of(RunFolder(run_dir))
    assert [(e.session_id, e.num_events, e.phenomena) for e in wds.entries] == \
           [(e.session_id, e.num_events, e.phenomena) for e in pq.entries]
    sid = wds.entries[-1].session_id
    assert wds.session(sid).system_flac == pq.session(sid).system_flac
    page = pq.select(Filters(), page=99, per=2)
    assert (page.number, page.pages, [e.session_id for e in page.entries]) == (3, 3, [pq.entries[4].session_id])
    assert pq.select(Filters(language="xx")).matched == 0
