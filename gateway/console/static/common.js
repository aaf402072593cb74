// The console's common module: the API client (session cookie + CSRF token on every write), the
// table helpers, and the navigation between pages. Each page is its own file (devices.js,
// readings.js, talk.js, memory.js, replies.js, health.js) that calls register(name, load, shown);
// index.html loads this file first and the pages after it (all deferred, in order; no inline script).
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
  if (!answer.ok) { const e = new Error(data.message || `${answer.status}`); e.field = data.field; e.line = data.line; e.problems = data.problems || []; throw e; }
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

function setOptions(select, values, labelOf) {
  const current = select.value;
  select.replaceChildren(...values.map((v) => { const o = document.createElement("option"); o.value = v; o.textContent = labelOf(v); return o; }));
  if (values.includes(current)) select.value = current;
}

async function people(select) {
  const p = await api("GET", "people");
  setOptions(select, p.people, (v) => v);
  return select.value;
}

// ---- navigation, refresh ----
const pages = {};  // name -> {load, shown}: load() refreshes the page, shown() runs when it is opened
function register(name, load, shown) { pages[name] = {load, shown}; }

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try { await pages[page].load(); } catch (e) { show(e.message); } finally { busy = false; }
}

function start() {
  document.querySelectorAll("nav button").forEach((b) => b.addEventListener("click", () => {
    page = b.dataset.page;
    if (pages[page].shown) pages[page].shown();
    document.querySelectorAll("nav button").forEach((o) => o.classList.toggle("active", o === b));
    Object.keys(pages).forEach((p) => $(`page-${p}`).classList.toggle("hidden", p !== page));
    show("");
    refresh();
  }));
  $("logout").addEventListener("click", async () => { try { await api("POST", "logout", {}); } finally { location.href = "/console"; } });
  (async () => {
    csrf = (await api("GET", "session")).csrf;
    await refresh();
    setInterval(refresh, 3000);  // live: new devices, codes and readings appear by themselves
  })();
}
document.addEventListener("DOMContentLoaded", start);  // after every deferred page file has registered
