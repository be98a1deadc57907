// The form that adds a destination (POST /v1/admin/destinations) or edits one (PATCH
// /v1/admin/destinations/NAME) with every settable field. The server checks every value; a
// refusal (400 naming the field) is shown under the form with that field marked.

import { ApiError, DEFAULT_TENANT, destPath, get, patch, post } from "./api.js";
import { h, setChildren, toast } from "./dom.js";
import { clearError, field, showError } from "./forms.js";

const HIDDEN_VALUE = "***";  // how the API shows a stored header value
const LATE_FIELDS = ["timeout_s", "rate_limit_per_s", "ordered"];

/** A refusal found before sending, shaped like the server's (so it is shown the same way). */
const refuse = (fieldName, detail) => new ApiError(0, "invalid_request", `${fieldName}: ${detail}`,
                                                   fieldName);

/** "" -> undefined; a number's text -> the number; anything else as typed (the server
 * refuses it, naming the field). */
function numberOrText(text) {
  const value = text.trim();
  if (value === "") return undefined;
  return /^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(value) ? Number(value) : value;
}

const eventTypes = (text) => text.split(/[\s,]+/).filter(Boolean);

/** "Name: value" per line -> {name: value}. */
function parseHeaders(text) {
  const out = {};
  text.split("\n").forEach((line, i) => {
    if (!line.trim()) return;
    const colon = line.indexOf(":");
    if (colon < 1) throw refuse("headers", `line ${i + 1} is not "Name: value"`);
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (value === HIDDEN_VALUE) {
      throw refuse("headers", `enter the value of ${name} again (stored values are not shown)`);
    }
    out[name] = value;
  });
  return out;
}

/**
 * The add/edit form. `onCreated(destination, secret)` runs after an add (secret: the generated
 * one, or null when one was given), `onSaved()` after any successful save.
 * Returns {root, openCreate(), openEdit(name)}.
 */
