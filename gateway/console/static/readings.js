// The console's Readings page: a table and a chart per person and kind, with the rules' thresholds.
"use strict";
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
register("readings", loadReadings);
