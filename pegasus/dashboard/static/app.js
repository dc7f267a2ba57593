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

const state = { scope: null, name: null, machines: null, diagrams: {}, streams: [], timers: [], view: 0, revive: null };
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
// A time in the browser's own time zone: "2026-05-01 14:03:07" (".123" with ms), its UTC form on hover.
function localTime(when, ms = false, day = true) {
  const date = typeof when === "number" ? new Date(when * 1000) : new Date(when);
  if (when === null || when === undefined || when === "" || isNaN(date)) return String(when ?? "-");
  const p = (n, w = 2) => String(n).padStart(w, "0");
  const text = (day ? `${date.getFullYear()}-${p(date.getMonth() + 1)}-${p(date.getDate())} ` : "") + `${p(date.getHours())}:${p(date.getMinutes())}:` +
    `${p(date.getSeconds())}${ms ? "." + p(date.getMilliseconds(), 3) : ""}`;
  return h("time", { datetime: date.toISOString(), title: date.toISOString() }, text);
}
function debounce(fn, ms) {
  let timer = null;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
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

// The stage a running task runs now, for the Gantt chart: its pool and since when (its latest transition into
// its current cognitive state); null when none runs (a stage that ended is in task.stages).
function runningStage(task, history) {
  const stage = currentStage(task);
  if (!stage) return null;
  const machine = state.machines[task.machine], into = (history.cognitive || []).filter((t) => t.to_state === task.state);
  if (!into.length) return null;
  const started = Date.parse(into[into.length - 1].timestamp) / 1000;
  const ended = (task.stages || []).some((st) => st.stage === stage && st.started >= started);
  return ended || !isFinite(started) ? null : { stage, pool: machine.stages[task.state].pool || "", started };
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
  const view = { state: params.get("state") || "", text: params.get("q") || "", cursors: [null], page: 0, rows: new Map(),
    total: null, asked: 0, refusal: "" };
  const counts = h("div", { class: "counts", id: "counts" });
  const stateSelect = h("select", { id: "state-filter", onchange: () => { view.state = stateSelect.value; restart(); } },
    h("option", { value: "" }, "every state"));
  // Searched by the server (GET /v1/tasks?text=&meta=): every page of matches, not only the one shown.
  const searched = debounce(() => {
    view.text = text.value.trim();
    const query = new URLSearchParams(view.text ? { q: view.text } : {});
    history.replaceState(null, "", `#/tasks${view.text ? "?" + query : ""}`);  // a reload keeps the search
    restart();
  }, 300);
  const text = h("input", { id: "text-filter", type: "search", value: view.text, size: 34,
    placeholder: "search input and result (key=value: metadata)", oninput: searched });
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

  function row(task, depth) {
    const parent = task.parent_id;
    const tr = h("tr", { class: `task-row${depth ? " sub-task" : ""}`, "data-task": task.task_id, "data-parent": parent || null,
      "data-depth": depth, "data-waiting": waitingFor(task), onclick: () => { location.hash = `#/task/${task.task_id}`; } },
      h("td", { class: `mono task-id depth-${Math.min(depth, 4)}` },  // no style attribute: the CSP forbids inline styles
        depth ? h("span", { class: "muted", "aria-hidden": "true" }, "\u21b3 ") : null,
        h("a", { href: `#/task/${task.task_id}` }, short(task.task_id))),
      h("td", {}, clip(task.input, 70),
        parent && !depth ? h("span", { class: "muted parent-link" }, " (sub-task of ",
          h("a", { href: `#/task/${parent}`, onclick: (e) => e.stopPropagation() }, short(parent)), ")") : null),
      h("td", { class: "lifecycle" }, lifecycleBadges(task)),
      h("td", { class: "cognitive" }, badge(task.state)),
      h("td", {}, task.machine), h("td", {}, task.priority),
      h("td", { class: "age", "data-created": task.created_at || "", title: task.created_at ? localTime(task.created_at).textContent : null },
        task.created_at ? age(task.created_at) : "-"),
      h("td", { class: "stage" }, currentStage(task)));
    return tr;
  }
  function matches(task) {  // a task whose state changed since the page was read (the text is the server's)
    return !view.state || task.lifecycle_state === view.state || task.state === view.state;
  }
  // Each sub-task right under its parent (indented, depth-first) when the parent is on this page; one whose
  // parent is on another page stays in place, naming its parent.
  function nested(tasks) {
    const shown = new Set(tasks.map((t) => t.task_id)), under = new Map();
    for (const t of tasks) if (t.parent_id && shown.has(t.parent_id)) {
      if (!under.has(t.parent_id)) under.set(t.parent_id, []);
      under.get(t.parent_id).push(t);
    }
    const out = [], placed = new Set();
    const place = (t, depth) => {
      if (placed.has(t.task_id)) return;
      placed.add(t.task_id);
      out.push(row(t, depth));
      for (const kid of (under.get(t.task_id) || []).slice().sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0))) place(kid, depth + 1);
    };
    for (const t of tasks) if (!(t.parent_id && shown.has(t.parent_id))) place(t, 0);
    for (const t of tasks) place(t, 0);  // a cycle cannot happen; anything left unplaced still shows
    return out;
  }
  function draw() {
    const tasks = [...view.rows.values()].filter(matches);
    body.replaceChildren(...nested(tasks));
    if (!tasks.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "no tasks")));
    prev.disabled = view.page === 0;
    next.disabled = !view.cursors[view.page + 1];
    const found = view.text && view.total !== null ? `${view.total} match${view.total === 1 ? "" : "es"}, ` : "";
    pageInfo.textContent = view.refusal || `${found}page ${view.page + 1}`;
  }
  async function load() {
    const query = new URLSearchParams({ limit: PAGE });
    if (view.state) query.set("state", view.state);
    if (view.cursors[view.page]) query.set("cursor", view.cursors[view.page]);
    const words = view.text.split(/\s+/).filter(Boolean);
    const text = words.filter((w) => !/^[^=]+=/.test(w)).join(" ");
    if (text) query.set("text", text);
    for (const pair of words.filter((w) => /^[^=]+=/.test(w))) query.append("meta", pair);
    const asked = ++view.asked;  // typing asks again: only the latest answer is drawn
    let page;
    try { page = await get(`/v1/tasks?${query}`); }
    catch (e) {
      if (asked !== view.asked || e.status !== 400) throw e;
      view.rows = new Map(); view.total = null; view.refusal = `search refused: ${e.message}`;
      draw();
      return;
    }
    if (asked !== view.asked) return;
    view.rows = new Map((page.tasks || page.items || []).map((t) => [t.task_id, t]));
    view.cursors[view.page + 1] = page.next_cursor || page.cursor || null;
    view.total = page.total ?? null;
    view.refusal = "";
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
    const [waiting, drafts] = await Promise.all([get("/v1/tasks?state=queued&limit=10"), get("/v1/tasks?state=draft&limit=10")]);
    const item = (t) => h("li", {}, h("a", { href: `#/task/${t.task_id}` }, short(t.task_id)), " ", clip(t.input, 50),
      " ", h("span", { class: "muted" }, `priority ${t.priority}`));
    // The count is the listing's own total (tasks in the queued state), so it agrees with the tasks listed;
    // stats.queue_length leaves out the queued tasks not yet in the admission queue (a retry's back-off).
    const queued = waiting.tasks || [], more = (waiting.total ?? queued.length) - queued.length;
    queue.replaceChildren(
      h("p", { id: "queue-summary" }, h("span", { id: "queued-count" }, `${waiting.total ?? queued.length} queued`),
        `, ${stats.active ?? 0} running of ${stats.max_active_tasks ?? "?"} at most`),
      h("ul", { id: "queued" }, ...queued.map(item)), h("p", { class: "muted" }, more > 0 ? `and ${more} more` : ""),
      h("h2", {}, "Waiting for approval"),
      (drafts.tasks || []).length ? h("ul", { id: "drafts" }, ...drafts.tasks.map(item)) : h("p", { class: "muted" }, "none"));
  }
  function choose(name) { view.state = name; stateSelect.value = name; restart(); }
  function restart() { view.page = 0; view.cursors = [null]; load().catch(() => {}); refreshCounts().catch(() => {}); }
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
      if (data.machine === "lifecycle" && data.to_state === "blocked") {
        task.waiting_unknown = true;  // why it waits (sub-tasks, a person) is in the list's row: read it again
        reading();
      }
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
  const log = taskLog(id);  // drawn once, moved into each redraw: what it read stays
  const draw = async () => {
    const [task, history, known] = await Promise.all([get(`/v1/tasks/${encodeURIComponent(id)}`),
      get(`/v1/tasks/${encodeURIComponent(id)}/history`),
      get(`/v1/tasks/${encodeURIComponent(id)}/context`).catch(() => ({}))]);
    const context = known.context || {};
    shown = { task, history };
    const chart = h("div", { class: "card", id: "gantt" });
    const content = [
      h("h1", {}, "Task ", h("span", { class: "mono" }, task.task_id)),
      h("div", { class: "card" }, fields(task), actions(task, draw)),
      h("h2", {}, "Machine"),
      h("div", { class: "card", id: "diagram" }, await lit(task.machine, task.state, history.cognitive || [], "cognitive")),
      h("div", { class: "card", id: "lifecycle-diagram" },
        await lit("lifecycle", task.lifecycle_state, (history.lifecycle || []).filter((t) => t.from_state !== "-"), "lifecycle")),
      h("h2", {}, "Stages by worker"), chart,
      h("div", { class: "grid2" },
        h("div", {}, h("h2", {}, "Transitions"), h("div", { class: "card" }, timeline(history))),
        h("div", {}, plan(context), memories(task, context), children(task))),
      h("h2", {}, "Log"), log.card,
    ];
    if (showing(view)) { main().replaceChildren(...content.filter(Boolean)); drawGantt(); }
  };
  let shown = null;
  // The chart is as wide as its card; a stage running now grows to the present every second.
  const drawGantt = () => {
    const card = document.getElementById("gantt");
    if (!card || !shown) return;
    const style = getComputedStyle(card);
    const width = card.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    card.replaceChildren(gantt(shown.task.stages || [], runningStage(shown.task, shown.history), Date.now() / 1000, width));
  };
  await draw();
  state.timers.push(setInterval(() => { if (shown && shown.task.lifecycle_state === "running") drawGantt(); }, 1000));
  const resized = throttle(drawGantt, 200);
  window.addEventListener("resize", resized);
  state.streams.push({ abort: () => window.removeEventListener("resize", resized) });
  // The stream ends with the task; a retry, resume or approval from this page starts it again (state.revive).
  let ended = false;
  const follow = () => stream(`/v1/tasks/${encodeURIComponent(id)}/events`,
    throttle(() => { draw().catch(() => {}); log.read(); }, 300), (up) => { live(up); if (up === null) ended = true; });
  follow();
  state.revive = () => { if (ended) { ended = false; follow(); } };
  log.read();
  state.timers.push(setInterval(() => { if (!log.finished()) log.read(); }, 2000));  // what no transition announces
  void ms;
}

