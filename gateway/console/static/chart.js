// A small offline SVG line chart: series of [time (s), value] points over a time range, with
// dashed horizontal threshold lines. drawChart(svg, {series, thresholds, from, to}).
"use strict";
const SVG_NS = "http://www.w3.org/2000/svg";
const COLORS = ["#2563eb", "#db2777", "#059669", "#d97706", "#7c3aed", "#0891b2"];

function svgEl(name, attrs, parent) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

function niceTicks(lo, hi, count) {
  const span = hi - lo || 1;
  const step0 = span / count;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0 * 0.999) || step0;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9; v += step) ticks.push(+v.toFixed(6));
  return ticks;
}

function timeLabel(t, span) {
  const d = new Date(t * 1000);
  if (span <= 2 * 86400) return d.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
  return d.toLocaleDateString([], {month: "short", day: "numeric"});
}

function drawChart(svg, {series, thresholds, from, to}) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 480, H = 260, L = 40, R = 8, T = 10, B = 26;
  const values = series.flatMap((s) => s.points.map((p) => p[1])).concat(thresholds.map((t) => t.value));
  if (!values.length) return;
  let lo = Math.min(...values), hi = Math.max(...values);
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.1 || 1;
  lo -= pad; hi += pad;
  const x = (t) => L + ((t - from) / (to - from || 1)) * (W - L - R);
  const y = (v) => T + (1 - (v - lo) / (hi - lo)) * (H - T - B);
  for (const v of niceTicks(lo, hi, 6)) {
    svgEl("line", {x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid"}, svg);
    svgEl("text", {x: L - 6, y: y(v) + 4, "text-anchor": "end"}, svg).textContent = String(v);
  }
  const span = to - from;
  for (let i = 0; i <= 4; i++) {
    const t = from + (span * i) / 4;
    svgEl("text", {x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle"}, svg)
      .textContent = timeLabel(t, span);
  }
  thresholds.forEach((th) => {
    svgEl("line", {x1: L, x2: W - R, y1: y(th.value), y2: y(th.value), class: "threshold", stroke: th.color}, svg);
    svgEl("text", {x: W - R - 2, y: y(th.value) - 4, "text-anchor": "end", fill: th.color}, svg).textContent = th.label;
  });
  series.forEach((s) => {
    const pts = s.points.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    if (s.points.length > 1) svgEl("polyline", {points: pts, fill: "none", stroke: s.color, "stroke-width": 2}, svg);
    s.points.forEach(([t, v]) => {
      const dot = svgEl("circle", {cx: x(t), cy: y(v), r: 3.5, fill: s.color, class: "point", "data-series": s.name}, svg);
      svgEl("title", {}, dot).textContent = `${s.name} ${v} at ${new Date(t * 1000).toLocaleString()}`;
    });
  });
}

window.drawChart = drawChart;
window.CHART_COLORS = COLORS;
