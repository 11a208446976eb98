// The console's pictures, drawn as plain SVG from API answers: the
// runnables by phase on a cluster, a runnable's attempts as a timeline
// across clusters, and a deployable's rollout across clusters. No
// library: each is a few rectangles and lines, and every label is text
// (createTextNode), never markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) e.setAttribute(k, v);
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// Colours by meaning, shared with style.css's badges.
const PHASE_COLOURS = {
  PendingApproval: "#c98a00", Queued: "#7a93c2", Scheduled: "#5b7fc4", Submitted: "#4170c0", Running: "#2456a6",
  FailingOver: "#d08700", Succeeded: "#1d7a3a", Failed: "#b3261e", Expired: "#8c5a52", Rejected: "#a33a35", Cancelled: "#8a9099",
};
const PHASE_ORDER = ["Running", "Submitted", "Scheduled", "FailingOver", "Queued", "PendingApproval", "Succeeded", "Failed", "Expired", "Rejected", "Cancelled"];
const RESULT_COLOURS = { Succeeded: "#1d7a3a", Failed: "#b3261e", Evicted: "#d08700", Cancelled: "#8a9099" };

// phaseBar draws counts by phase as one stacked bar with a legend below.
function phaseBar(counts, width) {
  const phases = PHASE_ORDER.filter(p => counts[p]);
  const total = phases.reduce((n, p) => n + counts[p], 0);
  const h = 14;
  const rows = Math.ceil(phases.length / 2);
  const g = svg("svg", { class: "phasebar", width, height: h + 6 + rows * 16, role: "img",
    "aria-label": phases.map(p => counts[p] + " " + p).join(", ") || "no runnables" });
  if (!total) {
    g.append(svg("rect", { x: 0, y: 0, width, height: h, rx: 3, fill: "#eef0f3" }),
      svg("text", { x: 6, y: 11, "font-size": 11, fill: "#66707a" }, "no runnables"));
    g.setAttribute("height", h);
    return g;
  }
  let x = 0;
  for (const p of phases) {
    const w = Math.max(2, (counts[p] / total) * width);
    g.append(svg("rect", { x, y: 0, width: w, height: h, fill: PHASE_COLOURS[p] || "#999", "data-phase": p },
      svg("title", {}, counts[p] + " " + p)));
    x += w;
  }
  phases.forEach((p, i) => {
    const lx = (i % 2) * (width / 2), ly = h + 6 + Math.floor(i / 2) * 16;
    g.append(svg("rect", { x: lx, y: ly, width: 9, height: 9, rx: 2, fill: PHASE_COLOURS[p] || "#999" }),
      svg("text", { x: lx + 13, y: ly + 9, "font-size": 11, fill: "#1d2329" }, counts[p] + " " + p));
  });
  return g;
}

// timeScale maps times onto [x0, x1].
function timeScale(t0, t1, x0, x1) {
  const span = Math.max(1, t1 - t0);
  return t => x0 + ((t - t0) / span) * (x1 - x0);
}

function shortTime(ms) {
  return new Date(ms).toISOString().slice(11, 19);
}

// axis draws ticks of HH:MM:SS along y between t0 and t1.
function axis(g, scale, t0, t1, y, height) {
  const ticks = 5;
  for (let i = 0; i <= ticks; i++) {
    const t = t0 + ((t1 - t0) * i) / ticks, x = scale(t);
    g.append(svg("line", { x1: x, x2: x, y1: y, y2: y + height, stroke: "#e4e7eb" }),
      svg("text", { x, y: y + height + 14, "font-size": 11, fill: "#66707a", "text-anchor": "middle" }, shortTime(t)));
  }
}

// textWidth measures a label as the page will draw it (11 px in the body's
// font), with a canvas, so that labels can be placed before the chart is
// in the page.
let measureCtx = null;
function textWidth(text, size) {
  if (!measureCtx) measureCtx = document.createElement("canvas").getContext("2d");
  measureCtx.font = size + "px " + getComputedStyle(document.body).fontFamily;
  return measureCtx.measureText(text).width;
}

