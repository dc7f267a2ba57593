// Pegasus dashboard: plain JS over the gateway's /v1 API (docs/dashboard.md).
// The bearer token lives in sessionStorage and goes only in the Authorization header, never in a URL;
// that is also why live updates read Server-Sent Events with fetch() (EventSource cannot send a header).
// Every text from a task is put in the page as text (textContent), never as HTML.
"use strict";

const TOKEN_KEY = "pegasus.token";
const PAGE = 25;
const TERMINAL = new Set(["done", "failed", "canceled"]);
const WRITE_SCOPES = new Set(["submit", "admin"]);
const ADMIN_SCOPES = new Set(["admin"]);

const state = { scope: null, name: null, machines: null, diagrams: {}, streams: [], timers: [], view: 0 };
// Each page drawn is a view; an answer that arrives after the person moved on must not draw the old one over it.
const showing = (view) => view === state.view;

// -- small helpers --------------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}
const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
  for (const child of children.flat()) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}
const badge = (text) => h("span", { class: `badge ${text || ""}` }, text ?? "-");
const short = (id) => String(id || "").slice(0, 8);
const clip = (text, n = 90) => { const t = String(text ?? ""); return t.length > n ? t.slice(0, n - 1) + "\u2026" : t; };
const main = () => document.getElementById("main");
function age(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (!isFinite(seconds)) return "-";
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.floor(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d`;
}
function throttle(fn, ms) {
  let timer = null, again = false;
  return () => {
    if (timer) { again = true; return; }
    fn();
    timer = setTimeout(function tick() { timer = null; if (again) { again = false; fn(); timer = setTimeout(tick, ms); } }, ms);
  };
}

// -- the API ------------------------------------------------------------------------------------------
const token = () => sessionStorage.getItem(TOKEN_KEY);

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token()}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const error = (data && data.error) || {};
    if (res.status === 401 && path !== "/v1/token") logout("The token was refused: log in again.");
    throw new ApiError(res.status, error.code || String(res.status), error.message || res.statusText);
  }
  return data;
}
const get = (path) => api("GET", path);

// Server-Sent Events over fetch: yields {id, event, data} until aborted; reconnects with Last-Event-ID.
function stream(path, onEvent, onStatus) {
  const control = new AbortController();
  let lastId = null, delay = 500;
  (async () => {
    while (!control.signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
        if (lastId) headers["Last-Event-ID"] = lastId;
        const res = await fetch(path, { headers, signal: control.signal });
        if (res.status === 401) { logout("The token was refused: log in again."); return; }
        if (!res.ok || !res.body) throw new Error(`${res.status}`);
        onStatus && onStatus(true);
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer = (buffer + value).replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const message = { id: null, event: "message", data: [] };
            for (const line of block.split("\n")) {
              if (!line || line.startsWith(":")) continue;
              const colon = line.indexOf(":");
              const field = colon < 0 ? line : line.slice(0, colon);
              const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (field === "data") message.data.push(text);
              else if (field === "id") message.id = text;
              else if (field === "event") message.event = text;
            }
            if (message.id) lastId = message.id;
            if (message.event === "end") {  // the task is over: its stream has nothing more to say
              control.abort();
              onStatus && onStatus(null);
              return;
            }
            if (!message.data.length) continue;
            let data = message.data.join("\n");
            try { data = JSON.parse(data); } catch (e) { /* not JSON: pass the text */ }
            onEvent({ id: message.id, event: message.event, data });
          }
        }
      } catch (e) {
        if (control.signal.aborted) return;
      }
      onStatus && onStatus(false);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  })();
  state.streams.push(control);
  return control;
}

async function machines() {
  if (!state.machines) {
    const data = await get("/v1/machines");
    const list = Array.isArray(data) ? data : (data.machines || Object.values(data));
    state.machines = Object.fromEntries(list.map((m) => [m.name, m]));
  }
  return state.machines;
}

async function diagram(name) {
  if (!state.diagrams[name]) {
    const res = await fetch(`/dashboard/machines/${encodeURIComponent(name)}.svg`,
                            { headers: { Authorization: `Bearer ${token()}` } });
    if (!res.ok) throw new ApiError(res.status, "diagram", `no diagram for ${name}`);
    state.diagrams[name] = await res.text();
  }
  // Our own server's SVG (pegasus/dashboard/diagram.py escapes every text), parsed as SVG, not HTML.
  const doc = new DOMParser().parseFromString(state.diagrams[name], "image/svg+xml");
  return document.importNode(doc.documentElement, true);
}

// The stage a task runs now: its machine's declaration for its cognitive state, while it runs.
function currentStage(task) {
  if (task.lifecycle_state !== "running") return "";
  const machine = state.machines && state.machines[task.machine];
  const runs = machine && machine.stages && machine.stages[task.state];
  return runs ? (runs.stage || runs) : "";
}

const canWrite = () => WRITE_SCOPES.has(state.scope);
const canAdmin = () => ADMIN_SCOPES.has(state.scope);

// -- login --------------------------------------------------------------------------------------------
function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.scope = state.name = state.machines = null;
  location.hash = "#/login";
  render(message);
}

function loginPage(message) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "bearer token", required: true });
  const problem = h("p", { class: "error", id: "login-error" }, message || "");
  const form = h("form", { class: "card login", id: "login", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await identify();
      location.hash = "#/tasks";
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      problem.textContent = e.status === 401 ? "That token was refused." : `Could not log in: ${e.message}`;
    }
  } },
  h("h1", {}, "Log in"),
  h("p", { class: "muted" }, "A token from ", h("code", {}, "pegasus token create NAME"),
    ". It is kept in this browser tab's session only."),
  input, h("button", { class: "action", type: "submit" }, "Log in"), problem);
  main().replaceChildren(form);
  input.focus();
}

async function identify() {
  const me = await api("GET", "/v1/token");
  state.scope = me.scope;
  state.name = me.name;
}

// -- tasks ----------------------------------------------------------------------------------------------
async function tasksPage(params) {
  const view = { state: params.get("state") || "", text: params.get("q") || "", cursors: [null], page: 0, rows: new Map() };
  const counts = h("div", { class: "counts", id: "counts" });
  const stateSelect = h("select", { id: "state-filter", onchange: () => { view.state = stateSelect.value; restart(); } },
    h("option", { value: "" }, "every state"));
  const text = h("input", { id: "text-filter", type: "search", placeholder: "filter by text or id", value: view.text,
    oninput: () => { view.text = text.value.toLowerCase(); draw(); } });
  const body = h("tbody", { id: "task-rows" });
  const prev = h("button", { class: "plain", id: "prev", onclick: () => { view.page -= 1; load(); } }, "\u2190 newer");
  const next = h("button", { class: "plain", id: "next", onclick: () => { view.page += 1; load(); } }, "older \u2192");
  const pageInfo = h("span", { class: "muted", id: "page-info" });
  const queue = h("div", { id: "queue" });
  const submit = canWrite() ? submitForm(() => load()) : null;
  main().replaceChildren(
    h("h1", {}, "Tasks"), counts,
    h("div", { class: "grid2" }, h("div", { class: "card" }, h("h2", {}, "The queue"), queue), submit),
    h("div", { class: "card" },
      h("div", { class: "filters" }, stateSelect, text, prev, next, pageInfo),
      h("table", { id: "tasks" }, h("thead", {}, h("tr", {}, ["task", "input", "lifecycle", "state", "machine", "priority",
        "age", "stage"].map((c) => h("th", {}, c)))), body)));
  const ms = await machines().catch(() => ({}));
  const lifecycle = ms.lifecycle ? ms.lifecycle.states : [];
  const cognitive = [...new Set(Object.values(ms).filter((m) => m.name !== "lifecycle").flatMap((m) => m.states))];
  for (const name of [...lifecycle, ...cognitive.filter((c) => !lifecycle.includes(c))]) {
    stateSelect.append(h("option", { value: name }, name));
  }
  stateSelect.value = view.state;

  function row(task) {
    const tr = h("tr", { class: "task-row", "data-task": task.task_id, onclick: () => { location.hash = `#/task/${task.task_id}`; } },
      h("td", { class: "mono" }, h("a", { href: `#/task/${task.task_id}` }, short(task.task_id))),
      h("td", {}, clip(task.input, 70)),
      h("td", { class: "lifecycle" }, badge(task.lifecycle_state)),
      h("td", { class: "cognitive" }, badge(task.state)),
      h("td", {}, task.machine), h("td", {}, task.priority),
      h("td", { class: "age", "data-created": task.created_at || "" }, task.created_at ? age(task.created_at) : "-"),
      h("td", { class: "stage" }, currentStage(task)));
    return tr;
  }
  function matches(task) {
    if (view.state && task.lifecycle_state !== view.state && task.state !== view.state) return false;
    if (!view.text) return true;
    return `${task.task_id} ${task.input} ${task.machine}`.toLowerCase().includes(view.text);
  }
  function draw() {
    const tasks = [...view.rows.values()].filter(matches);
    body.replaceChildren(...tasks.map(row));
    if (!tasks.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "no tasks")));
    prev.disabled = view.page === 0;
    next.disabled = !view.cursors[view.page + 1];
    pageInfo.textContent = `page ${view.page + 1}`;
  }
  async function load() {
    const query = new URLSearchParams({ limit: PAGE });
    if (view.state) query.set("state", view.state);
    if (view.cursors[view.page]) query.set("cursor", view.cursors[view.page]);
    const page = await get(`/v1/tasks?${query}`);
    view.rows = new Map((page.tasks || page.items || []).map((t) => [t.task_id, t]));
    view.cursors[view.page + 1] = page.next_cursor || page.cursor || null;
    draw();
  }
  async function refreshCounts() {
    const stats = await get("/v1/stats");
    const total = Object.values(stats.tasks || {}).reduce((a, b) => a + b, 0);
    counts.replaceChildren(
      h("button", { class: view.state ? "" : "selected", "data-state": "", onclick: () => choose("") }, `all ${total}`),
      ...Object.entries(stats.tasks || {}).map(([name, n]) =>
        h("button", { class: view.state === name ? "selected" : "", "data-state": name, onclick: () => choose(name) },
          badge(name), ` ${n}`)));
    const waiting = await get("/v1/tasks?state=queued&limit=10");
    const drafts = await get("/v1/tasks?state=draft&limit=10");
    const item = (t) => h("li", {}, h("a", { href: `#/task/${t.task_id}` }, short(t.task_id)), " ", clip(t.input, 50),
      " ", h("span", { class: "muted" }, `priority ${t.priority}`));
    queue.replaceChildren(
      h("p", {}, `${stats.queue_length ?? 0} queued, ${stats.active ?? 0} running of ${stats.max_active_tasks ?? "?"} at most`),
      h("ul", { id: "queued" }, ...(waiting.tasks || []).map(item)),
      h("h2", {}, "Waiting for approval"),
      (drafts.tasks || []).length ? h("ul", { id: "drafts" }, ...drafts.tasks.map(item)) : h("p", { class: "muted" }, "none"));
  }
  function choose(name) { view.state = name; stateSelect.value = name; restart(); }
  function restart() { view.page = 0; view.cursors = [null]; load(); refreshCounts(); }
  const counting = throttle(() => refreshCounts().catch(() => {}), 1000);
  const reading = throttle(() => load().catch(() => {}), 100);

  // Listen first, then read: a task submitted meanwhile is in the page or comes as an event.
  let down = false;
  stream("/v1/events", ({ event, data }) => {
    if (event === "lagged") { load().catch(() => {}); return; }  // fell behind: read the page again
    if (!data || !data.task_id) return;
    const task = view.rows.get(data.task_id);
    if (task) {
      if (data.machine === "lifecycle") task.lifecycle_state = data.to_state;
      else task.state = data.to_state;
      task.updated_at = data.timestamp;
      draw();
    } else if (view.page === 0 && data.machine === "lifecycle" && data.from_state === "-") {
      reading();  // a task submitted since the page was read: the newest page again (a burst: a few reads)
    }
    counting();
  }, (up) => {
    live(up);
    // Connected (again): read the page once more, so nothing that happened before the stream began is missed.
    if (up) { load().catch(() => {}); if (down) counting(); }
    down = !up;
  });
  await Promise.all([load(), refreshCounts()]);
  state.timers.push(setInterval(() => {
    for (const cell of document.querySelectorAll("td.age[data-created]")) cell.textContent = age(cell.dataset.created);
  }, 1000));
}