export function destinationForm({ onCreated, onSaved }) {
  const input = (name, props = {}) =>
    h("input", { name, id: `destination-${name}`, autocomplete: "off", ...props });
  const inputs = {
    name: input("name", { placeholder: "billing", required: true }),
    url: input("url", { type: "url", placeholder: "https://example.com/webhooks", size: 44 }),
    event_types: input("event_types", { placeholder: "*" }),
    max_in_flight: input("max_in_flight", { inputmode: "numeric", placeholder: "10", size: 6 }),
    timeout_s: input("timeout_s", { inputmode: "decimal", placeholder: "default", size: 6 }),
    rate_limit_per_s: input("rate_limit_per_s", { inputmode: "decimal", placeholder: "none",
                                                  size: 6 }),
    ordered: input("ordered", { type: "checkbox" }),
    headers: h("textarea", { name: "headers", id: "destination-headers", rows: 3, cols: 44,
                             placeholder: "X-Api-Key: value (one per line)" }),
    secret: input("secret", { placeholder: "generated", size: 44 }),
    tenant: input("tenant", { placeholder: DEFAULT_TENANT }),
  };
  const title = h("h2", {});
  const errorLine = h("p", { class: "error", id: "destination-form-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary", id: "destination-save" });
  const secretField = field("Secret", inputs.secret,
    "A whsec_ secret to sign with; leave empty to generate one (shown once).");
  const nameField = field("Name", inputs.name, "Letters, digits, _ and -; cannot be changed.");
  const tenantField = field("Tenant", inputs.tenant,
    "The customer it belongs to; empty: the default tenant. Cannot be changed.");
  const form = h("form", { id: "destination-form", class: "panel form", novalidate: true,
                           autocomplete: "off", hidden: true, onsubmit: (e) => {
    e.preventDefault();
    save();
  } });
  let editing = null;  // the destination as loaded, when editing
  let headersShown = "";

  setChildren(form, title,
    h("div", { class: "form-grid" },
      nameField,
      tenantField,
      field("URL", inputs.url, "Where events are POSTed (http or https)."),
      field("Event types", inputs.event_types,
            "Comma-separated: a type, prefix.* or *. Empty: every event."),
      field("Max in flight", inputs.max_in_flight, "Concurrent requests across all workers."),
      field("Timeout (s)", inputs.timeout_s, "Per attempt; empty: the service's default."),
      field("Rate limit (/s)", inputs.rate_limit_per_s, "Requests per second; empty: none."),
      field("Ordered", inputs.ordered, "One job at a time, oldest first (FIFO)."),
      field("Headers", inputs.headers,
            "Sent with every request. Stored values show as *** and must be typed again to change."),
      secretField),
    errorLine,
    h("div", { class: "toolbar" }, submit,
      h("button", { type: "button", id: "destination-cancel", onclick: close }, "Cancel")));

  function close() {
    form.hidden = true;
    editing = null;
    clearError(form, errorLine);
  }

  function fill(d) {
    inputs.name.value = d?.name ?? "";
    inputs.url.value = d?.url ?? "";
    inputs.event_types.value = d ? d.event_types.join(", ") : "";
    inputs.max_in_flight.value = d ? String(d.max_in_flight) : "";
    inputs.timeout_s.value = d?.timeout_s ?? "";
    inputs.rate_limit_per_s.value = d?.rate_limit_per_s ?? "";
    inputs.ordered.checked = Boolean(d?.ordered);
    headersShown = d ? Object.keys(d.headers).map((n) => `${n}: ${HIDDEN_VALUE}`).join("\n") : "";
    inputs.headers.value = headersShown;
    inputs.secret.value = "";
    inputs.tenant.value = d?.tenant ?? "";
  }

  function openCreate() {
    editing = null;
    fill(null);
    title.textContent = "Add a destination";
    submit.textContent = "Add destination";
    inputs.name.disabled = false;
    inputs.tenant.disabled = false;
    secretField.hidden = false;
    clearError(form, errorLine);
    form.hidden = false;
    inputs.name.focus();
  }

  async function openEdit(name, tenant = DEFAULT_TENANT) {
    const d = await get(destPath(name, tenant));
    editing = d;
    fill(d);
    title.textContent = `Edit ${d.name}`;
    submit.textContent = "Save changes";
    inputs.name.disabled = true;
    inputs.tenant.disabled = true;
    secretField.hidden = true;  // secrets are rotated, not edited
    clearError(form, errorLine);
    form.hidden = false;
    inputs.url.focus();
  }

  /** Every field as the API takes it; unset optional ones are left out (server defaults). */
  function values() {
    const out = {
      url: inputs.url.value.trim(),
      event_types: eventTypes(inputs.event_types.value),
      max_in_flight: numberOrText(inputs.max_in_flight.value),
      timeout_s: numberOrText(inputs.timeout_s.value) ?? null,
      rate_limit_per_s: numberOrText(inputs.rate_limit_per_s.value) ?? null,
      ordered: inputs.ordered.checked,
    };
    if (inputs.headers.value !== headersShown) out.headers = parseHeaders(inputs.headers.value);
    return out;
  }

  async function create() {
    const body = { name: inputs.name.value.trim(), ...values() };
    if (body.event_types.length === 0) delete body.event_types;
    if (body.max_in_flight === undefined) delete body.max_in_flight;
    for (const key of ["timeout_s", "rate_limit_per_s"]) if (body[key] === null) delete body[key];
    const secret = inputs.secret.value.trim();
    if (secret) body.secret = secret;
    const tenant = inputs.tenant.value.trim();
    if (tenant) body.tenant = tenant;
    const created = await post("/v1/admin/destinations", body);
    // A service that takes these only after creation ignores them in the POST: set them now.
    const late = Object.fromEntries(LATE_FIELDS.filter((key) => key in body &&
      (key === "ordered" ? Boolean(created[key]) !== body[key] : created[key] !== body[key]))
      .map((key) => [key, body[key]]));
    onCreated(created, secret ? null : created.secret);
    if (Object.keys(late).length > 0) {
      try {
        await patch(destPath(created.name, created.tenant), late);
      } catch (err) {
        await openEdit(created.name, created.tenant);
        showError(form, errorLine, err, `${created.name} was added, but not changed: `);
        return false;
      }
    }
    toast(`Added ${created.name}`);
    return true;
  }

  async function update() {
    const now = values();
    const changes = {};
    for (const [key, value] of Object.entries(now)) {
      const before = editing[key];
      const same = key === "event_types" ? value.join(",") === before.join(",")
        : key === "ordered" ? value === Boolean(before)
          : key === "headers" ? false
            : key === "max_in_flight" && value === undefined ? true
              : value === before;
      if (!same) changes[key] = value;
    }
    if (Object.keys(changes).length === 0) throw refuse("changes", "nothing changed");
    await patch(destPath(editing.name, editing.tenant), changes);
    toast(`Saved ${editing.name}: ${Object.keys(changes).join(", ")}`);
    return true;
  }

  async function save() {
    submit.disabled = true;
    clearError(form, errorLine);
    try {
      if (editing ? await update() : await create()) close();
      await onSaved();
    } catch (err) {
      showError(form, errorLine, err);
    } finally {
      submit.disabled = false;
    }
  }

  return { root: form, openCreate, openEdit };
}
