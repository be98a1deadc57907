// One event (`#/events/REF?source=NAME&tenant=ID`): looked up by its internal id, its
// webhook-id (`msg_...`) or the sender's id (with its source, and its tenant where several
// tenants use that id), with every job it made. A miss says which forms were tried (the admin
// API's 404 detail) and stops polling.

import { ApiError, get, seg } from "./api.js";
import { due, fmtBytes, fmtCount, fmtTime, h, jobLink, setChildren, table, when } from "./dom.js";

const MATCHED_BY = { id: "its internal id", message_id: "its webhook-id",
                     source_event_id: "the sender's id" };

/** `?source=…&tenant=…` of the ones given (empty: none). */
function lookupQuery(source, tenant) {
  const parts = [];
  if (source) parts.push(`source=${seg(source)}`);
  if (tenant) parts.push(`tenant=${seg(tenant)}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

/** The search form: a reference in any of its three forms, an optional source and tenant. */
export function searchForm(ref = "", source = "", tenant = "") {
  const refInput = h("input", { id: "event-ref", name: "ref", value: ref, size: 28,
                                placeholder: "42, msg_…, or the sender's id", required: true });
  const sourceInput = h("input", { id: "event-source", name: "source", value: source, size: 12,
                                   placeholder: "optional" });
  const tenantInput = h("input", { id: "event-tenant", name: "tenant", value: tenant, size: 12,
                                   placeholder: "optional" });
  return h("form", { class: "toolbar", id: "event-search", autocomplete: "off",
                     "aria-label": "Find an event", onsubmit: (event) => {
    event.preventDefault();
    const wanted = refInput.value.trim();
    if (!wanted) return;
    location.hash = `#/events/${seg(wanted)}${lookupQuery(sourceInput.value.trim(),
                                                          tenantInput.value.trim())}`;
  } },
    h("label", { for: "event-ref" }, "Find event"), refInput,
    h("label", { for: "event-source" }, "Source"), sourceInput,
    // Not just "Tenant": the events list's tenant filter sits beside this box.
    h("label", { for: "event-tenant" }, "Find in tenant"), tenantInput,
    h("button", { type: "submit", id: "event-search-go" }, "Find"),
    h("span", { class: "hint" }, "internal id, webhook-id (msg_…) or the sender's id; give ",
      "the source for a sender's id from a provider source (default api), and the tenant ",
      "when several tenants use that id"));
}

/** A job's status as a badge. */
export const statusBadge = (status) => h("span", { class: `badge status-${status}` }, status);

/** The table of an event's jobs. */
export function jobsTable(jobs) {
  if (jobs.length === 0) return h("p", { class: "empty" }, "No job: no destination wanted it.");
  return table(["Job", "Destination", "Status", "Attempts", "Next run", "Last error", "Finished",
                "Replays"],
    jobs.map((j) => h("tr", { "data-job": j.id },
      h("td", {}, jobLink(j.id)),
      h("td", {}, j.destination),
      h("td", { "data-col": "status" }, statusBadge(j.status)),
      h("td", { class: "num" }, fmtCount(j.attempts)),
      h("td", { "data-col": "next_run" }, j.next_run_at === null ? "–" : due(j.next_run_at)),
      h("td", { class: "error-text" }, j.last_error ?? ""),
      h("td", {}, j.finished_at === null ? "–" : when(j.finished_at)),
      h("td", { class: "num" }, fmtCount(j.replays)))),
    { class: "grid-table", id: "event-jobs" });
}

/** A hash segment as typed (percent-decoded when it decodes). */
function decoded(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;  // a stray % typed into the address bar: take it as it is
  }
}

/** The page of the event `ref` names (from `#/events/REF?source=NAME`). */
export function eventView({ arg, params }) {
  const ref = decoded(arg);
  const source = params.get("source") ?? "";
  const tenant = params.get("tenant") ?? "";
  const body = h("div", { id: "event-body" });
  const root = h("section", {},
    h("h1", {}, "Event"),
    searchForm(ref, source, tenant),
    body);

  async function refresh() {
    let event;
    try {
      event = await get(`/v1/admin/events/${seg(ref)}${lookupQuery(source, tenant)}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        setChildren(body, h("p", { class: "error", id: "event-missing" },
          `Nothing matched: ${err.detail}.`));
        view.finished = true;  // it will not appear by asking again
        return;
      }
      throw err;
    }
    setChildren(body,
      h("dl", { class: "facts", id: "event-facts" },
        [["Internal id", `#${event.id}`],
         ["webhook-id", event.message_id],
         // Whose destinations its jobs' names are: every tenant may have a `billing`.
         ["Tenant", event.tenant],
         ["Source / sender's id", `${event.source} / ${event.source_event_id}`],
         ["Type", event.type],
         ["Received", when(event.received_at)],
         ["Body", event.body_stored ? `${fmtBytes(event.body_bytes)}, stored`
           : `purged by retention ${fmtTime(event.body_purged_at)}: its jobs cannot be resent`],
         ["Found by", MATCHED_BY[event.matched_by] ?? event.matched_by],
        ].map(([term, value]) => [h("dt", {}, term), h("dd", {}, value)])),
      h("h2", {}, "Jobs"),
      jobsTable(event.jobs));
  }

  const view = { title: `Event ${ref}`, root, refresh, finished: false };
  return view;
}
