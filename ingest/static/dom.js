// Building the page safely: every piece of data becomes a text node (textContent), never
// markup: no HTML string is ever parsed anywhere in the dashboard.

/**
 * Create an element. props: `class`, `text` (textContent), `on<event>` (listener),
 * `checked`/`disabled`/`value` (properties), anything else an attribute. Children may be
 * nodes, strings or numbers (as text) or nested arrays; null/false/undefined are skipped.
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "checked" || key === "disabled" || key === "value") el[key] = value;
    else if (key === "href") el.setAttribute("href", internalHref(value));
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  appendAll(el, children);
  return el;
}

/** Append nodes and strings (as text) to `el`. */
export function appendAll(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace every child of `el`. */
export function setChildren(el, ...children) {
  el.replaceChildren();
  appendAll(el, children);
}

/** Only in-page links are ever built from data. */
function internalHref(value) {
  const text = String(value);
  if (!text.startsWith("#/")) throw new Error(`refusing link ${text}`);
  return text;
}

/**
 * What a list shows in place of its rows when its destination filter names no destination
 * of its tenant (`err`: that 404 ApiError; the destination was removed since it was picked,
 * say): the server's detail, and a link per tenant that has a destination of that name
 * (`linkFor(tenant)`: the list filtered by that one). `id` names the note.
 */
export function missingDestinationNote(id, err, linkFor) {
  const others = err.body?.other_tenants ?? [];
  const more = (err.body?.other_tenants_total ?? others.length) - others.length;
  return h("div", { class: "empty", id, role: "status" },
    h("p", {}, `${err.detail}.`),
    others.length === 0 ? h("p", { class: "hint" }, "A removed destination's jobs are listed " +
                                                  "under its removed name (all destinations).")
      : h("p", { "data-col": "other-tenants" }, "Show the one of tenant ",
        others.map((tenant, i) => [i ? ", " : "", h("a", { href: linkFor(tenant) }, tenant)]),
        more > 0 ? ` and ${more} more` : "", "."));
}

/** A link to a job's page. */
export const jobLink = (id) => h("a", { href: `#/jobs/${Number(id)}` }, `#${Number(id)}`);

export function fmtDuration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const s = Math.max(0, seconds);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${s.toFixed(s < 10 ? 1 : 0)} s`;
  if (s < 3600) return `${(s / 60).toFixed(s < 600 ? 1 : 0)} min`;
  if (s < 86400) return `${(s / 3600).toFixed(1)} h`;
  return `${(s / 86400).toFixed(1)} d`;
}

export const nowS = () => Date.now() / 1000;

/** "4.2 min ago" for a past unix time in seconds, "in 40 min" for a future one, "–" for none. */
export function fmtAgo(unixS) {
  if (unixS === null || unixS === undefined) return "–";
  const delta = unixS - nowS();
  return delta > 0.5 ? `in ${fmtDuration(delta)}` : `${fmtDuration(-delta)} ago`;
}

/** When a pending job runs: "due now" once its time has come, else "in 40 min". */
export function fmtDue(unixS) {
  if (unixS === null || unixS === undefined) return "–";
  const delta = unixS - nowS();
  return delta <= 0 ? "due now" : `in ${fmtDuration(delta)}`;
}

export const fmtTime = (unixS) =>
  unixS === null || unixS === undefined ? "–" : new Date(unixS * 1000).toLocaleString();

/** A relative time with the absolute one as its tooltip. */
export const when = (unixS) => h("span", { title: fmtTime(unixS) }, fmtAgo(unixS));

/** A pending job's run time ("due now", "in 40 min") with the absolute one as its tooltip. */
export const due = (unixS) => h("span", { title: fmtTime(unixS) }, fmtDue(unixS));

/** "98.5 %" for a fraction, "–" when there is nothing to divide. */
export const fmtPercent = (part, whole) =>
  whole > 0 ? `${(Math.floor((1000 * part) / whole) / 10).toFixed(1)} %` : "–";

export function fmtBytes(bytes) {
  if (bytes === null || bytes === undefined) return "n/a";
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/**
 * A destination URL to show: its password (`https://user:PASSWORD@host/`) as `***`, the
 * user name kept, the rest verbatim (shared/db_url.py redact_url does the same for the CLI,
 * which also hides a `password=` query parameter). Only for display: the edit form keeps
 * the real URL, which it sends back whole.
 */
export function fmtUrl(url) {
  const text = String(url ?? "");
  const slashes = text.indexOf("//");
  if (slashes < 0) return text;
  const start = slashes + 2;
  const ends = ["/", "?", "#"].map((c) => text.indexOf(c, start)).filter((i) => i >= 0);
  const end = ends.length ? Math.min(...ends) : text.length;
  const authority = text.slice(start, end);
  const at = authority.lastIndexOf("@");
  const userinfo = at < 0 ? "" : authority.slice(0, at);
  if (at < 0 || !userinfo.includes(":")) return text;
  const user = userinfo.slice(0, userinfo.indexOf(":"));
  return `${text.slice(0, start)}${user}:***@${authority.slice(at + 1)}${text.slice(end)}`;
}

/** The address `#/PAGE?...` of a dashboard page with these query values (empty ones left
 * out; `#/PAGE` when none is left). */
export function pageHash(page, values) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value) query.set(key, value);
  const text = query.toString();
  return text ? `#/${page}?${text}` : `#/${page}`;
}

export const fmtCount = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString());

/** A table with a header row; `rows` are arrays of cells (nodes or text). */
export function table(headers, rows, props = {}) {
  return h("table", props,
    h("thead", {}, h("tr", {}, headers.map((text) => h("th", { scope: "col" }, text)))),
    h("tbody", {}, rows));
}

/** A short-lived message at the bottom of the page. */
export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  const item = h("div", { class: `toast-item ${kind}` }, message);
  box.append(item);
  setTimeout(() => item.remove(), 6000);
}
