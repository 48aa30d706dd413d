// Engram console: plain JavaScript, no build step, no dependency. Every number and text it shows comes from
// Engram's API (/v1) called with the key the user typed, kept in this tab's sessionStorage only. Text from the
// API is always put into the page as text (textContent), never as HTML.
"use strict";

const ROOT = location.pathname.replace(/\/console(?:\/.*)?$/, "");
const API = ROOT + "/v1";
const KEY_ITEM = "engram.console.key";
const STATE = { me: null };

// ---- the API --------------------------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, error) {
    super((error && error.message) || `HTTP ${status}`);
    this.status = status;
    this.code = error ? error.code : null;
    this.param = error ? error.param : null;
  }
}

async function api(method, path, options = {}) {
  const url = new URL(API + path, location.origin);
  for (const [name, value] of Object.entries(options.query || {})) {
    if (value === undefined || value === null || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
  }
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(KEY_ITEM) || ""}` };
  let body;
  if (options.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(options.body);
  }
  const response = await fetch(url, { method, headers, body, cache: "no-store", credentials: "omit" });
  let data = null;
  try { data = await response.json(); } catch (_) { data = null; }
  if (!response.ok) {
    const error = new ApiError(response.status, data && data.error);
    if (response.status === 401 && !options.signingIn) signOut("The key was refused (401): sign in again.");
    throw error;
  }
  return data;
}

const can = (resource, level = "read") => {
  const rank = { none: 0, read: 1, write: 2 };
  const have = STATE.me ? STATE.me.permissions[resource] || "none" : "none";
  return rank[have] >= rank[level];
};

// ---- the page -------------------------------------------------------------------------------------------------

// h("p", {class: "x", text: "y"}, child, ...) → an element; props starting with "on" are listeners, others are
// attributes (true → present, false/null → absent). Strings among the children become text nodes.
function h(tag, props, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "text") element.textContent = String(value);
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

const main = () => document.getElementById("main");
let uid = 0;
const nextId = (prefix) => `${prefix}-${++uid}`;

let noticeAt = 0;
// A notice stays through a navigation that follows it at once (a purge, then back to the list).
function notice(text, kind = "notice") {
  noticeAt = Date.now();
  document.getElementById("notices").replaceChildren(h("p", { class: kind, text }));
}

function clearNotice() { document.getElementById("notices").replaceChildren(); }

function alertBox(error) {
  const code = error && error.code ? ` (${error.code})` : "";
  return h("p", { class: "alert", role: "alert" }, (error && error.message ? error.message : String(error)) + code);
}

function page(title, crumbs, ...content) {
  const heading = h("h1", { id: "page-title", tabindex: "-1", text: title });
  const trail = crumbs && crumbs.length ? h("p", { class: "crumbs" },
    ...crumbs.flatMap(([label, href], i) => [i ? " / " : "", h("a", { href, text: label })])) : null;
  main().replaceChildren(...[trail, heading, ...content].filter(Boolean));
  document.title = `${title} — Engram console`;
  heading.focus({ preventScroll: false });
}

function placeholder(text = "Loading…") { return h("p", { class: "hint", text }); }

// Fill `slot` (an element) with what `load` returns, or the API's error.
async function fill(slot, load) {
  slot.replaceChildren(placeholder());
  try {
    const content = await load();
    slot.replaceChildren(...[].concat(content).filter(Boolean));
  } catch (error) {
    slot.replaceChildren(alertBox(error));
  }
}

function tableOf(caption, columns, rows, empty = "Nothing here yet.") {
  const id = nextId("table");
  const table = h("table", { "aria-describedby": null },
    h("caption", { id, text: caption }),
    h("thead", null, h("tr", null, ...columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null, text: c.label })))),
    h("tbody", null, ...rows.map((row) => h("tr", null, ...columns.map((c, i) => {
      const cell = c.cell(row);
      return i === 0 ? h("th", { scope: "row" }, cell) : h("td", { class: c.num ? "num" : null }, cell);
    })))));
  const wrap = h("div", { class: "table-wrap", role: "region", "aria-labelledby": id, tabindex: "0" }, table);
  if (!rows.length) wrap.append(h("p", { class: "empty", text: empty }));
  return wrap;
}

function facts(pairs) {
  return h("dl", { class: "facts" }, ...pairs.filter(Boolean).flatMap(([term, value]) => [h("dt", { text: term }), h("dd", null, value)]));
}

function field(label, control, hint) {
  const id = control.id || nextId("field");
  control.id = id;
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  const wide = control.tagName === "TEXTAREA" || control.dataset.wide;
  if (control.type === "checkbox") {
    return h("div", { class: "field check" }, control, h("label", { for: id, text: label }),
      hint ? h("span", { class: "hint", id: hintId, text: hint }) : null);
  }
  return h("div", { class: wide ? "field wide" : "field" }, h("label", { for: id, text: label }), control,
    hint ? h("span", { class: "hint", id: hintId, text: hint }) : null);
}

// A modal dialog; `build(close)` returns its content. Focus returns to the opener when it closes.
function dialog(title, build) {
  const opener = document.activeElement;
  const titleId = nextId("dialog");
  const box = h("dialog", { "aria-labelledby": titleId });
  const close = () => box.close();
  box.append(h("h2", { id: titleId, text: title }), ...[].concat(build(close)));
  box.addEventListener("close", () => { box.remove(); if (opener && opener.focus) opener.focus(); });
  document.body.append(box);
  box.showModal();
  return box;
}

// ---- formatting -----------------------------------------------------------------------------------------------

const pad = (n) => String(n).padStart(2, "0");
function when(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const d = new Date(seconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}
function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KB", "MB", "GB", "TB"];
  let value = n, unit = 0;
  while (value >= 1000 && unit < units.length - 1) { value /= 1000; unit += 1; }
  return `${unit ? value.toFixed(1) : value} ${units[unit]}`;
}
const number = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const score = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
function duration(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60]]) {
    if (seconds >= size && seconds % size === 0) return `${seconds / size} ${unit}`;
  }
  return `${seconds} s`;
}
const compact = (value) => (value && Object.keys(value).length ? JSON.stringify(value) : "—");
// A job's counts as words: {"scopes": 1, "merged": 0} → "scopes 1, merged 0".
const tally = (value) => (value && Object.keys(value).length ? Object.entries(value).map(([k, v]) => `${k.replace(/_/g, " ")} ${number(v)}`).join(", ") : "nothing counted");

function badge(status) {
  const kind = { completed: "ok", finished: "ok", active: "ok", failed: "bad", cancelled: "bad", abandoned: "bad",
    invalidated: "bad", expired: "bad", in_progress: "busy", partial: "busy", running: "busy", queued: "busy",
    superseded: "info", consolidated: "info", archived: "info" }[status] || "";
  return h("span", { class: `badge ${kind}`, text: String(status).replace(/_/g, " ") });
}

// Score rows: [[label, value in 0..1 or null, bar class]] → one cell each: label, bar (decorative) and number.
function scoreRows(rows) {
  return h("div", { class: "scores" }, ...rows.map(([label, value, kind]) => h("div", { class: "score" },
    h("span", { text: label }),
    h("span", { class: `bar ${kind || ""}`, "aria-hidden": "true" },
      h("span", { "data-width": value === null || value === undefined ? 0 : Math.max(0, Math.min(1, value)) })),
    h("span", { class: "mono", text: score(value) }))));
}

// Bars get their width from data-width (the CSP allows no inline style attribute in markup, but CSSOM is fine).
function sizeBars(root) {
  for (const bar of root.querySelectorAll("[data-width]")) bar.style.width = `${Number(bar.dataset.width) * 100}%`;
}

// `text` with the [start, end] spans (Unicode code points) wrapped in <mark>.
function marked(text, spans) {
  const chars = Array.from(text);
  const out = [];
  let at = 0;
  for (const [start, end] of spans || []) {
    if (start < at || end > chars.length) continue;
    out.push(chars.slice(at, start).join(""), h("mark", null, chars.slice(start, end).join("")));
    at = end;
  }
  out.push(chars.slice(at).join(""));
  return out;
}

function scopeQuery(kind, id) { return { [`${kind}_id`]: id }; }
function scopeText(kind, id) { return `${kind}_id=${id}`; }
function itemText(item) {
  if (item.type === "message") {
    return (item.content || []).map((part) => part.text || part.refusal || "").filter(Boolean).join("\n");
  }
  return "";
}

// ---- signing in -----------------------------------------------------------------------------------------------

function signOut(message) {
  sessionStorage.removeItem(KEY_ITEM);
  STATE.me = null;
  chrome();
  if (location.hash !== "#/signin") location.hash = "#/signin";
  else route();
  if (message) notice(message);
}

function chrome() {
  const signedIn = Boolean(STATE.me);
  document.body.classList.toggle("signed-out", !signedIn);
  document.getElementById("sections").hidden = !signedIn;
  document.getElementById("sign-out").hidden = !signedIn;
  const who = document.getElementById("who");
  who.hidden = !signedIn;
  if (signedIn) {
    const bound = STATE.me.memory_scope ? Object.entries(STATE.me.memory_scope).map(([k, v]) => `${k}=${v}`).join(" ") : "";
    who.textContent = `Tenant ${STATE.me.tenant_id}` + (STATE.me.operator ? " · operator key" : "") +
      (bound ? ` · memories of ${bound}` : "");
  }
}

function signInPage(next) {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", spellcheck: "false", required: true,
    placeholder: "sk-engram-…" });
  const problem = h("div");
  const form = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_ITEM, input.value.trim());
    try {
      STATE.me = await api("GET", "/me", { signingIn: true });
    } catch (error) {
      sessionStorage.removeItem(KEY_ITEM);
      problem.replaceChildren(alertBox(error));
      input.focus();
      return;
    }
    clearNotice();
    chrome();
    const target = next && next !== "#/signin" ? next : "#/knowledge";
    if (location.hash === target) route();
    else location.hash = target;
  } },
  field("API key", input, "An Engram API key (engram keys create). It is kept in this browser tab only and sent to this Engram alone."),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Sign in" })), problem);
  page("Sign in", null, h("p", { text: "The console shows what this key may read, in its tenant, as any client of the API would see it." }), form);
  input.focus();
}

// ---- knowledge --------------------------------------------------------------------------------------------------

async function knowledgePage() {
  const list = h("div");
  page("Knowledge", null, h("p", { class: "hint", text: "Vector stores of this tenant: their files, chunks and searches." }), list);
  if (!can("vector_stores")) { list.replaceChildren(alertBox({ message: "This key cannot read vector stores (vector_stores.read)." })); return; }
  await fill(list, async () => {
    const stores = await api("GET", "/vector_stores", { query: { limit: 100, include: "details" } });
    return tableOf("Vector stores", [
      { label: "Name", cell: (s) => h("a", { href: `#/knowledge/${s.id}`, text: s.name || s.id }) },
      { label: "Status", cell: (s) => badge(s.status) },
      { label: "Files", num: true, cell: (s) => `${number(s.file_counts.completed)} done / ${number(s.file_counts.in_progress)} in progress / ${number(s.file_counts.failed)} failed` },
      { label: "Chunks", num: true, cell: (s) => number(s.details.chunk_count) },
      { label: "Usage", num: true, cell: (s) => bytes(s.usage_bytes) },
      { label: "Backend", cell: (s) => s.details.backend },
      { label: "Expires", cell: (s) => (s.expires_at ? when(s.expires_at) : "never") },
      { label: "Last active", cell: (s) => when(s.last_active_at) },
    ], stores.data, "No vector stores.");
  });
}

