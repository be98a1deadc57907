// Deliveries (jobs): the tenant's list, filtered by endpoint and status, and one delivery with
// every attempt (status, duration, the receiver's answer as an excerpt), the payload it was
// sent, and Resend for a token that may resend. Response bodies and payloads are untrusted
// text: shown as text only.

import { confirmPanel } from "/static/forms.js";
import { due, fmtDuration, h, setChildren, table, toast, when } from "/static/dom.js";
import { BODY_BYTES, payloadNote, payloadText } from "/static/payload.js";
import { ApiError, get, isMissingDestination, listOf, post, seg } from "./tenant_api.js";

const STATUSES = ["", "pending", "running", "done", "dead"];
const LIST_LIMIT = 100;

const badge = (status) => h("span", { class: `badge status-${status}` }, status);
const jobLink = (id) => h("a", { href: `#/jobs/${Number(id)}` }, `#${Number(id)}`);

/** A table of jobs (newest first, as the API answers them). */
export function jobsTable(jobs, { showDestination = true } = {}) {
  if (jobs.length === 0) return h("p", { class: "empty" }, "No deliveries yet.");
  return table(
    ["Delivery", "Event type", showDestination ? "Endpoint" : null, "Status", "Attempts",
     "Created", "Last error"].filter(Boolean),
    jobs.map((j) => h("tr", { "data-job": j.id },
      h("td", {}, jobLink(j.id)),
      h("td", {}, j.event_type ?? ""),
      showDestination ? h("td", {}, j.destination ?? "") : null,
      h("td", { "data-col": "status" }, badge(j.status)),
      h("td", { class: "num" }, String(j.attempts ?? 0)),
      h("td", {}, when(j.created_at)),
      h("td", { class: "reason", "data-col": "last_error" }, j.last_error ?? ""))),
    { class: "grid-table", id: "jobs" });
}

/** The deliveries page (`#/deliveries?destination=&status=`). */
export function deliveriesView({ params }) {
  const destination = h("input", { id: "filter-destination", name: "destination",
                                   value: params.get("destination") ?? "", size: 16,
                                   placeholder: "all endpoints" });
  const status = h("select", { id: "filter-status", name: "status" },
    STATUSES.map((s) => h("option", { value: s }, s || "any status")));
  status.value = params.get("status") ?? "";
  const body = h("div", { id: "deliveries" });
  const apply = (e) => {
    e.preventDefault();
    const query = new URLSearchParams();
    if (destination.value.trim()) query.set("destination", destination.value.trim());
    if (status.value) query.set("status", status.value);
    location.hash = `#/deliveries?${query}`;
  };
  const root = h("section", {},
    h("h1", {}, "Deliveries"),
    h("form", { class: "toolbar", id: "deliveries-filter", onsubmit: apply },
      destination, status, h("button", { type: "submit" }, "Filter")),
    body);

  async function refresh() {
    const query = new URLSearchParams({ limit: String(LIST_LIMIT) });
    if (params.get("destination")) query.set("destination", params.get("destination"));
    if (params.get("status")) query.set("status", params.get("status"));
    let answer;
    try {
      answer = await get(`/v1/tenant/jobs?${query}`);
    } catch (err) {  // the filter names none of the tenant's endpoints: say so, list nothing
      if (!isMissingDestination(err)) throw err;
      setChildren(body, h("p", { class: "empty", id: "no-endpoint" },
        `No endpoint named ${params.get("destination")}.`));
      return;
    }
    setChildren(body, jobsTable(listOf(answer, "jobs")));
  }

  return { title: "Deliveries", root, refresh };
}

/** "#" of an attempt: its number, and its run once the job was resent (each resend numbers
 * its attempts from 1 again). */
function attemptLabel(a, resent) {
  return resent ? `${a.run} / ${a.attempt}` : String(a.attempt ?? "");
}

function attemptsTable(attempts) {
  if (attempts.length === 0) return h("p", { class: "empty" }, "No attempt yet.");
  const resent = attempts.some((a) => (a.run ?? 1) > 1);
  return table([resent ? "Run / #" : "#", "Started", "Duration", "Answer", "Response (excerpt)"],
    attempts.map((a) => h("tr", { "data-attempt": a.attempt },
      h("td", { class: "num" }, attemptLabel(a, resent)),
      h("td", {}, when(a.started_at)),
      h("td", { class: "num" }, fmtDuration(a.duration_s)),
      h("td", { "data-col": "answer", class: a.status_code >= 200 && a.status_code < 300
        ? "" : "bad-text" },
        a.status_code ? `HTTP ${a.status_code}` : (a.error ?? "no answer")),
      h("td", {}, h("code", { class: "excerpt", "data-col": "response" },
        a.response_excerpt ?? "")))),
    { class: "grid-table", id: "attempts" });
}

/** One delivery (`#/jobs/ID`) with its attempts. */
export function jobView({ arg, can, refreshNow }) {
  const id = Number(arg);
  const facts = h("dl", { class: "facts", id: "job-facts" });
  const confirmBox = h("div", { class: "confirm", id: "job-confirm", hidden: true });
  const attempts = h("div", { id: "job-attempts" });
  const note = h("p", { class: "hint", id: "payload-note" });
  const payload = h("pre", { class: "payload", id: "payload" });
  let event = null;  // the payload's answer, read again only once retention purges it
  const resend = can("resend") ? h("button", { type: "button", "data-action": "resend",
                                               onclick: () => askResend() }, "Resend") : null;
  const root = h("section", {}, h("p", {}, h("a", { href: "#/deliveries" }, "← Deliveries")),
    h("div", { class: "toolbar" }, h("h1", {}, `Delivery #${id}`), resend),
    facts, confirmBox, h("h2", {}, "Attempts"), attempts,
    h("h2", {}, "Payload"), note, payload);

  function askResend() {
    confirmPanel(confirmBox, {
      id: "resend",
      text: `Send delivery #${id} again? Your endpoint may receive the event a second time ` +
            "(same webhook-id: deduplicate by it).",
      action: "Resend",
      run: async () => {
        await post(`/v1/tenant/jobs/${id}/resend`, {});
        toast(`Delivery #${id} queued again`);
        await refreshNow();
      },
    });
  }

  async function refresh() {
    let job;
    try {
      job = await get(`/v1/tenant/jobs/${id}`);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      setChildren(root, h("p", { class: "empty", id: "not-found" }, `No delivery #${id}.`));
      return;
    }
    const item = (label, value, col) => [h("dt", {}, label), h("dd", { "data-col": col }, value)];
    setChildren(facts,
      item("Endpoint", job.destination
        ? h("a", { href: `#/destinations/${seg(job.destination)}` }, job.destination) : "",
        "destination"),
      item("Event type", job.event_type ?? "", "event_type"),
      item("Webhook id", job.message_id ?? "", "message_id"),
      item("Status", badge(job.status), "status"),
      job.status === "pending" ? item("Next attempt", due(job.run_at), "run_at") : null,
      item("Created", when(job.created_at), "created_at"),
      item("Last error", job.last_error ?? "–", "last_error"));
    setChildren(attempts, attemptsTable(listOf(job.attempts, "attempts")));
    if (event === null || event.body_purged_at !== (job.body_purged_at ?? null)) {
      event = await get(`/v1/tenant/jobs/${id}/event?max_bytes=${BODY_BYTES}`);
      note.textContent = payloadNote(event);
      payload.textContent = payloadText(event, true) ?? "";
    }
  }

  return { title: `Delivery #${id}`, root, refresh };
}
