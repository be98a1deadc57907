// Pieces shared by the dashboard's forms and confirmations: labelled fields, the server's
// 400 shown next to the form (with the field it names marked), a confirmation panel, and a
// secret shown once. Everything is text (textContent); nothing is parsed as markup.

import { ApiError } from "./api.js";
import { h, setChildren } from "./dom.js";

/** A labelled input row; `input` carries an `id` and a `name` (the API field it edits). */
export function field(label, input, hint) {
  return h("div", { class: "field" },
    h("label", { for: input.id }, label),
    input,
    hint ? h("div", { class: "hint" }, hint) : null);
}

/** Clear a form's error line and field marks. */
export function clearError(form, errorLine) {
  errorLine.textContent = "";
  for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
}

/**
 * Show why a request was refused next to its form: the server's detail, and the input named by
 * its `field` marked invalid and focused. Errors other than ApiError say what failed.
 */
export function showError(form, errorLine, err, prefix = "") {
  clearError(form, errorLine);
  if (err instanceof ApiError) {
    // The detail of a refused field starts with its name ("max_in_flight: must be ...").
    const named = err.field && !err.detail.startsWith(`${err.field}:`) ? `${err.field}: ` : "";
    errorLine.textContent = `${prefix}${named}${err.detail}`;
    const input = err.field ? form.querySelector(`[name="${CSS.escape(err.field)}"]`) : null;
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.focus();
    }
    return;
  }
  errorLine.textContent = `${prefix}${err.message}`;
}

/**
 * A confirmation panel: `text` (what will happen), a button labelled `action` running `run`,
 * and Cancel. `run` errors are shown in the panel; it closes when `run` resolves.
 */
export function confirmPanel(panel, { text, action, run, id = "confirm" }) {
  const error = h("p", { class: "error", role: "alert" });
  const close = () => {
    panel.hidden = true;
    panel.replaceChildren();
  };
  const go = h("button", { type: "button", class: "danger", id: `${id}-go`, onclick: async () => {
    go.disabled = true;
    try {
      await run();
      close();
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.detail : err.message;
      go.disabled = false;
    }
  } }, action);
  setChildren(panel,
    h("p", { id: `${id}-text` }, text),
    go,
    h("button", { type: "button", id: `${id}-cancel`, onclick: close }, "Cancel"),
    error);
  panel.hidden = false;
  return close;
}

/** Show a secret the server returns once, until dismissed. */
export function showSecretOnce(panel, what, secret) {
  const close = () => {
    panel.hidden = true;
    panel.replaceChildren();
  };
  const value = h("code", { class: "secret", id: "new-secret" }, secret);
  setChildren(panel,
    h("p", {}, `The secret of ${what}, shown this once: store it now (the dashboard, the API `,
      "and the CLI show only its first characters from now on)."),
    value,
    h("button", { type: "button", id: "new-secret-select", onclick: () => {
      getSelection().selectAllChildren(value);
    } }, "Select"),
    h("button", { type: "button", id: "new-secret-done", onclick: close }, "Done"));
  panel.hidden = false;
}
