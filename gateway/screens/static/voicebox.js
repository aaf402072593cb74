// Browser voice box and LAN screen for the edge voice gateway.
//
// Default: a voice box. It connects to /device like an ESP32 (binary wire protocol
// v1, see firmware_protocol/PROTOCOL.md), streams the microphone while "Hold to talk" is held,
// plays the reply and moves the mouth from the Visemes track of each sentence.
// With ?watch=DEVICE (or ?watch=all)&key=KEY: a screen. It subscribes to /screen (Fay "human"
// messages) with the screen key, plays each sentence's HttpValue audio (its URL carries the key)
// and moves the mouth from its Lips.
"use strict";

const T = { HELLO: 0x01, WELCOME: 0x02, PING: 0x03, PONG: 0x04, ERROR: 0x05, AUDIO_START: 0x10,
  AUDIO_CHUNK: 0x11, AUDIO_STOP: 0x12, TRANSCRIPT: 0x20, REPLY_TEXT: 0x21, VAD_EVENT: 0x23,
  VISEMES: 0x30, MOUTH: 0x31, ACTION: 0x32, SENTIMENT: 0x33 };
const CAPS = 1 | 2 | 4 | 8 | 32 | 256; // AUDIO_IN AUDIO_OUT TEXT VISEMES ACTION SCREEN
const MIC_RATE = 16000, OUT_RATE = 16000, CHUNK_MS = 40, THINKING_MS = 20000;
const $ = (id) => document.getElementById(id);
const WS = location.protocol === "https:" ? "wss:" : "ws:"; // same origin: works over https too
const state = window.voicebox = { mode: "voicebox", status: "connecting", sentMs: 0, transcript: "",
  reply: "", action: "", sentiment: 0, mouth: 0, sentences: 0, errors: [] };

// ---- wire protocol (the subset a voice box needs) ----------------------------------------------
class Writer {
  constructor() { this.b = []; }
  u8(v) { this.b.push(v & 255); return this; }
  u16(v) { return this.u8(v >> 8).u8(v); }
  u32(v) { return this.u16((v >>> 16) & 0xffff).u16(v & 0xffff); }
  str(s) { const e = new TextEncoder().encode(s); this.u16(e.length); for (const x of e) this.b.push(x); return this; }
  fmt(rate) { return this.u8(0).u32(rate).u8(1); } // pcm_s16le, rate, mono
  bytes() { return new Uint8Array(this.b); }
}
class Reader {
  constructor(buf) { this.buf = buf; this.d = new DataView(buf); this.p = 0; }
  u8() { return this.d.getUint8(this.p++); }
  i8() { return this.d.getInt8(this.p++); }
  u16() { const v = this.d.getUint16(this.p); this.p += 2; return v; }
  u32() { const v = this.d.getUint32(this.p); this.p += 4; return v; }
  str() { const n = this.u16(); const s = new TextDecoder().decode(new Uint8Array(this.buf, this.p, n)); this.p += n; return s; }
  fmt() { return { codec: this.u8(), rate: this.u32(), channels: this.u8() }; }
  rest() { const a = this.buf.slice(this.p); this.p = this.buf.byteLength; return a; }
}
const hello = (id) => new Writer().u8(T.HELLO).str(id).str("").u8(1).u32(CAPS).fmt(MIC_RATE).fmt(OUT_RATE).str("browser voicebox").bytes();
const audioStart = (sid) => new Writer().u8(T.AUDIO_START).u16(sid).fmt(MIC_RATE).bytes();
const audioStop = (sid) => new Writer().u8(T.AUDIO_STOP).u16(sid).u8(0).bytes();
const pong = (nonce) => new Writer().u8(T.PONG).u32(nonce).bytes();
function audioChunk(sid, seq, pcm16) {
  const head = new Writer().u8(T.AUDIO_CHUNK).u16(sid).u32(seq).bytes();
  const out = new Uint8Array(head.length + pcm16.byteLength);
  out.set(head); out.set(new Uint8Array(pcm16.buffer, pcm16.byteOffset, pcm16.byteLength), head.length);
  return out;
}

// ---- the mouth: timelines of [{start, dur, open}] runs, placed on performance.now() ------------
const timelines = [];
function addTimeline(t0, runs) { timelines.push({ t0, runs, end: t0 + runs.reduce((a, r) => Math.max(a, r.start + r.dur), 0) }); }
function mouthAt(now) {
  for (const tl of timelines) {
    if (now < tl.t0 || now >= tl.end) continue;
    const t = now - tl.t0;
    for (const r of tl.runs) if (t >= r.start && t < r.start + r.dur) return r.open;
  }
  return 0;
}
setInterval(() => {
  const now = performance.now();
  while (timelines.length && timelines[0].end < now - 1000) timelines.shift();
  const open = mouthAt(now);
  state.mouth = open;
  const m = $("mouth");
  m.setAttribute("ry", (2 + open * 30).toFixed(1));
  m.setAttribute("data-open", open.toFixed(2));
}, 30);

