// Destinations: state (active, failing with its streak, paused with the reason), in-flight,
// pending, success rate and attempt latency, "rotating until" during a secret's overlap; add,
// edit, pause, resume, remove, and the secret panel (rotate, reveal, expire the previous one).

import { DEFAULT_TENANT, del, destPath, get, post, seg } from "./api.js";
import { destinationForm } from "./destination_form.js";
import { fmtCount, fmtDuration, fmtPercent, fmtTime, h, nowS, setChildren, table,
         toast } from "./dom.js";
import { confirmPanel, showSecretOnce } from "./forms.js";
import { rotating, secretPanel as secretEditor } from "./secret.js";

const PAUSE_REASON = "paused from the dashboard";
const WINDOW = "15m";

/** The badge: paused (with the reason) over failing (with the streak) over active. The
 * breaker's and a 410's pauses (shared/policy/delivery.py) are marked as failures. */
export function stateOf(d) {
  if (d.paused) {
    const auto = /^circuit breaker|410 Gone/.test(d.paused_reason ?? "");
    return { label: d.paused_reason ? `paused (${d.paused_reason})` : "paused",
             cls: auto ? "bad" : "warn" };
  }
  if (d.failure_streak > 0) {
    return { label: `failing · ${fmtCount(d.failure_streak)} in a row`, cls: "bad",
             title: `every attempt since ${fmtTime(d.failing_since)} failed` };
  }
  return { label: "active", cls: "ok" };
}

/** The destinations page (`#/destinations?tenant=ID` shows one tenant's); every action goes
 * through the admin API, naming the destination's tenant. */
