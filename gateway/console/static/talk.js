// The console's Talk page: the recent conversation turns of a person (read-only).
"use strict";
async function loadConversations() {
  const person = await people($("c-person"));
  if (!person) { fill("c-table", "c-none", [], () => {}); return; }
  const d = await api("GET", `conversations?${new URLSearchParams({person, device: $("c-device").value, n: "50"})}`);
  const devices = [...new Set(d.turns.map((t) => t.device_id).concat($("c-device").value ? [$("c-device").value] : []))];
  setOptions($("c-device"), ["", ...devices], (v) => v || "all devices");
  fill("c-table", "c-none", d.turns, (tr, t) => { cell(tr, when(t.ts)); cell(tr, t.device_id); cell(tr, t.said); cell(tr, t.answered); });
}
["c-person", "c-device"].forEach((id) => $(id).addEventListener("change", () => refresh()));
register("conversations", loadConversations);