function showSentence(text, action, sentiment) {
  state.reply = text; state.sentences += 1;
  $("reply").textContent = text;
  state.action = action ? action.code : "";
  $("action").textContent = action ? `${action.code} (${action.behavior}, ${action.affect})` : "";
  state.sentiment = sentiment;
  $("mood").textContent = sentiment > 0.4 ? `mood: positive ${sentiment}` : sentiment < -0.4 ? `mood: negative ${sentiment}` : `mood: neutral ${sentiment}`;
}
function setStatus(s) { state.status = s; $("status").textContent = s; }

// ---- audio out: schedule each chunk back to back on one AudioContext ---------------------------
let ctx = null, playHead = 0;
function audio() { if (!ctx) ctx = new AudioContext(); if (ctx.state === "suspended") ctx.resume(); return ctx; }
function play(samples, rate) {
  const c = audio();
  const buf = c.createBuffer(1, samples.length, rate);
  buf.copyToChannel(samples, 0);
  const src = c.createBufferSource();
  src.buffer = buf; src.connect(c.destination);
  const at = Math.max(c.currentTime + 0.05, playHead);
  src.start(at);
  playHead = at + samples.length / rate;
  return performance.now() + (at - c.currentTime) * 1000;
}

// ---- voice box mode ----------------------------------------------------------------------------
function runVoicebox(cfg, deviceId) {
  const ws = new WebSocket(`${WS}//${location.host}${cfg.device_path}`);
  ws.binaryType = "arraybuffer";
  const streams = {}; // stream id -> {rate, t0, runs, text, action, sentiment}
  const stream = (sid) => (streams[sid] = streams[sid] || { rate: OUT_RATE, runs: [], action: null, sentiment: 0 });
  ws.onopen = () => ws.send(hello(deviceId));
  ws.onclose = () => { clearTimeout(waiting); setStatus("disconnected"); };
  ws.onmessage = (ev) => {
    const r = new Reader(ev.data), type = r.u8();
    if (type === T.WELCOME) { ready(); $("talk").hidden = false; }
    else if (type === T.PING) ws.send(pong(r.u32()));
    else if (type === T.ERROR) {
      const code = r.str(), text = r.str(); state.errors.push(code + ": " + text);
      if (state.status === "thinking") { clearTimeout(waiting); setStatus(`no reply: ${code}: ${text}`); }
    }
    else if (type === T.TRANSCRIPT) { state.transcript = r.str(); $("transcript").textContent = state.transcript; }
    else if (type === T.REPLY_TEXT) { const text = r.str(), sid = r.u16(), final = r.u8(); if (!final) stream(sid).text = text; else setStatus("reply done"); }
    else if (type === T.ACTION) { const s = stream(r.u16()); s.action = { code: r.str(), behavior: r.str(), affect: r.str(), intensity: r.u8() / 100, priority: r.u8() }; }
    else if (type === T.SENTIMENT) stream(r.u16()).sentiment = r.i8() / 10;
    else if (type === T.VISEMES) {
      const s = stream(r.u16()), n = r.u8();
      for (let i = 0; i < n; i++) s.runs.push({ viseme: r.u8(), start: r.u16(), dur: r.u16(), open: r.u8() / 255 });
    } else if (type === T.AUDIO_START) { const s = stream(r.u16()); s.rate = r.fmt().rate; }
    else if (type === T.AUDIO_CHUNK) {
      const sid = r.u16(), seq = r.u32(), pcm = new Int16Array(r.rest()), s = stream(sid);
      const f = new Float32Array(pcm.length);
      for (let i = 0; i < pcm.length; i++) f[i] = pcm[i] / 32768;
      const t0 = play(f, s.rate);
      if (seq === 0) { addTimeline(t0, s.runs); showSentence(s.text || "", s.action, s.sentiment); }
    }
  };
  let mic = null, sid = 0, seq = 0, talking = false, waiting = null;
  const ready = () => setStatus(`connected as ${deviceId}`);
  function noMicrophone(text) {
    // Hold-to-talk cannot work here: say why, instead of "listening" or "thinking" forever.
    state.micProblem = text; talking = false; $("talk").classList.remove("on"); setStatus(text);
  }
  async function start() {
    if (talking) return;
    if (!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia)) {
      noMicrophone(window.isSecureContext ? "no microphone: this browser offers none to the page"
        : `no microphone: the browser allows it only on https pages; open https://${location.host}${location.pathname} (accept the certificate once)`);
      return;
    }
    talking = true; $("talk").classList.add("on"); setStatus("listening");
    const c = audio();
    let media;
    try {
      media = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
    } catch (err) {
      noMicrophone(`no microphone: ${err && err.name === "NotAllowedError" ? "permission denied" : (err && err.message) || err}`);
      return;
    }
    if (!talking) { media.getTracks().forEach((t) => t.stop()); ready(); return; } // let go before the microphone came
    const src = c.createMediaStreamSource(media), proc = c.createScriptProcessor(4096, 1, 1);
    const ratio = c.sampleRate / MIC_RATE, per = MIC_RATE * CHUNK_MS / 1000;
    let pending = [];
    sid = (sid % 0xffff) + 1; seq = 0;
    ws.send(audioStart(sid));
    proc.onaudioprocess = (e) => {
      if (!talking) return;
      const x = e.inputBuffer.getChannelData(0);
      for (let i = 0; i * ratio < x.length - 1; i++) {
        const p = i * ratio, k = Math.floor(p), a = p - k;
        pending.push(x[k] * (1 - a) + x[Math.min(k + 1, x.length - 1)] * a);
      }
      while (pending.length >= per) {
        const part = pending.slice(0, per); pending = pending.slice(per);
        const pcm = new Int16Array(per);
        for (let i = 0; i < per; i++) pcm[i] = Math.max(-32768, Math.min(32767, Math.round(part[i] * 32767)));
        ws.send(audioChunk(sid, seq++, pcm)); state.sentMs += CHUNK_MS;
      }
    };
    src.connect(proc); proc.connect(c.destination);
    mic = { media, src, proc };
  }
  function stop() {
    if (!talking) return;
    talking = false; $("talk").classList.remove("on");
    if (!mic) return; // nothing was sent (start() puts the status right)
    setStatus("thinking");
    ws.send(audioStop(sid));
    mic.proc.disconnect(); mic.src.disconnect(); mic.media.getTracks().forEach((t) => t.stop()); mic = null;
    clearTimeout(waiting); // no reply at all (nothing heard): say so instead of thinking forever
    waiting = setTimeout(() => { if (state.status === "thinking") setStatus("no reply: nothing was heard, hold the button while you speak"); }, THINKING_MS);
  }
  const b = $("talk");
  b.addEventListener("pointerdown", (e) => { e.preventDefault(); start().catch((err) => { state.errors.push(String(err)); noMicrophone("no microphone: " + err); }); });
  for (const ev of ["pointerup", "pointerleave", "pointercancel"]) b.addEventListener(ev, stop);
}

