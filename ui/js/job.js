// One job: status and live progress, cancel, downloads, first errors, usage, columns, its
// config (collapsible), and its records page by page with a status filter: every column, the
// model columns first, the shown ones choosable.

import { events, get, post, request } from "./api.js";
import { badge, errorBox, h, jobBadge, replace, route, section } from "./dom.js";
import { ageEl, duration, jsonTree, num, shortId } from "./format.js";
import { inProgressText, isActive, progressBar } from "./jobs.js";

const PAGE = 25;
// A record is listed once it has a result; the others are counts on the job.
const RECORD_STATUSES = ["completed", "failed"];

/** Column types whose values a model wrote: shown first in the records table. */
const MODEL_COLUMN = /^(llm-|image$|embedding$)/;

/** The job's output columns, those a model writes first (by the config's `column_type`). */
export function orderColumns(columns, config) {
  const types = new Map(((config && config.columns) || []).map((c) => [c.name, String(c.column_type || "")]));
  const model = (c) => MODEL_COLUMN.test(types.get(c) || "");
  return [...columns.filter(model), ...columns.filter((c) => !model(c))];
}

/** A value cut to one short line for the records table. */
function brief(v) {
  let s;
  if (typeof v === "string") s = v;
  else if (v && typeof v === "object" && typeof v.media_id === "string") s = "[image]";
  else if (Array.isArray(v) && v.length && v.every((x) => x && typeof x.media_id === "string")) s = `[${v.length} image${v.length > 1 ? "s" : ""}]`;
  else s = JSON.stringify(v);
  s = String(s ?? "").replace(/\s+/g, " ");
  return s.length > 80 ? s.slice(0, 79) + "…" : s;
}

