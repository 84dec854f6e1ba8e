// Preview: paste or upload a DataDesigner config (YAML or JSON), run POST /v1/preview, and read
// the records and their traces in the same views as a job's. A 422 lists its problems under
// the columns they name; a good config can then be submitted as a job.

import { ApiError, post } from "./api.js";
import { errorBox, h, replace, route, section } from "./dom.js";
import { recordBody } from "./record.js";

const DRAFT = "synthgate.preview_draft";

const EXAMPLE = `columns:
  - name: topic
    column_type: sampler
    sampler_type: category
    params:
      values: [math, history, art]
  - name: title
    column_type: expression
    expr: "{{ topic | upper }} for beginners"
`;

/** The request: a JSON config goes in a JSON body, anything else is sent as a YAML file. */
function buildRequest(text, numRecords, seed, path) {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed;
    try {
      parsed = JSON.parse(trimmed);
    } catch (e) {
      throw new ApiError(400, { error: { code: "invalid_json", message: "The config is not valid JSON: " + e.message } });
    }
    const body = parsed && typeof parsed === "object" && "config" in parsed && "num_records" in parsed
      ? { ...parsed, num_records: numRecords } : { config: parsed, num_records: numRecords };
    if (seed !== null) body.seed = seed;
    return { url: path, body: JSON.stringify(body), type: "application/json", config: body.config };
  }
  const q = new URLSearchParams({ num_records: String(numRecords) });
  if (seed !== null) q.set("seed", String(seed));
  return { url: `${path}?${q}`, body: text, type: "application/yaml", config: null };
}

/** The columns a JSON config lists (YAML is parsed by the server only). */
function configColumns(config) {
  const inner = config && config.data_designer ? config.data_designer : config;
  return Array.isArray(inner && inner.columns) ? inner.columns.filter((c) => c && typeof c === "object") : [];
}

/** Index of the column a `field` path such as `columns[2].prompt` points into. */
function fieldColumn(field) {
  const m = /^(?:data_designer\.)?columns\[(\d+)\]/.exec(field || "");
  return m ? Number(m[1]) : null;
}

/** The 422 problems, each under the column it names; the rest under "config". */
export function problemsView(err, config) {
  const details = err.details && err.details.length ? err.details
    : [{ code: err.code, message: err.message }];
  const columns = configColumns(config);
  const byColumn = new Map();
  for (const c of columns) byColumn.set(String(c.name), []);
  const general = [];
  for (const d of details) {
    let name = d.column;
    if (name === undefined || name === null) {
      const i = fieldColumn(d.field);
      if (i !== null && columns[i]) name = columns[i].name;
    }
    if (name === undefined || name === null) general.push(d);
    else {
      if (!byColumn.has(String(name))) byColumn.set(String(name), []);
      byColumn.get(String(name)).push(d);
    }
  }
  const problem = (d) => h("li", { class: "problem" },
    h("code", { class: "tag tag-fail" }, String(d.code)),
    d.field ? h("code", { class: "field" }, String(d.field)) : null,
    h("div", {}, String(d.message)));
  const typeOf = new Map(columns.map((c) => [String(c.name), c.column_type]));
  return h("section", { class: "card problems", role: "alert" },
    h("h2", {}, `${details.length} problem${details.length === 1 ? "" : "s"} `, h("code", { class: "muted small" }, String(err.code))),
    general.length ? h("div", { class: "problem-group" }, h("h3", {}, "config"), h("ul", {}, general.map(problem))) : null,
    h("ul", { class: "columns-check" }, [...byColumn.entries()].map(([name, ps]) =>
      h("li", { class: ps.length ? "col-bad" : "col-ok", "data-column": name },
        h("div", { class: "col-name" }, h("span", { class: "mark", "aria-hidden": "true" }, ps.length ? "✗" : "✓"), " ",
          h("code", {}, name), typeOf.get(name) ? h("span", { class: "muted small" }, " " + typeOf.get(name)) : null),
        ps.length ? h("ul", {}, ps.map(problem)) : null))));
}