function submitForm(done) {
  const text = h("textarea", { id: "submit-text", rows: 2, placeholder: "what should the task do?", required: true });
  const priority = h("input", { id: "submit-priority", type: "number", min: 0, max: 9, value: 5 });
  const problem = h("span", { class: "error" });
  return h("form", { class: "card", id: "submit", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api("POST", "/v1/tasks", { text: text.value, priority: Number(priority.value) });
      text.value = ""; problem.textContent = "";
      done();
    } catch (e) { problem.textContent = e.message; }
  } }, h("h2", {}, "Submit a task"), text, h("div", { class: "actions" }, "priority", priority,
    h("button", { class: "action", type: "submit" }, "Submit"), problem));
}

// -- a task ------------------------------------------------------------------------------------------------
async function taskPage(id) {
  const view = state.view;
  main().replaceChildren(h("p", { class: "muted" }, "loading\u2026"));
  const ms = await machines().catch(() => ({}));
  const draw = async () => {
    const [task, history, known] = await Promise.all([get(`/v1/tasks/${encodeURIComponent(id)}`),
      get(`/v1/tasks/${encodeURIComponent(id)}/history`),
      get(`/v1/tasks/${encodeURIComponent(id)}/context`).catch(() => ({}))]);
    const context = known.context || {};
    const content = [
      h("h1", {}, "Task ", h("span", { class: "mono" }, task.task_id)),
      h("div", { class: "card" }, fields(task), actions(task, draw)),
      h("h2", {}, "Machine"),
      h("div", { class: "card", id: "diagram" }, await lit(task.machine, task.state, history.cognitive || [], "cognitive")),
      h("div", { class: "card", id: "lifecycle-diagram" },
        await lit("lifecycle", task.lifecycle_state, (history.lifecycle || []).filter((t) => t.from_state !== "-"), "lifecycle")),
      h("h2", {}, "Stages by worker"), h("div", { class: "card", id: "gantt" }, gantt(task.stages || [])),
      h("div", { class: "grid2" },
        h("div", {}, h("h2", {}, "Transitions"), h("div", { class: "card" }, timeline(history))),
        h("div", {}, plan(context), memories(task, context), children(task))),
    ];
    if (showing(view)) main().replaceChildren(...content.filter(Boolean));
  };
  await draw();
  stream(`/v1/tasks/${encodeURIComponent(id)}/events`, throttle(() => draw().catch(() => {}), 300), live);
  void ms;
}