export function destinationsView({ params, refreshNow }) {
  const tenantFilter = params?.get("tenant") ?? "";
  const body = h("div", { id: "destinations" });
  const tenantInput = h("input", { id: "destinations-tenant", name: "tenant", size: 14,
                                   placeholder: "every tenant", value: tenantFilter });
  const filterForm = h("form", { class: "toolbar", id: "destinations-filter",
                                 autocomplete: "off", onsubmit: (e) => {
    e.preventDefault();
    const tenant = tenantInput.value.trim();
    location.hash = tenant ? `#/destinations?tenant=${seg(tenant)}` : "#/destinations";
  } },
    h("label", { for: "destinations-tenant" }, "Tenant"), tenantInput,
    h("button", { type: "submit", id: "destinations-filter-apply" }, "Filter"));
  const secretPanel = h("div", { class: "panel notice", id: "destination-secret", hidden: true });
  const confirmBox = h("div", { class: "confirm", id: "destination-confirm", hidden: true });
  const form = destinationForm({
    onCreated: (d, secret) => {
      if (secret) showSecretOnce(secretPanel, d.name, secret);
    },
    onSaved: refreshNow,
  });
  const secrets = secretEditor({ onChanged: refreshNow });
  const root = h("section", {},
    h("div", { class: "toolbar" },
      h("h1", {}, "Destinations"),
      h("button", { type: "button", class: "primary", id: "add-destination", onclick: () => {
        secretPanel.hidden = true;
        form.openCreate();
      } }, "Add destination")),
    h("p", { class: "hint" },
      "Success and latency: attempts started in the last 15 minutes (nearest-rank ",
      "percentiles of their durations). A paused destination gets no request and its jobs ",
      "wait uncharged."),
    filterForm, secretPanel, form.root, secrets.root, confirmBox, body);

  async function act(d, paused) {
    const name = d.name;
    const path = destPath(name, d.tenant, paused ? "/resume" : "/pause");
    try {
      const answer = await post(path, paused ? {} : { reason: PAUSE_REASON });
      toast(paused ? `${name} resumed; brought forward ${answer.brought_forward} job(s) `
                     + "waiting for a retry" : `${name} paused`);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
    await refreshNow();
  }

  // A test delivery (a signed hookline.ping through the normal path); the answer waits for
  // its first attempt (ingest/destination_checks.py) and the toast says how it went.
  async function sendTest(d) {
    const name = d.name;
    try {
      const out = await post(destPath(name, d.tenant, "/test"), {});
      const a = out.attempt;
      if (!a) toast(`${name}: test sent (job ${out.job_id}), not finished yet: ${out.job_status}`);
      else {
        const got = a.status_code === null ? (a.error ?? a.outcome) : `HTTP ${a.status_code}`;
        toast(`${name}: test ${a.outcome === "delivered" ? "delivered" : "failed"}: ${got} ` +
              `in ${fmtDuration(a.duration_s)}`, a.outcome === "delivered" ? undefined : "error");
      }
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
    await refreshNow();
  }

  async function openSecret(d) {
    const name = d.name;
    try {
      await secrets.open(name, d.tenant);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
  }

  async function edit(d) {
    const name = d.name;
    try {
      await form.openEdit(name, d.tenant);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
  }

  function askRemove(d) {
    confirmPanel(confirmBox, {
      id: "remove",
      text: `Remove ${d.name}? No new event is sent to it. Its unfinished jobs ` +
            `(${fmtCount(d.pending)} pending, ${fmtCount(d.in_flight)} in flight now) end dead ` +
            "with the error \"destination removed\" and cannot be replayed; its finished jobs " +
            "stay listed until retention removes them.",
      action: `Remove ${d.name}`,
      run: async () => {
        const out = await del(destPath(d.name, d.tenant));
        toast(`Removed ${d.name}; ${fmtCount(out.jobs_ended)} unfinished ` +
              `job${out.jobs_ended === 1 ? "" : "s"} ended dead`);
        await refreshNow();
      },
    });
  }

  function row(d, stored) {
    const state = stateOf(d);
    const ofTenant = d.tenant === DEFAULT_TENANT ? "" : `&tenant=${seg(d.tenant)}`;
    const deadCell = d.dead > 0
      ? h("a", { href: `#/dead?destination=${seg(d.name)}${ofTenant}` }, fmtCount(d.dead))
      : "0";
    const rate = d.latency_samples > 0 ? d.delivered_samples / d.latency_samples : null;
    return h("tr", { "data-destination": d.name, "data-tenant": d.tenant },
      h("td", { class: "name" },
        h("a", { href: `#/events?destination=${seg(d.name)}${ofTenant}`, title: "its events" },
          d.name),
        stored?.filter
          ? h("div", { class: "sub", "data-col": "filter",
                       title: "payload filter: only the events it matches are delivered" },
            `filter: ${JSON.stringify(stored.filter)}`)
          : null),
      h("td", { "data-col": "tenant" },
        h("a", { href: `#/tenants?prefix=${seg(d.tenant)}`, title: "the tenant" }, d.tenant)),
      h("td", { "data-col": "state" },
        h("span", { class: `badge ${state.cls}`, title: state.title }, state.label),
        rotating(stored)
          ? h("div", { class: "sub", "data-col": "rotation",
                       title: "the previous secret signs too until then" },
            `rotating until ${fmtTime(stored.previous_secret_until)}`)
          : null),
      h("td", { class: "num", "data-col": "in_flight" }, `${d.in_flight} / ${d.max_in_flight}`),
      h("td", { class: "num", "data-col": "pending" }, fmtCount(d.pending)),
      h("td", { class: "num" },
        d.oldest_pending_at === null ? "–" : fmtDuration(nowS() - d.oldest_pending_at)),
      h("td", { class: "num", "data-col": "dead" }, deadCell),
      h("td", { class: `num ${d.failure_streak > 0 ? "bad-text" : ""}`, "data-col": "streak" },
        fmtCount(d.failure_streak)),
      h("td", { class: `num ${rate !== null && rate < 0.9 ? "bad-text" : ""}`,
                "data-col": "success",
                title: `${d.delivered_samples} of ${d.latency_samples} attempts delivered` },
        fmtPercent(d.delivered_samples, d.latency_samples)),
      h("td", { class: "num", "data-col": "p50" }, fmtDuration(d.p50_s)),
      h("td", { class: "num", "data-col": "p99" }, fmtDuration(d.p99_s)),
      h("td", { class: "actions" },
        h("button", { type: "button", class: d.paused ? "primary" : "",
                      "data-action": d.paused ? "resume" : "pause",
                      onclick: () => act(d, d.paused) },
          d.paused ? "Resume" : "Pause"),
        h("button", { type: "button", "data-action": "edit", onclick: () => edit(d) },
          "Edit"),
        h("button", { type: "button", "data-action": "secret", onclick: () => openSecret(d) },
          "Secret"),
        h("button", { type: "button", "data-action": "test", onclick: () => sendTest(d),
                      title: "send a test event and show its first attempt" }, "Test"),
        h("button", { type: "button", class: "danger-text", "data-action": "remove",
                      onclick: () => askRemove(d) }, "Remove")));
  }

  async function refresh() {
    const [allRows, destinations] = await Promise.all([
      get(`/v1/admin/destination-stats?window=${WINDOW}`),
      get("/v1/admin/destinations"),
    ]);
    const key = (d) => `${d.tenant}/${d.name}`;  // names are unique within a tenant only
    const byName = new Map(destinations.map((d) => [key(d), d]));
    const rows = tenantFilter ? allRows.filter((d) => d.tenant === tenantFilter) : allRows;
    if (rows.length === 0 && tenantFilter) {
      setChildren(body, h("p", { class: "empty" }, `Tenant ${tenantFilter} has no destinations.`));
      return;
    }
    if (rows.length === 0) {
      setChildren(body, h("p", { class: "empty" },
        "No destinations yet: Add destination, or hookline destinations add NAME URL."));
      return;
    }
    setChildren(body, table(
      ["Name", "Tenant", "State", "In flight", "Pending", "Oldest due", "Dead", "Failing streak",
       "Success", "p50", "p99", ""],
      rows.map((d) => row(d, byName.get(key(d)))), { class: "grid-table" }));
  }

  return { title: "Destinations", root, refresh };
}