// ---- screen mode (Fay messages) ----------------------------------------------------------------
// Needs the screen key (?key=, as the gateway printed the page URL); reconnects by itself after a
// gateway restart (backoff up to 10 s), but not after a refused key (close code 4401).
const KEY_REFUSED = 4401;
function soundBlocked(url) {
  // Autoplay is blocked until the user interacts with the page: one tap enables sound.
  state.soundBlocked = true;
  console.info("autoplay blocked: showing Tap to enable sound");
  const b = $("sound"); b.hidden = false;
  b.onclick = () => { state.soundBlocked = false; b.hidden = true; audio(); new Audio(url).play().catch(() => {}); };
}
function runScreen(cfg, device, key) {
  state.mode = "screen";
  let delay = 500;
  const connect = () => {
    const ws = new WebSocket(`${WS}//${location.host}${cfg.screen_path}?device=${encodeURIComponent(device)}&key=${encodeURIComponent(key)}`);
    ws.onopen = () => { delay = 500; state.connects = (state.connects || 0) + 1; setStatus(`watching ${device}`); };
    ws.onclose = (ev) => {
      if (ev.code === KEY_REFUSED) { setStatus("refused: " + (ev.reason || "wrong screen key")); return; }
      setStatus("disconnected, reconnecting…");
      setTimeout(connect, delay); delay = Math.min(delay * 2, 10000);
    };
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data), d = msg.Data || {};
      if (d.Key === "transcript") { state.transcript = d.Text; $("transcript").textContent = d.Text; }
      else if (d.Key === "listen") { state.listen = d.Text; setStatus(`watching ${device}: ${d.Text === "woken" ? "woken (" + d.Word.replace(/_/g, " ") + ")" : d.Text}`); }
      else if (d.Key === "audio") {
        let t = 0; const runs = (d.Lips || []).map((l) => { const r = { start: t, dur: l.Time, open: OPEN[l.Lip] || 0 }; t += l.Time; return r; });
        addTimeline(performance.now(), runs);
        showSentence(d.Text, d.Action, d.Sentiment);
        state.audioUrl = d.HttpValue;  // none for a cluster member's device served by another member
        if (d.HttpValue) new Audio(d.HttpValue).play().catch((err) => { if (err && err.name === "NotAllowedError") soundBlocked(d.HttpValue); });
      }
    };
  };
  connect();
}
const OPEN = { sil: 0, PP: 0.25, FF: 0.25, nn: 0.25, TH: 0.45, DD: 0.45, CH: 0.45, SS: 0.45, ih: 0.45, RR: 0.45, kk: 0.65, E: 0.65, oh: 0.65, aa: 0.85, ou: 0.85 };

fetch("config.json").then((r) => r.json()).then((cfg) => {
  const q = new URLSearchParams(location.search);
  if (q.get("watch")) runScreen(cfg, q.get("watch"), q.get("key") || "");
  else runVoicebox(cfg, q.get("device") || "browser-" + Math.random().toString(36).slice(2, 8));
}).catch((err) => setStatus("cannot reach the gateway: " + err));
