// synth view: the session page's player (Web Audio mute/solo per channel, playhead, seeking
// transcript) and the index page's filter menus. No framework, no build step.
"use strict";

(function () {
  // index: a changed filter menu submits the form (and goes back to page 1)
  document.querySelectorAll("form.filters select").forEach((s) => {
    s.addEventListener("change", () => s.form.submit());
  });

  const audio = document.getElementById("player");
  if (!audio) return;
  const svg = document.getElementById("timeline");
  const playhead = document.getElementById("playhead");
  const now = document.getElementById("now");
  const strips = [...document.querySelectorAll(".strip .chan")];
  const lines = [...document.querySelectorAll("#transcript li.line")];
  const viewW = svg.viewBox.baseVal.width;
  const state = { mute: [false, false], solo: [false, false] };
  let graph = null; // built on first use: a page that never plays never opens an AudioContext

  function buildGraph() {
    if (graph) return graph;
    const ctx = new AudioContext();
    const src = ctx.createMediaElementSource(audio);
    const split = ctx.createChannelSplitter(2);
    const merge = ctx.createChannelMerger(2);
    src.connect(split);
    const gains = [0, 1].map((i) => {
      const g = ctx.createGain();
      split.connect(g, i);
      g.connect(merge, 0, i);
      return g;
    });
    // one analyser per channel after its gain: the level meters, and what a test can measure
    const meters = gains.map((g) => {
      const a = ctx.createAnalyser();
      a.fftSize = 2048;
      g.connect(a);
      return a;
    });
    merge.connect(ctx.destination);
    graph = { ctx, gains, meters };
    applyGains();
    return graph;
  }

  function wanted(i) {
    if (state.solo.some(Boolean)) return state.solo[i] ? 1 : 0;
    return state.mute[i] ? 0 : 1;
  }

  function applyGains() {
    strips.forEach((el, i) => {
      const g = wanted(i);
      el.dataset.gain = String(g);
      el.querySelector(".mute").setAttribute("aria-pressed", String(state.mute[i]));
      el.querySelector(".solo").setAttribute("aria-pressed", String(state.solo[i]));
      el.classList.toggle("silent", g === 0);
      if (graph) graph.gains[i].gain.value = g;
    });
  }

  function levels() {
    if (!graph) return [0, 0];
    return graph.meters.map((a) => {
      const buf = new Float32Array(a.fftSize);
      a.getFloatTimeDomainData(buf);
      let s = 0;
      for (const v of buf) s += v * v;
      return Math.sqrt(s / buf.length);
    });
  }

  strips.forEach((el, i) => {
    el.querySelector(".mute").addEventListener("click", () => {
      buildGraph();
      state.mute[i] = !state.mute[i];
      applyGains();
    });
    el.querySelector(".solo").addEventListener("click", () => {
      buildGraph();
      state.solo[i] = !state.solo[i];
      applyGains();
    });
  });

  audio.addEventListener("play", () => {
    const g = buildGraph();
    if (g.ctx.state !== "running") g.ctx.resume();
  });

  function seek(t) {
    audio.currentTime = Math.max(0, Math.min(t, audio.duration || t));
    draw();
  }

  lines.forEach((li) => li.addEventListener("click", () => seek(parseFloat(li.dataset.start))));
  document.querySelectorAll("ol.work li.line").forEach((li) =>
    li.addEventListener("click", () => seek(parseFloat(li.dataset.start))));
  svg.addEventListener("click", (ev) => {
    const r = svg.getBoundingClientRect();
    const dur = audio.duration || parseFloat(svg.dataset.duration);
    seek(((ev.clientX - r.left) / r.width) * dur);
  });

  let active = null;
  function draw() {
    const dur = audio.duration || parseFloat(svg.dataset.duration);
    const t = audio.currentTime;
    const x = dur > 0 ? (viewW * t) / dur : 0;
    playhead.setAttribute("x1", x.toFixed(2));
    playhead.setAttribute("x2", x.toFixed(2));
    playhead.dataset.time = t.toFixed(3);
    const m = Math.floor(t / 60);
    now.textContent = `${m}:${(t - 60 * m).toFixed(1).padStart(4, "0")}`;
    // the transcript line being said now: the last one started at or before t
    let cur = null;
    for (const li of lines) {
      if (parseFloat(li.dataset.start) <= t + 1e-3) cur = li;
      else break;
    }
    if (cur !== active) {
      if (active) active.classList.remove("active");
      if (cur) {
        cur.classList.add("active");
        const box = cur.parentElement;
        if (cur.offsetTop < box.scrollTop || cur.offsetTop > box.scrollTop + box.clientHeight - cur.offsetHeight)
          box.scrollTop = cur.offsetTop - box.clientHeight / 3;
      }
      active = cur;
    }
    const lv = levels();
    strips.forEach((el, i) => { el.querySelector("meter").value = Math.min(1, lv[i] * 4); });
  }

  function loop() {
    draw();
    if (!audio.paused) requestAnimationFrame(loop);
  }
  audio.addEventListener("play", () => requestAnimationFrame(loop));
  ["seeked", "timeupdate", "loadedmetadata", "pause"].forEach((e) => audio.addEventListener(e, draw));

  window.duplexViewer = {
    gains: () => strips.map((el, i) => (graph ? graph.gains[i].gain.value : wanted(i))),
    levels,
    seek,
    graph: () => graph,
  };
})();
