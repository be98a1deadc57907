// A destination's signing secret: rotate it (a generated or a pasted whsec_ secret, with an
// overlap during which the previous one keeps signing), reveal the current one (audited), and
// expire the previous one early. Every call goes through the admin API's secret routes; a
// secret is shown as text until dismissed and is never kept anywhere else.

import { ApiError, DEFAULT_TENANT, destPath, get, post } from "./api.js";
import { fmtAgo, fmtTime, h, nowS, setChildren, toast } from "./dom.js";
import { clearError, confirmPanel, field, showError } from "./forms.js";

const UNITS = { s: 1, m: 60, h: 3600, d: 86400 };
const DEFAULT_OVERLAP = "24 h";
const MAX_OVERLAP = "7 days";

/** "90s", "15m", "24h", "7d" or a number of seconds -> seconds; "" -> undefined (the
 * server's default). Anything else is refused naming the field, like the server would. */
export function overlapSeconds(text) {
  const value = text.trim();
  if (value === "") return undefined;
  const match = /^(\d+(?:\.\d+)?)\s*([smhd]?)$/.exec(value);
  if (!match) {
    throw new ApiError(0, "invalid_request",
                       `overlap_s: "${value}" is not a duration (e.g. 90s, 15m, 24h, 7d)`,
                       "overlap_s");
  }
  return Number(match[1]) * UNITS[match[2] || "s"];
}

/** Whether a destination (as GET /v1/admin/destinations shows it) is still in an overlap. */
export const rotating = (d) =>
  Boolean(d?.previous_secret) && (d.previous_secret_until ?? 0) > nowS();

/** A time as its local date and time, with how far away it is: "5/6/2026, 10:00 (in 24 h)". */
const fmtUntil = (unixS) => `${fmtTime(unixS)} (${fmtAgo(unixS)})`;

/**
 * The secret panel of one destination at a time. `onChanged()` runs after a rotation or an
 * expiry (to refresh the table). Returns {root, open(name)}.
 */
