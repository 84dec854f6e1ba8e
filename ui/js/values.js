// A record's values as a table: text as text, nested values as a JSON tree, images as <img>.
// Images stored by the server (`{media_id, mime_type, url}`) are fetched with the key and shown
// through blob: URLs; base64 images of a preview become data: URLs only when their bytes are
// an image format's (PNG, JPEG, GIF, WebP), so no other content is ever loaded as an image.

import { blobUrl } from "./api.js";
import { h } from "./dom.js";
import { jsonTree } from "./format.js";

const MAGIC = [
  ["iVBORw0KGgo", "image/png"],
  ["/9j/", "image/jpeg"],
  ["R0lGOD", "image/gif"],
  ["UklGR", "image/webp"],
];

/** The image MIME type of a base64 string, from its first bytes; null when not an image. */
export function base64Image(v) {
  if (typeof v !== "string" || v.length < 16 || !/^[A-Za-z0-9+/]+=*$/.test(v.slice(0, 4096))) {
    return null;
  }
  const hit = MAGIC.find(([prefix]) => v.startsWith(prefix));
  return hit ? hit[1] : null;
}

/** A data: URL when `url` already is one for an image type; null otherwise. */
export function imageDataUrl(url) {
  return typeof url === "string" && /^data:image\/(png|jpeg|gif|webp);base64,/.test(url) ? url : null;
}

function isMediaRef(v) {
  return v && typeof v === "object" && !Array.isArray(v) && typeof v.media_id === "string" &&
    typeof v.url === "string" && v.url.startsWith("/v1/records/");
}

/** An <img> filled from a /v1 media URL fetched with the key. */
export function mediaImage(url, alt, signal) {
  const img = h("img", { class: "media", alt, loading: "lazy" });
  blobUrl(url, signal).then(
    (u) => { img.src = u; },
    (e) => { img.replaceWith(h("span", { class: "error-inline" }, "image not loaded: " + e.message)); },
  );
  return img;
}

/** One value, rendered for reading. */
export function valueView(v, name, signal) {
  if (typeof v === "string") {
    const mime = base64Image(v);
    if (mime) return h("img", { class: "media", alt: name, src: "data:" + mime + ";base64," + v });
    return h("div", { class: "text" }, v);
  }
  if (isMediaRef(v)) return mediaImage(v.url, name, signal);
  if (Array.isArray(v) && v.length > 0 && v.every((x) => isMediaRef(x) || base64Image(x))) {
    return h("div", { class: "images" }, v.map((x, i) => valueView(x, `${name} ${i}`, signal)));
  }
  if (v !== null && typeof v === "object") return jsonTree(v, 1);
  return h("span", { class: "j-" + (v === null ? "null" : typeof v) }, JSON.stringify(v));
}

/**
 * The values table (traces are left out: they are shown as conversations). A record that
 * failed in a column gets that column's row marked, added when it holds no value.
 */
export function valuesTable(values, signal, error) {
  const errorColumn = error && error.column;
  const rows = Object.entries(values || {}).filter(([k]) => !k.endsWith("__trace"));
  const failedRow = errorColumn && !rows.some(([k]) => k === errorColumn)
    ? h("tr", { class: "failed-row" }, h("th", { scope: "row" }, errorColumn),
      h("td", {}, h("span", { class: "tag tag-fail" }, "failed here"), " ", h("code", {}, String(error.code))))
    : null;
  if (rows.length === 0 && !failedRow) return h("p", { class: "muted" }, "No values.");
  return h("table", { class: "values" },
    h("tbody", {}, rows.map(([k, v]) => h("tr", { class: k === errorColumn ? "failed-row" : null },
      h("th", { scope: "row" }, k),
      h("td", {}, valueView(v, k, signal)))), failedRow));
}
