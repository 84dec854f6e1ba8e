// One record: status, error, values, and each LLM column's trace as a conversation. The same
// body renders a previewed record.

import { get } from "./api.js";
import { badge, h, replace, route, section } from "./dom.js";
import { shortId } from "./format.js";
import { conversation } from "./trace.js";
import { valuesTable } from "./values.js";

/** The record's error, with the column and stage it failed in. */
export function recordError(err) {
  if (!err) return null;
  return h("div", { class: "error-box", role: "alert" },
    h("strong", {}, String(err.code)),
    err.column ? h("span", {}, " in column ", h("code", {}, String(err.column))) : null,
    err.stage ? h("span", { class: "muted" }, ` (${err.stage})`) : null,
    h("div", {}, String(err.message || "")));
}

/**
 * What each LLM column asked: its model alias, the model and the parameters, from the job's
 * config (a model the job defines) or the server's models. `{column: {alias, model, params}}`.
 */
function modelsByColumn(config, models) {
  const out = {};
  for (const c of (config && config.columns) || []) {
    if (!c.model_alias) continue;
    const own = ((config && config.model_configs) || []).find((m) => m.alias === c.model_alias);
    const server = (models || []).find((m) => m.alias === c.model_alias);
    out[c.name] = own
      ? { alias: c.model_alias, model: own.model, params: own.inference_parameters }
      : { alias: c.model_alias, model: server && server.model, params: server && server.limits };
  }
  return out;
}

/** Values and conversations of a record (`traces`: [{column, messages}]; `models` as
 * [`modelsByColumn`] gives them, when known). */
export function recordBody(record, traces, signal, models) {
  const failedColumn = record.error && record.error.column;
  return [
    recordError(record.error),
    section("Values", valuesTable(record.values, signal, record.error)),
    (traces || []).length
      ? h("div", { class: "traces" }, h("h2", { class: "section-title" }, "Traces"),
        traces.map((t) => conversation(t.column, t.messages,
          record.status === "failed" && failedColumn === t.column ? record.error : null,
          models && models[t.column])))
      : null,
  ];
}

export async function recordView(main, id, signal) {
  const record = await get(`/v1/records/${encodeURIComponent(id)}`, signal);
  let traces = [];
  try {
    traces = (await get(`/v1/records/${encodeURIComponent(id)}/trace`, signal)).traces;
  } catch (e) {
    if (e.code !== "trace_not_found") throw e;
  }
  // What each column asked; the record shows without it if either read fails.
  const [config, models] = await Promise.all([
    get(`/v1/jobs/${encodeURIComponent(record.job_id)}/config`, signal).then((c) => c.config, () => null),
    get("/v1/models", signal).then((m) => m.models, () => null),
  ]);
  replace(main,
    h("nav", { class: "crumbs", "aria-label": "Breadcrumb" },
      h("a", { href: route("jobs") }, "Jobs"), " / ",
      h("a", { href: route("jobs", record.job_id) }, "job " + shortId(record.job_id)), " / ",
      h("span", {}, "record " + record.index)),
    h("div", { class: "title-row" },
      h("h1", {}, "Record ", String(record.index)), badge(record.status),
      h("span", { class: "muted" }, `attempts: ${record.attempts}`),
      h("code", { class: "muted small" }, record.id)),
    recordBody(record, traces, signal, modelsByColumn(config, models)));
}
