// The console's Memory page: search a person's memories, edit or delete one; the person's rules (create,
// change, disable / enable, delete; when each fired); the portrait and the daily reflection.
"use strict";
let memoryDirty = true;  // a search is run when asked, not every 3 s
let ruleEditing = null;  // the id of the rule being changed: its row is not redrawn meanwhile
let memoryEditing = null;  // the id of the memory being changed: the table is not redrawn meanwhile

async function loadMemory() {
  const person = await people($("m-person"));
  if (!person) return;
  await Promise.all([loadRules(person), loadProfile(person)]);  // live: a rule firing shows at once
  if (!memoryDirty || memoryEditing !== null) return;
  memoryDirty = false;
  const q = $("m-q").value.trim();
  const d = await api("GET", `memory?${new URLSearchParams({person, q, type: $("m-type").value, tag: $("m-tag").value.trim(), n: "50"})}`);
  $("m-title").textContent = q ? `Best matches for "${q}"` : "Newest memories";
  fill("m-table", "m-none", d.nodes, (tr, n) => {
    cell(tr, when(n.ts)); cell(tr, n.type); cell(tr, n.content); cell(tr, n.tags.join(" "), "muted");
    const actions = cell(tr, n.tags.includes("kind:rule") ? "" : button("Edit", () => editMemory(tr, person, n)));
    actions.append(button("Delete", () => {
      if (!confirm(`Delete this memory of ${person}?\n\n${n.content}`)) return;
      memoryDirty = true;
      write("memory/delete", {person, id: n.id});
    }, "danger"));
  });
}

function editMemory(tr, person, n) {  // in place: the table is not redrawn until it is saved or cancelled
  memoryEditing = n.id;
  const content = document.createElement("textarea");
  content.value = n.content; content.rows = 3; content.maxLength = 4000; content.setAttribute("aria-label", "memory text");
  const tags = input(n.tags.join(" "), "tags", 1000);
  const error = document.createElement("div"); error.className = "error"; error.setAttribute("role", "alert");
  tr.replaceChildren();
  cell(tr, when(n.ts)); cell(tr, n.type); cell(tr, content); cell(tr, tags);
  const actions = cell(tr, button("Save", async () => {
    content.classList.remove("bad"); tags.classList.remove("bad");
    try {
      await api("POST", "memory/update", {person, id: n.id, content: content.value,
        tags: tags.value.split(/\s+/).filter(Boolean), importance: n.importance});
      memoryEditing = null; memoryDirty = true; await refresh();
    } catch (e) { (e.field === "tags" ? tags : content).classList.add("bad"); error.textContent = e.message; }
  }, "primary"));
  actions.append(button("Cancel", () => { memoryEditing = null; memoryDirty = true; refresh(); }), error);
  label($("m-table"));
  content.focus();
}
$("m-form").addEventListener("submit", (event) => { event.preventDefault(); memoryDirty = true; memoryEditing = null; refresh(); });
$("m-person").addEventListener("change", () => { memoryDirty = true; memoryEditing = null; ruleEditing = null; refresh(); });

// ---- rules ----
function input(value, label, maxLength) {
  const i = document.createElement("input");
  i.value = value; i.maxLength = maxLength; i.setAttribute("aria-label", label);
  return i;
}

function markBad(fields, e, errorBox) {  // the refused field is marked, the reason shown beside it
  Object.values(fields).forEach((f) => f.classList.remove("bad"));
  const bad = fields[e.field] || (e.field === "before" ? fields.above : null);
  if (bad) bad.classList.add("bad");
  errorBox.textContent = e.message;
}

function ruleBody(person, fields, extra) {
  const cond = fields.cond.value, value = fields.above.value.trim();
  return {person, text: fields.text.value, reading: fields.reading.value.trim(),
    above: cond === "above" ? value : "", before: cond === "before" ? value : "", ...extra};
}