function fields(task) {
  const rows = [["lifecycle", badge(task.lifecycle_state)], ["state", badge(task.state)], ["stage", currentStage(task) || "-"],
    ["machine", task.machine], ["priority", task.priority], ["source", task.source], ["created", task.created_at],
    ["input", task.input]];
  if (task.question) rows.push(["question", task.question]);
  if (task.suspend_reason) rows.push(["suspended", task.suspend_reason]);
  if (task.result !== null && task.result !== undefined) rows.push(["result", typeof task.result === "string" ? task.result : JSON.stringify(task.result, null, 2)]);
  if (task.error) rows.push(["error", `${task.error} (exit_reason: ${task.exit_reason})`]);
  // stored messages that could not be read back: set aside with their errors, never given to the task
  for (const q of task.messages_quarantined || []) rows.push([`message ${q.number}`, h("span", { class: "quarantine" }, `quarantined: ${clip(q.error, 300)}`)]);
  const usage = task.usage || {};
  if (usage.calls) rows.push(["usage", `${usage.calls} calls, ${usage.total_tokens} tokens`]);
  return h("dl", { class: "fields", id: "fields" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));
}

const typed = new Map();  // task id -> the resume message being typed on its page

function actions(task, redraw) {
  if (!canWrite()) return null;
  const lifecycle = task.lifecycle_state;
  const problem = h("span", { class: "error", id: "action-error" });
  const act = (verb, body) => async () => {
    try { await api("POST", `/v1/tasks/${encodeURIComponent(task.task_id)}/${verb}`, body || {}); problem.textContent = ""; }
    catch (e) { problem.textContent = `${verb}: ${e.message}`; }
    redraw().catch(() => {});
  };
  // What is typed survives the page's live redraws (a transition arriving while a person types).
  const message = h("input", { id: "resume-message", placeholder: "message for the task (optional)",
    oninput: (e) => { typed.set(task.task_id, e.target.value); } });
  message.value = typed.get(task.task_id) || "";
  const buttons = [];
  if (lifecycle === "draft") buttons.push(h("button", { class: "action", id: "approve", onclick: act("approve") }, "Approve"));
  if (lifecycle === "running") buttons.push(h("button", { class: "action", id: "suspend", onclick: act("suspend") }, "Suspend"));
  if (lifecycle === "blocked") {  // suspended, or waiting for the information it asked for
    buttons.push(message, h("button", { class: "action", id: "resume",
      onclick: () => { typed.delete(task.task_id); return act("resume", message.value ? { message: message.value } : {})(); } },
      "Resume"));
  }
  if (lifecycle === "failed") buttons.push(h("button", { class: "action", id: "retry", onclick: act("retry") }, "Retry"));
  if (!TERMINAL.has(lifecycle)) buttons.push(h("button", { class: "action danger", id: "cancel", onclick: act("cancel") }, "Cancel"));
  return h("div", { class: "actions", id: "actions" }, ...buttons, problem);
}

