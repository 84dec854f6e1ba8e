// An LLM column's trace as a conversation: one bubble per message (system, user, assistant,
// tool), tool calls with their arguments pretty-printed, tool results beside the call they
// answer, images shown, reasoning collapsed, and failures marked where they happened.

import { h } from "./dom.js";
import { pretty } from "./format.js";
import { imageDataUrl } from "./values.js";

/** The content blocks of a message (a string becomes one text block). */
function blocks(content) {
  if (content === null || content === undefined) return [];
  if (typeof content === "string") return [{ type: "text", text: content }];
  if (Array.isArray(content)) return content;
  return [{ type: "json", value: content }];
}

function blockView(b, i) {
  if (b && b.type === "text") return h("div", { class: "text" }, String(b.text ?? ""));
  if (b && b.type === "image_url") {
    const url = imageDataUrl(b.image_url && b.image_url.url);
    return url
      ? h("img", { class: "media", alt: "image " + (i + 1), src: url })
      : h("div", { class: "muted" }, "[image: " + String(b.image_url && b.image_url.url).slice(0, 80) + "]");
  }
  return h("pre", { class: "code" }, pretty(b && b.value !== undefined ? b.value : b));
}

function textOf(content) {
  return blocks(content).filter((b) => b && b.type === "text").map((b) => String(b.text ?? "")).join("\n");
}

function toolCallView(call) {
  const fn = call.function || {};
  return h("div", { class: "tool-call" },
    h("div", { class: "tool-head" },
      h("span", { class: "tag" }, "tool call"), " ",
      h("code", { class: "tool-name" }, String(fn.name ?? "?")),
      call.id ? h("span", { class: "muted small" }, " " + call.id) : null),
    h("pre", { class: "code args" }, pretty(fn.arguments ?? {})));
}

/** `temperature 0.7 · max_tokens 200`: the parameters a model was asked with. */
function paramsText(params) {
  return Object.entries(params || {})
    .filter(([, v]) => v !== null && v !== undefined && typeof v !== "object")
    .map(([k, v]) => `${k} ${v}`).join(" · ");
}

/**
 * The conversation of one column. `failure` is the record's error when it failed in this
 * column: it is shown after the last message, where generation stopped (for a request the
 * provider refused, right after the messages that were sent). `model`, when known, is what
 * the column asked: `{alias, model, params}`.
 */
export function conversation(column, messages, failure, model) {
  const names = new Map();
  for (const m of messages || []) {
    for (const c of m.tool_calls || []) names.set(c.id, c.function && c.function.name);
  }
  const items = (messages || []).map((m, i) => {
    const role = String(m.role || "unknown");
    const isToolError = role === "tool" && textOf(m.content).startsWith("Error:");
    const head = h("div", { class: "msg-head" },
      h("span", { class: "role" }, role),
      role === "tool" ? h("span", {}, " → ", h("code", {}, String(names.get(m.tool_call_id) ?? "?")),
        m.tool_call_id ? h("span", { class: "muted small" }, " " + m.tool_call_id) : null) : null,
      isToolError ? h("span", { class: "tag tag-fail" }, "tool error") : null,
      h("span", { class: "muted small msg-n" }, "#" + (i + 1)));
    return h("li", { class: `msg msg-${role.replace(/[^a-z]/g, "")}${isToolError ? " failed" : ""}` },
      head,
      m.reasoning_content
        ? h("details", { class: "reasoning" }, h("summary", {}, "reasoning"),
          h("div", { class: "text" }, String(m.reasoning_content)))
        : null,
      blocks(m.content).map(blockView),
      (m.tool_calls || []).map(toolCallView));
  });
  if (failure) {
    items.push(h("li", { class: "msg failed failure" },
      h("div", { class: "msg-head" }, h("span", { class: "tag tag-fail" }, "failed here")),
      h("div", {}, h("code", {}, String(failure.code)), " ", String(failure.message || ""))));
  }
  return h("section", { class: "card conversation", "data-column": column },
    h("h3", {}, column, " ", h("span", { class: "muted small" }, `${(messages || []).length} messages`)),
    model ? h("div", { class: "small muted model-info" }, "model ", h("code", {}, String(model.alias)),
      model.model ? [" (", h("code", {}, String(model.model)), ")"] : null,
      paramsText(model.params) ? " · " + paramsText(model.params) : null) : null,
    h("ol", { class: "messages" }, items));
}
