// memgpt inspector: a client of the server's own REST API (/v1), nothing else. Every text from
// the server is placed with textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { key: sessionStorage.getItem("memgpt-key") || "", agent: null, agents: [], streaming: false };

// ---- HTTP --------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}

async function api(method, path, body, raw) {
  const headers = { Authorization: `Bearer ${state.key}` };
  let payload;
  if (raw !== undefined) { headers["Content-Type"] = "application/json"; payload = raw; }
  else if (body !== undefined) { headers["Content-Type"] = "application/json"; payload = JSON.stringify(body); }
  const response = await fetch(path, { method, headers, body: payload });
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!response.ok) {
    const e = (data && data.error) || {};
    throw new ApiError(response.status, e.code || `http_${response.status}`, e.message || text || response.statusText);
  }
  return data;
}

function status(text, isError) {
  const el = $("status");
  el.textContent = text;
  el.classList.toggle("error", Boolean(isError));
}

function failed(e) { status(e instanceof ApiError ? `${e.code}: ${e.message}` : String(e), true); }

function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "style") node.style.cssText = v; // CSSOM: allowed by the page's CSP
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

const fmt = (n) => Number(n).toLocaleString("en");
const when = (t) => (t ? new Date(t).toLocaleString() : "");

// ---- agents ------------------------------------------------------------------------------

async function loadAgents() {
  const { agents } = await api("GET", "/v1/agents");
  state.agents = agents;
  const list = $("agent-list");
  list.replaceChildren(...agents.map((a) => el("li", {}, el("button", {
    type: "button", "data-agent": a.id, "aria-current": String(state.agent && state.agent.id === a.id),
    text: a.name, onclick: () => openAgent(a.id),
  }))));
  if (!agents.length) list.append(el("li", { class: "meta", text: "No agents yet." }));
}

async function openAgent(id) {
  state.agent = await api("GET", `/v1/agents/${id}`);
  $("empty").hidden = true;
  $("agent").hidden = false;
  $("agent-name").textContent = state.agent.name;
  showMeta();
  for (const b of document.querySelectorAll("#agent-list button")) b.setAttribute("aria-current", String(b.dataset.agent === id));
  $("chat-log").replaceChildren();
  await loadHistory();
  await refreshViews();
  status(`Agent ${state.agent.name}`);
}

function showMeta() {
  const a = state.agent;
  $("agent-meta").textContent = `${a.model || "the server's model"} · ${fmt(a.context_window)}-token window · policy ${a.policy} · ${a.loop_style} loop · version ${a.version}`;
}

async function loadHistory() {
  // The newest page of the conversation (the API pages oldest first).
  const first = await api("GET", `/v1/agents/${state.agent.id}/messages?size=100`);
  let page = first;
  const pages = Math.ceil(first.total / 100);
  if (pages > 1) page = await api("GET", `/v1/agents/${state.agent.id}/messages?size=100&page=${pages - 1}`);
  for (const item of page.items) addMessage(item);
}

$("create-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { name: f.get("name") };
  for (const k of ["persona", "human", "model", "policy"]) if (f.get(k)) body[k] = f.get(k);
  if (f.get("context_window")) body.context_window = Number(f.get("context_window"));
  const tools = String(f.get("tools") || "").split(",").map((s) => s.trim()).filter(Boolean);
  if (tools.length) body.tools = tools;
  try {
    const agent = await api("POST", "/v1/agents", body);
    ev.target.reset();
    $("new-agent").open = false;
    await loadAgents();
    await openAgent(agent.id);
  } catch (e) { failed(e); }
});

$("import-file").addEventListener("change", async (ev) => {
  const file = ev.target.files[0];
  if (!file) return;
  try {
    const imported = await api("POST", "/v1/agents/import", undefined, await file.text());
    ev.target.value = "";
    await loadAgents();
    await openAgent(imported.agent.id);
    status(`Imported ${imported.agent.name}: ${imported.messages} messages, ${imported.passages} passages`);
  } catch (e) { failed(e); }
});

