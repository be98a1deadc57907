// A job's page: its event (payload pretty-printed, size-limited), every attempt, the lease
// history, and what can be done to it (replay, resend, retry now). The payload is untrusted:
// it only ever becomes text (textContent), never markup.

import { ApiError, get, post } from "./api.js";
import { due, fmtCount, fmtDue, fmtDuration, fmtTime, h, setChildren, table,
         toast, when } from "./dom.js";
import { BODY_BYTES, payloadNote as noteOf, payloadText } from "./payload.js";

function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.map(([term, value]) => [h("dt", {}, term), h("dd", {}, value ?? "–")]));
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
  const actionPanel = h("div", { class: "panel", id: "job-action", hidden: true });
  const payloadNote = h("p", { class: "hint", id: "payload-note" });
  const payload = h("pre", { class: "payload", id: "payload" });
  const toggle = h("button", { type: "button", id: "payload-toggle", onclick: () => {
    pretty = !pretty;
    renderPayload();
  } }, "Show as stored");
  const attempts = h("div", { id: "attempts" });
  const leases = h("div", { id: "leases" });
  const title = h("h1", {}, `Job #${Number.isNaN(id) ? "?" : id}`);
  const root = h("section", { class: "job" }, title, summary, actionPanel,
    h("h2", {}, "Event payload"), h("div", { class: "toolbar" }, payloadNote, toggle), payload,
    h("h2", {}, "Attempts"), attempts,
    h("h2", {}, "Lease history"),
    h("p", { class: "hint" }, "Each claim takes a lease with a fresh token; every write by ",
      "its worker is fenced by that token."),
    leases);

  function renderPayload() {
    if (event === null) return;
    toggle.textContent = pretty ? "Show as stored" : "Pretty-print";
    payloadNote.textContent = noteOf(event);
    payload.textContent = payloadText(event, pretty) ?? "";
  }

  /** The buttons for what can be done to the job in its status: replay a dead job, resend a
   * finished one, bring a pending one's next attempt forward. */
  function actions(story) {
    return [
      story.status === "dead"
        ? h("button", { type: "button", id: "job-replay", onclick: replay }, "Replay") : null,
      story.status === "done" || story.status === "dead"
        ? h("button", { type: "button", id: "job-resend",
                        onclick: () => openAction("resend", story) }, "Resend") : null,
      story.status === "pending"
        ? h("button", { type: "button", id: "job-retry-now",
                        onclick: () => openAction("retry_now", story) }, "Retry now") : null,
    ];
  }

  /** The resend / retry now panel: what it does, an optional reason, then the answer (or
   * why the server refused). It sits outside the polled summary, so it survives refreshes. */
  function openAction(action, story) {
    const resend = action === "resend";
    const reason = h("input", { id: "job-action-reason", name: "reason", maxlength: 1000,
                                placeholder: "optional, goes to the audit log", size: 40 });
    const result = h("p", { id: "job-action-result", role: "status" });
    const error = h("p", { class: "error", id: "job-action-error", role: "alert" });
    const close = () => {
      actionPanel.hidden = true;
      actionPanel.replaceChildren();
    };
    async function run() {
      if (go.disabled || go.hidden) return;
      go.disabled = true;
      error.textContent = "";
      const body = reason.value.trim() ? { reason: reason.value.trim() } : {};
      try {
        const out = await post(`/v1/admin/jobs/${id}/${resend ? "resend" : "retry-now"}`, body);
        result.textContent = resend
          ? `Resent: job #${id} is pending and due now, a new attempt series.`
          : out.count === 1 ? `Job #${id} is due now: its next attempt goes out at once.`
            : `Job #${id} was already due: nothing changed.`;
        go.hidden = true;
        reason.disabled = true;
        cancel.textContent = "Close";
      } catch (err) {
        error.textContent = `Refused: ${err instanceof ApiError ? err.detail : err.message}`;
        go.disabled = false;
      }
      await refreshNow();
    }
    const go = h("button", { type: "submit", class: "primary", id: "job-action-go" },
                 resend ? `Resend job #${id}` : `Retry job #${id} now`);
    const cancel = h("button", { type: "button", id: "job-action-cancel", onclick: close },
                     "Cancel");
    const text = resend
      ? `Resend job #${id} to ${story.destination} as a new attempt series (pending, due now, ` +
        "a fresh attempt budget). It repeats the same webhook-id " +
        `(${story.message_id}) and the same body bytes, newly signed: a receiver that ` +
        "dedupes on webhook-id ignores it unless it accepts repeats."
      : `Bring job #${id}'s next attempt forward from ${fmtDue(story.run_at)} to now; its ` +
        "attempt count is kept. A paused destination still holds it until resumed.";
    setChildren(actionPanel,
      h("h2", {}, resend ? "Resend" : "Retry now"),
      h("p", { id: "job-action-text" }, text),
      h("form", { class: "toolbar", autocomplete: "off", onsubmit: (event) => {
        event.preventDefault();  // Enter in the reason field runs it too
        run();
      } }, h("label", { for: "job-action-reason" }, "Reason"), reason, go, cancel),
      result, error);
    actionPanel.hidden = false;
    reason.focus();
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
        ["Event", h("a", { href: `#/events/${Number(story.event_id)}` },
          `#${story.event_id} ${story.event_type}`)],
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
    // Each resend numbers its attempts from 1 again: once there is a second run, say which.
    const resent = rows.some((a) => (a.run ?? 1) > 1);
    setChildren(attempts, rows.length === 0 ? h("p", { class: "empty" }, "No attempt yet.") :
      table([resent ? "Run / #" : "#", "Worker", "Started", "Duration", "Status", "Error",
             "Response excerpt"],
        rows.map((a) => h("tr", {},
          h("td", { class: "num" }, resent ? `${a.run} / ${a.attempt}` : a.attempt),
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
          h("td", {}, h("code", {}, `…${a.lease_token.slice(-8)}`)),
          h("td", {}, when(a.started_at)),
          h("td", {}, leaseEnd(a, story, i === rows.length - 1)))),
        { class: "grid-table" }));
  }

  const view = { title: `Job #${id}`, root, refresh, finished: false };
  return view;
}
