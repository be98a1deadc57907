// One endpoint: its health over the last 24 h, its recent deliveries, and the actions this
// token may use: pause/resume, edit, test delivery, remove (manage_destinations), reveal and
// rotate the secret (view_secret, manage_secret), recover failed deliveries (resend: a
// dry-run count first, then the real resend once confirmed).

import { confirmPanel, field } from "/static/forms.js";
import { fmtCount, fmtDuration, fmtTime, h, setChildren, toast } from "/static/dom.js";
import { jobsTable } from "./deliveries.js";
import { destinationForm } from "./destination_form.js";
import { STATS_WINDOW_S } from "./destinations.js";
import { fmtRate, stateOf, successRate } from "./health.js";
import { secretButtons } from "./secret.js";
import { ApiError, del, get, listOf, post, seg } from "./tenant_api.js";

const RECENT_JOBS = 25;

/** The endpoint page for destination `arg`. */
export function destinationView({ arg: name, can, refreshNow }) {
  const path = `/v1/tenant/destinations/${seg(name)}`;
  const heading = h("h1", {}, name);
  const facts = h("dl", { class: "facts", id: "destination-facts" });
  const actions = h("div", { class: "toolbar", id: "destination-actions" });
  const confirmBox = h("div", { class: "confirm", id: "destination-confirm", hidden: true });
  const shown = h("div", { class: "panel notice", id: "secret-shown", hidden: true });
  const recoverBox = h("div", { class: "panel", id: "recover-panel", hidden: true });
  const jobs = h("div", { id: "destination-jobs" });
  // Built only for a token that may use it: a read-only page holds no action at all.
  const form = can("manage_destinations")
    ? destinationForm({ onCreated: () => {}, onSaved: refreshNow }) : null;
  const root = h("section", {}, h("p", {}, h("a", { href: "#/" }, "← Endpoints")), heading,
    facts, actions, confirmBox, shown, form?.root, recoverBox,
    h("h2", {}, "Recent deliveries"), jobs);
  let latest = null;
  let paused = null;

  async function run(label, action) {
    try {
      await action();
      toast(label);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
    await refreshNow();
  }

  const test = () => run("Test event sent", async () => {
    const out = await post(`${path}/test?wait=false`, {});  // its job page shows the attempts
    const job = out?.job_id ?? out?.jobs?.[0]?.id;
    if (job !== undefined) location.hash = `#/jobs/${Number(job)}`;
  });

  const remove = () => confirmPanel(confirmBox, {
    id: "remove",
    text: `Remove ${name}? It gets no new event; its unfinished deliveries are dropped.`,
    action: `Remove ${name}`,
    run: async () => {
      await del(path);
      toast(`Removed ${name}`);
      location.hash = "#/";
    },
  });

  function openRecover() {
    const since = h("input", { id: "recover-since", name: "since", value: "24h", size: 10 });
    const until = h("input", { id: "recover-until", name: "until", size: 10,
                               placeholder: "now" });
    const error = h("p", { class: "error", role: "alert", id: "recover-error" });
    const span = () => {
      const body = { since: since.value.trim() };
      if (until.value.trim()) body.until = until.value.trim();
      return body;
    };
    const count = async () => {
      error.textContent = "";
      try {
        const out = await post(`${path}/recover`, { ...span(), dry_run: true });
        const n = Number(out.count ?? 0);
        confirmPanel(confirmBox, {
          id: "recover",
          text: `${fmtCount(n)} failed deliver${n === 1 ? "y" : "ies"} of ${name} in this ` +
                "window would be sent again.",
          action: "Resend them",
          run: async () => {
            const done = await post(`${path}/recover`, span());
            const sent = Number(done.count ?? 0);
            toast(`${fmtCount(sent)} deliver${sent === 1 ? "y" : "ies"} of ${name} queued again`);
            recoverBox.hidden = true;
            await refreshNow();
          },
        });
      } catch (err) {
        error.textContent = err.message;
      }
    };
    setChildren(recoverBox, h("h2", {}, "Recover failed deliveries"),
      h("p", { class: "hint", id: "recover-hint" },
        "Sends again the deliveries created in this window that failed for good (out of ",
        "retries, or refused). Deliveries still being retried are not counted: they go out ",
        "on their own."),
      h("div", { class: "form-grid" },
        field("Since", since, "An age (24h, 7d), a date (2026-05-01T10:00Z) or unix seconds."),
        field("Until", until, "Empty: now."),
        h("div", { class: "field" }, h("button", { type: "button", class: "primary",
                                                   id: "recover-count", onclick: count },
          "Count them"))),
      error);
    recoverBox.hidden = false;
  }

  function renderActions(d) {
    const manage = can("manage_destinations");
    setChildren(actions,
      manage ? h("button", { type: "button", "data-action": d.paused ? "resume" : "pause",
                             onclick: () => run(d.paused ? "Resumed" : "Paused", () =>
                               post(`${path}/${d.paused ? "resume" : "pause"}`, {})) },
        d.paused ? "Resume" : "Pause") : null,
      manage ? h("button", { type: "button", "data-action": "edit",
                             onclick: () => form.openEdit(latest) }, "Edit") : null,
      manage ? h("button", { type: "button", "data-action": "test", onclick: test },
        "Send test event") : null,
      can("resend") ? h("button", { type: "button", "data-action": "recover",
                                   onclick: openRecover }, "Recover failed…") : null,
      secretButtons(name, { can, shown, confirmBox }),
      manage ? h("button", { type: "button", class: "danger-text", "data-action": "remove",
                             onclick: remove }, "Remove") : null);
  }

  function renderFacts(d, stats) {
    const state = stateOf(d);
    const item = (label, value, col) => [h("dt", {}, label), h("dd", { "data-col": col }, value)];
    const lastFailure = stats?.last_failure;
    setChildren(facts,
      item("URL", d.url ?? "", "url"),
      item("Event types", (d.event_types ?? []).join(", ") || "*", "event_types"),
      item("Filter", d.filter ? JSON.stringify(d.filter) : "none: every event of these types",
           "filter"),
      item("State", h("span", { class: `badge ${state.cls}`, title: state.title }, state.label),
           "state"),
      item("Success (24 h)", fmtRate(successRate(d, stats)), "success"),
      item("Latency p50 / p99", `${fmtDuration(stats?.p50_s)} / ${fmtDuration(stats?.p99_s)}`,
           "latency"),
      item("Last failure", lastFailure
        ? `${fmtTime(lastFailure.at ?? lastFailure.started_at)}: ` +
          `${lastFailure.error ?? `HTTP ${lastFailure.status_code}`}`
        : "–", "last_failure"));
  }

  async function refresh() {
    let d;
    try {
      d = await get(path);
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 404) throw err;
      setChildren(root, h("p", { class: "empty", id: "not-found" }, `No endpoint ${name}.`));
      return;
    }
    const [stats, jobList] = await Promise.all([
      get(`${path}/stats?window_s=${STATS_WINDOW_S}`).catch(() => null),
      get(`/v1/tenant/jobs?destination=${seg(name)}&limit=${RECENT_JOBS}`).catch((err) => {
        if (err instanceof ApiError && err.status === 404) return null;  // removed just now
        throw err;
      }),
    ]);
    if (jobList === null) {
      setChildren(root, h("p", { class: "empty", id: "not-found" }, `No endpoint ${name}.`));
      return;
    }
    latest = d;
    renderFacts(d, stats);
    if (paused !== Boolean(d.paused)) {  // rebuilt only on a change, so a click never misses
      paused = Boolean(d.paused);
      renderActions(d);
    }
    setChildren(jobs, jobsTable(listOf(jobList, "jobs"), { showDestination: false }));
  }

  return { title: name, root, refresh };
}