// fitText shortens text with an ellipsis until it is at most max px wide.
function fitText(text, size, max) {
  if (textWidth(text, size) <= max) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (textWidth(text.slice(0, mid) + "…", size) <= max) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

// attemptTimeline draws a runnable's attempts as bars on one lane per
// cluster, in time order, with each eviction as an arrow from the attempt
// it ended to the next one. The arrows' labels (its reason, what was
// carried and the restore point, from the eviction's audit entry where
// there is one) go in rows under the lanes: two failovers close in time would
// draw labels at the same place between the lanes, and what a Flink job
// carries (its job id and restore path) is wider than the gap between
// attempts. A label starts under its arrow, goes to the first row where it
// collides with no other, and is cut to fit the chart with its full text
// in a title, shown on hover.
function attemptTimeline(r, history, now) {
  const st = r.status || {};
  const attempts = st.attempts || [];
  const width = 900, left = 110, right = 40, lane = 46, top = 24, fontSize = 11, rowHeight = 16, gap = 12;
  if (!attempts.length) return null;
  const lanes = [];
  for (const a of attempts) if (!lanes.includes(a.cluster)) lanes.push(a.cluster);
  const start = a => Date.parse(a.startedAt), end = a => (a.endedAt ? Date.parse(a.endedAt) : now);
  const t0 = Math.min(Date.parse(r.metadata.creationTimestamp) || Infinity, ...attempts.map(start));
  const t1 = Math.max(now, ...attempts.map(end));
  const scale = timeScale(t0, t1, left, width - right);
  const height = top + lanes.length * lane;
  const g = svg("svg", { id: "timeline", width, role: "img", "aria-label": "attempts of " + r.metadata.name });
  axis(g, scale, t0, t1, top - 8, lanes.length * lane);
  lanes.forEach((c, i) => g.append(svg("text", { x: 4, y: top + i * lane + 20, "font-size": 12, "font-weight": 600, fill: "#1d2329" }, c)));
  const evictions = (history || []).filter(e => e.action === "evict");
  const rows = []; // per row of labels, the [x0, x1] taken
  const labelsTop = height + 30;
  attempts.forEach((a, i) => {
    const y = top + lanes.indexOf(a.cluster) * lane + 6;
    const x0 = scale(start(a)), x1 = Math.max(x0 + 3, scale(end(a)));
    const colour = a.endedAt ? RESULT_COLOURS[a.result] || "#8a9099" : PHASE_COLOURS[st.phase] || "#2456a6";
    const label = "attempt " + a.number + (a.endedAt ? ": " + (a.result || "ended") + (a.reason ? " (" + a.reason + ")" : "") : ": " + (st.phase || "live"));
    g.append(svg("rect", { x: x0, y, width: x1 - x0, height: 22, rx: 4, fill: colour, "data-attempt": a.number, class: "attempt" },
      svg("title", {}, label + "\n" + a.startedAt + (a.endedAt ? " → " + a.endedAt : " → now") + (a.message ? "\n" + a.message : ""))));
    g.append(svg("text", { x: x0 + 4, y: y + 15, "font-size": fontSize, fill: "#fff" }, "#" + a.number));
    const next = attempts[i + 1];
    if (a.result === "Evicted" && next) {
      const ny = top + lanes.indexOf(next.cluster) * lane + 6;
      const nx = scale(start(next));
      const e = evictions.find(ev => (ev.summary || "").startsWith("attempt " + a.number + " evicted"));
      const carried = e && / preserved ([^;]+)/.exec(e.summary);
      const point = e && /; restore point (\S+)/.exec(e.summary);
      const why = "#" + a.number + " → #" + next.number + ": " + (a.reason || "evicted") + (carried ? "; carried " + carried[1] : "") +
        (point ? "; restore point " + point[1] : "");
      g.append(svg("path", { d: `M${x1},${y + 11} C${x1 + 30},${y + 11} ${nx - 30},${ny + 11} ${nx},${ny + 11}`,
        fill: "none", stroke: "#d08700", "stroke-width": 2, "marker-end": "url(#arrow)", class: "failover" }, svg("title", {}, why)));
      const shown = fitText(why, fontSize, width - left - 4);
      const w = textWidth(shown, fontSize);
      const lx = Math.max(left, Math.min((x1 + nx) / 2 - w / 2, width - 4 - w));
      let row = rows.findIndex(taken => taken.every(([a0, a1]) => lx + w + gap <= a0 || a1 + gap <= lx));
      if (row < 0) rows.push([]), row = rows.length - 1;
      rows[row].push([lx, lx + w]);
      g.append(svg("text", { x: lx, y: labelsTop + row * rowHeight, "font-size": fontSize, fill: "#8a5a00", class: "failover-label",
        "data-attempt": a.number }, svg("title", {}, why), shown));
    }
  });
  g.setAttribute("height", rows.length ? labelsTop + (rows.length - 1) * rowHeight + 6 : height + 24);
  g.prepend(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#d08700" }))));
  return g;
}

// rolloutChart draws a deployable's rollout: one row per cluster (grouped
// by data center), the generations the spec went through as vertical
// lines (from the deployable's history), and each cluster's copy as a
// dot at its last sync, labelled with the generation it holds.
function rolloutChart(d, clusters, history, now) {
  const width = 900, left = 150, right = 70, row = 28, top = 22;
  const names = clusters.map(c => c.metadata.name);
  const byCluster = Object.fromEntries((d.status.clusters || []).map(c => [c.cluster, c]));
  const changes = (history || []).filter(e => ["create", "update", "approve"].includes(e.action)).map(e => Date.parse(e.time));
  const syncs = Object.values(byCluster).map(c => Date.parse(c.lastSyncedAt)).filter(t => !isNaN(t));
  const t0 = Math.min(...changes, ...syncs, now - 60000), t1 = Math.max(now, ...syncs);
  const scale = timeScale(t0, t1, left, width - right);
  const height = top + names.length * row;
  const g = svg("svg", { id: "rollout", width, height: height + 24, role: "img", "aria-label": "rollout of " + d.metadata.name });
  axis(g, scale, t0, t1, top - 8, names.length * row);
  for (const t of changes) {
    g.append(svg("line", { x1: scale(t), x2: scale(t), y1: top - 10, y2: height, stroke: "#2456a6", "stroke-dasharray": "3 3" },
      svg("title", {}, "spec changed at " + new Date(t).toISOString())));
  }
  const gen = d.status.generation || 0;
  names.forEach((n, i) => {
    const y = top + i * row + row / 2;
    const c = byCluster[n];
    const dc = (clusters[i].metadata.labels || {}).dc;
    g.append(svg("text", { x: 4, y: y + 4, "font-size": 12, fill: "#1d2329" }, n + (dc ? " (" + dc + ")" : "")),
      svg("line", { x1: left, x2: width - right, y1: y, y2: y, stroke: "#eef0f3" }));
    if (!c) {
      g.append(svg("text", { x: left + 4, y: y + 4, "font-size": 11, fill: "#66707a" }, "not placed here"));
      return;
    }
    const colour = c.state === "Synced" && c.syncedGeneration === gen ? "#1d7a3a" : c.state === "Error" ? "#b3261e" : "#d08700";
    const x = isNaN(Date.parse(c.lastSyncedAt)) ? left : scale(Date.parse(c.lastSyncedAt));
    g.append(svg("circle", { cx: x, cy: y, r: 7, fill: colour, "data-cluster": n, class: "copy" },
      svg("title", {}, n + ": " + (c.state || "?") + ", generation " + (c.syncedGeneration || 0) + " of " + gen +
        (c.lastSyncedAt ? " at " + c.lastSyncedAt : "") + (c.message ? "\n" + c.message : ""))),
      svg("text", { x: width - right + 6, y: y + 4, "font-size": 11, fill: colour }, "gen " + (c.syncedGeneration || 0) + "/" + gen));
  });
  return g;
}

// quantity reads a Kubernetes quantity ("500m", "3Gi", "1.5", "2e3") as a
// number; NaN for what is not one.
function quantity(s) {
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(s ?? "").trim());
  if (!m) return NaN;
  const scale = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
  return parseFloat(m[1]) * (m[2] ? scale[m[2]] : 1);
}

// usageBar draws used of total as a bar (over total in red), with the
// figures as its label.
function usageBar(used, total, label, width) {
  const share = total > 0 ? used / total : 0;
  const h = 14;
  const g = svg("svg", { class: "usagebar", width, height: h, role: "img", "aria-label": label, "data-share": share.toFixed(3) });
  g.append(svg("rect", { x: 0, y: 0, width, height: h, rx: 3, fill: "#eef0f3" }),
    svg("rect", { x: 0, y: 0, width: Math.min(1, share) * width, height: h, rx: 3, fill: share > 1 ? "#c0392b" : share > 0.85 ? "#e67e22" : "#2e86c1" }),
    svg("text", { x: 6, y: 11, "font-size": 11, fill: "#1d2228" }, label),
    svg("title", {}, label));
  return g;
}