/** Fetches an export with the key and hands it to the browser as a file. */
async function download(jobId, format, button) {
  const label = button.textContent;
  button.disabled = true;
  button.textContent = "Downloading…";
  try {
    const resp = await request(`/v1/jobs/${jobId}/records?format=${format}`);
    const url = URL.createObjectURL(await resp.blob());
    const a = h("a", { href: url, download: `${jobId}.${format}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
  } catch (e) {
    button.after(errorBox(e));
  } finally {
    button.disabled = false;
    button.textContent = label;
  }
}

export async function jobView(main, id, params, signal) {
  const base = `/v1/jobs/${encodeURIComponent(id)}`;
  let job = await get(base, signal);
  const head = h("div");
  const summary = h("div", { class: "grid" });
  const recordsBox = h("div");
  let recFilter = params.get("status") || "";
  let cursors = [null]; // cursor of each page seen; the last is the current page's
  let nextCursor = null;
  let lastPage = null;
  // The config names each column's type, which orders the records table's columns.
  const configP = get(`${base}/config`, signal);
  let columns = orderColumns(job.columns || [], (await configP.catch(() => null))?.config);
  const hidden = new Set();

  const configBox = h("div", { class: "muted" }, "Loading the config…");
  replace(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" },
      h("a", { href: route("jobs") }, "Jobs"), " / ", h("span", {}, "job " + shortId(id))),
    head, summary,
    section("Records", recordsBox),
    h("section", { class: "card" },
      h("details", { class: "config" }, h("summary", {}, h("h2", { class: "inline" }, "Config")), configBox)));

  function renderHead() {
    const cancel = isActive(job.status) && job.status !== "cancelling"
      ? h("button", { type: "button", class: "danger", onclick: async (ev) => {
        ev.target.disabled = true;
        try { job = await post(`${base}/cancel`, undefined, undefined, signal); renderAll(); } catch (e) { head.append(errorBox(e)); }
      } }, "Cancel job")
      : null;
    const dl = (fmt, label) => h("button", { type: "button", onclick: (ev) => download(job.id, fmt, ev.target) }, label);
    replace(head,
      h("div", { class: "title-row" },
        h("h1", {}, job.name ? [job.name, " "] : "Job ", h("span", { class: job.name ? "mono small muted" : "mono" }, shortId(job.id))),
        jobBadge(job),
        h("span", { class: "spacer" }), cancel),
      h("div", { class: "progress-big" }, progressBar(job.counts),
        h("div", { class: "small" },
          `${num(job.counts.completed)} completed · ${num(job.counts.failed)} failed · ` +
          `${inProgressText(job.counts)} · ${num(job.counts.pending)} pending · ` +
          `${num(job.counts.cancelled)} cancelled · ${num(job.counts.total)} total`),
        job.counts.selection ? h("div", { class: "small" }, selectionText(job.counts.selection)) : null),
      job.error ? errorBox(job.error) : null,
      h("div", { class: "actions" }, h("span", { class: "muted" }, "Download"),
        dl("jsonl", "JSONL"), dl("csv", "CSV"), dl("parquet", "Parquet")));
  }

  function renderSummary() {
    const usage = Object.entries(job.usage || {});
    const columns = Object.entries(job.column_usage || {});
    const priced = usage.some(([, u]) => u.cost !== undefined);
    const cached = usage.some(([, u]) => u.cached_requests > 0);
    const usageTable = (label, rows) => h("table", { class: "compact" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, label), h("th", { scope: "col", class: "num" }, "requests"),
        cached ? h("th", { scope: "col", class: "num" }, "cached") : null,
        h("th", { scope: "col", class: "num" }, "prompt tokens"), h("th", { scope: "col", class: "num" }, "completion tokens"),
        priced ? h("th", { scope: "col", class: "num" }, "cost") : null)),
      h("tbody", {}, rows.map(([name, u]) => h("tr", {}, h("td", {}, h("code", {}, name)),
        h("td", { class: "num" }, num(u.requests)),
        cached ? h("td", { class: "num" }, num(u.cached_requests || 0)) : null,
        h("td", { class: "num" }, num(u.prompt_tokens)),
        h("td", { class: "num" }, num(u.completion_tokens)),
        priced ? h("td", { class: "num" }, u.cost === undefined ? "" : money(u.cost)) : null))));
    replace(summary,
      section("About",
        h("dl", { class: "facts" },
          h("dt", {}, "id"), h("dd", {}, h("code", {}, job.id)),
          h("dt", {}, "created"), h("dd", {}, ageEl(job.created_at)),
          h("dt", {}, "running time"), h("dd", {}, duration(job.started_at, job.finished_at)),
          h("dt", {}, "seed"), h("dd", {}, h("code", {}, String(job.seed))),
          job.cost !== undefined ? [h("dt", {}, "cost"), h("dd", {}, money(job.cost),
            job.max_cost !== undefined ? ` of a budget of ${money(job.max_cost)}` : "")] : null,
          h("dt", {}, "columns"), h("dd", {}, h("div", { class: "chips" }, (job.columns || []).map((c) => h("code", { class: "chip" }, c)))),
          job.metadata ? [h("dt", {}, "metadata"), h("dd", {}, jsonTree(job.metadata, 0))] : null)),
      section("LLM usage", usage.length
        ? usageTable("model alias", usage)
        : h("p", { class: "muted" }, "No LLM requests.")),
      priced && columns.length ? section("LLM usage by column", usageTable("column", columns)) : null,
      providerStates(job.providers),
      toolUsage(job.tool_usage),
      (job.first_errors || []).length
        ? section("First errors", h("ul", { class: "errors" }, job.first_errors.map((e) => h("li", {},
          h("a", { href: route("records", e.record_id) }, "record " + e.index), " ",
          h("code", { class: "tag tag-fail" }, String(e.error.code)),
          e.error.column ? h("span", {}, " in ", h("code", {}, String(e.error.column))) : null,
          h("div", { class: "small" }, String(e.error.message))))))
        : null);
  }

  /** While the job runs: each model provider's admission state on the answering replica. */
  function providerStates(providers) {
    const rows = Object.entries(providers || {});
    if (!rows.length) return null;
    const circuit = (c) => h("span", { class: "tag " + (c === "closed" ? "tag-ok" : "tag-fail") }, c.replace("_", "-"));
    return section("Model providers",
      h("table", { class: "compact" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "provider"), h("th", { scope: "col" }, "circuit"),
          h("th", { scope: "col", class: "num" }, "in flight"), h("th", { scope: "col", class: "num" }, "limit"),
          h("th", { scope: "col", class: "num" }, "throttled"))),
        h("tbody", {}, rows.map(([name, p]) => h("tr", {},
          h("td", {}, h("code", {}, name)), h("td", {}, circuit(p.circuit),
            p.paused_for_secs ? ` paused ${Math.ceil(p.paused_for_secs)} s` : ""),
          h("td", { class: "num" }, num(p.in_flight)), h("td", { class: "num" }, num(p.concurrency_limit)),
          h("td", { class: "num" }, num(p.throttled)))))));
  }

  /** Tool use by LLM column: one row per (column, tool) with its calls by outcome. */
  function toolUsage(byColumn) {
    const rows = [];
    for (const [column, u] of Object.entries(byColumn || {})) {
      for (const [tool, outcomes] of Object.entries(u.tool_calls || {})) {
        rows.push([column, u.tool_turns, tool, outcomes]);
      }
    }
    if (!rows.length) return null;
    const outcomeText = (o) => Object.entries(o).map(([k, n]) => `${num(n)} ${k.replace("_", " ")}`).join(" · ");
    return section("Tool use",
      h("table", { class: "compact" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "column"), h("th", { scope: "col", class: "num" }, "turns"),
          h("th", { scope: "col" }, "tool"), h("th", { scope: "col" }, "calls by outcome"))),
        h("tbody", {}, rows.map(([column, turns, tool, outcomes]) => h("tr", {},
          h("td", {}, h("code", {}, column)), h("td", { class: "num" }, num(turns)),
          h("td", {}, h("code", {}, tool || "(no name)")), h("td", {}, outcomeText(outcomes)))))));
  }

  async function loadRecords() {
    const cursor = cursors[cursors.length - 1];
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) q.set("cursor", cursor);
    if (recFilter) q.set("status", recFilter);
    lastPage = await get(`${base}/records?${q}`, signal);
    nextCursor = lastPage.next_cursor || null;
    renderRecords();
  }

  /** Which columns the table shows: a checkbox each, all shown at first. */
  function columnChooser() {
    if (columns.length < 2) return null;
    return h("details", { class: "columns" }, h("summary", {}, `Columns (${columns.length - hidden.size} of ${columns.length} shown)`),
      h("div", { class: "column-choice" }, columns.map((c) => h("label", {},
        h("input", { type: "checkbox", checked: !hidden.has(c), "data-column": c, onchange: (ev) => {
          if (ev.target.checked) hidden.delete(c); else hidden.add(c);
          renderRecords();
          recordsBox.querySelector("details.columns").open = true;
        } }), " ", c))));
  }

  function renderRecords() {
    const page = lastPage;
    const cols = columns.filter((c) => !hidden.has(c));
    const select = h("select", { id: "record-status", onchange: () => {
      recFilter = select.value; cursors = [null]; loadRecords().catch(showErr);
    } }, h("option", { value: "" }, "all"), RECORD_STATUSES.map((s) => h("option", { value: s, selected: s === recFilter }, s)));
    const pageNo = cursors.length;
    replace(recordsBox,
      columnChooser(),
      h("div", { class: "toolbar" }, h("label", { for: "record-status" }, "Status "), select,
        h("span", { class: "spacer" }),
        h("button", { type: "button", disabled: pageNo === 1, onclick: () => { cursors.pop(); loadRecords().catch(showErr); } }, "← Previous"),
        h("span", { class: "muted small" }, `page ${pageNo}`),
        h("button", { type: "button", disabled: !nextCursor, onclick: () => { cursors.push(nextCursor); loadRecords().catch(showErr); } }, "Next →")),
      page.records.length === 0 ? h("p", { class: "muted" }, "No records" + (recFilter ? ` with status ${recFilter}.` : ".")) :
        h("div", { class: "table-wrap" }, h("table", { class: "records" },
          h("thead", {}, h("tr", {}, h("th", { scope: "col", class: "num" }, "#"), h("th", { scope: "col" }, "status"),
            h("th", { scope: "col" }, "error"), cols.map((c) => h("th", { scope: "col", "data-column": c }, c)))),
          h("tbody", {}, page.records.map((r) => h("tr", { "data-record": r.id },
            h("td", { class: "num" }, h("a", { href: route("records", r.id) }, String(r.index))),
            h("td", {}, badge(r.status)),
            h("td", {}, r.error ? h("code", { class: "tag tag-fail", title: String(r.error.message) }, String(r.error.code)) : ""),
            cols.map((c) => h("td", { class: "cell-brief" }, r.values && c in r.values ? brief(r.values[c]) : ""))))))));
  }

  function showErr(e) {
    replace(recordsBox, errorBox(e));
  }

  function renderAll() {
    renderHead();
    renderSummary();
  }

  renderAll();
  await loadRecords();
  configP.then((c) => {
    replace(configBox, h("div", { class: "json" }, jsonTree(c.config, 2)),
      Object.keys(c.run_config || {}).length ? [h("h3", {}, "Run config"), jsonTree(c.run_config, 2)] : null);
  }, (e) => replace(configBox, errorBox(e)));

  if (isActive(job.status)) {
    let pending = null;
    events(`${base}/events`, signal, (name, data) => {
      if (name === "progress") { job.status = data.status; job.counts = data.counts; renderHead(); }
      if (name === "record" && !pending) {
        // Many records can finish at once: refresh the page of records at most once a second.
        pending = setTimeout(() => { pending = null; loadRecords().catch(showErr); }, 1000);
      }
      if (name === "done") { job = data; renderAll(); loadRecords().catch(showErr); }
    }).catch(() => {});
  }
}

/** A cost in the unit of the server's prices: enough digits for fractions of a cent. */
function money(x) {
  return x >= 100 ? x.toFixed(2) : x.toPrecision(4);
}

/** A record_selection job's five counts, in a line. */
function selectionText(s) {
  return `record selection: ${num(s.accepted)} of ${num(s.target)} accepted · ` +
    `${num(s.rejected)} rejected · ${num(s.null_predicate)} null predicate · ` +
    `${num(s.failed_generation)} failed · ${num(s.trimmed)} trimmed · ` +
    `budget ${num(s.max_candidate_records)} candidates`;
}
