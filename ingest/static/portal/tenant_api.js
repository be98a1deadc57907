// The tenant API client. The tenant token arrives in the URL fragment (`#token=hlt_...`,
// which browsers never send to a server nor put in a Referer header); it is taken out of the
// address bar at once (history.replaceState), kept in memory and in this tab's
// sessionStorage (a reload keeps working), and sent only as a Bearer header. A 401 forgets
// it and tells the shell, which shows "this link has expired" (no retry can help).

import { ApiError, isMissingDestination, jsonOf, okOrThrow, seg } from "/static/api.js";

const TOKEN_KEY = "hookline.tenantToken";
const EXPIRED_CODES = new Set(["token_expired", "token_revoked"]);

export { ApiError, isMissingDestination, seg };

/** The token was refused (401): `expired` for token_expired / token_revoked. */
export class TokenRefused extends Error {
  constructor(code, detail) {
    super(`${code}: ${detail}`);
    this.code = code;
    this.expired = EXPIRED_CODES.has(code);
  }
}

let token = null;
let onRefused = () => {};

function stored(action) {
  try {
    return action(sessionStorage);
  } catch {
    return null;  // storage refused (e.g. a sandboxed frame): memory only
  }
}

/**
 * Take the token from the fragment (then remove it from the address bar and history entry),
 * else from this tab's storage. Returns it, or null when there is none.
 */
export function takeToken() {
  const params = new URLSearchParams(location.hash.replace(/^#\/?/, ""));
  const fromLink = params.get("token");
  if (fromLink) {
    token = fromLink;
    stored((s) => s.setItem(TOKEN_KEY, fromLink));
    history.replaceState(null, "", `${location.pathname}${location.search}#/`);
  } else {
    token = stored((s) => s.getItem(TOKEN_KEY));
  }
  return token;
}

/** Forget the token (memory and storage). */
export function dropToken() {
  token = null;
  stored((s) => s.removeItem(TOKEN_KEY));
}

/** Register what to do when the token is refused (show the expired message). */
export function setRefusedHandler(handler) {
  onRefused = handler;
}

/** Call the tenant API; resolves to the JSON answer, rejects with TokenRefused or ApiError. */
export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${token ?? ""}` };
  const init = { method, headers, cache: "no-store", credentials: "omit",
                 referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const data = await jsonOf(resp);
  if (resp.status === 401) {
    const refused = new TokenRefused(data?.error ?? "token_invalid", data?.detail ?? "");
    dropToken();
    onRefused(refused);
    throw refused;
  }
  return okOrThrow(resp, data);
}

export const get = (path) => api("GET", path);
export const post = (path, body = {}) => api("POST", path, body);
export const patch = (path, body) => api("PATCH", path, body);
export const del = (path) => api("DELETE", path);


/** A list answer as an array, whether the API wraps it (`{key: [...]}`) or not. */
export function listOf(answer, key) {
  if (Array.isArray(answer)) return answer;
  return Array.isArray(answer?.[key]) ? answer[key] : [];
}
