// The console's Talk page: the conversation turns as they happen, pushed over the live WebSocket
// (/console/api/live, opened with the session cookie; nothing is polled), with the latency, the
// brain that answered and the reply audio; below, what the memory keeps of earlier conversations.
"use strict";
const talkTurns = new Map();  // turn id -> its latest update
const talkAudio = new Map();  // turn id -> its <audio> (kept across renders: playback goes on)
const TALK_KEEP = 500;
let talkSocket = null;
let talkPeople = false;
let earlierKey = null;

function talkFilter() { return {person: $("c-person").value, device: $("c-device").value}; }

function keepTurn(t) {
  talkTurns.set(t.id, t);
  if (talkTurns.size > TALK_KEEP) {
    const oldest = [...talkTurns.values()].sort((a, b) => a.ts - b.ts)[0];
    talkTurns.delete(oldest.id);
    talkAudio.delete(oldest.id);
  }
}

function audioOf(t) {
  if (t.gateway) return t.done ? `audio on ${t.gateway}` : "";  // cluster mode: another member served it, its audio stays there
  if (!t.audio) return "";
  let a = talkAudio.get(t.id);
  if (!a) {
    a = document.createElement("audio");
    a.controls = true;
    a.preload = "metadata";
    a.src = `/console/api/${t.audio}`;
    talkAudio.set(t.id, a);
  }
  return a;
}

function renderTalk() {
  const f = talkFilter();
  const all = [...talkTurns.values()];
  const devices = [...new Set(all.filter((t) => !f.person || t.person === f.person).map((t) => t.device_id))].sort();
  setOptions($("c-device"), ["", ...new Set([...devices, ...(f.device ? [f.device] : [])])], (v) => v || "all devices");
  const rows = all.filter((t) => (!f.person || t.person === f.person) && (!f.device || t.device_id === f.device))
    .sort((a, b) => b.ts - a.ts);
  fill("c-table", "c-none", rows, (tr, t) => {
    cell(tr, when(t.ts));
    cell(tr, t.device_id);
    cell(tr, t.said);
    cell(tr, t.done ? t.answered + (t.aborted ? " (interrupted)" : "") : "…");
    cell(tr, t.latency_ms == null ? (t.done ? "no audio" : "") : `${t.latency_ms} ms`, "latency");
    cell(tr, t.failed ? `failed: ${t.failed}` : t.brain || (t.done ? "none" : ""), "brain");
    cell(tr, audioOf(t), "audio");
  });
}

function openTalkSocket() {
  if (talkSocket) return;
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/console/api/live`);
  talkSocket = ws;
  $("c-live").textContent = "connecting…";
  ws.onmessage = async (m) => {
    const message = JSON.parse(m.data);
    if (message.type === "ready") {  // subscribed: now the turns so far (none is missed in between)
      const d = await api("GET", "talk?n=200");
      d.turns.forEach((t) => { if (!talkTurns.has(t.id) || !talkTurns.get(t.id).done) keepTurn(t); });
      $("c-live").textContent = "live";
    } else if (message.type === "turn") {
      keepTurn(message.turn);
    }
    renderTalk();
  };
  ws.onclose = (e) => {
    talkSocket = null;
    if (e.code === 4401) { location.reload(); return; }  // the session ended: the login page
    $("c-live").textContent = "offline, reconnecting…";
    setTimeout(() => { if (page === "conversations") openTalkSocket(); }, 3000);
  };
}

async function loadEarlier() {
  const {person, device} = talkFilter();
  const key = `${person}\n${device}`;
  if (key === earlierKey) return;
  earlierKey = key;
  $("c-earlier-none").textContent = person ? "Nothing remembered yet." : "Choose a person to see what the memory keeps of their conversations.";
  if (!person) { fill("c-earlier", "c-earlier-none", [], () => {}); return; }
  const d = await api("GET", `conversations?${new URLSearchParams({person, device, n: "50"})}`);
  fill("c-earlier", "c-earlier-none", d.turns, (tr, t) => { cell(tr, when(t.ts)); cell(tr, t.device_id); cell(tr, t.said); cell(tr, t.answered); });
}

async function loadTalk() {  // called when shown and every few seconds: cheap, asks nothing new
  if (!talkPeople) {
    const p = await api("GET", "people");
    setOptions($("c-person"), ["", ...p.people], (v) => v || "everyone");
    talkPeople = true;
  }
  openTalkSocket();
  await loadEarlier();
}
["c-person", "c-device"].forEach((id) => $(id).addEventListener("change", () => { renderTalk(); earlierKey = null; loadEarlier().catch((e) => show(e.message)); }));
register("conversations", loadTalk);
