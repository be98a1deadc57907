// Resend or retry now every job of one destination that matches the Events view's filters.
// Nothing happens before a dry run has counted the jobs; the real run is a second click, and
// changing anything in the panel asks for a new dry run.

import { ApiError, post } from "./api.js";
import { fmtCount, h, setChildren } from "./dom.js";

/** What the panel can do: the route, the body's `status`, and the words for it. */
const ACTIONS = {
  "resend": { path: "/v1/admin/resend", status: null, label: "Resend done and dead jobs",
              verb: "resent", button: "Resend" },
  "resend-done": { path: "/v1/admin/resend", status: "done", label: "Resend done jobs",
                   verb: "resent", button: "Resend" },
  "resend-dead": { path: "/v1/admin/resend", status: "dead", label: "Resend dead jobs",
                   verb: "resent", button: "Resend" },
  "retry-now": { path: "/v1/admin/retry-now", status: null, label: "Retry now pending jobs",
                 verb: "made due now", button: "Retry now" },
};
const FOR_STATUS = { pending: "retry-now", done: "resend-done", dead: "resend-dead" };

const plural = (n, word) => `${fmtCount(n)} ${word}${n === 1 ? "" : "s"}`;

/**
 * The bulk panel for `filters` ({destination, status, since, until}: the Events view's, as
 * typed); `onDone` runs after a real run. Returns {root, open}.
 */
export function bulkPanel(filters, onDone) {
  const root = h("div", { class: "panel", id: "bulk", hidden: true });
  const action = h("select", { id: "bulk-action", name: "action", onchange: reset },
    Object.entries(ACTIONS).map(([key, a]) => h("option", { value: key }, a.label)));
  const reason = h("input", { id: "bulk-reason", name: "reason", maxlength: 1000, size: 32,
                              placeholder: "optional, goes to the audit log",
                              oninput: reset });
  const outcome = h("div", { id: "bulk-outcome" });

  function reset() {
    outcome.replaceChildren();
  }

  function body(dryRun) {
    const chosen = ACTIONS[action.value];
    const out = { destination: filters.destination, dry_run: dryRun };
    if (filters.tenant) out.tenant = filters.tenant;  // whose destination (default _default)
    if (chosen.status) out.status = chosen.status;
    if (filters.since) out.since = filters.since;
    if (filters.until) out.until = filters.until;
    if (reason.value.trim()) out.reason = reason.value.trim();
    return out;
  }

  function showError(err) {
    setChildren(outcome, h("p", { class: "error", id: "bulk-error", role: "alert" },
      `Refused: ${err instanceof ApiError ? err.detail : err.message}`));
  }

  async function dryRun() {
    const chosen = ACTIONS[action.value];
    let out;
    try {
      out = await post(chosen.path, body(true));
    } catch (err) {
      showError(err);
      return;
    }
    const go = h("button", { type: "button", class: "primary", id: "bulk-go",
                             disabled: out.count === 0, onclick: () => run(go) },
      out.count === 0 ? "Nothing to do" : `${chosen.button} ${plural(out.count, "job")}`);
    setChildren(outcome,
      h("p", { id: "bulk-count" },
        `Dry run: ${plural(out.count, "job")} of ${filters.destination} would be ` +
        `${chosen.verb}` +
        (out.job_ids.length ? ` (first: ${out.job_ids.map((id) => `#${id}`).join(", ")})` : "") +
        (out.more ? "; more match than one run takes: run it again afterwards." : ".")),
      go);
  }

  async function run(go) {
    const chosen = ACTIONS[action.value];
    go.disabled = true;
    try {
      const out = await post(chosen.path, body(false));
      setChildren(outcome, h("p", { id: "bulk-result", role: "status" },
        `Done: ${plural(out.count, "job")} of ${filters.destination} ${chosen.verb}` +
        (out.more ? "; more match: run it again." : ".")));
    } catch (err) {
      showError(err);
    }
    await onDone();
  }

  function open() {
    action.value = FOR_STATUS[filters.status] ?? "resend";
    reason.value = "";
    reset();
    const range = [filters.since && `since ${filters.since}`, filters.until &&
                   `until ${filters.until}`].filter(Boolean).join(", ");
    setChildren(root,
      h("h2", {}, `Resend / retry now jobs of ${filters.destination}`),
      h("p", { class: "hint" },
        `Jobs of ${filters.destination}${range ? ` whose event was received ${range}` : ""}, ` +
        "oldest first, at most 1,000 per run" +
        (filters.type ? " (the type filter does not apply here)" : "") +
        ". A resend repeats the same webhook-id and body: " +
        "receivers that dedupe on it ignore it unless they accept repeats."),
      h("form", { class: "toolbar", autocomplete: "off", onsubmit: (event) => {
        event.preventDefault();  // Enter in the reason field runs the dry run
        dryRun();
      } },
        h("label", { for: "bulk-action" }, "Action"), action,
        h("label", { for: "bulk-reason" }, "Reason"), reason,
        h("button", { type: "submit", id: "bulk-dry-run" }, "Dry run"),
        h("button", { type: "button", id: "bulk-close", onclick: () => {
          root.hidden = true;
        } }, "Close")),
      outcome);
    root.hidden = false;
  }

  return { root, open };
}