export function previewView(main, signal) {
  const text = h("textarea", { id: "config-text", spellcheck: "false", rows: 18, "aria-describedby": "config-help" });
  text.value = sessionStorage.getItem(DRAFT) || EXAMPLE;
  text.addEventListener("input", () => sessionStorage.setItem(DRAFT, text.value));
  const file = h("input", { type: "file", id: "config-file", accept: ".yaml,.yml,.json,application/json,application/yaml,text/yaml" });
  file.addEventListener("change", async () => {
    if (file.files && file.files[0]) {
      text.value = await file.files[0].text();
      sessionStorage.setItem(DRAFT, text.value);
    }
  });
  const n = h("input", { type: "number", id: "num-records", min: 1, max: 10, value: 2 });
  const seed = h("input", { type: "number", id: "seed", min: 0, placeholder: "random" });
  const runBtn = h("button", { type: "submit", class: "primary" }, "Run preview");
  const out = h("div", { id: "preview-out", "aria-live": "polite" });

  async function run(ev) {
    ev.preventDefault();
    runBtn.disabled = true;
    replace(out, h("p", { class: "muted" }, "Generating…"));
    let req = null;
    try {
      const seedValue = seed.value === "" ? null : Number(seed.value);
      req = buildRequest(text.value, Number(n.value || 1), seedValue, "/v1/preview");
      const res = await post(req.url, req.body, req.type, signal);
      showResult(res, seedValue);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 422 || e.status === 400 || e.status === 403)) replace(out, problemsView(e, req && req.config));
      else replace(out, errorBox(e));
    } finally {
      runBtn.disabled = false;
    }
  }

  function showResult(res, seedValue) {
    const jobN = h("input", { type: "number", id: "job-records", min: 1, value: 100 });
    const submit = h("button", { type: "button", onclick: async () => {
      submit.disabled = true;
      try {
        const req = buildRequest(text.value, Number(jobN.value || 1), seedValue, "/v1/jobs");
        const job = await post(req.url, req.body, req.type, signal);
        location.hash = route("jobs", job.id);
      } catch (e) {
        submit.after(e instanceof ApiError && e.details.length ? problemsView(e, null) : errorBox(e));
        submit.disabled = false;
      }
    } }, "Submit as a job");
    const failed = res.records.filter((r) => r.status === "failed").length;
    replace(out,
      h("div", { class: "card result-head" },
        h("strong", {}, `${res.records.length} record${res.records.length === 1 ? "" : "s"}`),
        failed ? h("span", { class: "tag tag-fail" }, `${failed} failed`) : null,
        h("span", { class: "muted" }, ` seed ${res.seed} · columns: `),
        h("span", { class: "chips" }, res.columns.map((c) => h("code", { class: "chip" }, c))),
        h("span", { class: "spacer" }),
        h("label", { for: "job-records" }, "records "), jobN, submit),
      res.records.map((r) => h("section", { class: "preview-record" },
        h("h2", { class: "section-title" }, `Record ${r.index} `, h("span", { class: "badge s-" + r.status }, r.status)),
        recordBody(r, r.traces, signal))));
  }

  replace(main,
    h("div", { class: "title-row" }, h("h1", {}, "Preview a config")),
    h("form", { class: "card preview-form", onsubmit: run },
      h("label", { for: "config-text" }, "DataDesigner config (YAML or JSON)"),
      h("p", { id: "config-help", class: "muted small" },
        "Paste a config written by DataDesigner's builder.write_config, or open a file. Nothing is stored."),
      text,
      h("div", { class: "toolbar" },
        h("label", { for: "config-file" }, "Open file "), file,
        h("span", { class: "spacer" }),
        h("label", { for: "num-records" }, "records "), n,
        h("label", { for: "seed" }, "seed "), seed,
        runBtn)),
    out);
}
