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
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


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


def test_page_lists_sessions_with_playable_audio(server, browser, tmp_path):
    url, run_dir = server
    ids = sorted(r.session_id for r in RunFolder(run_dir).records)
    page = browser.new_page()
    page.goto(url)
    assert page.title().endswith("sessions")
    shown = sorted(page.eval_on_selector_all("section.session", "els => els.map(e => e.dataset.session)"))
    assert shown == ids
    audios = page.locator("audio")
    assert audios.count() == 2 * len(ids)
    # every player has loaded its FLAC and knows the session's duration
    page.wait_for_function(
        "() => [...document.querySelectorAll('audio')].every(a => a.readyState >= 1 && a.duration > 0)",
        timeout=30_000)
    durations = page.eval_on_selector_all("audio", "els => els.map(a => [a.dataset.channel, a.duration])")
    recs = {r.session_id: r for r in RunFolder(run_dir).records}
    for sid, (ch_u, d_u), (ch_s, d_s) in zip(shown, durations[0::2], durations[1::2]):
        assert (ch_u, ch_s) == ("user", "system")
        assert abs(d_u - recs[sid].duration_s) < 0.05 and abs(d_s - recs[sid].duration_s) < 0.05
    # playing one advances its clock
    first = page.locator("audio").first
    page.evaluate("a => { a.muted = true; return a.play(); }", first.element_handle())
    page.wait_for_function("a => a.currentTime > 0.2", arg=first.element_handle(), timeout=10_000)
    # seeking works (the server answers byte ranges)
    second = page.locator("audio").nth(1).element_handle()
    target = min(20.0, durations[1][1] / 2)
    page.evaluate("([a, t]) => new Promise(r => { a.addEventListener('seeked', r, {once: true}); a.currentTime = t; })",
                  [second, target])
    assert abs(page.evaluate("a => a.currentTime", second) - target) < 0.5
    assert page.evaluate("a => a.seekable.length && a.seekable.end(0)", second) > target
    # the session picture opens and is a real image
    page.locator("details summary").first.click()
    page.wait_for_function("() => { const i = document.querySelector('details[open] img');"
                           " return i && i.complete && i.naturalWidth > 0; }", timeout=60_000)
    w = page.evaluate("() => document.querySelector('details[open] img').naturalWidth")
    assert w == 1600
    page.screenshot(path=str(tmp_path / "viewer.png"))
    assert (tmp_path / "viewer.png").stat().st_size > 10_000
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
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(url + "audio/nope/user.flac")


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
