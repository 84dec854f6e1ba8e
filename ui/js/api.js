// Talking to /v1. The API key lives in sessionStorage (this tab only, gone when it closes) and
// goes out as `Authorization: Bearer`; no cookie is ever used, so no other site can make this
// page's requests for it.

const KEY = "synthgate.api_key";

export function apiKey() {
  return sessionStorage.getItem(KEY);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** An error answer of the API: its status and the envelope's code, message and details. */
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || "HTTP " + status);
    this.status = status;
    this.code = e.code || "http_" + status;
    this.details = e.details || [];
  }
}

function headers(extra) {
  const h = new Headers(extra || {});
  const key = apiKey();
  if (key) h.set("Authorization", "Bearer " + key);
  return h;
}

/** Called on every 401, so the page can ask for a key. */
let onUnauthorized = () => {};
export function whenUnauthorized(fn) {
  onUnauthorized = fn;
}

async function fail(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    body = null;
  }
  const err = new ApiError(resp.status, body);
  if (resp.status === 401) onUnauthorized(err);
  return err;
}

/** `fetch` of a /v1 path with the key; the raw Response, or throws ApiError. */
export async function request(path, opts = {}) {
  const resp = await fetch(path, {
    method: opts.method || "GET",
    headers: headers(opts.headers),
    body: opts.body,
    signal: opts.signal,
    credentials: "omit",
    cache: "no-store",
  });
  if (!resp.ok) throw await fail(resp);
  return resp;
}

/** JSON of a /v1 path. */
export async function get(path, signal) {
  return (await request(path, { signal })).json();
}

/** POST with a JSON or text body; the JSON answer. */
export async function post(path, body, contentType, signal) {
  const opts = { method: "POST", signal };
  if (body !== undefined) {
    opts.body = typeof body === "string" ? body : JSON.stringify(body);
    opts.headers = { "Content-Type": contentType || "application/json" };
  }
  return (await request(path, opts)).json();
}

/** A blob: URL of a /v1 resource fetched with the key (images, downloads). */
export async function blobUrl(path, signal) {
  const resp = await request(path, { signal });
  return URL.createObjectURL(await resp.blob());
}

/**
 * Server-Sent Events of a /v1 path, read with fetch (EventSource cannot send the key):
 * calls onEvent(name, parsedData) for each event until the stream ends or `signal` aborts.
 */
export async function events(path, signal, onEvent) {
  const resp = await request(path, { signal, headers: { Accept: "text/event-stream" } });
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    // Events end with a blank line; lines end with \n, \r\n or \r.
    let m;
    while ((m = /\r\n\r\n|\n\n|\r\r/.exec(buf))) {
      const block = buf.slice(0, m.index);
      buf = buf.slice(m.index + m[0].length);
      let name = "message";
      const data = [];
      for (const line of block.split(/\r\n|\n|\r/)) {
        if (line.startsWith(":")) continue; // keep-alive comment
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        let v = i < 0 ? "" : line.slice(i + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "event") name = v;
        else if (field === "data") data.push(v);
      }
      if (data.length === 0) continue;
      let parsed;
      try {
        parsed = JSON.parse(data.join("\n"));
      } catch {
        parsed = data.join("\n");
      }
      onEvent(name, parsed);
    }
  }
}