// The machine's diagram with the current state lit and the path taken (the latest run's transitions).
async function lit(machine, current, transitions, kind) {
  let svg;
  try { svg = await diagram(machine); } catch (e) { return h("p", { class: "muted" }, e.message); }
  const runs = transitions.map((t) => t.run).filter((r) => r !== undefined);
  const last = runs.length ? Math.max(...runs) : undefined;
  for (const t of transitions) {
    if (last !== undefined && t.run !== undefined && t.run !== last) continue;
    svg.querySelector(`g.state[data-state="${CSS.escape(t.from_state)}"]`)?.classList.add("visited");
    svg.querySelector(`g.state[data-state="${CSS.escape(t.to_state)}"]`)?.classList.add("visited");
    svg.querySelector(`g.edge[data-from="${CSS.escape(t.from_state)}"][data-to="${CSS.escape(t.to_state)}"]`)?.classList.add("taken");
  }
  svg.querySelector(`g.state[data-state="${CSS.escape(current || "")}"]`)?.classList.add("current");
  svg.setAttribute("data-kind", kind);
  return svg;
}

function timeline(history) {
  const items = [
    ...(history.lifecycle || []).map((t) => ({ ...t, machine: "lifecycle", event: t.trigger_event_type })),
    ...(history.cognitive || []).map((t) => ({ ...t, machine: "cognitive" })),
  ].sort((a, b) => String(a.timestamp).localeCompare(String(b.timestamp)));
  return h("ul", { class: "timeline", id: "timeline" }, items.map((t) =>
    h("li", { class: t.machine }, h("span", { class: "mono muted" }, String(t.timestamp).slice(11, 23)), " ",
      `${t.from_state} \u2192 ${t.to_state}`, " ", h("span", { class: "muted" }, t.event || ""),
      t.reason ? h("span", { class: "muted" }, ` (${t.reason})`) : null)));
}

