// The console app: devices, readings (table + chart), health. Talks to /console/api/ with the
// session cookie; every write carries the CSRF token (X-CSRF-Token) the session hands out.
"use strict";
let csrf = "";
let page = "devices";
const $ = (id) => document.getElementById(id);

function show(message) { $("status").textContent = message || ""; }

async function api(method, path, body) {
  const headers = {};
  if (method !== "GET") { headers["Content-Type"] = "application/json"; headers["X-CSRF-Token"] = csrf; }
  const answer = await fetch(`/console/api/${path}`, {method, headers, body: body === undefined ? undefined : JSON.stringify(body)});
  if (answer.status === 401) { location.reload(); throw new Error("logged out"); }
  const data = await answer.json().catch(() => ({}));
  if (!answer.ok) { const e = new Error(data.message || `${answer.status}`); e.field = data.field; e.line = data.line; throw e; }
  return data;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  if (text instanceof Node) td.appendChild(text); else td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function button(label, onClick, cls) {
  const b = document.createElement("button");
  b.textContent = label;
  if (cls) b.className = cls;
  b.addEventListener("click", onClick);
  return b;
}

function label(table) {  // each cell names its column: on a phone the rows stack as cards (console.css)
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
  table.querySelectorAll("tbody tr").forEach((tr) => [...tr.cells].forEach((td, i) => { td.dataset.label = names[i] || ""; }));
}

function fill(tableId, noneId, rows, render) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows.map((row) => { const tr = document.createElement("tr"); render(tr, row); return tr; }));
  label($(tableId));
  $(noneId).classList.toggle("hidden", rows.length > 0);
  $(tableId).classList.toggle("hidden", rows.length === 0);
}

function when(ts) { return ts ? new Date(ts * 1000).toLocaleString() : "never"; }

async function write(path, body, after) {
  show("");
  try { const r = await api("POST", path, body); if (after) after(r); await refresh(); }
  catch (e) { show(`${path}: ${e.message}`); }
}

// ---- devices ----
async function loadDevices() {
  const d = await api("GET", "devices");
  fill("pending", "pending-none", d.pending, (tr, p) => {
    cell(tr, p.code, "code"); cell(tr, p.device_id); cell(tr, p.details);
    cell(tr, p.approved ? "approved, waiting for the box" : `expires in ${p.expires_in} s`);
    const actions = cell(tr, "");
    if (!p.approved) {
      actions.appendChild(button("Approve", () => write("devices/approve", {code: p.code}), "primary"));
      actions.appendChild(button("Reject", () => write("devices/reject", {device_id: p.device_id}), "danger"));
    }
  });
  fill("connected", "connected-none", d.connected, (tr, c) => {
    cell(tr, c.device_id); cell(tr, c.link); cell(tr, c.address);
    cell(tr, c.audio_in ? `${c.audio_in} / ${c.audio_out}` : ""); cell(tr, c.firmware); cell(tr, c.since ? when(c.since) : "");
    cell(tr, c.can_speak ? "yes" : "no"); cell(tr, c.person);
  });
  fill("registered", "registered-none", d.registered, (tr, r) => {
    cell(tr, r.device_id + (r.connected ? " (connected)" : ""));
    const name = document.createElement("input");
    name.value = r.name; name.maxLength = 100; name.setAttribute("aria-label", `name of ${r.device_id}`);
    const nameCell = cell(tr, name);
    nameCell.appendChild(button("Rename", () => write("devices/rename", {device_id: r.device_id, name: name.value})));
    cell(tr, when(r.last_seen));
    cell(tr, r.person + (r.mapped ? "" : " (own)"));
    cell(tr, button("Remove", () => { if (confirm(`Remove ${r.device_id}? It can no longer connect.`)) write("devices/remove", {device_id: r.device_id}); }, "danger"));
  });
}

$("add").addEventListener("submit", (event) => {
  event.preventDefault();
  $("add-error").textContent = "";
  api("POST", "devices/add", {device_id: $("add-id").value, name: $("add-name").value}).then((r) => {
    $("cred-id").textContent = r.device_id;
    $("cred-firmware").textContent = Object.entries(r.firmware).map(([k, v]) => `#define ${k.padEnd(18)} "${v}"`).join("\n");
    $("credentials").classList.remove("hidden");
    $("add-id").value = ""; $("add-name").value = "";
    return refresh();
  }).catch((e) => { $("add-error").textContent = e.message; });
});

// ---- readings ----
function setOptions(select, values, labelOf) {
  const current = select.value;
  select.replaceChildren(...values.map((v) => { const o = document.createElement("option"); o.value = v; o.textContent = labelOf(v); return o; }));
  if (values.includes(current)) select.value = current;
}

