// The jobs list: newest first, filtered by status and name on the server, with live progress
// bars for the jobs still running (from their event streams) and a periodic refresh for the
// rest.

import { events, get } from "./api.js";
import { h, jobBadge, replace, route } from "./dom.js";
import { ageEl, num, shortId, usageTotals } from "./format.js";

export const STATUSES = ["queued", "running", "cancelling", "completed", "failed", "cancelled"];
const ACTIVE = new Set(["queued", "running", "cancelling"]);
/** Browsers allow about six connections per host; streams beyond this would starve the page. */
const MAX_STREAMS = 3;
const REFRESH_MS = 5000;

export function isActive(status) {
  return ACTIVE.has(status);
}

/** A progress bar of record counts: completed, failed and cancelled shares of the total. */
export function progressBar(counts) {
  const total = counts.total || 0;
  const done = counts.completed + counts.failed + counts.cancelled;
  const pct = (n) => (total ? (100 * n) / total : 0);
  const seg = (cls, n) => {
    const s = h("span", { class: "seg " + cls });
    s.style.width = pct(n) + "%"; // CSSOM, which the CSP allows (unlike style attributes)
    return s;
  };
  return h("div", {
    class: "bar", role: "progressbar", "aria-valuemin": 0, "aria-valuemax": total,
    "aria-valuenow": done, "aria-label": `${done} of ${total} records finished`,
  }, seg("seg-ok", counts.completed), seg("seg-fail", counts.failed), seg("seg-cancel", counts.cancelled));
}

/** Records in progress, told apart: those generating, and those waiting on a model (for a
 * request slot or its answer), which a slow or tightly capped model makes most of them. */
export function inProgressText(c) {
  const waiting = c.waiting_for_model || 0;
  if (!waiting) return `${num(c.in_progress)} running`;
  const running = c.in_progress - waiting;
  return (running > 0 ? `${num(running)} running · ` : "") + `${num(waiting)} waiting for a model`;
}

function countsText(c) {
  const parts = [`${num(c.completed)}/${num(c.total)} done`];
  if (c.failed) parts.push(`${num(c.failed)} failed`);
  if (c.in_progress) parts.push(inProgressText(c));
  if (c.cancelled) parts.push(`${num(c.cancelled)} cancelled`);
  return parts.join(" · ");
}

function usageText(usage) {
  const t = usageTotals(usage);
  if (!t.requests) return "–";
  return `${num(t.requests)} req · ${num(t.prompt_tokens + t.completion_tokens)} tok`;
}

function row(job) {
  const c = job.counts;
  return h("tr", { "data-job": job.id, "data-status": job.status },
    h("td", {},
      job.name ? h("div", { class: "job-name" }, h("a", { href: route("jobs", job.id), title: job.id }, job.name)) : null,
      h("a", { href: route("jobs", job.id), class: "mono" + (job.name ? " small muted" : ""), title: job.id }, shortId(job.id)),
      h("div", { class: "small muted cols" }, (job.columns || []).slice(0, 4).join(", ") +
        ((job.columns || []).length > 4 ? ` +${job.columns.length - 4}` : ""))),
    h("td", {}, jobBadge(job)),
    h("td", { class: "progress-cell" }, progressBar(c), h("div", { class: "small muted" }, countsText(c))),
    h("td", { class: "num hide-narrow" }, num(c.total)),
    h("td", { class: "hide-narrow" }, h("span", { title: JSON.stringify(job.usage) }, usageText(job.usage))),
    h("td", {}, ageEl(job.created_at)));
}

