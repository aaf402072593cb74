// The console's Replies page: edit the reply table and the action rules, each checked before it is saved.
"use strict";
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

// The action rules (CSV): every problem shown under its line, with the lines around it.
let actionsLoaded = false;
async function loadActions() {
  if (actionsLoaded) return;
  const r = await api("GET", "actions");
  $("act-path").textContent = r.path;
  $("act-text").value = r.text;
  actionsLoaded = true;
}

function showActionProblems(e) {
  const box = $("act-error");
  box.replaceChildren();
  $("act-status").textContent = "";
  if (!e) { box.classList.add("hidden"); return; }
  const lines = $("act-text").value.split("\n");
  const problems = e.problems && e.problems.length ? e.problems : [{line: e.line, message: e.message}];
  for (const p of problems) {
    const ol = document.createElement("ol");
    ol.className = "lines";
    const at = p.line || 1, from = Math.max(1, at - 1), to = Math.min(lines.length, at + 1);
    ol.start = from;
    for (let n = from; n <= to; n++) {
      const li = document.createElement("li");
      li.textContent = lines[n - 1] || " ";
      if (n === at) {
        li.className = "bad";
        const m = document.createElement("div");
        m.className = "message";
        m.textContent = `line ${at}: ${p.message}`;
        li.appendChild(m);
      }
      ol.appendChild(li);
    }
    box.appendChild(ol);
  }
  box.classList.remove("hidden");
}

async function sendActions(path, done) {
  try {
    const r = await api("POST", path, {text: $("act-text").value});
    showActionProblems(null);
    $("act-status").textContent = `${done}: ${r.codes.length} rules` + (r.warnings.length ? `; note: ${r.warnings.join("; ")}` : "");
    $("act-status").className = "ok";
  } catch (e) { showActionProblems(e); }
}
$("act-check").addEventListener("click", () => sendActions("actions/check", "valid"));
$("act-save").addEventListener("click", () => sendActions("actions", "saved, used from the next sentence"));
register("replies", async () => { await loadReplies(); await loadActions(); });