function editRule(tr, person, r) {
  ruleEditing = r.id;
  const fields = {text: input(r.text, "rule text", 500), reading: input(r.reading, "reading kind", 32),
    cond: document.createElement("select"), above: input(r.above || r.before, "threshold or time", 16)};
  fields.cond.setAttribute("aria-label", "condition");
  fields.cond.replaceChildren(...[["above", "above"], ["before", "none before"]].map(([v, t]) => {
    const o = document.createElement("option"); o.value = v; o.textContent = t; return o;
  }));
  fields.cond.value = r.above ? "above" : "before";
  const error = document.createElement("div"); error.className = "error"; error.setAttribute("role", "alert");
  tr.replaceChildren();
  cell(tr, fields.text); cell(tr, fields.reading);
  const condCell = cell(tr, fields.cond); condCell.appendChild(fields.above);
  cell(tr, r.enabled ? "on" : "off"); cell(tr, when(r.last_fired)); cell(tr, "");
  const actions = cell(tr, button("Save", async () => {
    try {
      await api("POST", "rules/update", ruleBody(person, fields, {id: r.id}));
      ruleEditing = null; await refresh();
    } catch (e) { markBad(fields, e, error); }
  }, "primary"));
  actions.append(button("Cancel", () => { ruleEditing = null; refresh(); }), error);
  label($("rules"));
  fields.text.focus();
}

async function loadRules(person) {
  if (ruleEditing !== null) return;  // never overwrite what is being edited
  const d = await api("GET", `rules?${new URLSearchParams({person})}`);
  if (ruleEditing !== null) return;
  fill("rules", "rules-none", d.rules, (tr, r) => {
    tr.dataset.rule = r.id;
    cell(tr, r.text); cell(tr, r.reading);
    cell(tr, r.above ? `above ${r.above}` : `none before ${r.before}`);
    cell(tr, r.enabled ? "on" : "off", r.enabled ? "ok" : "muted");
    cell(tr, when(r.last_fired));
    const list = document.createElement("ul");
    r.firings.forEach((f) => { const li = document.createElement("li"); li.textContent = `${when(f.ts)}: ${f.text}`; list.appendChild(li); });
    cell(tr, r.firings.length ? list : "", "muted");
    const actions = cell(tr, button("Edit", () => editRule(tr, person, r)));
    actions.append(button(r.enabled ? "Disable" : "Enable", () => write("rules/enable", {person, id: r.id, enabled: !r.enabled})),
      button("Delete", () => { if (confirm(`Delete this rule of ${person}?\n\n${r.text}`)) write("rules/delete", {person, id: r.id}); }, "danger"));
  });
}

$("rule-add").addEventListener("submit", async (event) => {
  event.preventDefault();
  const fields = {text: $("ra-text"), reading: $("ra-reading"), cond: $("ra-cond"), above: $("ra-value")};
  $("ra-error").textContent = "";
  Object.values(fields).forEach((f) => f.classList.remove("bad"));
  try {
    await api("POST", "rules", ruleBody($("m-person").value, fields, {}));
    fields.text.value = ""; fields.reading.value = ""; fields.above.value = "";
    await refresh();
  } catch (e) { markBad(fields, e, $("ra-error")); }
});

// ---- portrait and reflections ----
async function loadProfile(person) {
  const p = await api("GET", `profile?${new URLSearchParams({person})}`);
  $("p-portrait").textContent = p.portrait;
  $("p-portrait").classList.toggle("hidden", !p.portrait);
  $("p-none").classList.toggle("hidden", !!p.portrait);
  $("p-updated").textContent = p.updated ? `(${when(p.updated)})` : "";
  fill("p-table", "p-table-none", p.reflections, (tr, r) => { cell(tr, when(r.ts)); cell(tr, r.content); });
}

$("p-run").addEventListener("click", async () => {
  $("p-run").disabled = true;
  $("p-status").textContent = "Reflecting...";
  try {
    const r = await api("POST", "profile/reflect", {person: $("m-person").value});
    $("p-status").textContent = `${r.insights.length} new insights, portrait rebuilt`;
    $("p-status").className = "ok";
    memoryDirty = true;
    await refresh();
  } catch (e) { $("p-status").textContent = e.message; $("p-status").className = "error"; }
  finally { $("p-run").disabled = false; }
});
register("memory", loadMemory, () => { memoryDirty = true; });
