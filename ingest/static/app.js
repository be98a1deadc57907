// The dashboard shell: token prompt, hash router (#/, #/destinations, #/tenants, #/event-types, #/sources, #/events,
// #/events/REF, #/dead, #/jobs/ID) and a poll of the current view every 2 s while the tab is visible. A view is
// {title, root, refresh(), finished?}: once it sets `finished`, it is not polled again.

import { AuthError, clearToken, get, getToken, setToken, setUnauthorizedHandler } from "./api.js";
import { deadView } from "./dead.js";
import { destinationsView } from "./destinations.js";
import { setChildren } from "./dom.js";
import { eventTypesView } from "./event_types.js";
import { eventsView } from "./events.js";
import { jobView } from "./job.js";
import { overviewView } from "./overview.js";
import { sourcesView } from "./sources.js";
import { tenantsView } from "./tenants.js";

const POLL_MS = 2000;
const VIEWS = { overview: overviewView, destinations: destinationsView, sources: sourcesView,
                events: eventsView, dead: deadView, jobs: jobView, tenants: tenantsView,
                "event-types": eventTypesView };

const $ = (id) => document.getElementById(id);
let current = null;

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  const name = Object.hasOwn(VIEWS, parts[0] ?? "") ? parts[0] : "overview";
  return { name, arg: parts[1], params: new URLSearchParams(query) };
}

function setLive(ok, message) {
  const live = $("live");
  live.className = ok ? "live ok" : "live bad";
  live.textContent = ok ? `live · ${new Date().toLocaleTimeString()}` : `error: ${message}`;
}

/** Refresh the current view once (skipped while its previous refresh is still running). */
async function tick() {
  const view = current;
  if (view === null || view.busy || view.finished) return;
  view.busy = true;
  try {
    await view.refresh();
    if (view === current) setLive(true);
  } catch (err) {
    if (!(err instanceof AuthError) && view === current) setLive(false, err.message);
  } finally {
    view.busy = false;
  }
}

function showLogin(message = "") {
  current = null;
  $("view").hidden = true;
  $("view").replaceChildren();
  $("sign-out").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
  $("live").textContent = "signed out";
  $("live").className = "live";
  $("token").focus();
}

function route() {
  if (!getToken()) {
    showLogin();
    return;
  }
  $("login").hidden = true;
  $("view").hidden = false;
  $("sign-out").hidden = false;
  const { name, arg, params } = parseHash();
  current = VIEWS[name]({ arg, params, refreshNow: tick });
  setChildren($("view"), current.root);
  document.title = `${current.title} · hookline`;
  for (const link of document.querySelectorAll("#nav a")) {
    link.classList.toggle("active", link.dataset.view === name);
  }
  tick();
}

async function signIn(event) {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) return;
  setToken(token);
  try {
    await get("/v1/admin/stats");
  } catch (err) {
    if (!(err instanceof AuthError)) showLogin(`Cannot reach the admin API: ${err.message}`);
    return;  // a 401 already showed the prompt again, with its message
  }
  $("token").value = "";
  route();
}

function jump(event) {
  event.preventDefault();
  const id = $("jump-id").value.trim();
  if (/^[0-9]+$/.test(id)) location.hash = `#/jobs/${id}`;
}

setUnauthorizedHandler(showLogin);
$("login-form").addEventListener("submit", signIn);
$("jump").addEventListener("submit", jump);
$("sign-out").addEventListener("click", () => {
  clearToken();
  showLogin();
});
window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) tick();
});
setInterval(() => {
  if (!document.hidden) tick();
}, POLL_MS);
route();