export async function jobsView(main, params, signal) {
  let filter = params.get("status") || "";
  let nameFilter = params.get("name") || "";
  const jobs = new Map(); // id -> job, in list order
  let cursor = null;
  let more = false;
  const streams = new Map(); // id -> AbortController

  const tbody = h("tbody");
  const empty = h("p", { class: "muted", hidden: true });
  const moreBtn = h("button", { type: "button", onclick: () => load(cursor) }, "Load more");
  /** Filters are the server's: the list is loaded again from the first page. */
  function refilter() {
    const q = new URLSearchParams();
    if (filter) q.set("status", filter);
    if (nameFilter) q.set("name", nameFilter);
    history.replaceState(null, "", q.size ? `#/jobs?${q}` : "#/jobs");
    jobs.clear();
    load(null).catch(() => {});
  }
  const select = h("select", { id: "status-filter", onchange: () => { filter = select.value; refilter(); } },
    h("option", { value: "" }, "all"), STATUSES.map((s) => h("option", { value: s, selected: s === filter }, s)));
  const nameInput = h("input", { id: "name-filter", type: "search", placeholder: "exact name", value: nameFilter,
    onchange: () => { nameFilter = nameInput.value.trim(); refilter(); } });

  replace(main,
    h("div", { class: "title-row" }, h("h1", {}, "Jobs"),
      h("span", { class: "spacer" }),
      h("label", { for: "name-filter" }, "Name "), nameInput,
      h("label", { for: "status-filter" }, "Status "), select),
    h("div", { class: "table-wrap" },
      h("table", { class: "jobs" },
        h("thead", {}, h("tr", {},
          h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Status"),
          h("th", { scope: "col" }, "Progress"), h("th", { scope: "col", class: "num hide-narrow" }, "Records"),
          h("th", { scope: "col", class: "hide-narrow" }, "LLM usage"), h("th", { scope: "col" }, "Age"))),
        tbody)),
    empty, h("p", {}, moreBtn));

  function render() {
    // A streamed job may have left the status asked for since it was loaded.
    const shown = [...jobs.values()].filter((j) => !filter || j.status === filter);
    replace(tbody, shown.map(row));
    empty.hidden = shown.length > 0;
    empty.textContent = filter || nameFilter ? "No jobs match these filters."
      : "No jobs yet. Submit one with POST /v1/jobs, or try a config under Preview.";
    moreBtn.hidden = !more;
    follow();
  }

  /** Streams progress of the first few active jobs; closes streams of jobs that finished. */
  function follow() {
    const active = [...jobs.values()].filter((j) => isActive(j.status)).slice(0, MAX_STREAMS).map((j) => j.id);
    for (const [id, ctl] of streams) {
      if (!active.includes(id)) { ctl.abort(); streams.delete(id); }
    }
    for (const id of active) {
      if (streams.has(id)) continue;
      const ctl = new AbortController();
      signal.addEventListener("abort", () => ctl.abort());
      streams.set(id, ctl);
      events(`/v1/jobs/${id}/events`, ctl.signal, (name, data) => {
        const j = jobs.get(id);
        if (!j) return;
        if (name === "progress") { j.status = data.status; j.counts = data.counts; }
        if (name === "done") jobs.set(id, data);
        if (name === "progress" || name === "done") {
          const old = tbody.querySelector(`tr[data-job="${CSS.escape(id)}"]`);
          if (old) old.replaceWith(row(jobs.get(id)));
        }
      }).catch(() => {}).finally(() => {
        if (streams.get(id) === ctl) streams.delete(id);
      });
    }
  }

  /** `GET /v1/jobs` with the filters, from `cursor` when given. */
  function listUrl(cursor) {
    const q = new URLSearchParams({ limit: "50" });
    if (filter) q.set("status", filter);
    if (nameFilter) q.set("name", nameFilter);
    if (cursor) q.set("cursor", cursor);
    return `/v1/jobs?${q}`;
  }

  async function load(from) {
    const page = await get(listUrl(from), signal);
    for (const j of page.jobs) jobs.set(j.id, j);
    cursor = page.next_cursor || null;
    more = !!cursor;
    render();
  }

  /** Picks up new jobs and changes of jobs not streamed, keeping later pages loaded. */
  async function refresh() {
    const page = await get(listUrl(null), signal);
    const fresh = page.jobs.filter((j) => !jobs.has(j.id));
    for (const j of page.jobs) if (!streams.has(j.id)) jobs.set(j.id, j);
    if (fresh.length) {
      const rest = [...jobs.entries()].filter(([id]) => !fresh.some((f) => f.id === id));
      jobs.clear();
      for (const j of fresh) jobs.set(j.id, j);
      for (const [id, j] of rest) jobs.set(id, j);
    }
    render();
  }

  await load(null);
  const timer = setInterval(() => refresh().catch(() => {}), REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
