// The console's Memory page: search a person's memories, delete one.
"use strict";
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
register("memory", loadMemory, () => { memoryDirty = true; });
