// Pegasus dashboard: the Gantt chart of a task's stages (task.js draws it on a task's page).

import { h, s } from "./core.js";

// The tick step for a span: 1, 2 or 5 times a power of ten, the smallest giving at most `most` intervals.
export function tickStep(span, most = 6) {
  const raw = Math.max(span, 1e-9) / most;
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw * (1 - 1e-9));
}
// "250 ms", "1.5 s", "2 min": a tick's time, in the unit of its step.
export function tickText(ms, step) {
  if (step >= 60000 && ms % 60000 === 0) return `${ms / 60000} min`;
  if (step >= 1000) return `${+(ms / 1000).toFixed(3)} s`;
  return `${+ms.toFixed(3)} ms`;
}

// Stages as a Gantt chart: one lane per worker (pool, member, pid), a bar per stage from start to end, and the
// stage running now (`running`: {stage, pool, started} in seconds) as a bar to `now`. As wide as `width`: its
// card at any window width; the lane labels are cut to fit, in full on hover.
export function gantt(stages, running, now, width) {
  const bars = stages.filter((st) => st.started).map((st) => ({ ...st, lane: `${st.pool} ${st.member || st.host || ""} pid ${st.pid}` }));
  if (running) bars.push({ ...running, finished: Math.max(now, running.started), lane: `${running.pool} (running now)`, running: true });
  if (!bars.length) return h("p", { class: "muted" }, "no stage has run yet");
  const lanes = [...new Set(bars.map((b) => b.lane))];
  const t0 = Math.min(...bars.map((b) => b.started));
  const spanMs = Math.max(...bars.map((b) => (b.finished || b.started) - t0)) * 1000;
  const total = Math.max(320, Math.floor(width));
  const left = Math.min(230, Math.floor(total * 0.3)), right = 36, laneH = 26;
  const plot = total - left - right;
  const step = tickStep(spanMs, Math.max(2, Math.floor(plot / 80)));  // a tick label is at most ~60 px wide
  const axisMs = Math.max(step, Math.ceil(spanMs / step - 1e-9) * step);
  const x = (t) => left + (((t - t0) * 1000) / axisMs) * plot;
  const chars = Math.floor((left - 8) / 6.6);
  const svg = s("svg", { class: "gantt", width: total, height: lanes.length * laneH + 30, viewBox: `0 0 ${total} ${lanes.length * laneH + 30}` });
  lanes.forEach((lane, i) => svg.append(s("text", { class: "lane-label", x: 4, y: i * laneH + 17 },
    s("title", {}, lane), lane.length > chars ? lane.slice(0, chars - 1) + "\u2026" : lane)));
  for (const st of bars) {
    const lane = lanes.indexOf(st.lane), end = st.finished || st.started;
    const tokens = st.usage ? st.usage.total_tokens : 0;
    const tip = st.running ? `${st.stage} on ${st.pool}: running for ${((end - st.started) * 1000).toFixed(0)} ms` :
      `${st.stage} on ${st.pool} (pid ${st.pid}, ${st.member || st.host}): ${((end - st.started) * 1000).toFixed(1)} ms, ` +
      `CPU ${st.cpu_ms ?? "?"} ms, ${tokens || 0} tokens${st.ok === false ? `, failed: ${st.error}` : ""}`;
    const barW = Math.max(2, x(end) - x(st.started));
    // the stage's name after its start, or ending at its end when it would run out of the chart
    const fits = x(st.started) + 3 + st.stage.length * 7 <= total;
    const label = s("text", { x: fits ? x(st.started) + 3 : x(end) - 3, y: lane * laneH + 17, "text-anchor": fits ? "start" : "end" }, st.stage);
    svg.append(s("g", { class: `stage${st.running ? " running" : ""}`, "data-stage": st.stage },
      s("rect", { class: `bar ${st.pool} ${st.ok === false ? "failed" : ""} ${st.running ? "running" : ""}`, x: x(st.started),
        y: lane * laneH + 4, width: barW, height: laneH - 8, rx: 3 }, s("title", {}, tip)), label));
  }
  const axis = s("g", { class: "axis" });
  for (let i = 0; i * step <= axisMs * (1 + 1e-9); i++) {
    const ms = i * step, at = left + (ms / axisMs) * plot;
    axis.append(s("line", { x1: at, x2: at, y1: 0, y2: lanes.length * laneH }),
      s("text", { class: "tick", "data-ms": +ms.toFixed(6), x: at, y: lanes.length * laneH + 16 }, tickText(ms, step)));
  }
  svg.prepend(axis);
  return svg;
}
