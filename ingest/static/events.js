// Events (`#/events?tenant=&destination=&status=&type=&since=&until=&before=&limit=`): newest first,
// each with its jobs, filtered and paged by the admin API (`next_before`); a search box for one
// event; and resend / retry now of a destination's matching jobs. The filters live in the
// address, so a filtered page can be linked and reloaded.

import { ApiError, destinationKey, destinationLabel, get, isMissingDestination,
         splitDestinationKey } from "./api.js";
import { bulkPanel } from "./bulk.js";
import { eventView, searchForm, statusBadge } from "./event.js";
import { due, h, jobLink, missingDestinationNote, pageHash, setChildren, table, when }
  from "./dom.js";

const PAGE = 50;
const FILTERS = ["tenant", "destination", "status", "type", "since", "until"];
const STATUSES = ["pending", "running", "done", "dead"];

/** `#/events` lists events; `#/events/REF` shows one. */
export function eventsView(context) {
  return context.arg === undefined ? eventListView(context) : eventView(context);
}

const hashFor = (values) => pageHash("events", values);

function eventListView({ params, refreshNow }) {
  const filters = Object.fromEntries(FILTERS.map((k) => [k, params.get(k) ?? ""]));
  const before = params.get("before") ?? "";
  const limit = Number.parseInt(params.get("limit") ?? "", 10) || PAGE;
  let known = "";

  const inputs = {
    tenant: h("input", { id: "events-tenant", name: "tenant", size: 12,
                         placeholder: "any tenant" }),
    destination: h("select", { id: "events-destination", name: "destination" }),
    status: h("select", { id: "events-status", name: "status" },
      h("option", { value: "" }, "any status"),
      STATUSES.map((s) => h("option", { value: s }, s))),
    type: h("input", { id: "events-type", name: "type", size: 14, placeholder: "any type" }),
    since: h("input", { id: "events-since", name: "since", size: 12, placeholder: "e.g. 2h" }),
    until: h("input", { id: "events-until", name: "until", size: 12, placeholder: "now" }),
  };
  for (const key of FILTERS) inputs[key].value = filters[key];
  const labels = { tenant: "Tenant", destination: "Destination", status: "Job status", type: "Type",
                   since: "Since", until: "Until" };
  const form = h("form", { class: "toolbar", id: "events-filters", autocomplete: "off",
                           "aria-label": "Filter events", onsubmit: (event) => {
    event.preventDefault();
    const values = Object.fromEntries(FILTERS.map((k) => [k, inputs[k].value.trim()]));
    // A destination is its tenant's: picking another tenant's sets the tenant filter too.
    if (values.destination) {
      const [tenant, name] = splitDestinationKey(values.destination);
      values.destination = name;
      if (tenant) values.tenant = tenant;
    }
    location.hash = hashFor({ ...values, limit: limit === PAGE ? "" : limit });
  } },
    FILTERS.map((k) => [h("label", { for: inputs[k].id }, labels[k]), inputs[k]]),
    h("button", { type: "submit", id: "events-apply" }, "Apply"));

  const bulk = bulkPanel(filters, refreshNow);
  const bulkOpen = h("button", { type: "button", id: "bulk-open", disabled: !filters.destination,
                                 title: filters.destination ? null
                                   : "Filter by a destination first", onclick: bulk.open },
    "Resend / retry now matching jobs");
  const newest = h("button", { type: "button", id: "events-newest", disabled: !before,
                               onclick: () => {
    location.hash = hashFor({ ...filters, limit: limit === PAGE ? "" : limit });
  } }, "Newest");
  const older = h("button", { type: "button", id: "events-older", disabled: true }, "Older");
  const pageNote = h("span", { class: "hint", id: "events-page" });
  const list = h("div", { id: "events-list" });
  const root = h("section", {},
    h("div", { class: "toolbar" }, h("h1", {}, "Events"), bulkOpen),
    searchForm(),
    form,
    h("p", { class: "hint" }, "Since and until take an age (2h, 30m), an ISO 8601 time or unix ",
      "seconds; they bound when the event was received. Job status keeps events with a job ",
      "in that status."),
    bulk.root,
    list,
    h("div", { class: "toolbar" }, newest, older, pageNote));

  /** The picker: each destination with its tenant (names repeat across tenants), named
   * "billing" for the default tenant's and "billing (acme)" for another's. */
  function syncDestinations(destinations) {
    const options = destinations.map((d) => [destinationKey(d.tenant, d.name),
      destinationLabel(d.tenant, d.name, filters.tenant)]);
    const chosen = filters.destination ? destinationKey(filters.tenant, filters.destination) : "";
    if (chosen && !options.some(([value]) => value === chosen)) {
      options.push([chosen, filters.destination]);  // a removed one, say: keep the filter shown
    }
    const text = options.map(([value]) => value).join("\n");
    if (text === known) return;  // the poll must not undo a pick that is not applied yet
    // The first fill shows the address's filter; a later one keeps what the picker shows.
    const picked = known === "" ? chosen : inputs.destination.value;
    known = text;
    setChildren(inputs.destination, h("option", { value: "" }, "all destinations"),
      options.map(([value, label]) => h("option", { value }, label)));
    inputs.destination.value = options.some(([value]) => value === picked) ? picked : "";
  }

  function jobLine(job) {
    return h("div", { class: "event-job", "data-job": job.id },
      jobLink(job.id), " ", job.destination, " ", statusBadge(job.status),
      job.next_run_at === null ? null : [" ", due(job.next_run_at)]);
  }

  function row(event) {
    return h("tr", { "data-event": event.id },
      h("td", {}, h("a", { href: `#/events/${Number(event.id)}` }, `#${Number(event.id)}`)),
      // The tenant: its jobs' destination names are that tenant's (names repeat).
      h("td", { "data-col": "tenant" }, event.tenant),
      h("td", {}, when(event.received_at)),
      h("td", {}, event.type),
      h("td", {}, `${event.source} / ${event.source_event_id}`),
      h("td", {}, h("code", {}, event.message_id)),
      h("td", { "data-col": "jobs" },
        event.jobs.length === 0 ? h("span", { class: "hint" }, "no job") : event.jobs.map(jobLine)));
  }

  async function refresh() {
    const query = new URLSearchParams({ limit: String(limit) });
    for (const key of FILTERS) if (filters[key]) query.set(key, filters[key]);
    if (before) query.set("before", before);
    let page;
    let destinations;
    try {
      [destinations, page] = await Promise.all([
        get(filters.tenant ? `/v1/admin/destinations?tenant=${encodeURIComponent(filters.tenant)}`
          : "/v1/admin/destinations"),
        get(`/v1/admin/events?${query}`).catch((err) => {
          if (isMissingDestination(err)) return err;  // shown in place of the list
          throw err;
        })]);
    } catch (err) {
      if (err instanceof ApiError && err.status === 400) {
        setChildren(list, h("p", { class: "error", id: "events-error", role: "alert" },
          `The filters were refused: ${err.detail}`));
        view.finished = true;  // the same filters would be refused again
        return;
      }
      throw err;
    }
    syncDestinations(destinations);
    if (page instanceof ApiError) {  // the filter names no destination of its tenant (any more)
      older.disabled = true;
      pageNote.textContent = "";
      setChildren(list, missingDestinationNote("events-missing", page, (other) =>
        hashFor({ ...filters, tenant: other, before: "", limit: limit === PAGE ? "" : limit })));
      return;
    }
    older.disabled = page.next_before === null;
    older.onclick = () => {
      location.hash = hashFor({ ...filters, before: page.next_before,
                                limit: limit === PAGE ? "" : limit });
    };
    pageNote.textContent = before ? `older than event #${before}` : "newest first";
    setChildren(list, page.events.length === 0
      ? h("p", { class: "empty", id: "events-empty" },
        before ? "No older events match." : "No event matches.")
      : table(["Event", "Tenant", "Received", "Type", "Source / sender's id", "webhook-id", "Jobs"],
        page.events.map(row), { class: "grid-table", id: "events-table" }));
  }

  const view = { title: "Events", root, refresh, finished: false };
  return view;
}
