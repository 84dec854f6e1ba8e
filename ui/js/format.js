// Small formatting helpers and the collapsible JSON view.

import { h } from "./dom.js";

/**
 * The last 8 characters of a UUID, enough to tell jobs apart on screen. (Not the first: ids
 * are UUIDv7, whose first characters are the creation time, shared by jobs made together.)
 */
export function shortId(id) {
  return String(id).slice(-8);
}

export function num(n) {
  return Number(n || 0).toLocaleString("en-US");
}

/** "5 s", "3 min", "2 h", "4 d" since `iso`. */
export function age(iso, now = Date.now()) {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h";
  return Math.floor(s / 86400) + " d";
}

/** A <time> with the relative age and the exact time as its title. */
export function ageEl(iso) {
  if (!iso) return h("span", { class: "muted" }, "–");
  return h("time", { datetime: iso, title: new Date(iso).toLocaleString() }, age(iso) + " ago");
}

/** Duration between two ISO times, or until now. */
export function duration(fromIso, toIso) {
  if (!fromIso) return "–";
  const ms = (toIso ? Date.parse(toIso) : Date.now()) - Date.parse(fromIso);
  const s = Math.max(0, ms / 1000);
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.round((s % 3600) / 60) + " min";
}

/** Total requests and tokens of a job's usage map. */
export function usageTotals(usage) {
  const t = { requests: 0, prompt_tokens: 0, completion_tokens: 0 };
  for (const u of Object.values(usage || {})) {
    t.requests += u.requests || 0;
    t.prompt_tokens += u.prompt_tokens || 0;
    t.completion_tokens += u.completion_tokens || 0;
  }
  return t;
}

/** Pretty JSON text; a string that holds JSON is parsed first. */
export function pretty(v) {
  if (typeof v === "string") {
    try {
      return JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v, null, 2);
}

/**
 * A collapsible view of a JSON value: objects and arrays are <details> (open down to
 * `openDepth`), scalars are text. Keyboard users open and close them with Enter or Space.
 */
export function jsonTree(value, openDepth = 2, depth = 0) {
  if (value === null || typeof value !== "object") {
    return h("span", { class: "j-" + (value === null ? "null" : typeof value) }, JSON.stringify(value));
  }
  const isArray = Array.isArray(value);
  const entries = isArray ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (entries.length === 0) return h("span", { class: "j-empty" }, isArray ? "[]" : "{}");
  const label = isArray ? `[${entries.length}]` : `{${entries.length}}`;
  const list = h("ul", { class: "j-list" },
    entries.map(([k, v]) => h("li", {},
      h("span", { class: "j-key" }, isArray ? String(k) : JSON.stringify(k)), ": ",
      jsonTree(v, openDepth, depth + 1))));
  return h("details", { class: "j-node", open: depth < openDepth }, h("summary", {}, label), list);
}
