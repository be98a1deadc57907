// Dead letters (`#/dead?destination=&tenant=&before=&limit=`): the most recently dead jobs
// with their last error, attempts and whether they can be replayed (a purged body or a
// removed destination cannot), paged by the admin API's `before` (Older, Newest); replay one,
// the selected ones, or all of a destination, each after a dry run counts what would happen.
// A destination is its tenant and its name (every tenant may have a `billing`): both travel
// together, in the picker, the address and the replay's body.

import { ApiError, destinationKey, destinationLabel as label, get, isMissingDestination, post,
         splitDestinationKey } from "./api.js";
import { fmtCount, h, jobLink, missingDestinationNote, pageHash, setChildren, table, toast,
         when } from "./dom.js";

const LIMIT = 200;
const MOST = 1000;  // the largest page the address may ask for

/** The address of the dead letters page with these parameters (empty ones left out). */
const hashFor = (values) => pageHash("dead", values);

/** The dead letters page; `params.destination` and `params.tenant` filter it (from
 * `#/dead?destination=X&tenant=T`; without a tenant the name is the default tenant's). */
export function deadView({ params, refreshNow }) {
  let destination = params.get("destination") ?? "";
  let tenant = params.get("tenant") ?? "";  // whose destination: "" is the default tenant
  let before = params.get("before") ?? "";  // the page after this job (its last row's id)
  const limit = Math.min(MOST, Number.parseInt(params.get("limit") ?? "", 10) || LIMIT);
  const shownLimit = limit === LIMIT ? "" : limit;
  let known = "";
  const selected = new Set();

  const select = h("select", { id: "dead-destination", onchange: () => {
    [tenant, destination] = splitDestinationKey(select.value);
    selected.clear();
    before = "";  // another destination's list starts at its newest
    history.replaceState(null, "", hashFor({ destination, tenant, limit: shownLimit }));
    hideConfirm();
    refreshNow();
  } });
  const replaySelected = h("button", { type: "button", id: "replay-selected",
                                       onclick: () => askSelected() }, "Replay selected");
  const replayAll = h("button", { type: "button", id: "replay-all",
                                  onclick: () => askAll() }, "Replay all of destination");
  const confirmBox = h("div", { class: "confirm", id: "confirm", hidden: true });
  const newest = h("button", { type: "button", id: "dead-newest", disabled: !before,
                               onclick: () => {
    location.hash = hashFor({ destination, tenant, limit: shownLimit });
  } }, "Newest");
  const older = h("button", { type: "button", id: "dead-older", disabled: true }, "Older");
  const list = h("div", { id: "dead-list" });
  const root = h("section", {},
    h("h1", {}, "Dead letters"),
    h("div", { class: "toolbar" },
      h("label", { for: "dead-destination" }, "Destination"), select, replaySelected, replayAll),
    confirmBox,
    list,
    h("div", { class: "toolbar" }, newest, older));

  function hideConfirm() {
    confirmBox.hidden = true;
    confirmBox.replaceChildren();
  }

  /** Show a dry run's result and a button that does the real thing. */
  function showConfirm(text, count, run) {
    const go = h("button", { type: "button", class: "primary", id: "confirm-replay",
                             disabled: count === 0, onclick: async () => {
      go.disabled = true;
      try {
        await run();
      } catch (err) {
        toast(err.message, "error");
      }
      hideConfirm();
      await refreshNow();
    } }, count === 0 ? "Nothing to replay" : `Replay ${count}`);
    setChildren(confirmBox,
      h("p", { id: "confirm-text" }, text),
      go,
      h("button", { type: "button", onclick: hideConfirm }, "Cancel"));
    confirmBox.hidden = false;
  }

  async function dryRun(body) {
    return (await post("/v1/admin/replay", { ...body, dry_run: true })).count;
  }

  async function askOne(id) {
    try {
      const count = await dryRun({ job_id: id });
      showConfirm(`Dry run: job #${id} would be replayed (${count} job).`, count, async () => {
        const out = await post("/v1/admin/replay", { job_id: id });
        toast(`Replayed ${out.count} job`);
      });
    } catch (err) {
      toast(`Job #${id}: ${err.message}`, "error");
    }
  }

  async function askSelected() {
    const ids = [...selected];
    if (ids.length === 0) {
      toast("Select dead jobs first.");
      return;
    }
    const checks = await Promise.allSettled(ids.map((id) => dryRun({ job_id: id })));
    const ok = ids.filter((id, i) => checks[i].status === "fulfilled" && checks[i].value === 1);
    showConfirm(`Dry run: ${ok.length} of ${ids.length} selected ` +
                `job${ids.length === 1 ? "" : "s"} would be replayed.`,
      ok.length, async () => {
        let count = 0;
        for (const id of ok) {
          count += (await post("/v1/admin/replay", { job_id: id })).count;
          selected.delete(id);
        }
        toast(`Replayed ${count} jobs`);
      });
  }

  async function askAll() {
    if (!destination) {
      toast("Choose a destination first.");
      return;
    }
    const body = { all_dead: true, destination, ...(tenant ? { tenant } : {}) };
    const which = label(tenant, destination);
    let count;
    try {
      count = await dryRun(body);
    } catch (err) {  // e.g. removed since it was picked: 404
      toast(`${which}: ${err.message}`, "error");
      await refreshNow();
      return;
    }
    showConfirm(`Dry run: ${count} dead job${count === 1 ? "" : "s"} of ${which} ` +
                "would be replayed.", count,
      async () => {
        const out = await post("/v1/admin/replay", body);
        toast(`Replayed ${out.count} jobs of ${which}`);
      });
  }

  function syncSelect(destinations) {
    const options = destinations.map((d) => [destinationKey(d.tenant, d.name),
                                             label(d.tenant, d.name)]);
    const chosen = destination ? destinationKey(tenant, destination) : "";
    if (chosen && !options.some(([value]) => value === chosen)) {
      options.push([chosen, label(tenant, destination)]);  // removed since, say: still shown
    }
    const values = options.map(([value]) => value).join("\n");
    if (values !== known) {
      known = values;
      setChildren(select, h("option", { value: "" }, "all destinations"),
        options.map(([value, text]) => h("option", { value }, text)));
    }
    select.value = chosen;
  }

  function row(job) {
    const box = h("input", { type: "checkbox", checked: selected.has(job.id),
                             disabled: !job.replayable,
                             "aria-label": `select job ${job.id}`, onchange: () => {
      if (box.checked) selected.add(job.id); else selected.delete(job.id);
      replaySelected.textContent = `Replay selected (${selected.size})`;
    } });
    const why = job.not_replayable_reason ?? "not replayable";
    return h("tr", { "data-job": job.id },
      h("td", {}, box),
      h("td", {}, jobLink(job.id)),
      h("td", { "data-col": "tenant" }, job.tenant ?? ""),
      h("td", {}, job.destination),
      h("td", {}, job.event_type),
      h("td", { class: "num" }, fmtCount(job.attempts)),
      h("td", { class: "error-text", "data-col": "last_error" }, job.last_error ?? ""),
      h("td", {}, when(job.finished_at)),
      h("td", { "data-col": "replayable" }, job.replayable ? "yes" : `no: ${why}`),
      h("td", {}, h("button", { type: "button", "data-action": "replay",
                                disabled: !job.replayable,
                                title: job.replayable ? null : `Cannot be replayed: ${why}`,
                                onclick: () => askOne(job.id) }, "Replay")));
  }

  async function refresh() {
    // one row more than shown: whether an older page exists
    const query = new URLSearchParams({ limit: String(limit + 1) });
    if (destination) query.set("destination", destination);
    if (tenant) query.set("tenant", tenant);
    if (before) query.set("before", before);
    const [destinations, found] = await Promise.all([
      get("/v1/admin/destinations"),
      get(`/v1/admin/dead?${query}`).catch((err) => {
        if (isMissingDestination(err)) return err;  // shown in place of the list
        if (before && err instanceof ApiError && err.status === 404) {
          // The page's first job is dead no more (replayed, purged): start from the newest.
          location.hash = hashFor({ destination, tenant, limit: shownLimit });
          return [];
        }
        throw err;
      })]);
    syncSelect(destinations);
    if (!Array.isArray(found)) {  // the filter names no destination of its tenant (any more)
      selected.clear();
      replaySelected.textContent = "Replay selected (0)";
      replayAll.disabled = true;
      older.disabled = true;
      setChildren(list, missingDestinationNote("dead-missing", found, (other) =>
        `#/dead?${new URLSearchParams({ destination, tenant: other })}`));
      return;
    }
    const dead = found.slice(0, limit);
    older.disabled = found.length <= limit;
    older.onclick = () => {
      location.hash = hashFor({ destination, tenant, before: dead[dead.length - 1].id,
                                limit: shownLimit });
    };
    const ids = new Set(dead.map((j) => j.id));
    for (const id of [...selected]) if (!ids.has(id)) selected.delete(id);
    replaySelected.textContent = `Replay selected (${selected.size})`;
    replayAll.disabled = !destination;
    replayAll.textContent = destination ? `Replay all of ${label(tenant, destination)}`
                                        : "Replay all of destination";
    if (dead.length === 0) {
      setChildren(list, h("p", { class: "empty" }, "No dead jobs."));
      return;
    }
    setChildren(list,
      table(["", "Job", "Tenant", "Destination", "Event type", "Attempts", "Last error",
             "Dead since", "Replayable", ""],
            dead.map(row), { class: "grid-table" }));
  }

  return { title: "Dead letters", root, refresh };
}