$("export").addEventListener("click", async () => {
  try {
    const file = await api("GET", `/v1/agents/${state.agent.id}/export`);
    const url = URL.createObjectURL(new Blob([JSON.stringify(file, null, 2)], { type: "application/json" }));
    const a = el("a", { href: url, download: `${state.agent.name}.af` });
    document.body.append(a);
    a.click();
    a.remove();
    URL.revokeObjectURL(url);
  } catch (e) { failed(e); }
});

$("delete").addEventListener("click", async () => {
  if (!confirm(`Delete agent ${state.agent.name} and all its memory?`)) return;
  try {
    await api("DELETE", `/v1/agents/${state.agent.id}`);
    state.agent = null;
    $("agent").hidden = true;
    $("empty").hidden = false;
    await loadAgents();
    status("Agent deleted");
  } catch (e) { failed(e); }
});

// ---- chat ----------------------------------------------------------------------------------

const KIND_LABEL = {
  user: "user", system_alert: "system alert", heartbeat: "heartbeat", login: "login", timer: "timer",
  document_upload: "upload", assistant: "assistant", function_return: "result", function_error: "error",
};

function addItem(cls, who, text) {
  const log = $("chat-log");
  const li = el("li", { class: cls }, el("span", { class: "who", text: who }), text);
  log.append(li);
  li.scrollIntoView({ block: "end" });
  return li;
}

function addMessage(m) {
  const kind = m.kind;
  if (kind === "assistant") {
    if (m.text) addItem("msg-monologue", "inner monologue", m.text);
    for (const call of m.function_calls || []) {
      if (call.name === "send_message") {
        let text = call.arguments;
        try { text = JSON.parse(call.arguments).message ?? text; } catch { /* shown raw */ }
        addItem("msg-reply", "reply (send_message)", text);
      } else {
        addItem("msg-call", `call ${call.name}`, call.arguments);
      }
    }
    return;
  }
  const cls = { user: "msg-user", function_return: "msg-result", function_error: "msg-error", heartbeat: "msg-heartbeat" }[kind] || "msg-event";
  const who = m.name ? `${KIND_LABEL[kind] || kind} · ${m.name}` : KIND_LABEL[kind] || kind;
  if (kind === "function_return" && m.name === "send_message") return;
  addItem(cls, who, m.text);
}

async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
      let event = "message";
      const data = [];
      for (const line of block.split(/\r?\n/)) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

