// Tenants (`#/tenants?prefix=&after=`): your customers in id order, searched by the start of
// their id and paged by the admin API (`next_after`), each with its destination count, its
// limit and whether it is disabled; "Destinations" lists one tenant's destinations, and
// "Open portal" mints a tenant token (POST /v1/admin/tenants/ID/tokens) and opens the portal
// link it comes with in a new tab, as that tenant.

import { get, post, seg } from "./api.js";
import { fmtCount, fmtTime, fmtUrl, h, setChildren, table, toast } from "./dom.js";
import { stateOf } from "./destinations.js";

const PAGE = 50;

function hashFor(prefix, after) {
  const query = new URLSearchParams();
  if (prefix) query.set("prefix", prefix);
  if (after) query.set("after", after);
  const text = query.toString();
  return text ? `#/tenants?${text}` : "#/tenants";
}

/** The tenants page. */
export function tenantsView({ params }) {
  const prefix = params.get("prefix") ?? "";
  const after = params.get("after") ?? "";
  let expanded = null;  // the tenant whose destinations are shown

  const search = h("input", { id: "tenants-prefix", name: "prefix", size: 18,
                              placeholder: "id starts with…", value: prefix });
  const form = h("form", { class: "toolbar", id: "tenants-search", autocomplete: "off",
                           onsubmit: (e) => {
    e.preventDefault();
    location.hash = hashFor(search.value.trim(), "");
  } },
    h("label", { for: "tenants-prefix" }, "Search"), search,
    h("button", { type: "submit", id: "tenants-search-apply" }, "Search"));
  const list = h("div", { id: "tenants-list" });
  const detail = h("div", { class: "panel", id: "tenant-destinations", hidden: true });
  const first = h("button", { type: "button", id: "tenants-first", disabled: !after,
                              onclick: () => { location.hash = hashFor(prefix, ""); } },
    "First page");
  const next = h("button", { type: "button", id: "tenants-next", disabled: true }, "Next page");
  const root = h("section", {},
    h("div", { class: "toolbar" }, h("h1", {}, "Tenants")),
    h("p", { class: "hint" },
      "A tenant is one of your customers: it owns its destinations, and an event published ",
      "for it reaches only those. Events published without a tenant belong to _default. ",
      "Manage tenants with hookline tenants … or PUT /v1/admin/tenants/ID."),
    form, list, h("div", { class: "toolbar" }, first, next), detail);

  async function openPortal(tenant) {
    try {
      const out = await post(`/v1/admin/tenants/${seg(tenant.id)}/tokens`, {});
      const url = new URL(String(out.portal_url ?? ""), location.origin);
      if (url.protocol !== "https:" && url.protocol !== "http:") {
        throw new Error(`refusing the portal address ${url.protocol}`);
      }
      window.open(url.href, "_blank", "noopener,noreferrer");
    } catch (err) {
      toast(`${tenant.id}: ${err.message}`, "error");
    }
  }

  async function showDestinations(id) {
    const destinations = await get(`/v1/admin/destinations?tenant=${seg(id)}`);
    setChildren(detail,
      h("div", { class: "toolbar" },
        h("h2", {}, `Destinations of ${id}`),
        h("a", { href: `#/destinations?tenant=${seg(id)}`, id: "tenant-destinations-link" },
          "open in Destinations"),
        h("button", { type: "button", id: "tenant-destinations-close", onclick: () => {
          expanded = null;
          detail.hidden = true;
        } }, "Close")),
      destinations.length === 0
        ? h("p", { class: "empty" }, `${id} has no destinations.`)
        : table(["Name", "URL", "Event types", "State", "Added"],
          destinations.map((d) => {
            const state = stateOf(d);
            return h("tr", { "data-destination": d.name },
              h("td", { class: "name" }, d.name),
              h("td", {}, fmtUrl(d.url)),
              h("td", {}, d.event_types.join(", ")),
              h("td", {}, h("span", { class: `badge ${state.cls}` }, state.label)),
              h("td", {}, fmtTime(d.created_at)));
          }), { class: "grid-table" }));
    detail.hidden = false;
  }

  async function expand(id) {
    expanded = id;
    try {
      await showDestinations(id);
    } catch (err) {
      toast(`${id}: ${err.message}`, "error");
    }
  }

  function row(t) {
    return h("tr", { "data-tenant": t.id },
      h("td", { class: "name" }, t.id),
      h("td", {}, t.name),
      h("td", { class: "num", "data-col": "destinations" }, fmtCount(t.destinations)),
      h("td", { class: "num" }, t.max_destinations === null ? "no limit"
        : fmtCount(t.max_destinations)),
      h("td", { "data-col": "state" }, t.disabled
        ? h("span", { class: "badge bad", title: "its events are refused" }, "disabled")
        : h("span", { class: "badge ok" }, "enabled")),
      h("td", {}, fmtTime(t.created_at)),
      h("td", { class: "actions" },
        h("button", { type: "button", "data-action": "destinations", onclick: () => expand(t.id) },
          "Destinations"),
        h("button", { type: "button", "data-action": "portal", disabled: t.disabled,
                      title: t.disabled ? "a disabled tenant's tokens do not work" : null,
                      onclick: () => openPortal(t) }, "Open portal")));
  }

  async function refresh() {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (prefix) query.set("prefix", prefix);
    if (after) query.set("after", after);
    const page = await get(`/v1/admin/tenants?${query}`);
    next.disabled = page.next_after === null;
    next.onclick = () => { location.hash = hashFor(prefix, page.next_after); };
    setChildren(list, page.tenants.length === 0
      ? h("p", { class: "empty" }, prefix ? `No tenant id starts with ${prefix}.` : "No tenants.")
      : table(["Id", "Name", "Destinations", "Limit", "State", "Created", ""],
        page.tenants.map(row), { class: "grid-table" }));
    if (expanded !== null) await showDestinations(expanded);
  }

  return { title: "Tenants", root, refresh };
}
