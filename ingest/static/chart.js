// The throughput chart: plain SVG built with createElementNS (no library, no markup strings).

const NS = "http://www.w3.org/2000/svg";
const W = 720;
const H = 200;
const M = { top: 12, right: 12, bottom: 26, left: 44 };

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

function niceMax(value) {
  if (value <= 5) return 5;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) {
    if (value <= step * magnitude) return step * magnitude;
  }
  return 10 * magnitude;
}

const hhmm = (unixS) =>
  new Date(unixS * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

/** Runs of consecutive buckets whose `key` is counted (not null): one line each. */
function countedRuns(buckets, key) {
  const runs = [];
  let run = [];
  buckets.forEach((b, i) => {
    if (b[key] === null || b[key] === undefined) {
      if (run.length) runs.push(run);
      run = [];
    } else {
      run.push(i);
    }
  });
  if (run.length) runs.push(run);
  return runs;
}

/**
 * Draw events accepted, deliveries and failed attempts per bucket (lines) and dead jobs (bars)
 * into `container` (replacing what was there). data: {bucket_s, buckets: [{start_s, events,
 * delivered, dead, failed}, ...]} from /v1/admin/throughput; `failed` null = not counted.
 */
export function drawThroughput(container, data) {
  const buckets = data.buckets;
  const n = Math.max(buckets.length, 2);
  const top = niceMax(Math.max(1, ...buckets.map((b) =>
    Math.max(b.events, b.delivered, b.dead, b.failed ?? 0))));
  const x = (i) => M.left + (i / (n - 1)) * (W - M.left - M.right);
  const y = (v) => H - M.bottom - (v / top) * (H - M.top - M.bottom);
  const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", class: "chart",
                         "aria-label": "events accepted, deliveries and failed attempts per bucket" });
  for (const v of [0, top / 2, top]) {
    svg.append(s("line", { x1: M.left, x2: W - M.right, y1: y(v), y2: y(v), class: "grid" }));
    svg.append(s("text", { x: M.left - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" },
                 Number.isInteger(v) ? v : v.toFixed(1)));
  }
  const labelEvery = Math.max(1, Math.round(buckets.length / 6));
  buckets.forEach((b, i) => {
    if (i % labelEvery === 0 || i === buckets.length - 1) {
      const anchor = i === 0 ? "start" : i === buckets.length - 1 ? "end" : "middle";
      svg.append(s("text", { x: x(i), y: H - 8, class: "axis", "text-anchor": anchor },
                   hhmm(b.start_s)));
    }
    if (b.dead > 0) {
      const bar = s("rect", { x: x(i) - 3, y: y(b.dead), width: 6, height: y(0) - y(b.dead),
                              class: "dead-bar" });
      bar.append(s("title", {}, `${hhmm(b.start_s)}: ${b.dead} dead`));
      svg.append(bar);
    }
  });
  // Failures first, so the events and deliveries lines stay visible where they coincide.
  const series = [["failed", "line-failed", "failed attempts"], ["events", "line-events", "events"],
                  ["delivered", "line-delivered", "delivered"]];
  for (const [key, cls, label] of series) {
    for (const run of countedRuns(buckets, key)) {
      const points = run.map((i) => `${x(i).toFixed(1)},${y(buckets[i][key]).toFixed(1)}`);
      svg.append(s("polyline", { points: points.join(" "), class: cls, fill: "none" }));
      for (const i of run) {
        const b = buckets[i];
        const dot = s("circle", { cx: x(i), cy: y(b[key]), r: 2.5, class: cls,
                                  "data-count": b[key] });
        dot.append(s("title", {}, `${hhmm(b.start_s)}: ${b[key]} ${label}`));
        svg.append(dot);
      }
    }
  }
  container.replaceChildren(svg);
}
