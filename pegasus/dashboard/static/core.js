// Pegasus dashboard, the parts every page uses: the page's state, building elements (h, s), times, the
// /v1 API with the token in the Authorization header only, Server-Sent Events over fetch() (EventSource
// cannot send a header), the machines' tables and diagrams, and what this token's scope may do.

// What a refused token does (log out, draw the login page) is the router's: app.js sets it, so that
// this module, which every page imports, imports none of them.
let tokenRefused = () => {};
export function onRefusedToken(handler) { tokenRefused = handler; }

// The header's live mark: a page's stream says whether it is connected.
export function live(up) {
  document.getElementById("live").textContent = up === null ? "" : (up ? "\u25cf live" : "\u25cb reconnecting");
}

export const TOKEN_KEY = "pegasus.token";
export const PAGE = 25;
export const TERMINAL = new Set(["done", "failed", "canceled"]);
export const WRITE_SCOPES = new Set(["submit", "admin"]);
export const ADMIN_SCOPES = new Set(["admin"]);

export const state = { scope: null, name: null, loggedOutBecause: "", machines: null, diagrams: {}, streams: [], timers: [], view: 0, revive: null };
// Each page drawn is a view; an answer that arrives after the person moved on must not draw the old one over it.
export const showing = (view) => view === state.view;

// -- small helpers --------------------------------------------------------------------------------
export function h(tag, attrs, ...children) {
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
// Makes ``nodes`` the children of ``parent``, leaving in place (never detached) those already there: a redraw
// keeps a box being typed in, its focus and a button being pressed. One that had to move gets its focus back.
export function patch(parent, nodes) {
  const focused = document.activeElement, from = focused && focused.selectionStart, to = focused && focused.selectionEnd;
  const keep = new Set(nodes);
  for (const child of [...parent.childNodes]) if (!keep.has(child)) child.remove();
  let at = parent.firstChild;
  for (const node of nodes) {
    if (node === at) at = at.nextSibling;
    else parent.insertBefore(node, at);
  }
  if (focused && focused.isConnected && document.activeElement !== focused) {
    focused.focus();
    if (typeof from === "number") focused.setSelectionRange(from, to);
  }
}
export const svgNS = "http://www.w3.org/2000/svg";
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [key, value] of Object.entries(attrs || {})) el.setAttribute(key, String(value));
  for (const child of children.flat()) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}
export const badge = (text) => h("span", { class: `badge ${text || ""}` }, text ?? "-");
export const short = (id) => String(id || "").slice(0, 8);
export const clip = (text, n = 90) => { const t = String(text ?? ""); return t.length > n ? t.slice(0, n - 1) + "\u2026" : t; };
export const main = () => document.getElementById("main");
export function age(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (!isFinite(seconds)) return "-";
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.floor(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d`;
}
// A time in the browser's own time zone: "2026-05-01 14:03:07" (".123" with ms), its UTC form on hover.
export function localTime(when, ms = false, day = true) {
  const date = typeof when === "number" ? new Date(when * 1000) : new Date(when);
  if (when === null || when === undefined || when === "" || isNaN(date)) return String(when ?? "-");
  const p = (n, w = 2) => String(n).padStart(w, "0");
  const text = (day ? `${date.getFullYear()}-${p(date.getMonth() + 1)}-${p(date.getDate())} ` : "") + `${p(date.getHours())}:${p(date.getMinutes())}:` +
    `${p(date.getSeconds())}${ms ? "." + p(date.getMilliseconds(), 3) : ""}`;
  return h("time", { datetime: date.toISOString(), title: date.toISOString() }, text);
}
export function debounce(fn, ms) {
  let timer = null;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
}
export function throttle(fn, ms) {
  let timer = null, again = false;
  return () => {
    if (timer) { again = true; return; }
    fn();
    timer = setTimeout(function tick() { timer = null; if (again) { again = false; fn(); timer = setTimeout(tick, ms); } }, ms);
  };
}

// -- the API ------------------------------------------------------------------------------------------
export const token = () => sessionStorage.getItem(TOKEN_KEY);

export class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token()}`, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const error = (data && data.error) || {};
    if (res.status === 401 && path !== "/v1/token") tokenRefused("The token was refused: log in again.");
    throw new ApiError(res.status, error.code || String(res.status), error.message || res.statusText);
  }
  return data;
}
export const get = (path) => api("GET", path);

// Server-Sent Events over fetch: yields {id, event, data} until aborted; reconnects with Last-Event-ID.
export function stream(path, onEvent, onStatus) {
  const control = new AbortController();
  let lastId = null, delay = 500;
  (async () => {
    while (!control.signal.aborted) {
      try {
        const headers = { Authorization: `Bearer ${token()}`, Accept: "text/event-stream" };
        if (lastId) headers["Last-Event-ID"] = lastId;
        const res = await fetch(path, { headers, signal: control.signal });
        if (res.status === 401) { tokenRefused("The token was refused: log in again."); return; }
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

export async function machines() {
  if (!state.machines) {
    const data = await get("/v1/machines");
    const list = Array.isArray(data) ? data : (data.machines || Object.values(data));
    state.machines = Object.fromEntries(list.map((m) => [m.name, m]));
  }
  return state.machines;
}

export async function diagram(name) {
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
export function currentStage(task) {
  if (task.lifecycle_state !== "running") return "";
  const machine = state.machines && state.machines[task.machine];
  const runs = machine && machine.stages && machine.stages[task.state];
  return runs ? (runs.stage || runs) : "";
}

// The stage a running task runs now, for the Gantt chart: its pool and since when (its latest transition into
// its current cognitive state); null when none runs (a stage that ended is in task.stages).
export function runningStage(task, history) {
  const stage = currentStage(task);
  if (!stage) return null;
  const machine = state.machines[task.machine], into = (history.cognitive || []).filter((t) => t.to_state === task.state);
  if (!into.length) return null;
  const started = Date.parse(into[into.length - 1].timestamp) / 1000;
  const ended = (task.stages || []).some((st) => st.stage === stage && st.started >= started);
  return ended || !isFinite(started) ? null : { stage, pool: machine.stages[task.state].pool || "", started };
}

export const canWrite = () => WRITE_SCOPES.has(state.scope);
export const canAdmin = () => ADMIN_SCOPES.has(state.scope);
