// A destination's health as the portal shows it: state (paused with its reason, failing with
// its streak, active) and success rate, from the tenant API's destination and stats answers.

import { fmtCount, fmtTime } from "/static/dom.js";

/** The state badge: paused over failing over active. */
export function stateOf(d) {
  if (d.paused) {
    return { label: d.paused_reason ? `paused (${d.paused_reason})` : "paused",
             cls: /^circuit breaker|410 Gone/.test(d.paused_reason ?? "") ? "bad" : "warn" };
  }
  const streak = Number(d.failure_streak ?? d.health?.failure_streak ?? 0);
  if (streak > 0) {
    const since = d.failing_since ?? d.health?.failing_since;
    return { label: `failing · ${fmtCount(streak)} in a row`, cls: "bad",
             title: since ? `every attempt since ${fmtTime(since)} failed` : undefined };
  }
  return { label: "active", cls: "ok" };
}

/** The success rate (a fraction) from a destination or its stats, or null when unknown. */
export function successRate(d, stats) {
  for (const source of [stats, d.health, d.stats, d]) {
    if (!source) continue;
    if (typeof source.success_rate === "number") return source.success_rate;
    if (source.latency_samples > 0) return source.delivered_samples / source.latency_samples;
    if (source.attempts > 0 && typeof source.delivered === "number") {
      return source.delivered / source.attempts;
    }
  }
  return null;
}

/** "98.5 %" or "–". */
export const fmtRate = (rate) =>
  rate === null || rate === undefined ? "–" : `${(Math.floor(rate * 1000) / 10).toFixed(1)} %`;
