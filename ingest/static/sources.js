// Sources: the providers that POST to /v1/sources/NAME, each verified by its scheme; add one
// (a given secret, or a generated one shown once) and remove one.

import { del, get, post, seg } from "./api.js";
import { fmtTime, h, setChildren, table, toast } from "./dom.js";
import { clearError, confirmPanel, field, showError, showSecretOnce } from "./forms.js";

const SCHEMES = [
  ["github", "GitHub (X-Hub-Signature-256, the webhook secret you set there)"],
  ["stripe", "Stripe (Stripe-Signature, the endpoint's whsec_ signing secret)"],
  ["standard", "Standard Webhooks (webhook-signature, a whsec_ secret)"],
  ["token", "Bearer token (Authorization: Bearer SECRET)"],
];

/** The sources page. */
export function sourcesView({ refreshNow }) {
  const list = h("div", { id: "sources-list" });
  const secretPanel = h("div", { class: "panel notice", id: "source-secret", hidden: true });
  const confirmBox = h("div", { class: "confirm", id: "source-confirm", hidden: true });
  const inputs = {
    name: h("input", { name: "name", id: "source-name", autocomplete: "off",
                       placeholder: "github" }),
    scheme: h("select", { name: "scheme", id: "source-scheme" },
      SCHEMES.map(([value, label]) => h("option", { value }, label))),
    secret: h("input", { name: "secret", id: "source-secret-input", autocomplete: "off",
                         size: 44, placeholder: "generated" }),
  };
  const errorLine = h("p", { class: "error", id: "source-form-error", role: "alert" });
  const form = h("form", { id: "source-form", class: "panel form", novalidate: true,
                           autocomplete: "off", hidden: true, onsubmit: (e) => {
    e.preventDefault();
    add();
  } },
    h("h2", {}, "Add a source"),
    h("div", { class: "form-grid" },
      field("Name", inputs.name, "The URL path segment: POST /v1/sources/NAME."),
      field("Scheme", inputs.scheme, "How its requests are verified."),
      field("Secret", inputs.secret,
            "The provider's signing secret or token; empty: generate one (shown once) " +
            "for senders that let you choose it.")),
    errorLine,
    h("div", { class: "toolbar" },
      h("button", { type: "submit", class: "primary", id: "source-save" }, "Add source"),
      h("button", { type: "button", id: "source-cancel", onclick: () => {
        form.hidden = true;
      } }, "Cancel")));

  const root = h("section", {},
    h("div", { class: "toolbar" },
      h("h1", {}, "Sources"),
      h("button", { type: "button", class: "primary", id: "add-source", onclick: () => {
        for (const el of Object.values(inputs)) if (el.tagName === "INPUT") el.value = "";
        secretPanel.hidden = true;
        clearError(form, errorLine);
        form.hidden = false;
        inputs.name.focus();
      } }, "Add source")),
    h("p", { class: "hint" },
      "Providers post to /v1/sources/NAME; a request is stored only once its signature ",
      "verifies with the source's secret."),
    secretPanel, form, confirmBox, list);

  async function add() {
    clearError(form, errorLine);
    const body = { name: inputs.name.value.trim(), scheme: inputs.scheme.value };
    const secret = inputs.secret.value.trim();
    if (secret) body.secret = secret;
    try {
      const out = await post("/v1/admin/sources", body);
      form.hidden = true;
      if (!secret) showSecretOnce(secretPanel, `source ${out.name}`, out.secret);
      toast(`Added source ${out.name}`);
      await refreshNow();
    } catch (err) {
      showError(form, errorLine, err);
    }
  }

  function askRemove(source) {
    confirmPanel(confirmBox, {
      id: "remove",
      text: `Remove source ${source.name}? Its requests to /v1/sources/${source.name} are ` +
            "refused (404) from within a second on. Events already accepted from it are " +
            "kept and their unfinished jobs are still delivered.",
      action: `Remove ${source.name}`,
      run: async () => {
        await del(`/v1/admin/sources/${seg(source.name)}`);
        toast(`Removed source ${source.name}`);
        await refreshNow();
      },
    });
  }

  async function refresh() {
    const sources = await get("/v1/admin/sources");
    if (sources.length === 0) {
      setChildren(list, h("p", { class: "empty" }, "No sources yet."));
      return;
    }
    setChildren(list, table(["Name", "Scheme", "Secret", "Added", ""],
      sources.map((s) => h("tr", { "data-source": s.name },
        h("td", { class: "name" }, s.name),
        h("td", {}, s.scheme),
        h("td", {}, h("code", {}, s.secret)),
        h("td", {}, fmtTime(s.created_at)),
        h("td", { class: "actions" },
          h("button", { type: "button", class: "danger-text", "data-action": "remove",
                        onclick: () => askRemove(s) }, "Remove")))),
      { class: "grid-table" }));
  }

  return { title: "Sources", root, refresh };
}