async function send(type, text) {
  if (state.streaming) return;
  state.streaming = true;
  $("send").disabled = true;
  let live = null;
  let thinking = null;
  try {
    const response = await fetch(`/v1/agents/${state.agent.id}/messages/stream`, {
      method: "POST",
      headers: { Authorization: `Bearer ${state.key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ type, text }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new ApiError(response.status, body.error?.code || "http", body.error?.message || response.statusText);
    }
    for await (const { event, data } of sseEvents(response)) {
      if (event === "thinking_delta") {
        thinking = thinking || addItem("msg-monologue live", "inner monologue (streaming)", "");
        thinking.append(data.text);
      } else if (event === "reply_delta") {
        live = live || addItem("msg-reply live", "reply (streaming)", "");
        live.append(data.text);
      } else if (event === "message") {
        if (data.kind === "assistant") {
          thinking?.remove(); live?.remove();
          thinking = null; live = null;
        }
        addMessage(data);
      } else if (event === "flush") {
        const f = data;
        addItem("msg-flush", "flush", `evicted ${f.evicted_messages} messages (${fmt(f.evicted_tokens)} tokens): ${fmt(f.tokens_before)} → ${fmt(f.tokens_after)} prompt tokens${f.summary_updated ? ", summary rewritten" : ", summary kept"}`);
      } else if (event === "step") {
        const log = $("chat-log");
        log.dataset.steps = String(Number(log.dataset.steps || 0) + 1);
        if (data.pressure_warning) addItem("msg-warning", "memory pressure", "The agent was warned that its context is nearly full.");
        state.agent.version = data.version;
        status(`Step done: ${data.stop_reason}, ${data.llm_calls} LLM calls, ${fmt(data.prompt_tokens)} prompt tokens`);
      } else if (event === "error") {
        throw new ApiError(0, data.error?.code || "step_failed", data.error?.message || "the step failed");
      }
    }
  } catch (e) {
    failed(e);
  } finally {
    thinking?.classList.remove("live");
    live?.classList.remove("live");
    state.streaming = false;
    $("send").disabled = false;
    await refreshViews().catch(failed);
  }
}

$("send-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("message").value;
  const type = $("event-type").value;
  if (type === "user" && !text.trim()) return;
  $("message").value = "";
  send(type, text);
});
$("message").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("send-form").requestSubmit(); }
});

// ---- context window --------------------------------------------------------------------------

const SECTIONS = [
  ["system_tokens", "system instructions", "--system"],
  ["tools_tokens", "function schemas", "--tools"],
  ["memory_tokens", "working context + header", "--memory"],
  ["summary_tokens", "recursive summary", "--summary"],
  ["queue_tokens", "FIFO queue", "--queue"],
];

async function loadContext() {
  const ctx = await api("GET", `/v1/agents/${state.agent.id}/context`);
  const t = ctx.tokens;
  const scale = Math.max(t.window, t.total_tokens, ctx.paging.flush_tokens || 0);
  const bar = $("window-bar");
  bar.replaceChildren();
  for (const [key, label, color] of SECTIONS) {
    bar.append(el("div", { class: "seg", title: `${label}: ${fmt(t[key])} tokens`, style: `width:${(100 * t[key]) / scale}%;background:var(${color})` }));
  }
  const line = (tokens, cls, label) => {
    if (tokens == null) return;
    bar.append(el("div", { class: `line ${cls}`, title: `${label} at ${fmt(tokens)} tokens`, style: `left:${(100 * tokens) / scale}%` }));
  };
  line(ctx.paging.warn_tokens, "warn", "warning");
  line(ctx.paging.flush_tokens, "flush", "flush");
  const pct = (100 * t.fraction).toFixed(1);
  bar.setAttribute("aria-label", `Context window: ${fmt(t.total_tokens)} of ${fmt(t.window)} tokens (${pct}%)`);
  $("window-caption").textContent = `${fmt(t.total_tokens)} of ${fmt(t.window)} prompt tokens in use (${pct}%; the rest of the window is kept for the reply), ${t.queue_messages} queued messages`;
  $("window-legend").replaceChildren(
    ...SECTIONS.map(([key, label, color]) => el("li", {}, el("i", { style: `background:var(${color})` }), `${label} ${fmt(t[key])}`)),
    el("li", { text: `warning line ${ctx.paging.warn_tokens == null ? "none" : fmt(ctx.paging.warn_tokens)} · flush line ${ctx.paging.flush_tokens == null ? "none" : fmt(ctx.paging.flush_tokens)}` }),
  );
  const p = ctx.paging;
  $("paging-note").textContent = `Policy ${p.policy}: a flush now would evict ${p.evict_messages} messages (${fmt(p.evict_tokens)} tokens).`;
  $("prompt-rows").replaceChildren(...ctx.messages.map((m, i) => {
    const q = m.queued;
    let content = m.content;
    for (const c of m.function_calls || []) content += `${content ? "\n" : ""}→ ${c.name}(${c.arguments})`;
    const signals = q
      ? `uses ${q.uses} · last used ${q.last_used}${Object.entries(q.signals || {}).map(([name, value]) => ` · ${name} ${Number.isInteger(value) ? value : value.toFixed(3)}`).join("")}${q.relevance == null ? "" : ` · relevance ${q.relevance.toFixed(3)}`}${q.pinned ? " · pinned" : ""}`
      : { system: "instructions, memory blocks, memory header", summary: "recursive summary of evicted messages" }[m.section] || "";
    return el("tr", { class: q && q.evict_next ? "evict" : "" },
      el("td", { text: String(i) }),
      el("td", { text: q ? `${m.role} (${q.kind})` : `${m.role} (${m.section})` }),
      el("td", { text: fmt(m.tokens) }),
      el("td", { class: "content" }, el("div", { text: content })),
      el("td", { class: "signals", text: signals }));
  }));
  $("functions").textContent = ctx.functions.map((f) => `${f.name}: ${f.description}`).join("\n");
  $("summary-text").textContent = ctx.summary.text || "(empty: nothing evicted yet)";
  $("summary-meta").textContent = `Covers ${ctx.summary.evicted_messages} evicted messages${ctx.summary.updated_at ? `; rewritten ${when(ctx.summary.updated_at)}` : ""}.`;
  const history = [...ctx.summary.history].reverse();
  $("flush-log").replaceChildren(...history.map((r) => el("li", {},
    el("span", { class: "score", text: `${when(r.at)}: ${r.evicted_messages} messages, ${fmt(r.evicted_tokens)} tokens evicted${r.forced ? " (forced by the provider)" : ""}${r.summary_updated ? "" : "; the summarizer failed, summary kept"}` }),
    el("div", { text: r.text }),
    el("button", { type: "button", class: "link", text: "Show the evicted messages", onclick: () => showEvicted(r) }))));
  if (!history.length) $("flush-log").append(el("li", { class: "meta", text: "No flush yet." }));
}

/** Every message (function results and alerts included) of the stretch a flush evicted. */
async function showEvicted(revision) {
  selectTab($("tab-recall"));
  // The server's timestamps as sent (JavaScript dates would round them to milliseconds).
  const start = revision.evicted_from, end = revision.evicted_until;
  try {
    const found = await api("GET", `/v1/agents/${state.agent.id}/messages?size=1000&start=${encodeURIComponent(start)}&end=${encodeURIComponent(end)}`);
    $("recall-note").textContent = `${found.total} messages evicted by the flush at ${when(revision.at)}`;
    showMessages(found.items);
  } catch (e) { failed(e); }
}

// ---- memory blocks -------------------------------------------------------------------------

async function loadBlocks() {
  const { blocks } = await api("GET", `/v1/agents/${state.agent.id}/memory`);
  $("blocks").replaceChildren(...blocks.map((b) => {
    const id = `block-${b.label}`;
    const area = el("textarea", { id, "aria-describedby": `${id}-count ${id}-error` });
    area.value = b.value;
    if (b.read_only) area.readOnly = true;
    const count = el("span", { id: `${id}-count`, class: "count" });
    const error = el("p", { id: `${id}-error`, class: "error", role: "alert" });
    const update = () => {
      const n = [...area.value].length;
      count.textContent = `${fmt(n)} / ${fmt(b.limit)} characters`;
      count.classList.toggle("over", n > b.limit);
    };
    area.addEventListener("input", update);
    update();
    const save = el("button", { type: "button", text: "Save", onclick: async () => {
      error.textContent = "";
      try {
        await api("PUT", `/v1/agents/${state.agent.id}/memory/${encodeURIComponent(b.label)}`, { value: area.value });
        status(`Saved ${b.label}`);
        await refreshViews();
      } catch (e) { error.textContent = e instanceof ApiError ? `${e.code}: ${e.message}` : String(e); }
    } });
    if (b.read_only) save.disabled = true;
    return el("section", { class: "block", "data-block": b.label },
      el("h3", {}, el("label", { for: id, text: b.label })),
      b.description ? el("p", { class: "meta", text: b.description }) : null,
      b.block_id ? el("p", { class: "meta shared", text: `Shared block ${b.block_id}: an edit here is seen by every agent holding it on its next step` }) : null,
      area, count, error, el("div", {}, save));
  }));
  await loadSkills();
}

async function loadSkills() {
  const { skills } = await api("GET", `/v1/agents/${state.agent.id}`);
  $("skills").replaceChildren(...skills.map((s) => el("li", { "data-skill": s.name },
    el("strong", { text: s.name }),
    el("span", { class: "meta", text: ` · ${s.files.length ? `${s.files.length} files` : `no files${s.source_url ? ` (source ${s.source_url})` : ""}`}${s.loaded.length ? ` · loaded: ${s.loaded.join(", ")}` : ""}` }),
    el("div", { text: s.description }))));
  if (!skills.length) $("skills").append(el("li", { class: "meta", text: "No skills." }));
}

// ---- archival and recall -------------------------------------------------------------------

function showPassages(page) {
  $("archival-results").replaceChildren(...page.items.map((item) => el("li", {},
    el("span", { class: "score", text: `${item.score ? item.score.toFixed(3) + " · " : ""}${when(item.created_at)}${item.tags.length ? " · " + item.tags.join(", ") : ""} ` }),
    el("button", { type: "button", class: "link", text: "delete", "aria-label": `Delete passage ${item.id}`, onclick: async () => {
      try { await api("DELETE", `/v1/agents/${state.agent.id}/archival/${item.id}`); await listPassages(); } catch (e) { failed(e); }
    } }),
    el("div", { text: item.text }))));
  if (!page.items.length) $("archival-results").append(el("li", { class: "meta", text: "No passages." }));
}

async function listPassages() {
  showPassages(await api("GET", `/v1/agents/${state.agent.id}/archival?size=50`));
}

$("archival-search").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  try { showPassages(await api("POST", `/v1/agents/${state.agent.id}/archival/search`, { query: f.get("query"), mode: f.get("mode"), size: 20 })); } catch (e) { failed(e); }
});
$("archival-all").addEventListener("click", () => listPassages().catch(failed));
$("archival-insert").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const tags = String(f.get("tags") || "").split(",").map((s) => s.trim()).filter(Boolean);
  try {
    const { ids } = await api("POST", `/v1/agents/${state.agent.id}/archival`, { text: f.get("text"), tags });
    ev.target.reset();
    status(`Inserted ${ids.length} passage(s)`);
    await listPassages();
  } catch (e) { failed(e); }
});

$("recall-search").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = new FormData(ev.target);
  const body = { size: 20 };
  if (f.get("query")) body.query = f.get("query");
  if (f.get("start")) body.start = new Date(`${f.get("start")}T00:00:00`).toISOString();
  if (f.get("end")) body.end = new Date(new Date(`${f.get("end")}T00:00:00`).getTime() + 86400000).toISOString();
  await searchRecall(body);
});

async function searchRecall(body) {
  try {
    const found = await api("POST", `/v1/agents/${state.agent.id}/recall/search`, body);
    $("recall-note").textContent = `${found.total} found${found.semantic ? " (words and meaning)" : ""}${found.note ? ": " + found.note : ""}`;
    showMessages(found.items);
  } catch (e) { failed(e); }
}

function showMessages(items) {
  $("recall-results").replaceChildren(...items.map((item) => el("li", {},
    el("span", { class: "score", text: `${KIND_LABEL[item.kind] || item.kind} · ${when(item.created_at)}${item.score ? " · " + item.score.toFixed(3) : ""}` }),
    el("div", { text: item.text || (item.function_calls || []).map((c) => `${c.name}(${c.arguments})`).join("\n") }))));
}

// ---- tabs, refresh, start ------------------------------------------------------------------

const tabs = [...document.querySelectorAll('[role="tab"]')];
function selectTab(tab) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  tab.focus();
  if (tab.id === "tab-archival" && state.agent) listPassages().catch(failed);
}
for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (ev) => {
    const i = tabs.indexOf(tab);
    if (ev.key === "ArrowRight") selectTab(tabs[(i + 1) % tabs.length]);
    else if (ev.key === "ArrowLeft") selectTab(tabs[(i + tabs.length - 1) % tabs.length]);
    else if (ev.key === "Home") selectTab(tabs[0]);
    else if (ev.key === "End") selectTab(tabs[tabs.length - 1]);
  });
}

async function refreshViews() {
  if (!state.agent) return;
  state.agent = await api("GET", `/v1/agents/${state.agent.id}`);
  showMeta();
  await Promise.all([loadContext(), loadBlocks()]);
}

async function connect(key) {
  state.key = key;
  try {
    await loadAgents();
    sessionStorage.setItem("memgpt-key", key);
    status(`Connected: ${state.agents.length} agents`);
  } catch (e) {
    failed(e);
  }
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  connect($("api-key").value.trim());
});
if (state.key) { $("api-key").value = state.key; connect(state.key); }
