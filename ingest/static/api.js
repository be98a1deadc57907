// The admin API client. The token lives in sessionStorage (this tab only) and goes out as a
// Bearer header on every request; a 401 forgets it and sends the user back to the prompt.
// Every request says it comes from the dashboard (`X-Hookline-Actor`), so the admin API's
// audit lines name it: every change, and the reads that are audited too (a secret's reveal).

const TOKEN_KEY = "hookline.adminToken";
const ACTOR = "dashboard";

export class AuthError extends Error {}

export class ApiError extends Error {
  /** `field` names the refused input when the server says which (400 invalid_request; 404
   * `destination` for a destination filter its tenant has none of); `body` is the whole
   * error answer (e.g. that 404's `other_tenants`), or null. */
  constructor(status, code, detail, field = null, body = null) {
    super(`${code}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.field = field;
    this.body = body;
  }
}

/** Whether `err` is the 404 of a destination filter naming no destination of its tenant
 * (removed since it was picked, say): a page shows it in place of its list. */
export const isMissingDestination = (err) =>
  err instanceof ApiError && err.status === 404 && err.field === "destination";

export const getToken = () => sessionStorage.getItem(TOKEN_KEY);
export const setToken = (token) => sessionStorage.setItem(TOKEN_KEY, token);
export const clearToken = () => sessionStorage.removeItem(TOKEN_KEY);

let onUnauthorized = () => {};

/** Register what to do when the API answers 401 (show the token prompt). */
export function setUnauthorizedHandler(handler) {
  onUnauthorized = handler;
}

/** Call the admin API; resolves to the JSON answer, rejects with AuthError or ApiError. */
export async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${getToken() ?? ""}`, "X-Hookline-Actor": ACTOR };
  const init = { method, headers, cache: "no-store", credentials: "omit" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 401) {
    clearToken();
    onUnauthorized("The admin token was refused; enter it again.");
    throw new AuthError("unauthorized");
  }
  return okOrThrow(resp, await jsonOf(resp));
}

/** An answer's JSON body, or null when it has none (shared with the portal's client). */
export async function jsonOf(resp) {
  try {
    return await resp.json();
  } catch {
    return null;
  }
}

/** `data` for a success; otherwise the ApiError the JSON error body names. */
export function okOrThrow(resp, data) {
  if (!resp.ok) {
    throw new ApiError(resp.status, data?.error ?? `http_${resp.status}`,
                       data?.detail ?? resp.statusText, data?.field ?? null, data ?? null);
  }
  return data;
}

export const get = (path) => api("GET", path);
export const post = (path, body = {}) => api("POST", path, body);
export const patch = (path, body) => api("PATCH", path, body);
export const del = (path) => api("DELETE", path);

/** A path segment (destination name) made safe for a URL. */
export const seg = (value) => encodeURIComponent(String(value));

export const DEFAULT_TENANT = "_default";

/** The admin path of a destination (names are unique within a tenant only), e.g.
 * destPath("billing", "acme", "/pause") -> /v1/admin/destinations/billing/pause?tenant=acme. */
export function destPath(name, tenant = DEFAULT_TENANT, suffix = "") {
  return `/v1/admin/destinations/${seg(name)}${suffix}?tenant=${seg(tenant ?? DEFAULT_TENANT)}`;
}

/** A tenant's destination as one picker value, "tenant~name": `~` is in no destination name
 * nor tenant id, so it splits one way only. No tenant ("") is the default tenant. */
export const destinationKey = (tenant, name) => `${tenant || DEFAULT_TENANT}~${name}`;

/** [tenant, name] of a destinationKey, the default tenant as ""; ["", ""] for "". */
export function splitDestinationKey(key) {
  const cut = key.indexOf("~");
  if (cut < 0) return ["", ""];
  const tenant = key.slice(0, cut);
  return [tenant === DEFAULT_TENANT ? "" : tenant, key.slice(cut + 1)];
}

/** How a picker names a destination: "billing" for the default tenant's (or `shown`
 * tenant's), "billing (acme)" for another tenant's. */
export const destinationLabel = (tenant, name, shown = DEFAULT_TENANT) =>
  (!tenant || tenant === DEFAULT_TENANT || tenant === shown ? name : `${name} (${tenant})`);