// Stages as a Gantt chart: one lane per worker (pool, member, pid), a bar per stage from start to end.
function gantt(stages) {
  const done = stages.filter((st) => st.started);
  if (!done.length) return h("p", { class: "muted" }, "no stage has run yet");
  const lanes = [...new Set(done.map((st) => `${st.pool} ${st.member || st.host || ""} pid ${st.pid}`))];
  const t0 = Math.min(...done.map((st) => st.started));
  const t1 = Math.max(...done.map((st) => st.finished || st.started));
  const span = Math.max(t1 - t0, 0.001);
  const left = 240, width = 720, laneH = 26;
  const x = (t) => left + ((t - t0) / span) * width;
  const svg = s("svg", { class: "gantt", width: left + width + 60, height: lanes.length * laneH + 30 });
  lanes.forEach((lane, i) => svg.append(s("text", { class: "lane-label", x: 4, y: i * laneH + 17 }, lane)));
  for (const st of done) {
    const lane = lanes.indexOf(`${st.pool} ${st.member || st.host || ""} pid ${st.pid}`);
    const end = st.finished || t1;
    const tokens = st.usage ? st.usage.total_tokens : 0;
    const tip = `${st.stage} on ${st.pool} (pid ${st.pid}, ${st.member || st.host}): ${((end - st.started) * 1000).toFixed(1)} ms, ` +
      `CPU ${st.cpu_ms ?? "?"} ms, ${tokens || 0} tokens${st.ok === false ? `, failed: ${st.error}` : ""}`;
    svg.append(s("g", { class: "stage", "data-stage": st.stage },
      s("rect", { class: `bar ${st.pool} ${st.ok === false ? "failed" : ""}`, x: x(st.started), y: lane * laneH + 4,
        width: Math.max(2, x(end) - x(st.started)), height: laneH - 8, rx: 3 }, s("title", {}, tip)),
      s("text", { x: x(st.started) + 3, y: lane * laneH + 17 }, st.stage)));
  }
  const axis = s("g", { class: "axis" });
  for (let i = 0; i <= 4; i++) {
    const at = left + (width * i) / 4;
    axis.append(s("line", { x1: at, x2: at, y1: 0, y2: lanes.length * laneH }),
      s("text", { x: at - 10, y: lanes.length * laneH + 16 }, `${((span * i) / 4 * 1000).toFixed(0)} ms`));
  }
  svg.prepend(axis);
  return svg;
}

