// The console's Health page: version, models, ports, links, the doctor's checks, the last log lines.
"use strict";
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
register("health", loadHealth);
