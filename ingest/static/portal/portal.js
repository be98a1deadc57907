// The portal shell: take the tenant token, ask GET /v1/tenant who it is and what it may do,
// then route (#/ endpoints, #/destinations/NAME, #/deliveries, #/jobs/ID) and refresh the
// current view every few seconds while the tab is visible. A refused token (expired, revoked,
// invalid) replaces everything with a message naming who to ask for a new link. Actions a
// token cannot use (read-only, a missing capability) are never shown.

import { fmtAgo, fmtTime, setChildren } from "/static/dom.js";
import { deliveriesView, jobView } from "./deliveries.js";
import { destinationView } from "./destination.js";
import { destinationsView } from "./destinations.js";
import { TokenRefused, get, setRefusedHandler, takeToken } from "./tenant_api.js";

const POLL_MS = 3000;
// What a read-only token may do, whatever its capability list says.
const READ_ONLY_CAPABILITIES = new Set(["view", "view_secret"]);
const VIEWS = { "": destinationsView, destinations: destinationView,
                deliveries: deliveriesView, jobs: jobView };

const $ = (id) => document.getElementById(id);
let ownerName = "the service that sent you here";
let session = null;
let current = null;

/** Whether this token may use `capability` (see docs/tenants.md, "Tenant tokens"). */
function can(capability) {
  if (session === null) return false;
  if (session.readOnly && !READ_ONLY_CAPABILITIES.has(capability)) return false;
  return session.capabilities.has(capability);
}

function showNotice(title, text) {
  current = null;
  $("view").hidden = true;
  $("view").replaceChildren();
  $("nav").hidden = true;
  $("expiry").textContent = "";
  $("live").textContent = "";
  $("notice-title").textContent = title;
  $("notice-text").textContent = text;
  $("notice").hidden = false;
}

function refused(err) {
  session = null;
  if (err.expired) {
    showNotice("Link expired", `This link has expired; ask ${ownerName} for a new one.`);
  } else {
    showNotice("Link not valid",
               `This link is not valid (${err.code}); ask ${ownerName} for a new one.`);
  }
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query = ""] = raw.split("?");
  const parts = path.split("/").filter(Boolean);
  const name = Object.hasOwn(VIEWS, parts[0] ?? "") ? (parts[0] ?? "") : "";
  const arg = parts[1] === undefined ? undefined : decodeURIComponent(parts[1]);
  return { name, arg, params: new URLSearchParams(query) };
}

function setLive(ok, message) {
  $("live").className = ok ? "live ok" : "live bad";
  $("live").textContent = ok ? `live · ${new Date().toLocaleTimeString()}` : `error: ${message}`;
  if (session?.expiresAt) {
    $("expiry").textContent =
      `${session.readOnly ? "read-only · " : ""}link expires ${fmtAgo(session.expiresAt)}`;
    $("expiry").title = fmtTime(session.expiresAt);
  }
}

async function tick() {
  const view = current;
  if (view === null || view.busy) return;
  view.busy = true;
  try {
    await view.refresh();
    if (view === current) setLive(true);
  } catch (err) {
    if (!(err instanceof TokenRefused) && view === current) setLive(false, err.message);
  } finally {
    view.busy = false;
  }
}

function route() {
  if (session === null) return;
  const { name, arg, params } = parseHash();
  current = VIEWS[name]({ arg, params, can, refreshNow: tick });
  setChildren($("view"), current.root);
  document.title = `${current.title} · ${session.tenantName}`;
  for (const link of document.querySelectorAll("#nav a")) {
    const active = link.dataset.view === (name === "" || name === "destinations"
      ? "destinations" : "deliveries");
    link.classList.toggle("active", active);
  }
  tick();
}

async function loadSettings() {
  try {
    const resp = await fetch("/portal/settings.json", { cache: "no-store", credentials: "omit" });
    const settings = await resp.json();
    if (typeof settings?.owner_name === "string" && settings.owner_name) {
      ownerName = settings.owner_name;
    }
  } catch {
    // keep the default wording
  }
}

async function start() {
  const token = takeToken();
  await loadSettings();
  if (!token) {
    showNotice("No link", `Open this page with the link you were given; ask ${ownerName} for one.`);
    return;
  }
  let me;
  try {
    me = await get("/v1/tenant");
  } catch (err) {
    if (!(err instanceof TokenRefused)) {
      showNotice("Unavailable", `The webhook service cannot be reached: ${err.message}`);
    }
    return;
  }
  const tenant = me.tenant ?? me;
  session = {
    tenantId: tenant.id,
    tenantName: tenant.name || tenant.id,
    capabilities: new Set(me.capabilities ?? tenant.capabilities ?? ["view"]),
    readOnly: Boolean(me.read_only ?? tenant.read_only),
    expiresAt: me.expires_at ?? tenant.expires_at ?? null,
  };
  $("tenant-name").textContent = session.tenantName;
  $("notice").hidden = true;
  $("nav").hidden = false;
  $("view").hidden = false;
  if (session.readOnly) $("expiry").classList.add("read-only");
  route();
}

setRefusedHandler(refused);
// A new link pasted into this tab carries a new token: start over with it.
window.addEventListener("hashchange", () => (location.hash.includes("token=") ? start() : route()));
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) tick();
});
setInterval(() => {
  if (!document.hidden) tick();
}, POLL_MS);
start();