// The task's log (GET /v1/tasks/{id}/logs, as pegasus logs): each answer's entries appended, asked again from
// its "next" while the task goes on; one read at a time.
function taskLog(id) {
  const list = h("ol", { class: "log", id: "log-entries" });
  const card = h("div", { class: "card", id: "log" }, list);
  let after = 0, finished = false, reading = null;
  const line = (e) => {
    const text = e.kind === "transition"
      ? [`${e.machine === "lifecycle" ? "lifecycle" : "run " + e.run} ${e.from_state} \u2192 ${e.to_state} `,
        h("span", { class: "muted" }, e.event), e.reason ? h("span", { class: "muted" }, ` (${e.reason})`) : null,
        e.stage ? h("span", { class: "muted" }, ` [${e.stage} ${e.seconds ?? 0}s${e.worker ? ", " + e.worker : ""}]`) : null]
      : e.kind === "error" ? `error in ${e.stage || "a stage"}: ${e.error}`
      : e.kind === "step_down" ? `model step-down in ${e.stage || "a stage"}: ${e.change}`
      : e.kind === "tool" ? [`step ${e.step_index} ${e.tool || ""} ${e.success ? "ok" : "failed"}: `,
        h("pre", {}, clip(e.success ? (typeof e.output === "string" ? e.output : JSON.stringify(e.output)) : e.error, 2000))]
      : e.kind;
    return h("li", { class: `log-${e.kind}`, "data-kind": e.kind, "data-id": e.id },
      h("span", { class: "mono muted" }, localTime(e.at, true, false)), " ", text);
  };
  const read = () => {
    if (reading || finished) return reading;
    reading = (async () => {
      for (let more = true; more;) {
        const page = await get(`/v1/tasks/${encodeURIComponent(id)}/logs?after=${after}`);
        list.append(...page.entries.map(line));
        after = page.next;
        more = page.more;
        finished = page.finished;
        if (finished) for (const e of page.effects_unknown || []) {
          list.append(h("li", { class: "log-unknown", "data-kind": "effect_unknown" },
            `effect unknown: step ${e.step_index} ${e.tool || ""} (run ${e.run}, started ${e.started_at})`));
        }
      }
    })().catch(() => {}).finally(() => { reading = null; });
    return reading;
  };
  return { card, read, finished: () => finished };
}