async function storePage(storeId) {
  const summary = h("div"), files = h("div"), results = h("div", { id: "search-results", "aria-live": "polite" });
  page("Vector store", [["Knowledge", "#/knowledge"]], summary, h("h2", { text: "Files" }), files,
    h("h2", { text: "Search playground" }), searchForm(storeId, results), results);
  fill(summary, async () => {
    const store = await api("GET", `/vector_stores/${storeId}`, { query: { include: "details" } });
    document.getElementById("page-title").textContent = `Vector store ${store.name || store.id}`;
    document.title = `${store.name || store.id} — Engram console`;
    return facts([
      ["Id", h("code", { text: store.id })], ["Status", badge(store.status)],
      ["Backend", store.details.backend],
      ["Embedding", `${store.details.embedding_model} (${store.details.embedding_dimension} dimensions)`],
      ["Files", `${number(store.file_counts.total)}: ${number(store.file_counts.completed)} completed, ${number(store.file_counts.in_progress)} in progress, ${number(store.file_counts.failed)} failed`],
      ["Chunks", number(store.details.chunk_count)], ["Usage", bytes(store.usage_bytes)],
      ["Expires", store.expires_at ? when(store.expires_at) : "never"], ["Shared", store.details.shared ? "yes, with every tenant" : "no"],
      ["Metadata", compact(store.metadata)],
    ]);
  });
  await fill(files, () => filesTable(storeId));
}

async function filesTable(storeId, status) {
  const filter = h("select", { onchange: (event) => fill(holder, () => filesRows(storeId, event.target.value)) },
    ...["", "completed", "in_progress", "failed", "cancelled"].map((s) => h("option", { value: s, text: s ? s.replace("_", " ") : "every status" })));
  const holder = h("div");
  await fill(holder, () => filesRows(storeId, status));
  return [h("div", { class: "fields" }, field("Show files", filter)), holder];
}

