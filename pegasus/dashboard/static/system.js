// Pegasus dashboard, the system's pages: pools and members, and schedules (created from the page) and
// webhooks.

import { state, showing, h, badge, short, clip, main, localTime, api, get, canAdmin } from "./core.js";

// A member's capabilities as "name value" chips (a nested value as compact JSON); none: said so.
export function capabilities(caps) {
  const entries = Object.entries(caps || {});
  if (!entries.length) return h("span", { class: "muted" }, "none advertised");
  return entries.map(([key, value]) => h("span", { class: "chip", title: key }, key.replace(/^pegasus\./, ""), " ",
    h("strong", {}, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value))));
}

// -- pools and members -----------------------------------------------------------------------------------
export async function poolsPage() {
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
export async function schedulesPage() {
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
export function scheduleForm(problem, done) {
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
