// An endpoint's signing secret: reveal it (view_secret) and rotate it (manage_secret), both
// audited by the server with the tenant as the actor. A secret is shown as text until Done
// and is kept nowhere else.

import { confirmPanel } from "/static/forms.js";
import { fmtTime, h, nowS, setChildren, toast } from "/static/dom.js";
import { get, post, seg } from "./tenant_api.js";

/** Show `secret` in `panel` with `text` above it, until Done. */
export function showSecret(panel, text, secret, note = null) {
  const value = h("code", { class: "secret", id: "secret-value" }, secret);
  setChildren(panel, h("p", {}, text), value,
    h("button", { type: "button", id: "secret-select", onclick: () => {
      getSelection().selectAllChildren(value);
    } }, "Select"),
    h("button", { type: "button", id: "secret-done", onclick: () => {
      panel.hidden = true;
      panel.replaceChildren();
    } }, "Done"),
    note ? h("p", { id: "secret-note" }, note) : null);
  panel.hidden = false;
}

/** The buttons this token may use on `name`'s secret; `shown` displays a secret,
 * `confirmBox` asks before a rotation. */
export function secretButtons(name, { can, shown, confirmBox }) {
  const reveal = async () => {
    try {
      const out = await get(`/v1/tenant/destinations/${seg(name)}/secret`);
      showSecret(shown, `The signing secret of ${name} (this reveal is recorded).`, out.secret);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
  };
  const rotate = () => confirmPanel(confirmBox, {
    id: "rotate",
    text: `Rotate the signing secret of ${name}? A new secret is generated; the previous one ` +
          "keeps signing too for a while (every request carries both signatures), so update " +
          "your receiver before then.",
    action: "Rotate secret",
    run: async () => {
      const out = await post(`/v1/tenant/destinations/${seg(name)}/rotate-secret`, {});
      const until = out.previous_secret_until;
      showSecret(shown, `The new signing secret of ${name}, shown this once.`, out.secret,
        typeof until === "number" && until > nowS()
          ? `The previous secret keeps signing until ${fmtTime(until)}.` : null);
      toast(`Rotated the secret of ${name}`);
    },
  });
  return [
    can("view_secret") ? h("button", { type: "button", "data-action": "reveal-secret",
                                       onclick: reveal }, "Reveal secret") : null,
    can("manage_secret") ? h("button", { type: "button", "data-action": "rotate-secret",
                                         onclick: rotate }, "Rotate secret") : null,
  ];
}
