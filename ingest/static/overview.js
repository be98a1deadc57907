// Overview: throughput chart (events, deliveries, failed attempts, dead jobs), jobs by status,
// oldest pending age, dead count, WAL size, the supervisor's view of its workers, and the
// processes panel (children wanted and alive, restarts by cause, heartbeat age, CPU, memory:
// the figures /metrics exposes, from GET /v1/admin/processes).

import { get } from "./api.js";
import { drawThroughput } from "./chart.js";
import { fmtBytes, fmtCount, fmtDuration, h, setChildren, table, when } from "./dom.js";

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

/** "signal 1, crash 2" for a slot's restarts by cause; "0" for none. */
export function fmtRestarts(byCause) {
  const causes = Object.keys(byCause).sort();
  return causes.length === 0 ? "0" : causes.map((c) => `${c} ${byCause[c]}`).join(", ");
}

/** "worker 2 of 2 alive · ingest 1 of 1 alive", or why the supervisor's figures are missing. */
function childrenLine(figures) {
  if (!figures.supervised) {
    return "No supervisor figures: ingest runs without hookline serve, or its supervisor is gone.";
  }
  const known = Object.keys(figures.children);
  const kinds = ["worker", "ingest"].filter((k) => known.includes(k))
    .concat(known.filter((k) => k !== "worker" && k !== "ingest").sort());
  return kinds.map((kind) => {
    const { wanted, alive } = figures.children[kind];
    return `${kind}: ${alive} of ${wanted} alive`;
  }).join(" · ") + ` · restarts: ${fmtCount(figures.restarts)}`;
}

function processRow(p) {
  const restarted = Object.keys(p.restarts).length > 0;
  return h("tr", { "data-slot": p.slot },
    h("td", { class: "name" }, p.slot),
    h("td", { "data-col": "state" },
      h("span", { class: `badge ${p.running ? "ok" : "warn"}` },
        p.running ? "running" : "not running")),
    h("td", { class: `num ${restarted ? "bad-text" : ""}`, "data-col": "restarts" },
      fmtRestarts(p.restarts)),
    h("td", { class: "num", "data-col": "heartbeat" }, fmtDuration(p.heartbeat_age_s)),
    h("td", { class: "num", "data-col": "cpu" },
      p.cpu_s === null ? "–" : `${p.cpu_s.toFixed(1)} s`),
    h("td", { class: "num", "data-col": "memory" },
      p.resident_memory_bytes === null ? "–" : fmtBytes(p.resident_memory_bytes)),
    h("td", { class: "num", "data-col": "started" },
      p.started_at === null ? "–" : when(p.started_at)));
}

/** The overview page; refresh() polls stats, the supervisor view and throughput. */
export function overviewView() {
  const cards = h("div", { class: "cards", id: "overview-cards" });
  const chart = h("div", { class: "chart-box", id: "throughput-chart" });
  const children = h("p", { class: "hint", id: "processes-summary" });
  const processes = h("div", { id: "processes" });
  const root = h("section", { class: "overview" },
    h("h1", {}, "Overview"),
    cards,
    h("h2", {}, "Per minute, last 30 minutes"),
    h("p", { class: "legend" },
      h("span", { class: "key key-events" }), "events accepted ",
      h("span", { class: "key key-delivered" }), "deliveries (jobs done) ",
      h("span", { class: "key key-failed" }), "failed attempts (will be retried, or made the job dead) ",
      h("span", { class: "key key-dead" }), "jobs dead"),
    chart,
    h("h2", {}, "Processes"),
    children,
    processes);

  async function refresh() {
    const [stats, workers, throughput, figures] = await Promise.all([
      get("/v1/admin/stats"),
      get("/v1/admin/supervisor"),
      get("/v1/admin/throughput?window=30m&bucket=60"),
      get("/v1/admin/processes"),
    ]);
    const buckets = throughput.buckets;
    const current = buckets[buckets.length - 1] ?? { events: 0, delivered: 0, failed: 0 };
    const previous = buckets[buckets.length - 2] ?? { events: 0, delivered: 0, failed: 0 };
    const jobs = stats.jobs_by_status;
    const paused = stats.paused_count;  // every tenant's (paused_destinations: one tenant's)
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
    children.textContent = childrenLine(figures);
    setChildren(processes, table(
      ["Process", "State", "Restarts (by cause)", "Heartbeat age", "CPU", "Memory", "Started"],
      figures.processes.map(processRow), { class: "grid-table processes" }));
  }

  return { title: "Overview", root, refresh };
}