async function filesRows(storeId, status) {
  const rows = [];
  let after = null, more = true;
  while (more && rows.length < 1000) {
    const found = await api("GET", `/vector_stores/${storeId}/files`, { query: { limit: 100, include: "details", filter: status, after, order: "asc" } });
    rows.push(...found.data);
    more = found.has_more;
    after = found.last_id;
  }
  return tableOf("Files", [
    { label: "File", cell: (f) => h("a", { href: `#/knowledge/${storeId}/files/${f.id}`, text: f.details.filename }) },
    { label: "Status", cell: (f) => badge(f.status) },
    { label: "Chunks", num: true, cell: (f) => number(f.details.chunk_count) },
    { label: "Usage", num: true, cell: (f) => bytes(f.usage_bytes) },
    { label: "Last error", cell: (f) => (f.last_error ? h("span", null, h("code", { text: f.last_error.code }), `: ${f.last_error.message}`) : "—") },
    { label: "Attributes", cell: (f) => h("code", { text: compact(f.attributes) }) },
  ], rows, status ? `No ${status.replace("_", " ")} files.` : "No files.");
}

function searchForm(storeId, results) {
  const query = h("input", { type: "search", name: "query", required: true, "data-wide": "1" });
  const k = h("input", { type: "number", min: 1, max: 50, value: 5 });
  const ranker = h("select", null, h("option", { value: "auto", text: "auto (relevance)" }), h("option", { value: "none", text: "none (fusion order)" }));
  const threshold = h("input", { type: "number", min: 0, max: 1, step: 0.05, value: 0 });
  const vectorWeight = h("input", { type: "number", min: 0, step: 0.1, value: 1 });
  const keywordWeight = h("input", { type: "number", min: 0, step: 0.1, value: 1 });
  const filters = h("textarea", { rows: 2, spellcheck: "false", placeholder: '{"type": "eq", "key": "team", "value": "ops"}' });
  const rewrite = h("input", { type: "checkbox" });
  return h("form", { class: "panel", role: "search", "aria-label": "Search this store", onsubmit: async (event) => {
    event.preventDefault();
    let parsed = null;
    if (filters.value.trim()) {
      try { parsed = JSON.parse(filters.value); } catch (error) { results.replaceChildren(alertBox({ message: `Filters are not JSON: ${error.message}` })); filters.focus(); return; }
    }
    const body = { query: query.value, max_num_results: Number(k.value), rewrite_query: rewrite.checked,
      ranking_options: { ranker: ranker.value, score_threshold: Number(threshold.value),
        hybrid_search: { embedding_weight: Number(vectorWeight.value), text_weight: Number(keywordWeight.value) } },
      include: ["score_details", "chunk"] };
    if (parsed) body.filters = parsed;
    await fill(results, async () => searchResults(storeId, await api("POST", `/vector_stores/${storeId}/search`, { body })));
    sizeBars(results);
  } },
  h("div", { class: "fields" }, field("Query", query), field("Top k", k), field("Ranker", ranker),
    field("Score threshold", threshold, "0 to 1"), field("Vector weight", vectorWeight), field("Keyword weight", keywordWeight),
    field("Filters (JSON, optional)", filters, "OpenAI's attribute filters: comparison or compound."),
    field("Rewrite the query with the chat model", rewrite)),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Search" })));
}

function searchResults(storeId, found) {
  const heading = h("h3", { text: `${found.data.length} result${found.data.length === 1 ? "" : "s"} for “${found.search_query.join(" / ")}”` });
  if (!found.data.length) return [heading, h("p", { class: "empty", text: "Nothing reached the threshold." })];
  return [heading, h("ol", { class: "hits" }, ...found.data.map((hit, i) => h("li", { class: "card" },
    h("header", null, h("strong", { text: `#${i + 1}` }),
      h("a", { href: `#/knowledge/${storeId}/files/${hit.file_id}`, text: hit.filename }),
      h("span", { class: "meta", text: `chunk ${hit.chunk.index}` + (hit.chunk.page_start ? `, page ${hit.chunk.page_start}${hit.chunk.page_end !== hit.chunk.page_start ? `–${hit.chunk.page_end}` : ""}` : "") })),
    scoreRows([["Score (relevance)", hit.score, "relevance"], ["Vector part (cosine)", hit.score_details.vector, "vector"],
      ["Keyword part (BM25)", hit.score_details.keyword, "keyword"]]),
    h("p", { class: "text" }, ...marked(hit.content[0].text, hit.score_details.matches)),
    Object.keys(hit.attributes || {}).length ? h("p", { class: "meta" }, "Attributes: ", h("code", { text: compact(hit.attributes) })) : null)))];
}

async function filePage(storeId, fileId) {
  const summary = h("div"), chunks = h("div");
  page("File", [["Knowledge", "#/knowledge"], ["Vector store", `#/knowledge/${storeId}`]], summary, h("h2", { text: "Chunks" }), chunks);
  await fill(summary, async () => {
    const file = await api("GET", `/vector_stores/${storeId}/files/${fileId}`, { query: { include: "details" } });
    document.getElementById("page-title").textContent = `File ${file.details.filename}`;
    document.title = `${file.details.filename} — Engram console`;
    return facts([
      ["Id", h("code", { text: file.id })], ["Status", badge(file.status)],
      ["Last error", file.last_error ? h("span", null, h("code", { text: file.last_error.code }), `: ${file.last_error.message}`) : "—"],
      ["Chunks", number(file.details.chunk_count)], ["Usage", bytes(file.usage_bytes)],
      ["Chunking", file.chunking_strategy.type === "static" ? `${file.chunking_strategy.static.max_chunk_size_tokens} tokens, ${file.chunking_strategy.static.chunk_overlap_tokens} overlap` : file.chunking_strategy.type],
      ["Attributes", h("code", { text: compact(file.attributes) })], ["Added", when(file.created_at)],
    ]);
  });
  const list = h("ol", { class: "chunks" });
  const more = h("button", { type: "button", class: "quiet", text: "Show more chunks" });
  let after = null;
  const load = async () => {
    more.disabled = true;
    try {
      const page_ = await api("GET", `/vector_stores/${storeId}/files/${fileId}/chunks`, { query: { limit: 20, after } });
      for (const c of page_.data) {
        list.append(h("li", { class: "card" },
          h("header", null, h("strong", { text: `Chunk ${c.index}` }),
            h("span", { class: "meta", text: `${c.token_count} tokens · characters ${c.char_start}–${c.char_end}` + (c.page_start ? ` · page ${c.page_start}` : "") })),
          h("p", { class: "text", text: c.text })));
      }
      if (!list.children.length) chunks.replaceChildren(h("p", { class: "empty", text: "This file has no chunks (not completed, or empty)." }));
      after = page_.last_id;
      more.hidden = !page_.has_more;
    } catch (error) {
      chunks.append(alertBox(error));
    }
    more.disabled = false;
  };
  chunks.replaceChildren(list, h("div", { class: "actions" }, more));
  more.addEventListener("click", load);
  await load();
}

// ---- memory -----------------------------------------------------------------------------------------------------

async function memoryPage() {
  const totals = h("div"), list = h("div");
  page("Memory", null, h("p", { class: "hint", text: "Users, agents and runs with memories in this tenant." }), totals, list);
  if (!can("memories")) { list.replaceChildren(alertBox({ message: "This key cannot read memories (memories.read)." })); return; }
  fill(totals, async () => {
    const s = await api("GET", "/memories/stats");
    return h("p", { text: `${number(s.active)} active memories (${number(s.total)} in all, every version and status) · ${number(s.users)} users · ${number(s.agents)} agents · ${number(s.runs)} runs · ${number(s.exchanges)} stored exchanges` });
  });
  await fill(list, async () => {
    const found = await api("GET", "/memories/entities", { query: { limit: 100 } });
    return tableOf("Users, agents and runs", [
      { label: "Id", cell: (e) => h("a", { href: `#/memory/${e.type}/${encodeURIComponent(e.id)}`, text: e.id }) },
      { label: "Kind", cell: (e) => e.type },
      { label: "Active memories", num: true, cell: (e) => number(e.memories.active) },
      { label: "All versions", num: true, cell: (e) => number(e.memories.total) },
      { label: "First", cell: (e) => when(e.created_at) },
      { label: "Last changed", cell: (e) => when(e.updated_at) },
    ], found.data, "No memories yet.");
  });
}

async function entityPage(kind, id) {
  const stats = h("div"), timeline = h("div"), results = h("div", { id: "memory-results", "aria-live": "polite" });
  const showAll = h("input", { type: "checkbox", checked: true });
  const reload = () => Promise.all([fill(stats, () => scopeStats(kind, id)),
    fill(timeline, () => memoryTimeline(kind, id, showAll.checked, reload))]);
  showAll.addEventListener("change", reload);
  const purge = can("memories", "write") ?
    h("button", { type: "button", class: "danger", text: "Purge this scope…", onclick: () => purgeDialog(kind, id) }) : null;
  page(`${kind[0].toUpperCase() + kind.slice(1)} ${id}`, [["Memory", "#/memory"]], stats,
    h("div", { class: "actions" }, purge),
    h("h2", { text: "Timeline" }), h("div", { class: "fields" }, field("Show superseded, archived and expired memories too", showAll)), timeline,
    h("h2", { text: "Memory search playground" }), memorySearchForm(kind, id, results), results);
  await reload();
}

async function scopeStats(kind, id) {
  const s = await api("GET", "/memories/stats", { query: scopeQuery(kind, id) });
  return facts([["Scope", h("span", { class: "scope", text: scopeText(kind, id) })],
    ["Memories", `${number(s.active)} active · ${number(s.superseded)} superseded · ${number(s.invalidated)} invalidated · ${number(s.consolidated)} consolidated · ${number(s.archived)} archived · ${number(s.expired)} expired`],
    ["Stored exchanges", number(s.exchanges)]]);
}

async function memoryTimeline(kind, id, inactive, reload) {
  const rows = [];
  let after = null, more = true;
  while (more && rows.length < 500) {
    const found = await api("GET", "/memories", { query: { ...scopeQuery(kind, id), include_inactive: inactive ? "true" : null, limit: 100, after } });
    rows.push(...found.data);
    more = found.has_more;
    after = found.last_id;
  }
  if (!rows.length) return h("p", { class: "empty", text: "No memories in this scope." });
  // A superseded version is shown under the memory that replaced it (its superseded_by), not as a memory of its own.
  const shown = new Set(rows.map((m) => m.id));
  const earlier = new Map();
  for (const m of rows) {
    if (m.superseded_by && shown.has(m.superseded_by)) {
      if (!earlier.has(m.superseded_by)) earlier.set(m.superseded_by, []);
      earlier.get(m.superseded_by).push(m);
    }
  }
  const tops = rows.filter((m) => !(m.superseded_by && shown.has(m.superseded_by)));
  return h("ol", { class: "timeline", "aria-label": `Memories of ${scopeText(kind, id)}, newest first` },
    ...tops.map((m) => memoryCard(m, reload, versionsOf(m.id, earlier))));
}

// Every version a memory replaced, newest first (a chain: each superseded one may have replaced another).
function versionsOf(memoryId, earlier) {
  const out = [];
  for (let next = earlier.get(memoryId) || []; next.length; ) {
    out.push(...next);
    next = next.flatMap((m) => earlier.get(m.id) || []);
  }
  return out;
}

function memoryCard(m, reload, versions = []) {
  const history = h("div", { class: "history", hidden: true });
  const editable = m.status === "active" && can("memories", "write");
  const historyButton = h("button", { type: "button", class: "quiet", "aria-expanded": "false", text: "History",
    onclick: async () => {
      const open = history.hidden;
      history.hidden = !open;
      historyButton.setAttribute("aria-expanded", String(open));
      if (open) await fill(history, () => historyList(m.id));
    } });
  const validity = `valid ${when(m.valid_from)} → ${m.valid_to ? when(m.valid_to) : "now"}`;
  return h("li", { class: m.status === "active" ? "card" : "card inactive", "data-memory": m.id },
    h("header", null, badge(m.status), h("span", { class: "badge info", text: m.memory_type }),
      m.pinned ? h("span", { class: "badge", text: "pinned" }) : null, h("code", { class: "meta", text: m.id })),
    h("p", { class: "text memory-text", text: m.memory }),
    h("p", { class: "meta" }, h("span", { text: validity }),
      h("span", { text: `importance ${score(m.importance)}` }),
      h("span", { text: `last used ${m.last_accessed_at ? when(m.last_accessed_at) : "never"} (${number(m.access_count)}×)` }),
      h("span", { text: `source ${m.source.kind}${m.source.id ? ` ${m.source.id}` : ""}` }),
      h("span", { text: `added ${when(m.created_at)}` })),
    h("div", { class: "actions" }, historyButton,
      editable ? h("button", { type: "button", class: "quiet", text: "Edit", onclick: () => editDialog(m, reload) }) : null,
      can("memories", "write") && m.status !== "superseded" ? h("button", { type: "button", class: "quiet", text: "Delete", onclick: () => deleteDialog(m, reload) }) : null),
    versions.length ? h("div", { class: "versions" }, h("p", { class: "meta", text: "Earlier versions" }),
      h("ul", null, ...versions.map((v) => h("li", { "data-memory": v.id }, h("span", { class: "text", text: v.memory }),
        h("span", { class: "meta", text: ` valid ${when(v.valid_from)} → ${when(v.valid_to)} · ${v.status} · ${v.id}` }))))) : null,
    history);
}

async function historyList(memoryId) {
  const found = await api("GET", `/memories/${memoryId}/history`);
  return [h("h3", { text: "History (oldest first)" }), h("ol", null, ...found.data.map((e) => h("li", null,
    h("strong", { text: e.event }), ` ${when(e.created_at)} by ${e.actor}`,
    e.old_memory && e.new_memory && e.old_memory !== e.new_memory ? h("div", null, "“", h("del", { text: e.old_memory }), "” → “", h("ins", { text: e.new_memory }), "”")
      : (e.new_memory || e.old_memory ? h("div", { text: `“${e.new_memory || e.old_memory}”` }) : null),
    e.details && Object.keys(e.details).length ? h("div", { class: "meta" }, h("code", { text: compact(e.details) })) : null)))];
}

function editDialog(m, reload) {
  dialog("Edit memory", (close) => {
    const text = h("textarea", { rows: 3, required: true });
    text.value = m.memory;
    const importance = h("input", { type: "number", min: 0, max: 1, step: 0.05, value: m.importance });
    const pinned = h("input", { type: "checkbox", checked: m.pinned });
    const problem = h("div");
    return h("form", { onsubmit: async (event) => {
      event.preventDefault();
      const body = {};
      if (text.value !== m.memory) body.memory = text.value;
      if (Number(importance.value) !== m.importance) body.importance = Number(importance.value);
      if (pinned.checked !== m.pinned) body.pinned = pinned.checked;
      try {
        await api("POST", `/memories/${m.id}`, { body });
      } catch (error) { problem.replaceChildren(alertBox(error)); return; }
      close();
      notice(Object.keys(body).length ? `Memory ${m.id} updated: its history shows the change.` : "Nothing changed.");
      await reload();
    } },
    h("p", { class: "hint", text: "New text makes a new version (the old one stays in the history); other fields change in place." }),
    field("Text", text), h("div", { class: "fields" }, field("Importance (0 to 1)", importance), field("Pinned", pinned)), problem,
    h("div", { class: "actions" }, h("button", { type: "submit", text: "Save" }), h("button", { type: "button", class: "quiet", text: "Cancel", onclick: close })));
  });
}

function deleteDialog(m, reload) {
  dialog("Delete this memory?", (close) => {
    const problem = h("div");
    return [h("p", { class: "text", text: `“${m.memory}”` }),
      h("p", { text: "The memory and its earlier versions are deleted; its history keeps the events without any text." }), problem,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "danger", text: "Delete memory", onclick: async () => {
          try { await api("DELETE", `/memories/${m.id}`); } catch (error) { problem.replaceChildren(alertBox(error)); return; }
          close();
          notice(`Memory ${m.id} deleted.`);
          await reload();
        } }),
        h("button", { type: "button", class: "quiet", text: "Cancel", onclick: close }))];
  });
}

