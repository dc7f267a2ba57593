// Pegasus dashboard, the tasks page: the counts, the queue, the submit form, and the list (searched and
// paged by the server, sub-tasks nested under their parents), kept live from /v1/events.

import { PAGE, state, h, badge, short, clip, main, patch, age, localTime, debounce, throttle, api, get, stream, machines, currentStage, canWrite, live } from "./core.js";
import { waitingFor, lifecycleBadges } from "./task.js";

export async function tasksPage(params) {
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
    restart({ searched: true });
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

  // A row whose task did not change is kept, not drawn again: a click on it begun before a redraw is not lost.
  const drawnRows = new Map();  // task id -> [what its row shows, the row]
  function row(task, depth) {
    const key = JSON.stringify([task, depth]), had = drawnRows.get(task.task_id);
    if (had && had[0] === key) return had[1];
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
    drawnRows.set(task.task_id, [key, tr]);
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
    const rows = nested(tasks);
    for (const id of drawnRows.keys()) if (!view.rows.has(id)) drawnRows.delete(id);
    patch(body, rows.length ? rows : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "no tasks"))]);
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
  // The counts and the queue are drawn again only when they change (a click on them is not lost to a redraw).
  let countsShown = null, queueShown = null;
  async function refreshCounts() {
    const stats = await get("/v1/stats");
    const total = Object.values(stats.tasks || {}).reduce((a, b) => a + b, 0);
    const countsNow = JSON.stringify([stats.tasks, view.state]);
    if (countsNow !== countsShown) counts.replaceChildren(
      h("button", { class: view.state ? "" : "selected", "data-state": "", onclick: () => choose("") }, `all ${total}`),
      ...Object.entries(stats.tasks || {}).map(([name, n]) =>
        h("button", { class: view.state === name ? "selected" : "", "data-state": name, onclick: () => choose(name) },
          badge(name), ` ${n}`)));
    countsShown = countsNow;
    const [waiting, drafts] = await Promise.all([get("/v1/tasks?state=queued&limit=10"), get("/v1/tasks?state=draft&limit=10")]);
    const item = (t) => h("li", {}, h("a", { href: `#/task/${t.task_id}` }, short(t.task_id)), " ", clip(t.input, 50),
      " ", h("span", { class: "muted" }, `priority ${t.priority}`));
    // The count is the listing's own total (tasks in the queued state), so it agrees with the tasks listed;
    // stats.queue_length leaves out the queued tasks not yet in the admission queue (a retry's back-off).
    const queued = waiting.tasks || [], more = (waiting.total ?? queued.length) - queued.length;
    const queueNow = JSON.stringify([waiting, drafts, stats.active, stats.max_active_tasks]);
    if (queueNow === queueShown) return;
    queueShown = queueNow;
    queue.replaceChildren(
      h("p", { id: "queue-summary" }, h("span", { id: "queued-count" }, `${waiting.total ?? queued.length} queued`),
        `, ${stats.active ?? 0} running of ${stats.max_active_tasks ?? "?"} at most`),
      h("ul", { id: "queued" }, ...queued.map(item)), h("p", { class: "muted" }, more > 0 ? `and ${more} more` : ""),
      h("h2", {}, "Waiting for approval"),
      (drafts.tasks || []).length ? h("ul", { id: "drafts" }, ...drafts.tasks.map(item)) : h("p", { class: "muted" }, "none"));
  }
  function choose(name) { view.state = name; stateSelect.value = name; restart(); }
  // A new filter hides at once what it excludes, before the server answers (a state is checked here; the
  // rows of an earlier search are dropped, the search being the server's): no row it excludes stays drawn.
  function restart({ searched = false } = {}) {
    view.page = 0; view.cursors = [null];
    if (searched) { view.rows = new Map(); view.total = null; view.refusal = ""; }
    draw();
    load().catch(() => {}); refreshCounts().catch(() => {});
  }
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

export function submitForm(done) {
  const text = h("textarea", { id: "submit-text", rows: 2, placeholder: "what should the task do?", required: true });
  const priority = h("input", { id: "submit-priority", type: "number", min: 0, max: 9, value: 5 });
  // The model tier of every model stage: "default" or a name of [llm.tiers]; empty: each stage's own.
  const tier = h("input", { id: "submit-tier", size: 10, placeholder: "each stage's", title: "model tier (docs/llm.md)" });
  const problem = h("span", { class: "error", id: "submit-error", role: "alert" });
  return h("form", { class: "card", id: "submit", onsubmit: async (event) => {
    event.preventDefault();
    const body = { text: text.value, priority: Number(priority.value) };
    if (tier.value.trim()) body.tier = tier.value.trim();
    try {
      await api("POST", "/v1/tasks", body);
      text.value = ""; problem.textContent = "";
      done();
    } catch (e) { problem.textContent = e.message; }
  } }, h("h2", {}, "Submit a task"), text, h("div", { class: "actions" }, "priority", priority, "tier", tier,
    h("button", { class: "action", type: "submit" }, "Submit"), problem));
}