function plan(context) {
  const steps = (context.plan && context.plan.steps) || [];
  const results = context.actions_done || [];
  if (!steps.length && !results.length) return null;
  return h("div", { id: "plan" }, h("h2", {}, "Plan and tool results"), h("div", { class: "card" },
    context.plan && context.plan.goal ? h("p", {}, h("strong", {}, "goal "), context.plan.goal) : null,
    h("ol", { id: "plan-steps" }, steps.map((step) => h("li", {}, `${step.completed ? "\u2713 " : ""}${step.description}`,
      step.action_params && step.action_params.tool ? h("span", { class: "mono muted" }, ` ${step.action_params.tool}`) : null))),
    results.map((r) => h("div", { class: "step-result" }, h("strong", {}, `step ${r.step_index} ${r.tool || r.action_type}: ${r.success ? "ok" : "failed"}`),
      h("pre", {}, clip(r.error || (typeof r.output === "string" ? r.output : JSON.stringify(r.output)), 2000))))));
}

// Issue 19's memories and post-task reflection, issue 20's sub-tasks: shown when the task has them.
function memories(task, context) {
  const recall = context.recall || {};
  const given = recall.memories || task.memories || [];
  const post = task.post_reflection || null;  // {status, attempts, reflection: {facts, episode, assessment}, error}
  const after = post ? (post.reflection || post) : context.post_reflection;
  const verdicts = context.reflections || [];
  if (!given.length && !after && !verdicts.length && !post) return null;
  const text = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
  return h("div", { id: "memories" }, h("h2", {}, "Memories and reflections"), h("div", { class: "card" },
    verdicts.map((r, i) => h("p", { class: "reflection" }, h("strong", {}, `reflection ${i + 1}: ${r.verdict}`), " ", r.assessment || "")),
    given.length ? h("div", {}, h("strong", {}, "memories given"), h("ul", { id: "memories-given" }, given.map((m) =>
      h("li", {}, typeof m === "string" ? m : [h("span", { class: "badge" }, m.kind || "memory"), " ", m.title || m.id || "",
        m.text ? h("div", { class: "muted" }, clip(m.text, 300)) : null])))) : null,
    post ? h("p", {}, h("strong", {}, "post-task reflection: "), post.status || "", post.error ? ` (${post.error})` : "") : null,
    after && typeof after === "object" ? h("div", { id: "post-reflection" },
      after.assessment ? h("p", {}, after.assessment) : null,
      (after.facts || []).length ? h("ul", {}, after.facts.map((f) => h("li", {}, h("span", { class: "mono" }, f.path), " ", clip(f.content, 200)))) : null,
      after.episode ? h("p", {}, h("strong", {}, "episode "), after.episode.title || "", " ", after.episode.summary || "") : null)
      : (after ? h("pre", {}, text(after)) : null)));
}

function children(task) {
  const kids = task.children || [];
  const parent = task.parent_id || (task.metadata && task.metadata.parent_id);
  const waiting = new Set(task.waiting_for || []);
  if (!kids.length && !parent) return null;
  return h("div", { id: "children" }, h("h2", {}, "Sub-tasks"), h("div", { class: "card" },
    parent ? h("p", {}, "parent ", h("a", { href: `#/task/${parent}` }, short(parent))) : null,
    h("ul", {}, kids.map((k) => { const kid = typeof k === "string" ? { task_id: k } : k;
      return h("li", {}, h("a", { href: `#/task/${kid.task_id}` }, short(kid.task_id)), " ",
        kid.lifecycle_state ? badge(kid.lifecycle_state) : null, waiting.has(kid.task_id) ? h("span", { class: "muted" }, " awaited") : null,
        " ", clip(kid.input || "", 60)); }))));
}