async function purgeDialog(kind, id) {
  const scope = scopeText(kind, id);
  let counts;
  try { counts = await api("GET", "/memories/stats", { query: scopeQuery(kind, id) }); } catch (error) { notice(error.message, "alert"); return; }
  dialog(`Purge ${scope}`, (close) => {
    const typed = h("input", { type: "text", autocomplete: "off", spellcheck: "false" });
    const go = h("button", { type: "submit", class: "danger", disabled: true, text: "Purge" });
    typed.addEventListener("input", () => { go.disabled = typed.value.trim() !== scope; });
    const problem = h("div");
    setTimeout(() => typed.focus(), 0);
    return h("form", { onsubmit: async (event) => {
      event.preventDefault();
      if (typed.value.trim() !== scope) return;
      let done;
      try { done = await api("DELETE", "/memories", { query: scopeQuery(kind, id) }); } catch (error) { problem.replaceChildren(alertBox(error)); return; }
      close();
      const removed = Object.entries(done.counts).filter(([, n]) => n).map(([what, n]) => `${n} ${what.replace(/_/g, " ")}`).join(", ");
      notice(`Purged ${scopeText(kind, id)}: ${removed || "nothing was left"}.`);
      location.hash = "#/memory";
    } },
    h("p", null, "This deletes everything Engram holds for exactly the scope ", h("span", { class: "scope", text: scope }),
      " — and nothing outside it:"),
    h("ul", null, h("li", { text: `${number(counts.total)} memories (${number(counts.active)} active; every version and status)` }),
      h("li", { text: `${number(counts.exchanges)} stored exchanges` }),
      h("li", { text: "their history, pending add jobs, idempotency records and cached embeddings" })),
    h("p", { text: "It cannot be undone." }),
    field(`Type ${scope} to confirm`, typed), problem,
    h("div", { class: "actions" }, go, h("button", { type: "button", class: "quiet", text: "Cancel", onclick: close })));
  });
}

