// The console's Replies page: edit the reply table, checked before it is saved.
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
register("replies", loadReplies);
