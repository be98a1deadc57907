// A job's page: its event (payload pretty-printed, size-limited), every attempt, and the lease
// history. The payload is untrusted: it only ever becomes text (textContent), never markup.

import { ApiError, get, post } from "./api.js";
import { due, fmtBytes, fmtCount, fmtDuration, fmtTime, h, setChildren, table, toast,
         when } from "./dom.js";

const BODY_BYTES = 64 * 1024;

function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value ?? "–")]));
}

/** Pretty JSON when the whole body is there and parses; else the text as stored. */
function payloadText(event, pretty) {
  if (event.body_purged_at !== null) return null;
  if (pretty && !event.truncated) {
    try {
      return JSON.stringify(JSON.parse(event.body), null, 2);
    } catch {
      // not JSON after all: show it as stored
    }
  }
  return event.body;
}

function leaseEnd(attempt, job, isLast) {
  if (attempt.duration_s !== null) {
    const result = attempt.status_code !== null ? `HTTP ${attempt.status_code}` : attempt.error;
    return `released with a result (${result}) after ${fmtDuration(attempt.duration_s)}`;
  }
  if (attempt.error) return attempt.error;  // lease expired (worker lost), handed back, ...
  if (isLast && job.status === "running") return `held; lease until ${fmtTime(job.lease_until)}`;
  return "no result recorded";
}

/** The page of job `arg` (`#/jobs/ID`). Polling stops for good once the job is known not to
 * exist (`view.finished`). */
export function jobView({ arg, refreshNow }) {
  const id = Number.parseInt(arg, 10);
  let pretty = true;
  let event = null;
  const summary = h("div", { id: "job-summary" });
  const payloadNote = h("p", { class: "hint", id: "payload-note" });
  const payload = h("pre", { class: "payload", id: "payload" });
  const toggle = h("button", { type: "button", id: "payload-toggle", onclick: () => {
    pretty = !pretty;
    renderPayload();
  } }, "Show as stored");
  const attempts = h("div", { id: "attempts" });
  const leases = h("div", { id: "leases" });
  const title = h("h1", {}, `Job #${Number.isNaN(id) ? "?" : id}`);
  const root = h("section", { class: "job" }, title, summary,
    h("h2", {}, "Event payload"), h("div", { class: "toolbar" }, payloadNote, toggle), payload,
    h("h2", {}, "Attempts"), attempts,
    h("h2", {}, "Lease history"),
    h("p", { class: "hint" }, "Each claim takes a lease with a fresh token; every write by ",
      "its worker is fenced by that token."),
    leases);

  function renderPayload() {
    if (event === null) return;
    toggle.textContent = pretty ? "Show as stored" : "Pretty-print";
    const text = payloadText(event, pretty);
    if (text === null) {
      payloadNote.textContent = `The body was purged by retention ${fmtTime(event.body_purged_at)}.`;
      payload.textContent = "";
      return;
    }
    payloadNote.textContent = `${event.type}, ${fmtBytes(event.size_bytes)}` +
      (event.truncated ? `; showing the first ${fmtBytes(BODY_BYTES)} as stored` : "") +
      (event.valid_utf8 ? "" : "; bytes that are not UTF-8 are shown as \uFFFD");
    payload.textContent = text;
  }

  /** The buttons for what can be done to the job in its status. */
  function actions(story) {
    return [
      story.status === "dead"
        ? h("button", { type: "button", id: "job-replay", onclick: replay }, "Replay") : null,
    ];
  }

  async function replay() {
    try {
      const dry = await post("/v1/admin/replay", { job_id: id, dry_run: true });
      if (dry.count === 1) {
        await post("/v1/admin/replay", { job_id: id });
        toast(`Job #${id} replayed`);
      }
    } catch (err) {
      toast(err.message, "error");
    }
    await refreshNow();
  }

  async function refresh() {
    if (Number.isNaN(id)) {
      setChildren(summary, h("p", { class: "error", id: "job-missing" }, "Not a job id."));
      view.finished = true;
      return;
    }
    let story;
    try {
      story = await get(`/v1/admin/jobs/${id}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        setChildren(summary, h("p", { class: "error", id: "job-missing" },
          `No job ${id}: no job has this id (or retention has removed it).`));
        view.finished = true;  // it will not appear: stop asking
        return;
      }
      throw err;
    }
    if (event === null || event.body_purged_at !== story.body_purged_at) {
      event = await get(`/v1/admin/jobs/${id}/event?max_bytes=${BODY_BYTES}`);
      renderPayload();
    }
    setChildren(summary,
      h("p", {},
        h("span", { class: `badge status-${story.status}`, id: "job-status" }, story.status),
        actions(story)),
      facts([
        ["Destination", story.destination],
        ["Event", `#${story.event_id} ${story.event_type}`],
        ["webhook-id", story.message_id],
        ["Source / id", `${story.source} / ${story.source_event_id}`],
        ["Received", when(story.received_at)],
        ["Attempts", `${fmtCount(story.attempts.length)} recorded, ` +
                     `${fmtCount(story.replays)} replays`],
        ["Next run", story.status === "pending" ? h("span", { id: "job-next-run" },
          due(story.run_at)) : "–"],
        ["Finished", story.finished_at === null ? "–" : when(story.finished_at)],
        ["Last error", story.last_error],
      ]));
    const rows = story.attempts;
    setChildren(attempts, rows.length === 0 ? h("p", { class: "empty" }, "No attempt yet.") :
      table(["#", "Worker", "Started", "Duration", "Status", "Error", "Response excerpt"],
        rows.map((a) => h("tr", {},
          h("td", { class: "num" }, a.attempt),
          h("td", {}, a.worker),
          h("td", {}, when(a.started_at)),
          h("td", { class: "num" }, fmtDuration(a.duration_s)),
          h("td", { class: "num" }, a.status_code ?? "–"),
          h("td", { class: "error-text" }, a.error ?? (a.location ? `Location: ${a.location}` : "")),
          h("td", {}, a.response_excerpt ? h("code", { class: "excerpt" }, a.response_excerpt) : "–"))),
        { class: "grid-table" }));
    setChildren(leases, rows.length === 0 ? h("p", { class: "empty" }, "Never claimed.") :
      table(["Claim", "Worker", "Lease token", "Taken", "Ended"],
        rows.map((a, i) => h("tr", {},
          h("td", { class: "num" }, i + 1),
          h("td", {}, a.worker),
          h("td", {}, h("code", {}, `${a.lease_token.slice(0, 8)}…`)),
          h("td", {}, when(a.started_at)),
          h("td", {}, leaseEnd(a, story, i === rows.length - 1)))),
        { class: "grid-table" }));
  }

  const view = { title: `Job #${id}`, root, refresh, finished: false };
  return view;
}