async function loadReadings() {
  const q = () => new URLSearchParams({person: $("r-person").value, kind: $("r-kind").value, days: $("r-days").value});
  let d = await api("GET", `readings?${q()}`);
  setOptions($("r-person"), ["", ...d.people], (v) => v || "everyone");
  setOptions($("r-kind"), ["", ...d.kinds], (v) => v || "all kinds");
  if (d.person !== $("r-person").value || d.kind !== $("r-kind").value) d = await api("GET", `readings?${q()}`);
  $("r-csv").href = `/console/api/readings.csv?${q()}`;
  const tbody = $("r-table").tBodies[0];
  tbody.replaceChildren(...d.readings.slice().reverse().map((r) => {
    const tr = document.createElement("tr");
    cell(tr, when(r.measured_at) + (r.clock === "gateway" ? " *" : "")); cell(tr, r.device_id); cell(tr, r.kind);
    cell(tr, Object.entries(r.values).map(([n, v]) => `${n} ${v} ${r.units[n] || ""}`.trim()).join(", "));
    return tr;
  }));
  label($("r-table"));
  // one line per value name (of the chosen kind, or kind.name for all kinds)
  const series = new Map();
  const nameOf = (r, n) => (d.kind ? n : `${r.kind} ${n}`);
  d.readings.forEach((r) => Object.entries(r.values).forEach(([n, v]) => {
    const key = nameOf(r, n);
    if (!series.has(key)) series.set(key, {name: key, points: [], color: window.CHART_COLORS[series.size % window.CHART_COLORS.length]});
    series.get(key).points.push([r.measured_at, v]);
  }));
  const thresholds = [];
  d.thresholds.forEach((th) => {
    const sample = d.readings.find((r) => r.kind === th.kind);
    const names = sample ? Object.keys(sample.values) : [];
    th.limits.forEach((limit, i) => {
      const s = series.get(names[i] === undefined ? "" : nameOf(sample, names[i]));
      thresholds.push({value: limit, label: `alert above ${limit}${names[i] ? " (" + names[i] + ")" : ""}`, color: s ? s.color : "#b91c1c"});
    });
  });
  const to = Date.now() / 1000, from = to - Number($("r-days").value) * 86400;
  $("r-title").textContent = `${d.kind || "All readings"}${d.person ? " of " + d.person : ""}`;
  $("r-legend").replaceChildren(...[...series.values()].map((s) => {
    const span = document.createElement("span");
    const sw = document.createElement("span"); sw.className = "swatch"; sw.style.background = s.color;
    span.append(sw, s.name); return span;
  }));
  $("r-empty").classList.toggle("hidden", d.readings.length > 0);
  window.drawChart($("r-chart"), {series: [...series.values()], thresholds, from, to});
}
["r-person", "r-kind", "r-days"].forEach((id) => $(id).addEventListener("change", () => refresh()));

// ---- conversations and memory (read-only) ----
async function people(select) {
  const p = await api("GET", "people");
  setOptions(select, p.people, (v) => v);
  return select.value;
}

async function loadConversations() {
  const person = await people($("c-person"));
  if (!person) { fill("c-table", "c-none", [], () => {}); return; }
  const d = await api("GET", `conversations?${new URLSearchParams({person, device: $("c-device").value, n: "50"})}`);
  const devices = [...new Set(d.turns.map((t) => t.device_id).concat($("c-device").value ? [$("c-device").value] : []))];
  setOptions($("c-device"), ["", ...devices], (v) => v || "all devices");
  fill("c-table", "c-none", d.turns, (tr, t) => { cell(tr, when(t.ts)); cell(tr, t.device_id); cell(tr, t.said); cell(tr, t.answered); });
}
["c-person", "c-device"].forEach((id) => $(id).addEventListener("change", () => refresh()));

let memoryDirty = true;  // a search is run when asked, not every 3 s
async function loadMemory() {
  const person = await people($("m-person"));
  if (!person || !memoryDirty) return;
  memoryDirty = false;
  const q = $("m-q").value.trim();
  const d = await api("GET", `memory?${new URLSearchParams({person, q, type: $("m-type").value, tag: $("m-tag").value.trim(), n: "50"})}`);
  $("m-title").textContent = q ? `Best matches for "${q}"` : "Newest memories";
  fill("m-table", "m-none", d.nodes, (tr, n) => {
    cell(tr, when(n.ts)); cell(tr, n.type); cell(tr, n.content); cell(tr, n.tags.join(" "), "muted");
    cell(tr, button("Delete", () => {
      if (!confirm(`Delete this memory of ${person}?\n\n${n.content}`)) return;
      memoryDirty = true;
      write("memory/delete", {person, id: n.id});
    }, "danger"));
  });
}
$("m-form").addEventListener("submit", (event) => { event.preventDefault(); memoryDirty = true; refresh(); });
$("m-person").addEventListener("change", () => { memoryDirty = true; refresh(); });

