// Event types (`#/event-types`): the event-type catalogue (GET /v1/admin/event-types), each
// type with its latest schema version, validation mode and flags; "Schema" shows the type's
// schemas and examples by version (as text, never markup), "Archive"/"Restore" flips its
// archived flag and "Remove" deletes it (after a confirmation). Types are written with
// `hookline event-types put|import` or PUT /v1/admin/event-types/NAME.

import { del, get, post, seg } from "./api.js";
import { confirmPanel } from "./forms.js";
import { fmtTime, h, setChildren, table, toast } from "./dom.js";

/** The event types page. */
export function eventTypesView() {
  let shown = null;  // the type whose schemas are open
  const list = h("div", { id: "event-types-list" });
  const detail = h("div", { class: "panel", id: "event-type-detail", hidden: true });
  const confirm = h("div", { class: "panel", id: "event-type-confirm", hidden: true });
  const root = h("section", {},
    h("div", { class: "toolbar" }, h("h1", {}, "Event types")),
    h("p", { class: "hint" },
      "The catalogue of the event types you send, with a JSON Schema of their data per ",
      "version. While it holds types, a destination may subscribe only to types it lists, and ",
      "each type's validation (off, warn, reject) applies at publish. Empty: everything ",
      "behaves as without it. Add types with hookline event-types put|import or ",
      "PUT /v1/admin/event-types/NAME; publish hookline event-types export to your customers."),
    confirm, list, detail);

  function showSchemas(t) {
    shown = t.name;
    const versions = Object.keys(t.schemas).sort((a, b) => Number(b) - Number(a));
    setChildren(detail,
      h("div", { class: "toolbar" },
        h("h2", {}, `${t.name}: schemas`),
        h("button", { type: "button", id: "event-type-close", onclick: () => {
          shown = null;
          detail.hidden = true;
        } }, "Close")),
      versions.length === 0
        ? h("p", { class: "empty" }, `${t.name} has no schema: its events are not checked.`)
        : versions.map((v) => h("div", { "data-version": v },
          h("h3", {}, `version ${v}${Number(v) === t.latest_version ? " (latest)" : ""}`),
          h("pre", { class: "payload" }, JSON.stringify(t.schemas[v], null, 2)),
          Object.hasOwn(t.examples, v)
            ? h("div", {}, h("h3", {}, "example data"),
              h("pre", { class: "payload" }, JSON.stringify(t.examples[v], null, 2)))
            : null)));
    detail.hidden = false;
  }

  async function setArchived(t, archived) {
    try {
      await post(`/v1/admin/event-types/${seg(t.name)}/archive`, { archived });
      await refresh();
    } catch (err) {
      toast(`${t.name}: ${err.message}`, "error");
    }
  }

  function remove(t) {
    confirmPanel(confirm, {
      id: "event-type-remove",
      text: `Remove ${t.name} and its schemas? Stored events keep their type; destinations ` +
        "subscribed to it keep their subscription.",
      action: "Remove",
      run: async () => {
        await del(`/v1/admin/event-types/${seg(t.name)}`);
        if (shown === t.name) detail.hidden = true;
        await refresh();
      },
    });
  }

  function row(t) {
    const flags = [];
    if (t.deprecated) flags.push(h("span", { class: "badge warn" }, "deprecated"));
    if (t.archived) flags.push(h("span", { class: "badge bad" }, "archived"));
    return h("tr", { "data-event-type": t.name },
      h("td", { class: "name" }, t.name),
      h("td", {}, t.description),
      h("td", { class: "num" }, t.latest_version === null ? "–" : String(t.latest_version)),
      h("td", { "data-col": "validation" }, t.validation),
      h("td", {}, flags.length ? flags : h("span", { class: "badge ok" }, "active")),
      h("td", {}, fmtTime(t.updated_at)),
      h("td", { class: "actions" },
        h("button", { type: "button", "data-action": "schemas", onclick: () => showSchemas(t) },
          "Schema"),
        h("button", { type: "button", "data-action": t.archived ? "restore" : "archive",
                      onclick: () => setArchived(t, !t.archived) },
          t.archived ? "Restore" : "Archive"),
        h("button", { type: "button", class: "danger", "data-action": "remove",
                      onclick: () => remove(t) }, "Remove")));
  }

  async function refresh() {
    const { event_types: types } = await get("/v1/admin/event-types");
    setChildren(list, types.length === 0
      ? h("p", { class: "empty" }, "The catalogue is empty: every event type is accepted.")
      : table(["Name", "Description", "Latest", "Validation", "State", "Updated", ""],
        types.map(row), { class: "grid-table" }));
    const open = types.find((t) => t.name === shown);
    if (open) showSchemas(open);
  }

  return { title: "Event types", root, refresh };
}