function memorySearchForm(kind, id, results) {
  const query = h("input", { type: "search", required: true, "data-wide": "1" });
  const k = h("input", { type: "number", min: 1, max: 100, value: 5 });
  const ranking = h("select", null, ...["balanced", "semantic", "keyword", "recency", "priority"].map((r) => h("option", { value: r, text: r })));
  const threshold = h("input", { type: "number", min: 0, max: 1, step: 0.05, value: 0 });
  return h("form", { class: "panel", role: "search", "aria-label": `Search the memories of ${scopeText(kind, id)}`, onsubmit: async (event) => {
    event.preventDefault();
    const body = { ...scopeQuery(kind, id), query: query.value, top_k: Number(k.value), ranking: ranking.value, score_threshold: Number(threshold.value) };
    await fill(results, async () => memoryHits(await api("POST", "/memories/search", { body })));
    sizeBars(results);
  } },
  h("div", { class: "fields" }, field("Query", query), field("Top k", k), field("Ranking", ranking), field("Score threshold", threshold)),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Search memories" })));
}

const SIGNALS = [["relevance", "Relevance (both legs)", "relevance"], ["vector", "Vector (cosine)", "vector"], ["keyword", "Keyword (BM25)", "keyword"],
  ["context", "With its neighbours", ""], ["session", "Session", ""], ["speaker", "Speaker named", ""], ["time", "Time asked about", ""],
  ["recency", "Recency", ""], ["importance", "Importance", ""], ["decay", "Decay factor", ""]];

function memoryHits(found) {
  const heading = h("h3", { text: `${found.data.length} memor${found.data.length === 1 ? "y" : "ies"} for “${found.search_query}”` });
  if (!found.data.length) return [heading, h("p", { class: "empty", text: "Nothing reached the threshold." })];
  return [heading, h("ol", { class: "hits" }, ...found.data.map((m, i) => h("li", { class: "card" },
    h("header", null, h("strong", { text: `#${i + 1}` }), badge(m.status), h("code", { class: "meta", text: m.id })),
    h("p", { class: "text memory-text", text: m.memory }),
    scoreRows([["Score", m.score, "relevance"], ...SIGNALS.filter(([key]) => m.score_details[key] !== null && m.score_details[key] !== undefined)
      .map(([key, label, kind]) => [label, m.score_details[key], kind])]))))];
}

// ---- responses and conversations --------------------------------------------------------------------------------

async function responsesPage() {
  const conversations = h("div"), recent = h("div");
  page("Responses and conversations", null, h("h2", { text: "Conversations" }), conversations, h("h2", { text: "Recent responses" }), recent);
  if (!can("responses")) { conversations.replaceChildren(alertBox({ message: "This key cannot read responses (responses.read)." })); return; }
  fill(conversations, async () => {
    const found = await api("GET", "/conversations", { query: { limit: 50 } });
    return tableOf("Conversations, newest first", [
      { label: "Conversation", cell: (c) => h("a", { href: `#/responses/${c.id}`, text: c.id }) },
      { label: "Started", cell: (c) => when(c.created_at) },
      { label: "Metadata", cell: (c) => h("code", { text: compact(c.metadata) }) },
    ], found.data, "No conversations.");
  });
  await fill(recent, async () => responsesTable(await api("GET", "/responses", { query: { limit: 20 } }), "Responses, newest first"));
}

function recallSummary(r) {
  const m = r.usage && r.usage.memory;
  if (!m) return "memory off";
  if (m.status !== "completed") return `recall ${m.status}`;
  return `${m.memories} memories, ${m.exchanges} exchanges`;
}

function outputText(r) { return (r.output || []).map(itemText).filter(Boolean).join("\n"); }

function responsesTable(found, caption) {
  return tableOf(caption, [
    { label: "Response", cell: (r) => h("a", { href: `#/responses/${r.id}`, text: r.id }) },
    { label: "Created", cell: (r) => when(r.created_at) },
    { label: "Model", cell: (r) => r.model },
    { label: "Status", cell: (r) => badge(r.status) },
    { label: "Recall", cell: recallSummary },
    { label: "Answer", cell: (r) => { const t = outputText(r); return t.length > 120 ? `${t.slice(0, 120)}…` : t || "—"; } },
  ], found.data, "No stored responses.");
}

async function conversationPage(conversationId) {
  const body = h("div");
  page(`Conversation ${conversationId}`, [["Responses", "#/responses"]], body);
  await fill(body, async () => {
    const [conversation, items, responses] = await Promise.all([
      api("GET", `/conversations/${conversationId}`),
      api("GET", `/conversations/${conversationId}/items`, { query: { limit: 100, order: "asc", include: "file_search_call.results" } }),
      api("GET", "/responses", { query: { conversation: conversationId, limit: 100, order: "asc" } })]);
    const owner = new Map();
    for (const r of responses.data) for (const item of r.output || []) owner.set(item.id, r);
    const turns = [];
    let current = null;
    for (const item of items.data) {
      const r = owner.get(item.id) || null;
      if (!current || (r && current.response !== r) || (!r && current.response)) {
        current = { response: r, items: [] };
        turns.push(current);
      }
      current.items.push(item);
    }
    // an item with no response (the user's input) opens the turn the next response answers
    const merged = [];
    for (const turn of turns) {
      const last = merged[merged.length - 1];
      if (last && !last.response && turn.response) { last.response = turn.response; last.items.push(...turn.items); } else merged.push(turn);
    }
    return [facts([["Started", when(conversation.created_at)], ["Metadata", h("code", { text: compact(conversation.metadata) })],
      ["Responses", number(responses.data.length)]]),
    ...merged.map((turn) => h("section", { class: "turn", "aria-label": turn.response ? `Turn answered by ${turn.response.id}` : "Items" },
      ...turn.items.map(itemView),
      turn.response ? turnFooter(turn.response) : null))];
  });
}

// Under a turn: its response, and (opened on demand) what recall gave the model and which files it cited.
function turnFooter(r) {
  const cited = [...new Set(citations(r).map((c) => c.filename))];
  const inside = h("div");
  const more = h("details", { ontoggle: () => { if (more.open && !inside.childElementCount) fill(inside, () => recalled(r)).then(() => sizeBars(inside)); } },
    h("summary", { text: `What recall put in front of the model: ${recallSummary(r)}` }), inside);
  return h("div", null, h("p", { class: "meta" },
    h("a", { href: `#/responses/${r.id}`, text: `Response ${r.id}` }), h("span", { text: r.model }),
    h("span", { text: `recall: ${recallSummary(r)}` }), cited.length ? h("span", { text: `cited: ${cited.join(", ")}` }) : null),
  r.usage && r.usage.memory && r.usage.memory.ids && r.usage.memory.ids.length ? more : null);
}

function citations(r) {
  const out = [];
  for (const item of r.output || []) {
    if (item.type !== "message") continue;
    for (const part of item.content || []) for (const a of part.annotations || []) if (a.type === "file_citation") out.push(a);
  }
  return out;
}

function itemView(item) {
  if (item.type === "message") {
    return h("div", { class: `item ${item.role}` }, h("span", { class: "role", text: item.role }), h("p", { class: "text", text: itemText(item) }));
  }
  if (item.type === "file_search_call") {
    return h("div", { class: "item" }, h("span", { class: "role", text: "file search" }),
      h("p", { class: "meta", text: `queries: ${(item.queries || []).join(" / ")} · ${(item.results || []).length} results` }));
  }
  return h("div", { class: "item" }, h("span", { class: "role", text: item.type.replace(/_/g, " ") }));
}

async function responsePage(responseId) {
  const body = h("div");
  page(`Response ${responseId}`, [["Responses", "#/responses"]], body);
  await fill(body, async () => {
    const [r, inputs] = await Promise.all([
      api("GET", `/responses/${responseId}`, { query: { include: ["file_search_call.results", "memory_search_call.results"] } }),
      api("GET", `/responses/${responseId}/input_items`, { query: { limit: 100, order: "asc" } })]);
    const usage = r.usage || {};
    const content = [facts([["Created", when(r.created_at)], ["Model", r.model], ["Status", badge(r.status)],
      ["Conversation", r.conversation ? h("a", { href: `#/responses/${r.conversation.id}`, text: r.conversation.id }) : "—"],
      ["Previous response", r.previous_response_id ? h("a", { href: `#/responses/${r.previous_response_id}`, text: r.previous_response_id }) : "—"],
      ["Tokens", `${number(usage.input_tokens)} in, ${number(usage.output_tokens)} out`]])];
    content.push(h("h2", { text: "Input" }), ...inputs.data.map(itemView));
    content.push(h("h2", { text: "Answer" }), ...(r.output || []).filter((i) => i.type === "message").map(itemView));
    content.push(h("h2", { text: "What recall put in front of the model" }), ...await recalled(r));
    content.push(h("h2", { text: "File search" }), ...fileSearch(r));
    return content;
  });
  sizeBars(body);
}

async function recalled(r) {
  const m = r.usage && r.usage.memory;
  if (!m) return [h("p", { class: "empty", text: "Memory was off for this response." })];
  const head = h("p", { text: `Recall ${m.status}${m.reason ? ` (${m.reason})` : ""}: ${m.memories} memories and ${m.exchanges} earlier exchanges, ${number(m.injected_tokens)} tokens in the model's instructions. Remembering this exchange: ${m.remember}${m.remember_reason ? ` (${m.remember_reason})` : ""}.` });
  if (!m.ids || !m.ids.length) return [head];
  const item = (r.output || []).find((i) => i.type === "memory_search_call");
  const shown = new Map(((item && item.results) || []).map((x) => [x.id, x]));
  const rows = await Promise.all(m.ids.map(async (id, i) => {
    const given = shown.get(id);
    const scoreOf = (m.scores && m.scores[i] !== undefined && m.scores[i] !== null) ? m.scores[i] : (given ? given.score : null);
    let text = given ? given.text : null, where = null, note = null;
    try {
      if (id.startsWith("exch_")) {
        const e = await api("GET", `/memories/exchanges/${id}`);
        text = `User: ${e.user_prompt}\nAssistant: ${e.assistant_response}`;
        where = e.user_id ? ["user", e.user_id] : e.agent_id ? ["agent", e.agent_id] : ["run", e.run_id];
      } else {
        const mem = await api("GET", `/memories/${id}`);
        text = mem.memory;
        where = mem.user_id ? ["user", mem.user_id] : mem.agent_id ? ["agent", mem.agent_id] : ["run", mem.run_id];
        if (mem.status !== "active") note = `now ${mem.status}`;
      }
    } catch (error) {
      note = error.status === 404 ? "no longer stored (deleted or purged)" : error.status === 403 ? "this key may not read it" : error.message;
    }
    return { id, score: scoreOf, text, where, note, kind: id.startsWith("exch_") ? "exchange" : "memory" };
  }));
  return [head, h("ol", { class: "hits", "aria-label": "Recalled memories and exchanges, in the order the model saw them" }, ...rows.map((x) => h("li", { class: "card" },
    h("header", null, h("span", { class: "badge info", text: x.kind }), h("code", { class: "meta", text: x.id }),
      x.where ? h("a", { href: `#/memory/${x.where[0]}/${encodeURIComponent(x.where[1])}`, text: `${x.where[0]} ${x.where[1]}` }) : null,
      x.note ? h("span", { class: "badge bad", text: x.note }) : null),
    scoreRows([["Recall score", x.score, "relevance"]]),
    x.text ? h("p", { class: "text", text: x.text }) : null)))];
}

function fileSearch(r) {
  const calls = (r.output || []).filter((i) => i.type === "file_search_call");
  const cited = citations(r);
  if (!calls.length && !cited.length) return [h("p", { class: "empty", text: "No file search in this response." })];
  const out = [];
  for (const call of calls) {
    out.push(h("p", { text: `Searched for: ${(call.queries || []).join(" / ")} (${call.status})` }));
    const results = call.results || [];
    out.push(tableOf("Results the model was given", [
      { label: "File", cell: (x) => x.filename },
      { label: "Score", num: true, cell: (x) => score(x.score) },
      { label: "Cited", cell: (x) => (cited.some((c) => c.file_id === x.file_id) ? "yes" : "no") },
      { label: "Text", cell: (x) => (x.text.length > 200 ? `${x.text.slice(0, 200)}…` : x.text) },
    ], results, "No results (or not stored)."));
  }
  out.push(h("h3", { text: "Citations in the answer" }), cited.length ? h("ul", null, ...cited.map((c) => h("li", null, `${c.filename} `, h("code", { text: c.file_id }), ` at character ${c.index}`)))
    : h("p", { class: "empty", text: "The answer cites no file." }));
  return out;
}

// ---- operations -------------------------------------------------------------------------------------------------

const LIMIT_USAGE = { max_storage_bytes: ["knowledge", "storage_bytes", bytes], max_files_per_store: ["knowledge", "max_store_files", number],
  max_file_size_bytes: ["knowledge", "max_file_bytes", bytes], max_entries: ["memory", "active_memories", number] };

async function operationsPage() {
  const limits = h("div"), jobs = h("div"), syncs = h("div"), errors = h("div");
  page("Operations", null, h("h2", { text: "Tenant limits and usage" }), limits, h("h2", { text: "Scheduled jobs" }), jobs,
    h("h2", { text: "Drop-folder syncs" }), syncs, h("h2", { text: "Drop-folder errors" }), errors);
  fill(limits, () => limitsView(limits));
  if (can("operations")) fill(jobs, () => jobsView(jobs));
  else jobs.replaceChildren(h("p", { class: "hint", text: "The jobs and their runs need an operator key (operations.read: engram keys create --operator)." }));
  if (can("vector_stores")) {
    fill(syncs, syncsView);
    await fill(errors, async () => {
      const found = await api("GET", "/drop_folder/errors", { query: { limit: 50 } });
      return tableOf("Objects the drop folder could not apply, newest first", [
        { label: "Object", cell: (e) => h("code", { text: `s3://${e.bucket}/${e.key}` }) },
        { label: "Code", cell: (e) => h("code", { text: e.code }) },
        { label: "Why", cell: (e) => e.message },
        { label: "When", cell: (e) => when(e.created_at) },
      ], found.data, "No drop-folder errors.");
    });
  } else {
    syncs.replaceChildren(h("p", { class: "hint", text: "Needs vector_stores.read." }));
  }
}

async function limitsView(slot) {
  const found = await api("GET", "/tenant/limits");
  const inputs = {};
  const rows = Object.keys(found.limits).map((name) => ({ name, value: found.limits[name], default: found.defaults[name] }));
  const usageOf = (name) => {
    const spec = LIMIT_USAGE[name];
    if (!spec) return "—";
    const part = found.usage[spec[0]];
    return part ? spec[2](part[spec[1]]) : "not readable with this key";
  };
  const table = tableOf(`Limits of tenant ${found.tenant_id}`, [
    { label: "Limit", cell: (r) => h("code", { text: r.name }) },
    { label: "Value", num: true, cell: (r) => {
      if (!STATE.me.operator) return number(r.value);
      inputs[r.name] = h("input", { type: "number", min: 1, step: 1, value: r.value, "aria-label": `New value of ${r.name}` });
      return inputs[r.name];
    } },
    { label: "Default", num: true, cell: (r) => number(r.default) },
    { label: "Used", num: true, cell: (r) => usageOf(r.name) },
  ], rows);
  if (!STATE.me.operator) return [table, h("p", { class: "hint", text: "Changing limits needs an operator key (engram keys create --operator)." })];
  const problem = h("div");
  const save = h("button", { type: "submit", text: "Save limits" });
  return h("form", { onsubmit: async (event) => {
    event.preventDefault();
    const changes = {};
    for (const r of rows) if (Number(inputs[r.name].value) !== r.value) changes[r.name] = Number(inputs[r.name].value);
    try { await api("POST", "/tenant/limits", { body: changes }); } catch (error) { problem.replaceChildren(alertBox(error)); return; }
    notice(Object.keys(changes).length ? `Limits saved: ${Object.entries(changes).map(([k, v]) => `${k} = ${number(v)}`).join(", ")}.` : "No limit changed.");
    await fill(slot, () => limitsView(slot));
  } }, table, problem, h("div", { class: "actions" }, save));
}

async function jobsView(slot, shown) {
  const found = await api("GET", "/jobs");
  const runs = h("div", { "aria-live": "polite" });
  if (shown) fill(runs, () => runsView(shown));
  const lastOf = (job) => job.scopes.filter((s) => s.last_run).sort((a, b) => b.last_run.started_at - a.last_run.started_at)[0];
  const table = tableOf("Jobs (runs over every tenant, *, and this tenant's own)", [
    { label: "Job", cell: (j) => h("span", null, h("code", { text: j.name }), h("span", { class: "meta block", text: j.description })) },
    { label: "Lane", cell: (j) => j.lane },
    { label: "Every", cell: (j) => duration(j.cadence_s) },
    { label: "Last run", cell: (j) => { const s = lastOf(j); return s ? h("span", null, badge(s.last_run.status), ` ${when(s.last_run.started_at)} (${s.scope})`) : "never"; } },
    { label: "Counts", cell: (j) => { const s = lastOf(j); return s ? tally(s.last_run.counts) : "—"; } },
    { label: "Actions", cell: (j) => h("div", { class: "actions tight" },
      h("button", { type: "button", class: "quiet small", text: "Runs", "aria-label": `Runs of ${j.name}`, onclick: () => fill(runs, () => runsView(j.name)) }),
      STATE.me.operator ? h("button", { type: "button", class: "small", text: "Run now", "aria-label": `Run ${j.name} now for this tenant`, onclick: (event) => runNow(j.name, event.target, slot) }) : null) },
  ], found.data);
  return [table, runs];
}

async function runNow(name, button, slot) {
  button.disabled = true;
  notice(`Running ${name} for this tenant…`);
  try {
    const outcome = await api("POST", `/jobs/${name}/runs`, { body: {} });
    notice(`${name} (${outcome.scope}): ${outcome.status} in ${outcome.seconds} s — ${tally(outcome.counts)}${outcome.error ? ` — ${outcome.error}` : ""}`);
    await fill(slot, () => jobsView(slot, name));
  } catch (error) {
    notice(`${name}: ${error.message}`, "alert");
    button.disabled = false;
  }
}

async function runsView(name) {
  const found = await api("GET", `/jobs/${name}/runs`, { query: { limit: 10 } });
  return tableOf(`Latest runs of ${name}`, [
    { label: "Run", cell: (r) => `#${r.id}` },
    { label: "Scope", cell: (r) => h("code", { text: r.scope }) },
    { label: "Started", cell: (r) => when(r.started_at) },
    { label: "Finished", cell: (r) => when(r.finished_at) },
    { label: "Status", cell: (r) => badge(r.status) },
    { label: "Counts", cell: (r) => tally(r.counts) },
    { label: "Error", cell: (r) => r.error || "—" },
  ], found.data, "Never run here.");
}

async function syncsView() {
  const found = await api("GET", "/drop_folder/syncs", { query: { limit: 10 } });
  const table = tableOf("Drop-folder sync runs that covered this tenant, newest first", [
    { label: "Run", cell: (r) => `#${r.id}` },
    { label: "Scope", cell: (r) => (r.all_tenants ? "every tenant (hourly job)" : r.vector_store ? `store ${r.vector_store}` : "this tenant") },
    { label: "Started", cell: (r) => when(r.started_at) },
    { label: "Status", cell: (r) => badge(r.status) },
    { label: "Counts", cell: (r) => (r.counts ? tally(r.counts) : "(service-wide)") },
    { label: "Error", cell: (r) => r.error || "—" },
  ], found.data, "No sync has run yet.");
  if (!can("vector_stores", "write")) return table;
  const holder = h("div");
  const button = h("button", { type: "button", class: "quiet", text: "Sync the drop folder now", onclick: async () => {
    button.disabled = true;
    try {
      const done = await api("POST", "/drop_folder/sync", { body: {} });
      notice(`Drop-folder sync ${done.status}: ${tally(done.counts)}`);
      await fill(holder, syncsView);
    } catch (error) { notice(error.message, "alert"); }
    button.disabled = false;
  } });
  return [table, h("div", { class: "actions" }, button)];
}

// ---- routing ----------------------------------------------------------------------------------------------------

const ROUTES = [
  [/^#\/knowledge\/(vs_[\w-]+)\/files\/(file-[\w-]+)$/, (m) => filePage(m[1], m[2]), "knowledge"],
  [/^#\/knowledge\/(vs_[\w-]+)$/, (m) => storePage(m[1]), "knowledge"],
  [/^#\/knowledge$/, () => knowledgePage(), "knowledge"],
  [/^#\/memory\/(user|agent|run)\/(.+)$/, (m) => entityPage(m[1], decodeURIComponent(m[2])), "memory"],
  [/^#\/memory$/, () => memoryPage(), "memory"],
  [/^#\/responses\/(conv_[\w-]+)$/, (m) => conversationPage(m[1]), "responses"],
  [/^#\/responses\/(resp_[\w-]+)$/, (m) => responsePage(m[1]), "responses"],
  [/^#\/responses$/, () => responsesPage(), "responses"],
  [/^#\/operations$/, () => operationsPage(), "operations"],
];

async function route() {
  const hash = location.hash || "#/knowledge";
  if (!sessionStorage.getItem(KEY_ITEM) || !STATE.me) {
    chrome();
    signInPage(hash);
    return;
  }
  for (const link of document.querySelectorAll(".sections a")) link.removeAttribute("aria-current");
  for (const [pattern, show, section] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    const link = document.querySelector(`.sections a[data-section="${section}"]`);
    if (link) link.setAttribute("aria-current", "page");
    document.body.dataset.loading = "true";
    Promise.resolve(show(match)).catch((error) => main().append(alertBox(error)))
      .finally(() => { sizeBars(main()); document.body.dataset.loading = "false"; });
    return;
  }
  location.hash = "#/knowledge";
}

async function start() {
  document.getElementById("sign-out").addEventListener("click", () => signOut("Signed out: the key is forgotten."));
  // The skip link moves the focus to the content without touching the hash (the pages' addresses live there).
  document.querySelector(".skip").addEventListener("click", (event) => { event.preventDefault(); main().focus(); });
  window.addEventListener("hashchange", () => {
    if (Date.now() - noticeAt > 1000) clearNotice();
    route();
  });
  if (sessionStorage.getItem(KEY_ITEM)) {
    try { STATE.me = await api("GET", "/me", { signingIn: true }); } catch (_) { sessionStorage.removeItem(KEY_ITEM); }
  }
  chrome();
  route();
}

start();