// ---- replies ----
let repliesLoaded = false;
async function loadReplies() {
  if (repliesLoaded) return;  // never overwrite what is being edited
  const r = await api("GET", "replies");
  $("rep-path").textContent = r.path;
  $("rep-text").value = r.text;
  repliesLoaded = true;
}

function showReplyError(e) {
  const box = $("rep-error");
  box.replaceChildren();
  $("rep-status").textContent = "";
  if (!e) { box.classList.add("hidden"); return; }
  const lines = $("rep-text").value.split("\n");
  const at = e.line || 1;
  const from = Math.max(1, at - 2), to = Math.min(lines.length, at + 2);
  box.start = from;
  for (let n = from; n <= to; n++) {
    const li = document.createElement("li");
    li.textContent = lines[n - 1] || " ";
    if (e.line && n === at) li.className = "bad";
    if (n === at) { const m = document.createElement("div"); m.className = "message"; m.textContent = (e.line ? `line ${at}: ` : "") + e.message; li.appendChild(m); }
    box.appendChild(li);
  }
  box.classList.remove("hidden");
  if (e.line) {  // put the cursor on the line
    const offset = lines.slice(0, at - 1).reduce((sum, l) => sum + l.length + 1, 0);
    $("rep-text").setSelectionRange(offset, offset + (lines[at - 1] || "").length);
  }
}

async function sendReplies(path, done) {
  try {
    const r = await api("POST", path, {text: $("rep-text").value});
    showReplyError(null);
    $("rep-status").textContent = `${done}: ${r.intents.length} intents`;
    $("rep-status").className = "ok";
  } catch (e) { showReplyError(e); }
}
$("rep-check").addEventListener("click", () => sendReplies("replies/check", "valid"));
$("rep-save").addEventListener("click", () => sendReplies("replies", "saved, used from the next answer"));

// ---- health ----
async function loadHealth() {
  const h = await api("GET", "health");
  const about = [["version", h.version], ["up for", `${Math.floor(h.uptime_s / 3600)} h ${Math.floor(h.uptime_s / 60) % 60} min`],
    ...Object.entries(h.models).map(([k, v]) => [`model: ${k}`, v])];
  $("h-about").tBodies[0].replaceChildren(...about.map(([k, v]) => { const tr = document.createElement("tr"); cell(tr, k); cell(tr, v); return tr; }));
  $("h-ports").tBodies[0].replaceChildren(...h.ports.map((p) => { const tr = document.createElement("tr"); cell(tr, p.what); cell(tr, p.address); cell(tr, p.key, "muted"); return tr; }));
  const links = Object.entries(h.links);
  $("h-links").tBodies[0].replaceChildren(...(links.length ? links : [["-", []]]).map(([l, ds]) => { const tr = document.createElement("tr"); cell(tr, l); cell(tr, ds.join(", ") || "none"); return tr; }));
  $("h-log").textContent = h.log.join("\n");
}

$("h-run").addEventListener("click", async () => {
  $("h-run").disabled = true;
  $("h-run").textContent = "Checking...";
  try {
    const r = await api("GET", "health/checks");
    $("h-checks").tBodies[0].replaceChildren(...r.checks.map((c) => {
      const tr = document.createElement("tr");
      cell(tr, c.status, c.status === "OK" ? "ok" : "error"); cell(tr, c.what); cell(tr, c.status === "OK" ? "" : c.fix);
      return tr;
    }));
    label($("h-checks"));
  } catch (e) { show(e.message); } finally { $("h-run").disabled = false; $("h-run").textContent = "Run the checks"; }
});

// ---- navigation, refresh ----
const loaders = {devices: loadDevices, readings: loadReadings, conversations: loadConversations, memory: loadMemory,
  replies: loadReplies, health: loadHealth};
let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try { await loaders[page](); } catch (e) { show(e.message); } finally { busy = false; }
}
document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
  page = b.dataset.page;
  memoryDirty = true;
  document.querySelectorAll("nav button").forEach((o) => o.classList.toggle("active", o === b));
  Object.keys(loaders).forEach((p) => $(`page-${p}`).classList.toggle("hidden", p !== page));
  show("");
  refresh();
}));
$("logout").addEventListener("click", async () => { try { await api("POST", "logout", {}); } finally { location.href = "/console"; } });

(async () => {
  csrf = (await api("GET", "session")).csrf;
  await refresh();
  setInterval(refresh, 3000);  // live: new devices, codes and readings appear by themselves
})();
