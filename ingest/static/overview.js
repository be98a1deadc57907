// Overview: throughput chart (events, deliveries, failed attempts, dead jobs), jobs by status,
// oldest pending age, dead count, WAL size and the supervisor's view of its workers.

import { get } from "./api.js";
import { drawThroughput } from "./chart.js";
import { fmtBytes, fmtCount, fmtDuration, h, setChildren } from "./dom.js";

function card(id, label, value, { detail, kind = "", href } = {}) {
  const valueNode = href ? h("a", { href }, value) : value;
  return h("div", { class: `card ${kind}`, "data-card": id },
    h("div", { class: "label" }, label),
    h("div", { class: "value" }, valueNode),
    detail ? h("div", { class: "detail" }, detail) : null);
}

function workersCard(workers) {
  if (!workers.known) {
    return card("workers", "Workers alive", "unknown", { kind: "warn", detail: workers.detail });
  }
  const kind = workers.workers_healthy > 0 ? "" : "bad";
  return card("workers", "Workers alive", fmtCount(workers.workers_alive), {
    kind,
    detail: `${workers.workers_healthy} healthy, ${workers.workers_wanted} wanted` +
            (workers.stopping ? " (stopping)" : ""),
  });
}

/** The overview page; refresh() polls stats, the supervisor view and throughput. */
export function overviewView() {
  const cards = h("div", { class: "cards", id: "overview-cards" });
  const chart = h("div", { class: "chart-box", id: "throughput-chart" });
  const root = h("section", { class: "overview" },
    h("h1", {}, "Overview"),
    cards,
    h("h2", {}, "Per minute, last 30 minutes"),
    h("p", { class: "legend" },
      h("span", { class: "key key-events" }), "events accepted ",
      h("span", { class: "key key-delivered" }), "deliveries (jobs done) ",
      h("span", { class: "key key-failed" }), "failed attempts (will be retried, or made the job dead) ",
      h("span", { class: "key key-dead" }), "jobs dead"),
    chart);

  async function refresh() {
    const [stats, workers, throughput] = await Promise.all([
      get("/v1/admin/stats"),
      get("/v1/admin/supervisor"),
      get("/v1/admin/throughput?window=30m&bucket=60"),
    ]);
    const buckets = throughput.buckets;
    const current = buckets[buckets.length - 1] ?? { events: 0, delivered: 0, failed: 0 };
    const previous = buckets[buckets.length - 2] ?? { events: 0, delivered: 0, failed: 0 };
    const jobs = stats.jobs_by_status;
    const paused = Object.keys(stats.paused_destinations ?? {}).length;
    setChildren(cards,
      card("events-per-minute", "Events accepted / min", fmtCount(previous.events),
           { detail: `this minute so far: ${fmtCount(current.events)}` }),
      card("deliveries-per-minute", "Deliveries / min", fmtCount(previous.delivered),
           { detail: `this minute so far: ${fmtCount(current.delivered)}` }),
      card("failed-per-minute", "Failed attempts / min", fmtCount(previous.failed),
           { kind: previous.failed > 0 ? "warn" : "",
             detail: `this minute so far: ${fmtCount(current.failed)}` }),
      card("pending", "Pending", fmtCount(jobs.pending)),
      card("running", "Running", fmtCount(jobs.running)),
      card("done", "Done", fmtCount(jobs.done)),
      card("dead", "Dead", fmtCount(jobs.dead),
           { kind: jobs.dead > 0 ? "bad" : "", href: "#/dead" }),
      card("oldest-pending", "Oldest pending (due)",
           stats.oldest_pending_age_s === null ? "none due" : fmtDuration(stats.oldest_pending_age_s),
           { kind: stats.oldest_pending_age_s > 300 ? "warn" : "" }),
      card("paused", "Paused destinations", fmtCount(paused),
           { kind: paused > 0 ? "warn" : "", href: "#/destinations" }),
      card("wal", "WAL size", stats.wal_bytes === null ? "n/a" : fmtBytes(stats.wal_bytes),
           { detail: stats.wal_bytes === null ? "not SQLite" : "SQLite -wal file" }),
      workersCard(workers),
    );
    drawThroughput(chart, throughput);
  }

  return { title: "Overview", root, refresh };
}