function fields(task) {
  const rows = [["lifecycle", lifecycleBadges(task)], ["state", badge(task.state)], ["stage", currentStage(task) || "-"],
    ["machine", task.machine], ["priority", task.priority], ["source", task.source], ["created", localTime(task.created_at)],
    ["input", task.input]];
  if (task.question) rows.push(["question", task.question]);
  if (task.suspend_reason) rows.push(["suspended", task.suspend_reason]);
  if (task.result !== null && task.result !== undefined) rows.push(["result", typeof task.result === "string" ? task.result : JSON.stringify(task.result, null, 2)]);
  if (task.error) rows.push(["error", `${task.error} (exit_reason: ${task.exit_reason})`]);
  // stored messages that could not be read back: set aside with their errors, never given to the task
  for (const q of task.messages_quarantined || []) rows.push([`message ${q.number}`, h("span", { class: "quarantine" }, `quarantined: ${clip(q.error, 300)}`)]);
  if (task.max_attempts) rows.push(["attempts", `${task.attempts} of ${task.max_attempts}`]);
  const usage = task.usage || {};
  if (usage.calls) rows.push(["usage", `${usage.calls} calls, ${usage.total_tokens} tokens`]);
  if (task.trace_id) rows.push(["trace", task.trace_id]);  // [telemetry] on: its id in the tracing backend
  return h("dl", { class: "fields", id: "fields" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", { "data-field": k }, v)]));
}

const typed = new Map();  // task id -> the resume message being typed on its page
const refused = new Map();  // task id -> the last refusal of an action on its page: shown until the next action

// Why a blocked task waits: for its sub-tasks (it goes on by itself), or for a person (an answer, a resume).
function waitingFor(task) {
  if (task.lifecycle_state !== "blocked" || task.waiting_unknown) return null;
  if ((task.waiting_for || []).length || task.waiting_for_children) return "children";
  return task.state === "suspended" ? "person" : null;  // only a suspended task is resumed (Admission.resume)
}
function lifecycleBadges(task) {
  const why = waitingFor(task);
  return [badge(task.lifecycle_state), why ? " " : null,
    why === "children" ? h("span", { class: "badge children", "data-waiting": why, title: "it goes on by itself when they end" },
      "waiting for sub-tasks") : null,
    why === "person" ? h("span", { class: "badge person", "data-waiting": why, title: "resume it, answering its question if it asked one" },
      "waiting for you") : null];
}

// Whether the lifecycle table has a row from ``from`` on ``event`` (an action the gateway can carry out).
function allows(from, event) {
  const lifecycle = state.machines && state.machines.lifecycle;
  return Boolean(lifecycle && lifecycle.transitions.some((row) => row.from === from && row.event === event));
}

// Only the actions that can succeed: allowed from the task's state by the lifecycle table, by this token's
// scope (approve, suspend, cancel, retry need admin; resume needs submit), and not a resume of a parent that
// waits for its sub-tasks (it resumes by itself). A refusal stays shown across the live redraws.
function actions(task, redraw) {
  if (!canWrite()) return null;
  const id = task.task_id, lifecycle = task.lifecycle_state, why = waitingFor(task);
  const problem = h("span", { class: "error", id: "action-error", role: "alert" }, refused.get(id) || "");
  const act = (verb, body) => async () => {
    refused.delete(id);
    try { await api("POST", `/v1/tasks/${encodeURIComponent(id)}/${verb}`, body || {}); if (state.revive) state.revive(); }
    catch (e) { refused.set(id, `${verb} refused: ${e.message}`); }
    problem.textContent = refused.get(id) || "";
    redraw().catch(() => {});
  };
  // What is typed survives the page's live redraws (a transition arriving while a person types).
  const message = h("input", { id: "resume-message", placeholder: task.question ? "your answer" : "message for the task (optional)",
    oninput: (e) => { typed.set(id, e.target.value); } });
  message.value = typed.get(id) || "";
  const buttons = [];
  if (canAdmin() && allows(lifecycle, "TASK_APPROVED")) buttons.push(h("button", { class: "action", id: "approve", onclick: act("approve") }, "Approve"));
  const machine = state.machines && state.machines[task.machine];
  const active = Boolean(machine && machine.active.includes(task.state));  // TASK_SUSPENDED's rows: from an active state
  if (canAdmin() && lifecycle === "running" && active) buttons.push(h("button", { class: "action", id: "suspend", onclick: act("suspend") }, "Suspend"));
  if (why === "person") {  // suspended, or waiting for the information it asked for
    buttons.push(message, h("button", { class: "action", id: "resume",
      onclick: () => { typed.delete(id); return act("resume", message.value ? { message: message.value } : {})(); } },
      "Resume"));
  }
  if (why === "children") {
    const n = (task.waiting_for || []).length;
    buttons.push(h("span", { class: "muted", id: "waiting-note" },
      `waiting for ${n || "its"} sub-task${n === 1 ? "" : "s"}: it goes on by itself when they end`));
  }
  // a failed task is retried while it has attempts left (the gateway gives the system's max_attempts)
  const spent = task.max_attempts && task.attempts >= task.max_attempts;
  if (canAdmin() && allows(lifecycle, "TASK_RETRIED") && !spent) buttons.push(h("button", { class: "action", id: "retry", onclick: act("retry") }, "Retry"));
  if (canAdmin() && allows(lifecycle, "TASK_RETRIED") && spent) {
    buttons.push(h("span", { class: "muted", id: "no-retry" }, `no retry left: ${task.attempts} of ${task.max_attempts} attempts used`));
  }
  if (canAdmin() && allows(lifecycle, "TASK_CANCELED")) buttons.push(h("button", { class: "action danger", id: "cancel", onclick: act("cancel") }, "Cancel"));
  if (!buttons.length && !problem.textContent) return null;
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
    h("li", { class: t.machine }, h("span", { class: "mono muted" }, localTime(t.timestamp, true, false)), " ",
      `${t.from_state} \u2192 ${t.to_state}`, " ", h("span", { class: "muted" }, t.event || ""),
      t.reason ? h("span", { class: "muted" }, ` (${t.reason})`) : null)));
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

// A member's capabilities as "name value" chips (a nested value as compact JSON); none: said so.
function capabilities(caps) {
  const entries = Object.entries(caps || {});
  if (!entries.length) return h("span", { class: "muted" }, "none advertised");
  return entries.map(([key, value]) => h("span", { class: "chip", title: key }, key.replace(/^pegasus\./, ""), " ",
    h("strong", {}, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value))));
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
      h("td", { class: "capabilities" }, capabilities(m.capabilities))));
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
  // The form is drawn once: the tables' redraws (every 5 s) never wipe what is typed or a refusal shown.
  const tables = h("div", { id: "schedule-tables" });
  const problem = h("p", { class: "error", id: "schedule-error", role: "alert" });  // a refusal, kept until the next try
  main().replaceChildren(h("h1", {}, "Schedules and webhooks"), canAdmin() ? scheduleForm(problem, () => draw().catch(() => {})) : null, tables);
  const draw = async () => {
    const part = async (path, build) => {
      try { return build(await get(path)); }
      catch (e) { return h("p", { class: "muted" }, [404, 501].includes(e.status) ? "not offered by this system" : e.message); }
    };
    const list = (data, key) => (Array.isArray(data) ? data : data[key] || []);
    const control = (sc, verb, label) => h("button", { class: "plain", "data-action": verb, onclick: async () => {
      problem.textContent = "";
      try { await api("POST", `/v1/schedules/${encodeURIComponent(sc.name)}/${verb}`); }
      catch (e) { problem.textContent = `${label} ${sc.name} refused: ${e.message}`; }
      draw().catch(() => {});
    } }, label);
    const when = (sc) => sc.cron ? `${sc.cron} (${sc.tz || "UTC"})` : (sc.every_s ? `every ${sc.every_s} s` : "");
    const schedules = await part("/v1/schedules", (data) => h("table", { id: "schedules" },
      h("thead", {}, h("tr", {}, ["name", "when", "text", "next", "fired", "skipped", "last task", "overlap", "", ""]
        .map((c) => h("th", {}, c)))),
      h("tbody", {}, list(data, "schedules").map((sc) => h("tr", { "data-schedule": sc.name },
        h("td", {}, sc.name), h("td", { class: "mono" }, when(sc)), h("td", {}, clip(sc.text, 60)),
        // a quarantined one (a stored value the supervisor could not follow): its error where its next time would be
        h("td", sc.quarantined ? { class: "quarantine" } : {}, sc.quarantined ? clip(sc.quarantined, 160) : (sc.next_time ? localTime(sc.next_time) : "-")),
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
    tables.replaceChildren(h("div", { class: "card" }, h("h2", {}, "Schedules"), schedules),
      h("div", { class: "card" }, h("h2", {}, "Webhooks"), webhooks));
  };
  await draw();
  state.timers.push(setInterval(() => draw().catch(() => {}), 5000));
}

// A new schedule, through POST /v1/schedules (its checks are the CLI's): a refusal is shown until the next try.
function scheduleForm(problem, done) {
  const field = (id, attrs) => h("input", { id, ...attrs });
  const name = field("schedule-name", { required: true, maxlength: 64, placeholder: "name", size: 12 });
  const text = field("schedule-text", { required: true, placeholder: "what each run should do", size: 28 });
  const kind = h("select", { id: "schedule-kind" }, h("option", { value: "every" }, "every"), h("option", { value: "cron" }, "cron"));
  const rule = field("schedule-rule", { required: true, placeholder: "1h, 30m, 90s", size: 14 });
  kind.addEventListener("change", () => { rule.placeholder = kind.value === "cron" ? "0 9 * * 1-5" : "1h, 30m, 90s"; });
  const zone = field("schedule-tz", { size: 16, value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC",
    title: "the time zone of a cron rule (IANA name)" });
  const overlap = h("select", { id: "schedule-overlap", title: "when the previous run still runs" },
    ["skip", "buffer_one", "allow_all", "cancel_other"].map((o) => h("option", { value: o }, o)));
  const added = h("p", { class: "muted", id: "schedule-added" });
  return h("form", { class: "card", id: "schedule-form", onsubmit: async (event) => {
    event.preventDefault();
    const body = { name: name.value.trim(), text: text.value, overlap: overlap.value };
    if (kind.value === "cron") { body.cron = rule.value.trim(); body.tz = zone.value.trim() || "UTC"; }
    else body.every = /^\d+(\.\d+)?$/.test(rule.value.trim()) ? Number(rule.value.trim()) : rule.value.trim();
    problem.textContent = added.textContent = "";
    try {
      const made = await api("POST", "/v1/schedules", body);
      added.textContent = `added ${made.name || body.name}`;
      name.value = text.value = rule.value = "";
      done();
    } catch (e) { problem.textContent = `not added: ${e.message}`; }
  } }, h("h2", {}, "New schedule"),
  h("div", { class: "actions" }, name, text, kind, rule, zone, overlap, h("button", { class: "action", type: "submit", id: "schedule-add" }, "Add")),
  problem, added);
}

// -- the router ----------------------------------------------------------------------------------------------
function live(up) {
  document.getElementById("live").textContent = up === null ? "" : (up ? "\u25cf live" : "\u25cb reconnecting");
}

function stop() {
  state.revive = null;
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
