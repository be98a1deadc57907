// Destinations: state (active, paused, auto-paused with reason), in-flight, pending, failing
// streak and attempt latency percentiles, with pause and resume buttons.

import { post, get, seg } from "./api.js";
import { fmtCount, fmtDuration, h, nowS, setChildren, table, toast } from "./dom.js";

const PAUSE_REASON = "paused from the dashboard";

/** "auto-paused" for the breaker's and a 410's reasons (shared/policy/delivery.py). */
function stateOf(d) {
  if (!d.paused) return { label: "active", cls: "ok" };
  const auto = /^circuit breaker|410 Gone/.test(d.paused_reason ?? "");
  return { label: auto ? "auto-paused" : "paused", cls: auto ? "bad" : "warn",
           reason: d.paused_reason };
}

/** The destinations page; every action goes through the admin API. */
export function destinationsView({ refreshNow }) {
  const body = h("div", { id: "destinations" });
  const root = h("section", {},
    h("h1", {}, "Destinations"),
    h("p", { class: "hint" },
      "Latency: nearest-rank percentiles of attempt durations over the last 15 minutes. ",
      "A paused destination gets no request and its jobs wait uncharged."),
    body);

  async function act(name, paused) {
    const path = `/v1/admin/destinations/${seg(name)}/${paused ? "resume" : "pause"}`;
    try {
      await post(path, paused ? {} : { reason: PAUSE_REASON });
      toast(`${name} ${paused ? "resumed" : "paused"}`);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
    await refreshNow();
  }

  function row(d) {
    const state = stateOf(d);
    const deadCell = d.dead > 0
      ? h("a", { href: `#/dead?destination=${seg(d.name)}` }, fmtCount(d.dead))
      : "0";
    return h("tr", { "data-destination": d.name },
      h("td", { class: "name" }, d.name),
      h("td", { "data-col": "state" },
        h("span", { class: `badge ${state.cls}` }, state.label),
        state.reason ? h("div", { class: "reason" }, state.reason) : null),
      h("td", { class: "num", "data-col": "in_flight" }, `${d.in_flight} / ${d.max_in_flight}`),
      h("td", { class: "num", "data-col": "pending" }, fmtCount(d.pending)),
      h("td", { class: "num" },
        d.oldest_pending_at === null ? "–" : fmtDuration(nowS() - d.oldest_pending_at)),
      h("td", { class: "num", "data-col": "dead" }, deadCell),
      h("td", { class: `num ${d.failure_streak > 0 ? "bad-text" : ""}`, "data-col": "streak" },
        fmtCount(d.failure_streak)),
      h("td", { class: "num" }, fmtDuration(d.p50_s)),
      h("td", { class: "num" }, fmtDuration(d.p99_s)),
      h("td", {},
        h("button", { type: "button", class: d.paused ? "primary" : "",
                      "data-action": d.paused ? "resume" : "pause",
                      onclick: () => act(d.name, d.paused) },
          d.paused ? "Resume" : "Pause")));
  }

  async function refresh() {
    const rows = await get("/v1/admin/destination-stats?window=15m");
    if (rows.length === 0) {
      setChildren(body, h("p", { class: "empty" },
        "No destinations yet: hookline destinations add NAME URL."));
      return;
    }
    setChildren(body, table(
      ["Name", "State", "In flight", "Pending", "Oldest due", "Dead", "Failing streak",
       "p50", "p99", ""],
      rows.map(row), { class: "grid-table" }));
  }

  return { title: "Destinations", root, refresh };
}
