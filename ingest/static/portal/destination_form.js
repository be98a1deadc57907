// Create or edit an endpoint: name (on create), URL, and the event types it subscribes to,
// picked from the types the tenant API offers (GET /v1/tenant/event-types) or typed freely
// (patterns such as `invoice.*` too). The server checks everything again (SSRF guard,
// max_destinations) and a refusal is shown next to the field it names.

import { clearError, field, showError } from "/static/forms.js";
import { h, setChildren } from "/static/dom.js";
import { get, listOf, patch, post, seg } from "./tenant_api.js";

/** The offered event types as strings, whatever shape the answer has; with an event-type
 * catalogue, its types (archived ones hidden) and their descriptions (name -> text). */
async function offeredTypes() {
  const answer = await get("/v1/tenant/event-types");
  const described = new Map(listOf(answer, "catalogue")
    .filter((t) => typeof t?.name === "string")
    .map((t) => [t.name, `${t.description ?? ""}${t.deprecated ? " (deprecated)" : ""}`]));
  const names = listOf(answer, "event_types")
    .map((t) => (typeof t === "string" ? t : t?.type ?? t?.name))
    .filter((t) => typeof t === "string" && t !== "");
  return { names, described };
}

/**
 * The endpoint form. `onCreated(destination)` runs after a create (its answer may carry the
 * generated secret, shown once), `onSaved()` after an edit. Returns {root, openCreate(),
 * openEdit(destination)}.
 */
export function destinationForm({ onCreated, onSaved }) {
  const title = h("h2", {});
  const inputs = {
    name: h("input", { id: "dest-name", name: "name", autocomplete: "off", required: true,
                       placeholder: "billing" }),
    url: h("input", { id: "dest-url", name: "url", autocomplete: "off", required: true,
                      placeholder: "https://example.com/webhooks", size: 40 }),
    other: h("input", { id: "dest-other-types", name: "event_types", autocomplete: "off",
                        placeholder: "invoice.*, order.created" }),
  };
  const picker = h("div", { class: "picker", id: "event-type-picker" });
  const nameField = field("Name", inputs.name, "Letters, digits, _ . : - (unique among yours).");
  const errorLine = h("p", { class: "error", id: "dest-error", role: "alert" });
  const save = h("button", { type: "submit", class: "primary", id: "dest-save" }, "Save");
  const form = h("form", { class: "form-grid", id: "dest-form", novalidate: true,
                           autocomplete: "off", onsubmit: (e) => {
    e.preventDefault();
    submit();
  } },
    nameField,
    field("URL", inputs.url, "Where the events are POSTed."),
    h("div", { class: "field" }, h("label", {}, "Event types"), picker,
      h("div", { class: "hint" }, "None chosen: every event type.")),
    field("Other event types", inputs.other,
          "Comma-separated types or patterns ending in .* (e.g. invoice.*)."),
    h("div", { class: "field" }, save));
  const root = h("section", { class: "panel", id: "dest-panel", hidden: true },
    title, form, errorLine,
    h("button", { type: "button", id: "dest-cancel", onclick: () => {
      root.hidden = true;
    } }, "Cancel"));
  let editing = null;

  async function fill(chosen) {
    let offered = [];
    let described = new Map();
    try {
      ({ names: offered, described } = await offeredTypes());
    } catch {
      offered = [];  // the picker is a help: free text still works
    }
    const wanted = new Set(chosen);
    setChildren(picker, offered.length === 0 ? h("span", { class: "hint" }, "none offered yet")
      : offered.map((type) => h("label", { title: described.get(type) || null },
        h("input", { type: "checkbox", value: type, checked: wanted.has(type),
                     "data-event-type": type }), type)));
    inputs.other.value = chosen.filter((t) => !offered.includes(t)).join(", ");
  }

  function chosenTypes() {
    const picked = [...picker.querySelectorAll("input[type=checkbox]")]
      .filter((box) => box.checked).map((box) => box.value);
    const typed = inputs.other.value.split(",").map((t) => t.trim()).filter(Boolean);
    return [...new Set([...picked, ...typed])];
  }

  async function openCreate() {
    editing = null;
    title.textContent = "Add endpoint";
    nameField.hidden = false;
    inputs.name.value = "";
    inputs.url.value = "";
    clearError(form, errorLine);
    await fill([]);
    root.hidden = false;
    inputs.name.focus();
  }

  async function openEdit(d) {
    editing = d.name;
    title.textContent = `Edit ${d.name}`;
    nameField.hidden = true;
    inputs.url.value = d.url ?? "";
    clearError(form, errorLine);
    await fill(d.event_types ?? []);
    root.hidden = false;
    inputs.url.focus();
  }

  async function submit() {
    save.disabled = true;
    clearError(form, errorLine);
    try {
      const types = chosenTypes();
      if (editing === null) {
        const body = { name: inputs.name.value.trim(), url: inputs.url.value.trim() };
        if (types.length > 0) body.event_types = types;
        const created = await post("/v1/tenant/destinations", body);
        root.hidden = true;
        await onCreated(created);
      } else {
        await patch(`/v1/tenant/destinations/${seg(editing)}`,
                    { url: inputs.url.value.trim(), event_types: types.length ? types : ["*"] });
        root.hidden = true;
        await onSaved();
      }
    } catch (err) {
      showError(form, errorLine, err);
    } finally {
      save.disabled = false;
    }
  }

  return { root, openCreate, openEdit };
}