// -- pools and members -----------------------------------------------------------------------------------
async function poolsPage() {
  const view = state.view;
  const draw = async () => {
    const stats = await get("/v1/stats");
    const pools = Object.entries(stats.pools || {}).map(([name, pool]) => h("div", { class: "card pool", "data-pool": name },
      h("h2", {}, `${name} pool`),
      h("p", {}, `${pool.busy} busy of ${pool.size}, ${pool.queued} queued, ${pool.replaced || 0} replaced`,
        pool.budget || pool.rate ? ` \u2014 rate budget left: ${JSON.stringify(pool.budget || pool.rate)}` : ""),
      h("table", {}, h("thead", {}, h("tr", {}, ["worker", "pid", "host", "member", "", "held", "task"].map((c) => h("th", {}, c)))),
        h("tbody", {}, (pool.workers || []).map((w) => h("tr", {}, h("td", {}, w.index), h("td", {}, w.pid), h("td", {}, w.host),
          h("td", {}, w.member), h("td", {}, badge(w.busy ? "running" : (w.ready === false ? "starting" : "idle"))),
          h("td", {}, w.held || 0), h("td", {}, (w.tasks || []).map((t) => h("a", { href: `#/task/${t}`, class: "mono" }, short(t), " ")))))))));
    const members = (stats.members || []).map((m) => h("tr", {}, h("td", {}, m.name), h("td", {}, m.local ? "this machine" : m.address),
      h("td", {}, Object.entries(m.workers || {}).map(([p, n]) => `${p} ${n}`).join(", ")),
      h("td", { class: "mono" }, JSON.stringify(m.capabilities || {}))));
    const usage = stats.usage || {}, actors = stats.task_actors || {};
    if (!showing(view)) return;
    main().replaceChildren(h("h1", {}, "Pools and members"),
      h("div", { class: "card", id: "system" }, h("p", {}, `queue ${stats.queue_length}, running ${stats.active} of ` +
        `${stats.max_active_tasks}; task actors: ${actors.hosts ?? "?"} (${actors.running ?? 0} runs); model usage ` +
        `${usage.calls || 0} calls, ${usage.total_tokens || 0} tokens; supervisor pid ${stats.supervisor_pid}`)),
      // memory's embedding vectors (issue 29): rows still without one, and the endpoint's last failure
      ...(stats.embeddings ? [h("div", { class: "card", id: "embeddings" }, h("p", {}, `vectors (${stats.embeddings.model}): ` +
        `${stats.embeddings.rows_without_vector ?? "?"} rows without one, ${stats.embeddings.recall_without_vector || 0} recalls ` +
        `by full text alone` + (stats.embeddings.healthy === false ? `; failing: ${clip(stats.embeddings.last_error, 200)}` : "")))] : []),
      ...pools,
      h("div", { class: "card", id: "members" }, h("h2", {}, "Members"), h("table", {}, h("thead", {}, h("tr", {},
        ["member", "address", "workers", "capabilities"].map((c) => h("th", {}, c)))), h("tbody", {}, members))));
  };
  await draw();
  state.timers.push(setInterval(() => draw().catch(() => {}), 2000));
}