export function secretPanel({ onChanged }) {
  const title = h("h2", {});
  const state = h("p", { id: "secret-state" });
  const inputs = {
    secret: h("input", { name: "secret", id: "rotate-secret", autocomplete: "off", size: 44,
                         placeholder: "generated" }),
    overlap: h("input", { name: "overlap_s", id: "rotate-overlap", autocomplete: "off", size: 8,
                          placeholder: "24h" }),
  };
  const errorLine = h("p", { class: "error", id: "rotate-error", role: "alert" });
  const shown = h("div", { class: "panel notice", id: "secret-shown", hidden: true });
  const confirmBox = h("div", { class: "confirm", id: "secret-confirm", hidden: true });
  const rotateButton = h("button", { type: "submit", class: "primary", id: "rotate-go" },
    "Rotate secret");
  const expireButton = h("button", { type: "button", id: "expire-previous",
                                     onclick: () => askExpire() }, "Expire previous secret now");
  const revealButton = h("button", { type: "button", id: "reveal-secret",
                                     onclick: () => reveal() }, "Reveal secret");
  const form = h("form", { class: "form-grid", id: "rotate-form", novalidate: true,
                           autocomplete: "off", onsubmit: (e) => {
    e.preventDefault();
    rotate();
  } },
    field("New secret", inputs.secret,
          "A whsec_ secret to paste; leave empty to generate one (shown once)."),
    field("Overlap", inputs.overlap,
          `How long the previous secret keeps signing too (both signatures on every request): ` +
          `default ${DEFAULT_OVERLAP}, 0 s (none) to ${MAX_OVERLAP}; e.g. 90s, 15m, 24h, 7d.`),
    h("div", { class: "field" }, rotateButton));
  const root = h("section", { class: "panel", id: "secret-panel", hidden: true },
    title, state, form, errorLine,
    h("div", { class: "toolbar" }, revealButton, expireButton,
      h("button", { type: "button", id: "secret-close", onclick: close }, "Close")),
    h("p", { class: "hint" }, "Rotation, reveal and expiry are each written to the audit log ",
      "(secret_rotated, secret_revealed, previous_secret_expired) with actor dashboard; the ",
      "secret itself never is."),
    confirmBox, shown);
  let name = null;
  let tenant = DEFAULT_TENANT;

  function close() {
    root.hidden = true;
    name = null;
    hideShown();
    confirmBox.hidden = true;
    confirmBox.replaceChildren();
  }

  function hideShown() {
    shown.hidden = true;
    shown.replaceChildren();
  }

  /** Show a secret until Done is clicked. */
  function showSecret(id, text, secret, note) {
    const value = h("code", { class: "secret", id }, secret);
    setChildren(shown, h("p", {}, text), value,
      h("button", { type: "button", id: `${id}-select`, onclick: () => {
        getSelection().selectAllChildren(value);
      } }, "Select"),
      h("button", { type: "button", id: `${id}-done`, onclick: hideShown }, "Done"),
      note ? h("p", { id: `${id}-note` }, note) : null);
    shown.hidden = false;
  }

  function showState(d) {
    if (rotating(d)) {
      state.textContent = `Rotating: the previous secret (${d.previous_secret}) signs too ` +
        `until ${fmtUntil(d.previous_secret_until)}. Current secret: ${d.secret}`;
    } else {
      state.textContent = `One secret signs: ${d.secret}`;
    }
    expireButton.hidden = !rotating(d);
  }

  async function load() {
    const d = await get(destPath(name, tenant));
    showState(d);
    return d;
  }

  async function open(destination, ofTenant = DEFAULT_TENANT) {
    name = destination;
    tenant = ofTenant;
    title.textContent = `Secret of ${destination}`;
    inputs.secret.value = "";
    inputs.overlap.value = "";
    clearError(form, errorLine);
    hideShown();
    confirmBox.hidden = true;
    await load();
    root.hidden = false;
    inputs.secret.focus();
  }

  async function rotate() {
    rotateButton.disabled = true;
    clearError(form, errorLine);
    try {
      const body = {};
      const pasted = inputs.secret.value.trim();
      if (pasted) body.secret = pasted;
      const overlap = overlapSeconds(inputs.overlap.value);
      if (overlap !== undefined) body.overlap_s = overlap;
      const out = await post(destPath(name, tenant, "/rotate-secret"), body);
      inputs.secret.value = "";
      const until = out.previous_secret_until;
      showSecret("new-secret",
        `The new secret of ${out.name}, shown this once: give it to the receiver (Reveal ` +
        "secret shows it again, audited).", out.secret,
        until !== null && until > nowS()
          ? `The previous secret keeps signing until ${fmtUntil(until)}: every request ` +
            "carries both signatures until then."
          : "No overlap: only the new secret signs from the next attempt.");
      toast(`Rotated the secret of ${out.name}`);
      await load();
      await onChanged();
    } catch (err) {
      showError(form, errorLine, err);
    } finally {
      rotateButton.disabled = false;
    }
  }

  async function reveal() {
    try {
      const out = await get(destPath(name, tenant, "/secret"));
      showSecret("revealed-secret",
        `The current secret of ${out.name}. This reveal was written to the audit log ` +
        "(secret_revealed, actor dashboard).", out.secret, null);
    } catch (err) {
      toast(`${name}: ${err.message}`, "error");
    }
  }

  function askExpire() {
    const target = name;
    const targetTenant = tenant;
    confirmPanel(confirmBox, {
      id: "expire",
      text: `Expire the previous secret of ${target} now? From the next attempt only the ` +
            "current secret signs: a receiver still verifying with the previous one refuses " +
            "every request.",
      action: "Expire previous secret",
      run: async () => {
        const out = await post(destPath(target, targetTenant, "/expire-previous-secret"));
        toast(out.expired ? `The previous secret of ${target} signs no more`
          : `${target} had no previous secret signing`);
        if (name === target) await load();
        await onChanged();
      },
    });
  }

  return { root, open };
}
