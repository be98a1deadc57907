// The tenant's endpoints (destinations): state, failure streak and success rate over the last
// 24 h, each linking to its own page (deliveries and actions). "Add endpoint" only for a token
// that may manage destinations.

import { fmtCount, h, setChildren, table, toast } from "/static/dom.js";
import { destinationForm } from "./destination_form.js";
import { fmtRate, stateOf, successRate } from "./health.js";
import { showSecret } from "./secret.js";
import { get, listOf, seg } from "./tenant_api.js";

export const STATS_WINDOW_S = 86400;
const MAX_STATS_CALLS = 25;

/** The endpoints page. */
export function destinationsView({ can, refreshNow }) {
  const body = h("div", { id: "destinations" });
  const shown = h("div", { class: "panel notice", id: "secret-shown", hidden: true });
  const form = can("manage_destinations") ? destinationForm({
    onCreated: async (d) => {
      toast(`Added ${d.name}`);
      if (typeof d.secret === "string" && d.secret.startsWith("whsec_")) {
        showSecret(shown, `The signing secret of ${d.name}, shown this once: store it where ` +
                          "your receiver verifies signatures.", d.secret);
      }
      await refreshNow();
    },
    onSaved: refreshNow,
  }) : null;
  const add = form
    ? h("button", { type: "button", class: "primary", id: "add-destination", onclick: () => {
      shown.hidden = true;
      form.openCreate();
    } }, "Add endpoint")
    : null;
  const root = h("section", {},
    h("div", { class: "toolbar" }, h("h1", {}, "Endpoints"), add),
    h("p", { class: "hint" }, "Success: attempts in the last 24 hours that got a 2xx answer. ",
      "A paused endpoint gets no request; its deliveries wait."),
    shown, form?.root, body);

  async function statsOf(destinations) {
    const wanted = destinations.filter((d) => successRate(d, null) === null)
      .slice(0, MAX_STATS_CALLS);
    const answers = await Promise.all(wanted.map((d) =>
      get(`/v1/tenant/destinations/${seg(d.name)}/stats?window_s=${STATS_WINDOW_S}`)
        .catch(() => null)));
    return new Map(wanted.map((d, i) => [d.name, answers[i]]));
  }

  function row(d, stats) {
    const state = stateOf(d);
    const streak = Number(d.failure_streak ?? d.health?.failure_streak ?? 0);
    return h("tr", { "data-destination": d.name },
      h("td", { class: "name" }, h("a", { href: `#/destinations/${seg(d.name)}` }, d.name),
        h("div", { class: "url" }, d.url ?? "")),
      h("td", { class: "types" }, (d.event_types ?? []).join(", ")),
      h("td", { "data-col": "state" },
        h("span", { class: `badge ${state.cls}`, title: state.title }, state.label)),
      h("td", { class: `num ${streak > 0 ? "bad-text" : ""}`, "data-col": "streak" },
        fmtCount(streak)),
      h("td", { class: "num", "data-col": "success" }, fmtRate(successRate(d, stats))));
  }

  async function refresh() {
    const destinations = listOf(await get("/v1/tenant/destinations"), "destinations");
    const stats = await statsOf(destinations);
    if (destinations.length === 0) {
      setChildren(body, h("p", { class: "empty" }, can("manage_destinations")
        ? "No endpoints yet: Add endpoint to receive webhooks." : "No endpoints yet."));
      return;
    }
    setChildren(body, table(["Endpoint", "Event types", "State", "Failing streak", "Success"],
      destinations.map((d) => row(d, stats.get(d.name))), { class: "grid-table" }));
  }

  return { title: "Endpoints", root, refresh };
}
