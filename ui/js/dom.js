// Building DOM nodes. Every piece of data becomes a text node: nothing here parses markup, so a
// value such as "<img src=x onerror=...>" is shown as those characters and never runs.

/**
 * h("a", {href: "#/jobs", class: "x", onclick: fn}, "text", node, [more, nodes])
 * Attributes named on* become event listeners; `false`/null/undefined attributes are skipped;
 * children may be strings, numbers, nodes, arrays of them, or null (skipped).
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "href" && !safeHref(v)) {
      throw new Error("refusing href " + v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

/** Appends children (strings as text) to `el`. */
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** Replaces the children of `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

/** Links the page builds: in-page routes, and blob: URLs of fetched downloads. */
function safeHref(v) {
  return typeof v === "string" && (v.startsWith("#") || v.startsWith("blob:"));
}

/** A route link: `link("#/jobs/ID", "text")`. Ids are encoded, never trusted as paths. */
export function route(...parts) {
  return "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/");
}

/** A labelled section with a heading. */
export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** A status badge: the status text, coloured by class. */
export function badge(status) {
  return h("span", { class: "badge s-" + String(status).replace(/[^a-z_]/g, "") }, String(status));
}

/** A job's badge: its status, or "completed with failures" when any record failed. */
export function jobBadge(job) {
  if (job.status === "completed" && job.counts && job.counts.failed > 0) {
    return h("span", { class: "badge s-partial", title: `${job.counts.failed} records failed` }, "completed with failures");
  }
  return badge(job.status);
}

/** A message box for errors. */
export function errorBox(err) {
  const code = err && err.code ? err.code : "error";
  return h("div", { class: "error-box", role: "alert" },
    h("strong", {}, code), " ", h("span", {}, err && err.message ? err.message : String(err)));
}