// -- schedules and webhooks --------------------------------------------------------------------------------
async function schedulesPage() {
  const view = state.view;
  const draw = async () => {
    const part = async (path, build) => {
      try { return build(await get(path)); }
      catch (e) { return h("p", { class: "muted" }, [404, 501].includes(e.status) ? "not offered by this system" : e.message); }
    };
    const list = (data, key) => (Array.isArray(data) ? data : data[key] || []);
    const control = (sc, verb, label) => h("button", { class: "plain", "data-action": verb, onclick: async () => {
      try { await api("POST", `/v1/schedules/${encodeURIComponent(sc.name)}/${verb}`); } catch (e) { alert(e.message); }
      draw().catch(() => {});
    } }, label);
    const when = (sc) => sc.cron ? `${sc.cron} (${sc.tz || "UTC"})` : (sc.every_s ? `every ${sc.every_s} s` : "");
    const schedules = await part("/v1/schedules", (data) => h("table", { id: "schedules" },
      h("thead", {}, h("tr", {}, ["name", "when", "text", "next", "fired", "skipped", "last task", "overlap", "", ""]
        .map((c) => h("th", {}, c)))),
      h("tbody", {}, list(data, "schedules").map((sc) => h("tr", { "data-schedule": sc.name },
        h("td", {}, sc.name), h("td", { class: "mono" }, when(sc)), h("td", {}, clip(sc.text, 60)),
        // a quarantined one (a stored value the supervisor could not follow): its error where its next time would be
        h("td", sc.quarantined ? { class: "quarantine" } : {}, sc.quarantined ? clip(sc.quarantined, 160) : (sc.next_time || "-")),
        h("td", {}, sc.fired ?? 0), h("td", {}, sc.skipped ?? 0),
        h("td", {}, sc.last_task ? h("a", { href: `#/task/${sc.last_task}`, class: "mono" }, short(sc.last_task)) : "-"),
        h("td", {}, sc.overlap || ""), h("td", {}, badge(sc.quarantined ? "quarantined" : sc.paused ? "paused" : "active")),
        h("td", {}, canAdmin() && !sc.quarantined ? [control(sc, sc.paused ? "resume" : "pause", sc.paused ? "Resume" : "Pause"), " ",
          control(sc, "trigger", "Fire now")] : null))))));
    const webhooks = await part("/v1/webhooks", (data) => h("table", { id: "webhooks" },
      h("thead", {}, h("tr", {}, ["name", "address", "text", "signed"].map((c) => h("th", {}, c)))),
      h("tbody", {}, list(data, "webhooks").map((w) => h("tr", {}, h("td", {}, w.name),
        h("td", { class: "mono" }, `POST /v1/webhooks/${w.name}`),
        w.quarantined ? h("td", { class: "quarantine" }, clip(w.quarantined, 160)) : h("td", {}, clip(w.text, 80)),
        h("td", {}, w.secret_file ? "yes" : "no"))))));
    if (!showing(view)) return;
    main().replaceChildren(h("h1", {}, "Schedules and webhooks"), h("div", { class: "card" }, h("h2", {}, "Schedules"), schedules),
      h("div", { class: "card" }, h("h2", {}, "Webhooks"), webhooks));
  };
  await draw();
  state.timers.push(setInterval(() => draw().catch(() => {}), 5000));
}

// -- the router ----------------------------------------------------------------------------------------------
function live(up) {
  document.getElementById("live").textContent = up === null ? "" : (up ? "\u25cf live" : "\u25cb reconnecting");
}

function stop() {
  for (const control of state.streams.splice(0)) control.abort();
  for (const timer of state.timers.splice(0)) clearInterval(timer);
  document.getElementById("live").textContent = "";
}

async function render(message) {
  stop();
  const view = ++state.view;
  const [path, query] = (location.hash.slice(1) || "/tasks").split("?");
  const parts = path.split("/").filter(Boolean);
  const loggedIn = Boolean(token());
  document.getElementById("nav").classList.toggle("hidden", !loggedIn);
  document.getElementById("logout").classList.toggle("hidden", !loggedIn);
  if (!loggedIn || parts[0] === "login") { document.getElementById("who").textContent = ""; loginPage(message); return; }
  try {
    if (!state.scope) await identify();
    document.getElementById("who").textContent = `${state.name} (${state.scope})`;
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.page === parts[0]);
    if (parts[0] === "task" && parts[1]) await taskPage(decodeURIComponent(parts[1]));
    else if (parts[0] === "pools") await poolsPage();
    else if (parts[0] === "schedules") await schedulesPage();
    else await tasksPage(new URLSearchParams(query || ""));
  } catch (e) {
    if (e.status === 401 || !showing(view)) return;
    main().replaceChildren(h("div", { class: "card error" }, e.status === 404 ? "Not found." : `Error: ${e.message}`));
  }
}

window.addEventListener("hashchange", () => render());
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("logout").addEventListener("click", () => logout(""));
  render();
});
