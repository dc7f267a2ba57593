// Pegasus dashboard: plain JS modules over the gateway's /v1 API (docs/dashboard.md). This one logs in and
// routes (#/tasks, #/task/ID, #/pools, #/schedules); core.js, tasks.js, task.js and system.js draw.
// The bearer token lives in sessionStorage and goes only in the Authorization header, never in a URL.
// Every text from a task is put in the page as text (textContent), never as HTML.

import { TOKEN_KEY, state, showing, h, main, token, api, onRefusedToken } from "./core.js";
import { tasksPage } from "./tasks.js";
import { taskPage } from "./task.js";
import { poolsPage, schedulesPage } from "./system.js";

// -- login ---------------------------------------------------------------------------------------------
export function logout(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.scope = state.name = state.machines = null;
  state.loggedOutBecause = message;  // the hashchange's render draws the login page after this one
  if (location.hash === "#/login") render(); else location.hash = "#/login";
}

export function loginPage(message) {
  const input = h("input", { type: "password", id: "token", autocomplete: "off", placeholder: "bearer token", required: true });
  const problem = h("p", { class: "error", id: "login-error" }, message || state.loggedOutBecause || "");
  const form = h("form", { class: "card login", id: "login", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    try {
      await identify();
      state.loggedOutBecause = "";
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

export async function identify() {
  const me = await api("GET", "/v1/token");
  state.scope = me.scope;
  state.name = me.name;
}


// -- the router ----------------------------------------------------------------------------------------------
export function stop() {
  state.revive = null;
  for (const control of state.streams.splice(0)) control.abort();
  for (const timer of state.timers.splice(0)) clearInterval(timer);
  document.getElementById("live").textContent = "";
}

export async function render(message) {
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

onRefusedToken(logout);
window.addEventListener("hashchange", () => render());
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("logout").addEventListener("click", () => logout(""));
  render();
});
