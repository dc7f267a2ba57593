// Pegasus dashboard, a task's page: its fields and the actions that can succeed, its machines' diagrams
// lit, its stages as a Gantt chart (charts.js), its transitions, plan, memories, sub-tasks and log.

import { state, showing, h, badge, short, clip, main, patch, localTime, throttle, api, get, stream, machines, diagram, currentStage, runningStage, canWrite, canAdmin, live } from "./core.js";
import { gantt } from "./charts.js";

export async function taskPage(id) {
  const view = state.view;
  main().replaceChildren(h("p", { class: "muted" }, "loading\u2026"));
  const ms = await machines().catch(() => ({}));
  // Drawn once and kept in place by each redraw (patch): the log (what it read stays), the card of the
  // fields and actions (what is typed, the focus, a button being pressed, a refusal).
  const log = taskLog(id), summary = h("div", { class: "card", id: "summary" });
  let asked = 0, drawn = 0;  // an answer older than the one drawn is dropped
  const draw = async () => {
    const mine = ++asked;
    const [task, history, known] = await Promise.all([get(`/v1/tasks/${encodeURIComponent(id)}`),
      get(`/v1/tasks/${encodeURIComponent(id)}/history`),
      get(`/v1/tasks/${encodeURIComponent(id)}/context`).catch(() => ({}))]);
    if (mine < drawn) return;
    const context = known.context || {};
    const chart = h("div", { class: "card", id: "gantt" });
    const content = [
      h("h1", {}, "Task ", h("span", { class: "mono" }, task.task_id)),
      summary,
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
    if (!showing(view) || mine < drawn) return;
    drawn = mine;
    shown = { task, history };
    patch(summary, [fields(task), bar(task)].filter(Boolean));
    patch(main(), content.filter(Boolean));
    drawGantt();
  };
  const bar = actionBar(id, draw);
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
  // The stream ends with the task; a retry, resume or approval from this page starts a new one (state.revive),
  // even while the old one is open: that one may have found the task over before the action and not yet said so.
  let following = null;
  const follow = () => {
    const mine = stream(`/v1/tasks/${encodeURIComponent(id)}/events`,
      throttle(() => { draw().catch(() => {}); log.read(); }, 300), (up) => { if (following === mine) live(up); });
    following = mine;
  };
  follow();
  state.revive = () => { following.abort(); follow(); };
  log.read();
  state.timers.push(setInterval(() => { if (!log.finished()) log.read(); }, 2000));  // what no transition announces
  void ms;
}

// The task's log (GET /v1/tasks/{id}/logs, as pegasus logs): each answer's entries appended, asked again from
// its "next" while the task goes on; one read at a time.
export function taskLog(id) {
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

export function fields(task) {
  const rows = [["lifecycle", lifecycleBadges(task)], ["state", badge(task.state)], ["stage", currentStage(task) || "-"],
    ["machine", task.machine], ["priority", task.priority], ["source", task.source], ["created", localTime(task.created_at)],
    ["input", task.input]];
  if (task.tier) rows.splice(4, 0, ["tier", task.tier]);  // its own model tier (submit --tier), after its machine
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

export const typed = new Map();  // task id -> the resume message being typed on its page
export const refused = new Map();  // task id -> the last refusal of an action on its page: shown until the next action

// Why a blocked task waits: for its sub-tasks (it goes on by itself), or for a person (an answer, a resume).
export function waitingFor(task) {
  if (task.lifecycle_state !== "blocked" || task.waiting_unknown) return null;
  if ((task.waiting_for || []).length || task.waiting_for_children) return "children";
  return task.state === "suspended" ? "person" : null;  // only a suspended task is resumed (Admission.resume)
}
export function lifecycleBadges(task) {
  const why = waitingFor(task);
  return [badge(task.lifecycle_state), why ? " " : null,
    why === "children" ? h("span", { class: "badge children", "data-waiting": why, title: "it goes on by itself when they end" },
      "waiting for sub-tasks") : null,
    why === "person" ? h("span", { class: "badge person", "data-waiting": why, title: "resume it, answering its question if it asked one" },
      "waiting for you") : null];
}

// Whether the lifecycle table has a row from ``from`` on ``event`` (an action the gateway can carry out).
export function allows(from, event) {
  const lifecycle = state.machines && state.machines.lifecycle;
  return Boolean(lifecycle && lifecycle.transitions.some((row) => row.from === from && row.event === event));
}

// Only the actions that can succeed: allowed from the task's state by the lifecycle table, by this token's
// scope (approve, suspend, cancel, retry need admin; resume needs submit), and not a resume of a parent that
// waits for its sub-tasks (it resumes by itself). Each is a button ({id, label}) or a note ({id, note}).
export function offered(task) {
  const lifecycle = task.lifecycle_state, why = waitingFor(task), offers = [];
  if (canAdmin() && allows(lifecycle, "TASK_APPROVED")) offers.push({ id: "approve", label: "Approve" });
  const machine = state.machines && state.machines[task.machine];
  const active = Boolean(machine && machine.active.includes(task.state));  // TASK_SUSPENDED's rows: from an active state
  if (canAdmin() && lifecycle === "running" && active) offers.push({ id: "suspend", label: "Suspend" });
  if (why === "person") offers.push({ id: "resume", label: "Resume" });  // suspended, or waiting for the information it asked for
  if (why === "children") {
    const n = (task.waiting_for || []).length;
    offers.push({ id: "waiting-note", note: `waiting for ${n || "its"} sub-task${n === 1 ? "" : "s"}: it goes on by itself when they end` });
  }
  // a failed task is retried while it has attempts left (the gateway gives the system's max_attempts)
  const spent = task.max_attempts && task.attempts >= task.max_attempts;
  if (canAdmin() && allows(lifecycle, "TASK_RETRIED") && !spent) offers.push({ id: "retry", label: "Retry" });
  if (canAdmin() && allows(lifecycle, "TASK_RETRIED") && spent) {
    offers.push({ id: "no-retry", note: `no retry left: ${task.attempts} of ${task.max_attempts} attempts used` });
  }
  if (canAdmin() && allows(lifecycle, "TASK_CANCELED")) offers.push({ id: "cancel", label: "Cancel" });
  return offers;
}

// A task page's action bar: ``bar(task)`` is the bar for the task as read now, the same element while the
// same actions are offered, so a live redraw never takes the message being typed, the focus or a press on a
// button. A refusal stays shown until the next action; a refused message stays in its box to be mended.
export function actionBar(id, redraw) {
  const problem = h("span", { class: "error", id: "action-error", role: "alert" });
  const message = h("input", { id: "resume-message", oninput: () => { typed.set(id, message.value); } });
  message.value = typed.get(id) || "";  // what was typed before the person left the page
  const act = (verb) => async () => {
    const body = verb === "resume" && message.value ? { message: message.value } : {};
    refused.delete(id);
    problem.textContent = "";
    try {
      await api("POST", `/v1/tasks/${encodeURIComponent(id)}/${verb}`, body);
      if (verb === "resume") { typed.delete(id); message.value = ""; }
      if (state.revive) state.revive();
    } catch (e) { refused.set(id, `${verb} refused: ${e.message}`); }
    problem.textContent = refused.get(id) || "";
    redraw().catch(() => {});
  };
  const shown = (offer) => offer.note ? [h("span", { class: "muted", id: offer.id }, offer.note)]
    : [offer.id === "resume" ? message : null,
      h("button", { class: `action${offer.id === "cancel" ? " danger" : ""}`, id: offer.id, onclick: act(offer.id) }, offer.label)];
  let drawn = null, bar = null;
  return (task) => {
    if (!canWrite()) return null;
    const offers = offered(task), key = JSON.stringify(offers);
    message.placeholder = task.question ? "your answer" : "message for the task (optional)";
    problem.textContent = refused.get(id) || "";
    if (key !== drawn) {
      drawn = key;
      bar = h("div", { class: "actions", id: "actions" }, offers.flatMap(shown), problem);
    }
    return offers.length || problem.textContent ? bar : null;
  };
}

// The machine's diagram with the current state lit and the path taken (the latest run's transitions).
export async function lit(machine, current, transitions, kind) {
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

export function timeline(history) {
  const items = [
    ...(history.lifecycle || []).map((t) => ({ ...t, machine: "lifecycle", event: t.trigger_event_type })),
    ...(history.cognitive || []).map((t) => ({ ...t, machine: "cognitive" })),
  ].sort((a, b) => String(a.timestamp).localeCompare(String(b.timestamp)));
  return h("ul", { class: "timeline", id: "timeline" }, items.map((t) =>
    h("li", { class: t.machine }, h("span", { class: "mono muted" }, localTime(t.timestamp, true, false)), " ",
      `${t.from_state} \u2192 ${t.to_state}`, " ", h("span", { class: "muted" }, t.event || ""),
      t.reason ? h("span", { class: "muted" }, ` (${t.reason})`) : null)));
}

export function plan(context) {
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
export function memories(task, context) {
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

export function children(task) {
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
