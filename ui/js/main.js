// The page: hash routes (#/jobs, #/jobs/ID, #/records/ID, #/preview), one view at a time, each
// with an AbortSignal that closes its streams and timers when the view changes; and the key
// prompt, shown whenever /v1 answers 401.

import { apiKey, get, setApiKey, whenUnauthorized } from "./api.js";
import { errorBox, h, replace } from "./dom.js";
import { jobView } from "./job.js";
import { jobsView } from "./jobs.js";
import { previewView } from "./preview.js";
import { recordView } from "./record.js";

const main = document.getElementById("main");
const forget = document.getElementById("forget-key");
let current = null; // AbortController of the view on screen
let asking = false;

function parse(hash) {
  const [path, query] = hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query || "") };
}

async function show() {
  if (current) current.abort();
  current = new AbortController();
  const signal = current.signal;
  forget.hidden = !apiKey();
  const { parts, params } = parse(location.hash);
  const name = parts[0] || "jobs";
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === name || (name === "records" && a.dataset.nav === "jobs")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  try {
    if (name === "jobs" && parts[1]) await jobView(main, parts[1], params, signal);
    else if (name === "jobs") await jobsView(main, params, signal);
    else if (name === "records" && parts[1]) await recordView(main, parts[1], signal);
    else if (name === "preview") previewView(main, signal);
    else replace(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs")));
    document.title = "synthgate · " + (main.querySelector("h1")?.textContent || name);
  } catch (e) {
    if (signal.aborted || e.name === "AbortError" || e.status === 401) return;
    replace(main, errorBox(e), h("p", {}, h("a", { href: "#/jobs" }, "Back to the jobs")));
  }
}

/** The key form: the key is checked against /v1 before it is kept for this tab. */
function askForKey(reason) {
  if (asking) return;
  asking = true;
  if (current) current.abort();
  const input = h("input", { type: "password", id: "api-key", autocomplete: "off", required: true, minlength: 1, "aria-describedby": "key-help" });
  const msg = h("div", { "aria-live": "assertive" }, reason ? errorBox(reason) : null);
  const form = h("form", { class: "card key-form", onsubmit: async (ev) => {
    ev.preventDefault();
    setApiKey(input.value.trim());
    try {
      await get("/v1/jobs?limit=1");
      asking = false;
      show();
    } catch (e) {
      setApiKey(null);
      asking = false;
      askForKey(e);
    }
  } },
  h("h1", {}, "API key"),
  h("p", { id: "key-help" }, "This server needs an API key. It is kept in this tab only (sessionStorage) and sent as a bearer token; closing the tab forgets it."),
  h("label", { for: "api-key" }, "Key"), input, msg,
  h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Continue")));
  replace(main, form);
  forget.hidden = true;
  input.focus();
}

whenUnauthorized((err) => askForKey(apiKey() ? err : null));
forget.addEventListener("click", () => { setApiKey(null); askForKey(null); });
window.addEventListener("hashchange", () => { if (!asking) { show(); main.focus({ preventScroll: true }); } });
show();
