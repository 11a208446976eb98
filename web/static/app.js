// purser's console: plain JavaScript over the REST API. The token lives in
// sessionStorage; a link carrying #token= logs in and the token is dropped
// from the address bar. Pages are hash routes (#/runnables/NS/NAME), so
// every row is a real link: it opens in a new tab and its address can be
// copied. Pages poll the API every two seconds, so phases and sync states
// change on screen without a reload; a page is drawn again only when what
// it shows changed, so that a selection or an open section survives.
// Every value from the API is put in the page as text, never as HTML.
// Judgements (freshness, a cluster's state) are the API's: the console
// shows them, it does not make its own.
"use strict";

const POLL_MS = 2000;
let access = null;   // GET /api/v1/whoami: what this user may do
let pollTimer = null;

// ---- small DOM helpers ----
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick" || k === "onchange" || k === "onsubmit") e[k] = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
function badge(text, title) { return text ? el("span", { class: "badge " + text, title }, text) : el("span", { class: "muted" }, "—"); }
// age prints how long ago ts was, as kubectl prints ages (v1alpha1.Ago).
function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return Math.floor(s) + "s";
  if (s < 7200) return Math.floor(s / 60) + "m";
  if (s < 172800) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}
// when prints a time to the second, in UTC, on one line, with how long
// ago as its title; the API's microseconds say nothing to a reader.
function when(ts, withAge) {
  if (!ts) return el("span", { class: "muted" }, "—");
  const d = new Date(ts);
  if (isNaN(d)) return ts;
  const text = d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  return el("time", { datetime: ts, title: age(ts) + " ago", class: "ts" }, text, withAge ? el("span", { class: "muted" }, " (" + age(ts) + " ago)") : null);
}
function ago(ts) {
  return ts ? el("time", { datetime: ts, title: new Date(ts).toISOString(), class: "ts" }, age(ts) + " ago") : el("span", { class: "muted" }, "never");
}
// Paths of the console's pages, so that every reference is a link.
function runnablePath(ns, name) { return "#/runnables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name); }
function deployablePath(ns, name) { return "#/deployables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name); }
function clusterPath(name) { return "#/clusters/" + encodeURIComponent(name); }
function link(href, text, attrs) { return el("a", Object.assign({ href }, attrs || {}), text); }
// rowLink is a row's main link: CSS stretches it over the whole row, so
// the row behaves as a link (middle click, copy address) and its other
// links and buttons stay clickable above it.
function rowLink(href, text) { return el("a", { href, class: "row-link" }, text); }
function yamlBlock(id, value) { return el("pre", { id, class: "yaml" }, toYAML(value)); }
// changed tells whether value differs from what key last drew.
function changed(holder, value) {
  const s = JSON.stringify(value);
  if (holder.last === s) return false;
  holder.last = s;
  return true;
}
function describeError(e) { return e && e.describe ? e.describe() : String(e); }
function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}
function main(...children) {
  const m = document.getElementById("main");
  m.replaceChildren(...children.filter(c => c !== null && c !== undefined));
  return m;
}
// fill replaces an element's children, skipping absent ones.
function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter(c => c !== null && c !== undefined && c !== false));
}
// kv lays out label/value pairs as a two-column grid.
function kv(attrs, ...pairs) {
  const cells = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) cells.push(el("div", {}, pairs[i]), el("div", {}, pairs[i + 1]));
  return el("div", Object.assign({ class: "kv" }, attrs), cells);
}

// ---- API ----
function token() { return sessionStorage.getItem("purser-token"); }

class APIError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : "HTTP " + status);
    this.status = status;
    this.body = body;
  }
  describe() {
    let s = (this.body && this.body.reason ? this.body.reason + " (" + this.status + "): " : "") + this.message;
    for (const d of (this.body && this.body.details) || []) s += "\n  " + (d.field ? d.field + ": " : "") + d.message;
    return s;
  }
}

async function api(method, path, body, contentType) {
  const headers = { "Authorization": "Bearer " + token(), "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = contentType || "application/json";
  const resp = await fetch(path, { method, headers, body });
  let data = null;
  try { data = await resp.json(); } catch (e) { /* empty body */ }
  if (resp.status === 401) { logout("Your token was not accepted; log in again."); throw new APIError(401, data); }
  if (!resp.ok) throw new APIError(resp.status, data);
  return data;
}

function may(ns, verb) {
  if (!access) return false;
  if (access.admin) return true;
  for (const key of [ns, "*"]) {
    if ((access.namespaces[key] || []).includes(verb)) return true;
  }
  return false;
}
function writableNamespaces() {
  if (!access) return [];
  return Object.keys(access.namespaces).filter(ns => ns !== "*" && access.namespaces[ns].includes("write")).sort();
}
function readableNamespaces() {
  return access ? Object.keys(access.namespaces).filter(ns => ns !== "*").sort() : [];
}

// ---- login ----
function logout(message) {
  sessionStorage.removeItem("purser-token");
  sessionStorage.removeItem("purser-filters");
  for (const k of Object.keys(filters)) delete filters[k];
  access = null;
  showLogin(message);
}

function showLogin(message) {
  stopPolling();
  document.getElementById("nav").hidden = true;
  document.getElementById("who").replaceChildren();
  const input = el("input", { type: "password", id: "token", placeholder: "bearer token", autocomplete: "off" });
  main(el("form", { class: "login", onsubmit: async (ev) => {
      ev.preventDefault();
      sessionStorage.setItem("purser-token", input.value.trim());
      await start();
    } },
    el("h1", {}, "Log in to purser"),
    el("p", { class: "muted" }, "Paste your token. ", el("code", {}, "purser up"),
      " prints a link that logs you in, and writes the admin token to ", el("code", {}, "admin.token"), " in its data folder."),
    message ? el("p", { class: "error" }, message) : null,
    input,
    el("button", { type: "submit", id: "login" }, "Log in"),
    el("p", { id: "sso" })));
  input.focus();
  sso.settings().then(oidc => {
    if (oidc) document.getElementById("sso")?.replaceChildren(
      el("button", { type: "button", id: "sso-login", onclick: () => sso.begin(oidc) }, "Sign in with single sign-on"));
  });
}

async function start() {
  try {
    access = await api("GET", "/api/v1/whoami");
  } catch (e) {
    if (e.status !== 401) showLogin(e.describe ? e.describe() : String(e));
    return;
  }
  document.getElementById("nav").hidden = false;
  document.getElementById("who").replaceChildren(
    el("span", { id: "user" }, access.user + (access.admin ? " (admin)" : "")),
    el("button", { id: "logout", class: "secondary", onclick: () => logout() }, "Log out"));
  route();
}

// ---- routing and polling ----
function stopPolling() {
  clearTimeout(pollTimer);
  pollTimer = null;
  if (watchAbort) { watchAbort.abort(); watchAbort = null; }
}

// live runs render now and then every POLL_MS while the page stays the same.
function live(render) {
  stopPolling();
  const page = location.hash;
  const tick = async () => {
    if (location.hash !== page || !token()) return;
    try { await render(); } catch (e) { if (e.status !== 401) toast(e.describe ? e.describe() : String(e)); }
    if (location.hash === page) pollTimer = setTimeout(tick, POLL_MS);
  };
  tick();
}

function route() {
  if (!token()) return showLogin();
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === (parts[0] || "farm"));
  switch (parts[0]) {
    case "deployables": return parts[1] ? deployableDetail(parts[1], parts[2]) : deployables();
    case "clusters": return parts[1] ? clusterDetail(parts[1]) : clusters();
    case "register-cluster": return registerCluster();
    case "history": return historyPage();
    case "inventory": return inventoryPage();
    case "submit": return submitRunnable();
    case "apply-deployable": return applyDeployable();
    case "runnables": return parts[1] ? runnableDetail(parts[1], parts[2]) : runnables();
    case "queue": return queuePage();
    case "schedules": return parts[1] ? scheduleDetail(parts[1], parts[2]) : schedules();
    case "edit-runnable": return editRunnable(parts[1], parts[2]);
    case "whatif": return whatIfPage(parts[1], parts[2]);
    default: return farmPage();
  }
}

// ---- shared filter state ----
const filters = JSON.parse(sessionStorage.getItem("purser-filters") || "{}");
function saveFilters() { sessionStorage.setItem("purser-filters", JSON.stringify(filters)); }

function namespaceSelect(key, allowAll) {
  const names = readableNamespaces();
  const allowed = v => (v === "" ? allowAll && access.readsEverywhere : access.readsEverywhere || names.includes(v));
  if (filters[key] === undefined || !allowed(filters[key])) filters[key] = allowAll && access.readsEverywhere ? "" : (names[0] || "default");
  const opts = [];
  if (allowAll && access.readsEverywhere) opts.push(el("option", { value: "" }, "all namespaces"));
  for (const n of new Set([...names, filters[key]].filter(Boolean))) opts.push(el("option", { value: n, selected: n === filters[key] }, n));
  const s = el("select", { id: key, onchange: () => { filters[key] = s.value; saveFilters(); route(); } }, opts);
  return s;
}

// ---- queue ----
// What waits and why: each namespace's use of its quota, the Queued
// runnables in the order the submitter places them (status.queuePosition),
// and each cluster's free capacity against its allocatable, as placement
// counts with them.
function queuePage() {
  const view = el("div");
  const holder = {};
  main(el("h1", {}, "Queue"), el("div", { class: "filters" }, namespaceSelect("qns", true)), view);
  live(async () => {
    const ns = filters.qns;
    const q = new URLSearchParams({ phase: "Queued" });
    if (ns) q.set("namespace", ns);
    const [queued, quotas, cl] = await Promise.all([
      api("GET", "/api/v1/runnables?" + q),
      ns ? api("GET", "/api/v1/quotas/" + encodeURIComponent(ns)).then(x => ({ items: [x] })).catch(e => e.status === 404 ? { items: [] } : Promise.reject(e))
        : api("GET", "/api/v1/quotas"),
      api("GET", "/api/v1/clusters")]);
    const items = queued.items.slice().sort((a, b) => (a.status.queuePosition || 1e9) - (b.status.queuePosition || 1e9));
    if (!changed(holder, [items.map(r => [r.metadata.uid, r.status.queuePosition, r.status.message]), quotas.items, cl.items.map(c => [c.metadata.name, c.status.resources])])) return;
    const quotaRows = [];
    for (const qt of quotas.items) {
      for (const [name, limit] of Object.entries(qt.spec.limits || {}).sort()) {
        const used = (qt.status.used || {})[name] || "0";
        quotaRows.push(el("tr", { "data-namespace": qt.metadata.name, "data-resource": name }, el("td", {}, qt.metadata.name), el("td", {}, name),
          el("td", {}, usageBar(quantity(used), quantity(limit), used + " of " + limit, 220))));
      }
    }
    fill(view,
      el("h2", {}, "Quotas"),
      el("table", { id: "quotas", class: "list" }, el("thead", {}, el("tr", {}, ["Namespace", "Resource", "Used of limit"].map(h => el("th", {}, h)))),
        el("tbody", {}, quotaRows.length ? quotaRows : el("tr", {}, el("td", { colspan: 3, class: "muted" }, ns ? "No quota for " + ns + "." : "No quotas.")))),
      el("h2", {}, "Waiting (" + items.length + ")"),
      el("table", { id: "queue", class: "list" }, el("thead", {}, el("tr", {}, ["Position", "Namespace", "Name", "Priority", "Asks for", "Waiting", "Why"].map(h => el("th", {}, h)))),
        el("tbody", {}, items.length ? items.map(r => el("tr", { class: "linked", "data-name": r.metadata.name },
          el("td", { class: "num position" }, r.status.queuePosition ?? "—"), el("td", {}, r.metadata.namespace),
          el("td", { class: "nowrap" }, rowLink(runnablePath(r.metadata.namespace, r.metadata.name), r.metadata.name)),
          el("td", { class: "num" }, r.spec.priority ?? 0),
          el("td", {}, Object.entries(r.status.requests || {}).map(([k, v]) => k + " " + v).join(", ") || "—"),
          el("td", { class: "nowrap" }, ago(r.metadata.creationTimestamp)),
          el("td", { class: "message" }, r.status.message || "")))
          : el("tr", {}, el("td", { colspan: 7, class: "muted" }, "Nothing waits.")))),
      el("h2", {}, "Free capacity by cluster"),
      el("table", { id: "free", class: "list" }, el("thead", {}, el("tr", {}, ["Cluster", "Free of allocatable"].map(h => el("th", {}, h)))),
        el("tbody", {}, cl.items.map(c => el("tr", { "data-cluster": c.metadata.name }, el("td", {}, link(clusterPath(c.metadata.name), c.metadata.name)),
          el("td", {}, c.status.resources ? resourceBars("resources-" + c.metadata.name, c.status.resources) : el("span", { class: "muted" }, "not reported"))))))
    );
  });
}

// resourceBars shows, per resource, what is in use of a cluster's
// allocatable (allocatable less free), cpu, memory and pods first.
function resourceBars(id, res) {
  const first = ["cpu", "memory", "pods"];
  const names = Object.keys(res.allocatable || {}).sort((a, b) => ((first.indexOf(a) + 1 || 99) - (first.indexOf(b) + 1 || 99)) || a.localeCompare(b));
  return el("table", { id, class: "bars" }, el("tbody", {}, names.map(n => {
    const total = quantity(res.allocatable[n]), free = quantity((res.free || {})[n] ?? "0");
    return el("tr", { "data-resource": n }, el("td", {}, n),
      el("td", {}, usageBar(total - free, total, ((res.free || {})[n] ?? "0") + " free of " + res.allocatable[n], 220)));
  })));
}

// ---- farm ----
// The farm at a glance: one column per data center (the clusters' dc
// label), each cluster with its state, the freshness of its records, what
// its nodes can allocate and the runnables on it by phase. Each DC carries
// its standing headroom from GET /api/v1/dcs (could the farm absorb its
// loss now), and for an admin the shortage's message and the what-if.
function farmPage() {
  const board = el("div", { id: "farm", class: "farm" });
  const note = el("p", { id: "headroom-error", class: "error", hidden: true });
  const holder = {};
  main(el("h1", {}, "Farm"),
    el("p", { class: "muted" }, "Data centers as columns (each cluster's ", el("code", {}, "dc"), " label); per DC whether the farm could absorb losing it now; per cluster its state, how fresh purser's records of it are, what its nodes can allocate, and the runnables on it by phase."),
    note, board);
  // The DC list is the what-if of every DC, computed by the API at most
  // once in DCHeadroomTTL, and a call that finds it old waits for it (2 s
  // at 10,000 runnables): after the first, it is asked for beside the
  // polls and drawn at the next one, so that the clusters never wait for
  // it. The farm still shows when it cannot be had.
  const dcs = { list: null, pending: null };
  const fetchDCs = () => dcs.pending || (dcs.pending = api("GET", "/api/v1/dcs")
    .catch(e => ({ items: [], error: describeError(e) }))
    .then(l => { dcs.list = l; dcs.pending = null; return l; }));
  live(async () => {
    const [list, dcList] = await Promise.all([api("GET", "/api/v1/clusters"), dcs.list ? (fetchDCs(), dcs.list) : fetchDCs()]);
    if (!changed(holder, [list.items.map(c => [c.metadata, c.status, c.spec.taints]), dcList])) return;
    const byDC = new Map();
    for (const c of list.items) {
      const dc = (c.metadata.labels || {}).dc || "no dc label";
      if (!byDC.has(dc)) byDC.set(dc, []);
      byDC.get(dc).push(c);
    }
    note.hidden = !dcList.error;
    note.textContent = dcList.error ? "The DCs' headroom is not available: " + dcList.error : "";
    const headroom = new Map(dcList.items.map(d => [d.metadata.name, d.status || {}]));
    const names = [...byDC.keys()].sort((a, b) => (a === "no dc label") - (b === "no dc label") || a.localeCompare(b));
    fill(board, names.length ? names.map(dc => el("section", { class: "dc", "data-dc": dc },
      el("h2", {}, dc, el("span", { class: "muted" }, " · " + byDC.get(dc).length + " cluster" + (byDC.get(dc).length === 1 ? "" : "s"))),
      headroom.has(dc) ? dcHeadroom(dc, headroom.get(dc)) : null,
      byDC.get(dc).map(clusterCard))) : el("p", { class: "muted" }, "No clusters registered."));
  });
}

// dcHeadroom is a DC's badge (absorbable, or short by how much), the
// message naming the shortage (the API gives it to admins alone) and, for
// an admin, the link to the what-if of losing it.
function dcHeadroom(dc, st) {
  const hr = st.headroom || {};
  const short = hr.short ? hr.short.runnables + " runnable" + (hr.short.runnables === 1 ? "" : "s") +
    Object.entries(hr.short.requests || {}).map(([k, v]) => ", " + k + " " + v).join("") : "";
  return el("div", { class: "headroom", "data-dc": dc },
    hr.absorbable ? el("span", { class: "badge absorbable", title: "losing " + dc + " now would be absorbed (" + hr.verdict + ")" }, "absorbable")
      : el("span", { class: "badge short " + (hr.verdict || ""), title: "losing " + dc + " now: " + (hr.verdict || "unknown") }, "short" + (short ? ": " + short : "")),
    st.message ? el("div", { class: "message small" }, st.message) : null,
    access.admin ? el("a", { class: "button whatif", "data-dc": dc, href: whatIfPath("dc", dc) }, "What if " + dc + " is lost") : null);
}

// placedBy says which placement policy made an object written to /k8s
// the runnable or deployable whose metadata md is, or "—".
function placedBy(md) {
  const p = ((md || {}).annotations || {})["purser.io/placement-policy"];
  return p ? el("span", { class: "placed-by" }, "a native object written to /k8s, by " + p) : "—";
}

// ---- what-if ----
// What losing a DC (or a cluster) would do, as POST /api/v1/drills with
// dryRun answers it: a snapshot placed by the submitter's own code,
// nothing changed. It is run when the page opens and again on demand,
// not polled: each run reads every runnable of the farm.
function whatIfPath(kind, name) { return "#/whatif/" + encodeURIComponent(kind) + "/" + encodeURIComponent(name); }

function whatIfPage(kind, name) {
  stopPolling();
  const page = location.hash;
  const view = el("div", { id: "whatif" }, el("p", { class: "muted" }, "Computing…"));
  const run = async () => {
    fill(view, el("p", { class: "muted" }, "Computing…"));
    let rep;
    try {
      rep = await api("POST", "/api/v1/drills", JSON.stringify({ target: { kind, name }, dryRun: true }));
    } catch (e) {
      if (location.hash === page) fill(view, el("p", { id: "whatif-error", class: "error" }, describeError(e)));
      return;
    }
    if (location.hash === page) fill(view, whatIfReport(rep));
  };
  main(el("p", {}, link("#/farm", "← Farm")),
    el("h1", {}, "What if " + kind + " " + name + " is lost"),
    el("p", { class: "muted" }, "A dry run: the farm as it stands is placed by the submitter's own code without the lost clusters; nothing is changed."),
    el("div", { class: "actions" }, el("button", { id: "whatif-again", class: "secondary", onclick: run }, "Run again")),
    view);
  run();
}

function whatIfReport(rep) {
  const runnableLink = ref => {
    const i = ref.indexOf("/");
    return i > 0 ? link(runnablePath(ref.slice(0, i), ref.slice(i + 1)), ref) : ref;
  };
  const figure = (id, f) => f ? [el("div", { class: "small" }, f.runnables + " active runnable" + (f.runnables === 1 ? "" : "s")),
    f.allocatable ? resourceBars(id, { allocatable: f.allocatable, free: f.free }) : el("span", { class: "muted" }, "capacity not reported")] : null;
  const short = rep.short ? rep.short.runnables + " runnable" + (rep.short.runnables === 1 ? "" : "s") +
    Object.entries(rep.short.requests || {}).map(([k, v]) => ", " + k + " " + v).join("") : "nothing";
  return [
    el("div", { id: "whatif-verdict", class: "actions" }, badge(rep.verdict), el("span", { class: "message" }, rep.message)),
    kv({ id: "whatif-summary" }, "Target", rep.target.kind + " " + rep.target.name, "Moves", String((rep.moves || []).length),
      "Left queued", String((rep.unplaceable || []).length), "Short", short,
      "Time to move all", rep.durationSeconds + " s (the last move's turn at the eviction rate)"),
    el("h2", {}, "Moves (" + (rep.moves || []).length + ")"),
    el("table", { id: "whatif-moves", class: "list" }, el("thead", {}, el("tr", {}, ["Runnable", "From", "To", "Downtime", "Restore point", "Why there"].map(h => el("th", {}, h)))),
      el("tbody", {}, (rep.moves || []).length ? rep.moves.map(m => el("tr", { "data-runnable": m.runnable },
        el("td", { class: "nowrap" }, runnableLink(m.runnable)), el("td", { class: "from" }, link(clusterPath(m.from), m.from)), el("td", { class: "to" }, link(clusterPath(m.to), m.to)),
        el("td", { class: "num downtime" }, m.downtimeSeconds + " s"),
        el("td", { class: "carried" }, m.restorePoint ? m.restorePoint.kind + " " + (m.restorePoint.path || m.restorePoint.source) : el("span", { class: "muted" }, "—")),
        el("td", { class: "message" }, m.reason || "")))
        : el("tr", {}, el("td", { colspan: 6, class: "muted" }, "Nothing moves.")))),
    el("h2", {}, "Left queued (" + (rep.unplaceable || []).length + ")"),
    el("table", { id: "whatif-unplaceable", class: "list" }, el("thead", {}, el("tr", {}, ["Runnable", "", "Why"].map(h => el("th", {}, h)))),
      el("tbody", {}, (rep.unplaceable || []).length ? rep.unplaceable.map(u => el("tr", { "data-runnable": u.runnable },
        el("td", { class: "nowrap" }, runnableLink(u.runnable)),
        el("td", {}, u.never ? el("span", { class: "badge NotAbsorbed", title: "no cluster left could ever take it" }, "never") : el("span", { class: "badge Queued", title: "waits for capacity or quota to free" }, "waits")),
        el("td", { class: "message" }, u.reason)))
        : el("tr", {}, el("td", { colspan: 3, class: "muted" }, "Every runnable finds a cluster.")))),
    el("h2", {}, "Clusters before and after"),
    el("table", { id: "whatif-clusters", class: "list" }, el("thead", {}, el("tr", {}, ["Cluster", "Before", "After"].map(h => el("th", {}, h)))),
      el("tbody", {}, (rep.clusters || []).map(c => el("tr", { "data-cluster": c.name },
        el("td", { class: "nowrap" }, link(clusterPath(c.name), c.name), c.lost ? [" ", el("span", { class: "badge NotReady" }, "lost")] : null),
        el("td", {}, figure("before-" + c.name, c.before)),
        el("td", {}, c.after ? figure("after-" + c.name, c.after) : el("span", { class: "muted" }, "taken away"))))))];
}

function clusterCard(c) {
  const st = c.status || {};
  const agent = st.agent || {};
  const fr = agent.freshness || {};
  const ready = readyCondition(c);
  const cap = st.capacity;
  const counts = st.runnables || {};
  const active = ["Running", "Submitted", "Scheduled", "FailingOver"].reduce((n, p) => n + (counts[p] || 0), 0);
  const taints = allTaints(c);
  return el("article", { class: "card state-" + (st.state || "Unknown"), "data-cluster": c.metadata.name },
    el("header", {}, link(clusterPath(c.metadata.name), c.metadata.name, { class: "name" }), " ",
      badge(st.state || "Unknown", ready ? ready.reason + ": " + (ready.message || "") : "not judged yet")),
    ready && st.state !== "Ready" ? el("div", { class: "reason" }, ready.reason + (ready.message ? ": " + ready.message : "")) : null,
    el("div", { class: "records" }, badge(fr.fresh ? "fresh" : "stale", fr.message), " ", el("span", { class: "muted" }, fr.message || "")),
    el("div", { class: "capacity" }, cap
      ? [(cap.milliCPU / 1000).toFixed(cap.milliCPU % 1000 ? 1 : 0) + " CPU · " + gib(cap.memoryBytes) + " · " + cap.pods + " pods on " +
          cap.nodes + " node" + (cap.nodes === 1 ? "" : "s") + (cap.unschedulable ? " (+" + cap.unschedulable + " cordoned)" : ""),
         el("div", { class: "muted" }, active + " active runnable" + (active === 1 ? "" : "s") + (cap.milliCPU ? ", " + (active / (cap.milliCPU / 1000)).toFixed(2) + " per core" : ""))]
      : el("span", { class: "muted" }, "capacity not known yet (no Node records)")),
    taints.length ? el("div", { class: "taints" }, taints.map(t => el("span", { class: "badge taint" }, taintText(t)))) : null,
    phaseBar(counts, 260));
}

function gib(bytes) { return (bytes / (1 << 30)).toFixed(bytes % (1 << 30) ? 1 : 0) + " GiB"; }
function readyCondition(c) { return ((c.status || {}).conditions || []).find(x => x.type === "Ready"); }
function allTaints(c) { return ((c.spec || {}).taints || []).concat((c.status || {}).taints || []); }
function taintText(t) { return t.key + (t.value ? "=" + t.value : "") + ":" + t.effect; }

// ---- runnables ----
const PHASES = ["", "PendingApproval", "Queued", "Scheduled", "Submitted", "Running", "Succeeded", "Failed", "Expired", "Rejected", "Cancelled", "FailingOver"];
const ENDED = ["Succeeded", "Failed", "Expired", "Rejected", "Cancelled"];
// What a failover may wait for that a person can vouch for
// (v1alpha1.Waiting*; POST .../failover?confirmStopped=true).
const WAITS_FOR_STOP = ["AwaitingFencing", "CopyUnconfirmed", "HeartbeatsStale"];

function runnables() {
  const phase = el("select", { id: "phase", onchange: () => { filters.phase = phase.value; saveFilters(); route(); } },
    PHASES.map(p => el("option", { value: p, selected: p === (filters.phase || "") }, p || "any phase")));
  const cluster = el("input", { id: "cluster-filter", placeholder: "cluster", value: filters.cluster || "",
    onchange: () => { filters.cluster = cluster.value.trim(); saveFilters(); route(); } });
  const body = el("tbody");
  const more = el("div", { class: "muted" });
  const holder = {};
  main(el("h1", {}, "Runnables"),
    el("div", { class: "filters" }, namespaceSelect("ns", true), phase, cluster,
      writableNamespaces().length || (access && access.admin) ? el("a", { id: "submit-new", class: "button", href: "#/submit" }, "Submit from YAML") : null),
    el("table", { id: "runnables", class: "list" }, el("thead", {}, el("tr", {}, ["Namespace", "Name", "Kind", "Phase", "Cluster", "Health", "Attempts", "Submitted by", "Age", "Message"].map(h => el("th", {}, h)))), body),
    more);
  live(async () => {
    const q = new URLSearchParams({ limit: "200" });
    if (filters.ns) q.set("namespace", filters.ns);
    if (filters.phase) q.set("phase", filters.phase);
    if (filters.cluster) q.set("cluster", filters.cluster);
    const list = await api("GET", "/api/v1/runnables?" + q);
    if (!changed(holder, [list, Math.floor(Date.now() / 10000)])) return;
    body.replaceChildren(...list.items.map(r => el("tr", { class: "linked", "data-name": r.metadata.name },
      el("td", { class: "nowrap" }, r.metadata.namespace), el("td", { class: "nowrap" }, rowLink(runnablePath(r.metadata.namespace, r.metadata.name), r.metadata.name)),
      el("td", {}, (r.spec.template || {}).kind || ""),
      el("td", { class: "phase" }, badge(r.status.phase)),
      el("td", { class: "nowrap" }, r.status.cluster ? link(clusterPath(r.status.cluster), r.status.cluster) : ""), el("td", {}, badge(r.status.health)),
      el("td", { class: "num" }, r.status.attemptCount || 0),
      el("td", {}, r.status.submittedBy || ""), el("td", { class: "nowrap" }, ago(r.metadata.creationTimestamp)), el("td", { class: "muted message" }, r.status.message || ""))));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 10, class: "muted" }, "No runnables match.")));
    more.textContent = list.continue ? "Showing the first 200; narrow the filters to see the rest." : "";
  });
}

// placementNote says why a runnable has no attempt, in its own terms.
function placementNote(st) {
  switch (st.phase) {
    case "Cancelled": return "Cancelled before it was placed on any cluster.";
    case "Rejected": return "Rejected: never placed.";
    case "Expired": return "Expired before it could be placed (its deadline passed).";
    case "Failed": return "Failed before it was placed: " + (st.message || "");
    case "PendingApproval": return "Waiting for approval; placed once approved.";
  }
  return "Not placed yet: " + (st.message || "waiting for a cluster");
}

function runnableDetail(ns, name) {
  const view = el("div");
  const holder = {};
  const base = "/api/v1/runnables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  main(el("p", {}, link("#/runnables", "← Runnables")), view);
  live(async () => {
    const q = new URLSearchParams({ namespace: ns, kind: "Runnable", name });
    let r;
    try { r = await api("GET", base); } catch (e) {
      if (e.status === 404) {
        if (changed(holder, "gone")) fill(view, el("h1", {}, "Runnable " + ns + "/" + name), el("p", { id: "gone", class: "muted" }, "No such runnable (it may have been deleted; its history stays in the audit log)."),
          link("#/history", "History"));
        return;
      }
      throw e;
    }
    const [hist, cl, all] = await Promise.all([historyTail(q, 500).then(items => ({ items })), r.status.cluster ? api("GET", "/api/v1/clusters/" + encodeURIComponent(r.status.cluster)).catch(() => null) : null,
      r.status.phase === "Running" && may(ns, "write") ? api("GET", "/api/v1/clusters").catch(() => ({ items: [] })) : { items: [] }]);
    const moveTargets = all.items.map(c => c.metadata.name);
    if (!changed(holder, [r, hist.items.length, cl && cl.status.state, Math.floor(Date.now() / 10000)])) return;
    const st = r.status || {};
    const ended = ENDED.includes(st.phase);
    const actions = [];
    const pc = st.pendingChange;
    const act = (id, label, cls, method, suffix, what, confirmText) => el("button", { id, class: cls, onclick: async () => {
      if (confirmText && !confirm(confirmText)) return;
      try {
        await api(method, base + suffix);
        toast(name + " " + what);
        holder.last = null;
      } catch (e) { toast(describeError(e)); }
    } }, label);
    if (pc && may(ns, "approve") && pc.author !== access.user) {
      // A decision names the version shown on this very render, and the
      // object: one removed and made again under the name starts over.
      const rv = "?resourceVersion=" + encodeURIComponent(pc.resourceVersion) + "&uid=" + encodeURIComponent(r.metadata.uid || "");
      actions.push(act("approve", "Approve", "", "POST", "/approve" + rv, "approved"), act("reject", "Reject", "danger", "POST", "/reject" + rv, "rejected"));
    }
    if (!ended && may(ns, "write")) actions.push(act("cancel", "Cancel", "danger", "DELETE", "", "cancelled", "Cancel " + ns + "/" + name + "? Purser removes it from its cluster."));
    if (ended && may(ns, "write")) actions.push(act("delete", "Delete", "danger", "DELETE", "", "deleted", "Delete " + ns + "/" + name + "? It ended (" + st.phase + "); its history stays in the audit log."));
    // Operating the work, as purser suspend, resume, rerun, move and
    // apply do; the API refuses (with its reason, shown) what the kind or
    // the phase does not allow.
    if (may(ns, "write")) {
      if (["Submitted", "Running"].includes(st.phase)) actions.push(act("suspend", "Suspend", "", "POST", "/suspend", "suspended"));
      if (st.phase === "Suspended") actions.push(act("resume", "Resume", "", "POST", "/resume", "resume asked"));
      if (ended && st.phase !== "Rejected") actions.push(act("rerun", "Rerun", "", "POST", "/rerun", "rerun as a new attempt"));
      if (st.phase === "Running" && !(st.move && !["Done", "Failed"].includes(st.move.step))) {
        const to = el("select", { id: "move-to" }, el("option", { value: "" }, "placement chooses"),
          moveTargets.filter(n => n !== st.cluster).map(n => el("option", { value: n }, n)));
        actions.push(el("span", { class: "move" }, to, el("button", { id: "move", onclick: async () => {
          const body = to.value ? JSON.stringify({ to: to.value }) : undefined;
          try { await api("POST", base + "/move", body); toast(name + " is being moved" + (to.value ? " to " + to.value : "")); holder.last = null; }
          catch (e) { toast(describeError(e)); }
        } }, "Move")));
      }
      if (!["PendingApproval", "Rejected"].includes(st.phase)) actions.push(el("a", { id: "edit", class: "button", href: "#/edit-runnable/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) }, "Edit"));
    }
    // The override is offered only where the API takes it: a failover
    // that waits for a copy nobody can confirm stopped (status.waiting).
    const attempt = (st.attempts || []).length;
    const confirmed = st.confirmedStopped && st.confirmedStopped.attempt === attempt;
    if (WAITS_FOR_STOP.includes(st.waiting) && !confirmed && may(ns, "write")) {
      const on = st.cluster || "its cluster";
      actions.push(act("confirm-stopped", "Fail over: I confirm it stopped on " + on, "danger", "POST", "/failover?confirmStopped=true", "moved off " + on,
        "Purser cannot confirm that the copy on " + on + " stopped. Move it elsewhere only if you know it did: otherwise it may run twice."));
    }
    const t = r.spec.template || {};
    fill(view,
      el("h1", {}, "Runnable " + ns + "/" + name, " ", badge(st.phase)),
      pc ? pendingNote(pc, "runnable") : null,
      el("div", { class: "actions" }, actions),
      kv({ id: "runnable" },
        "Kind", (t.apiVersion || "") + " " + (t.kind || ""),
        // A runnable made of a native object written to /k8s names the
        // placement policy that made it so.
        "Placed by", placedBy(r.metadata),
        "Phase", st.phase || "", "Cluster", st.cluster ? link(clusterPath(st.cluster), st.cluster) : "—", "Health", badge(st.health),
        "Message", el("span", { class: "message" }, st.message || ""), "Submitted by", st.submittedBy || "", "Approved by", st.approvedBy ? st.approvedBy + (st.approvedGeneration ? " (generation " + st.approvedGeneration + ")" : "") : "—",
        "Created", when(r.metadata.creationTimestamp, true), "Deadline", r.spec.deadline ? when(r.spec.deadline) : "—",
        "Preserved", pairs(st.preserved) || "—",
        "Restore point", st.restorePoint ? st.restorePoint.path + " (" + st.restorePoint.kind + " from attempt " + st.restorePoint.attempt + ")" : "—",
        "Waiting for", st.waiting || "—",
        "Move", st.move ? moveText(st.move) : "—",
        "Update", st.update ? "generation " + st.update.generation + " by " + st.update.by + (st.update.error ? ": refused: " + st.update.error : "") : "—",
        "Confirmed stopped", st.confirmedStopped ? "by " + st.confirmedStopped.by + " (attempt " + st.confirmedStopped.attempt + ")" : "—",
        "Ended", st.endedAt ? when(st.endedAt, true) : "—", "Removed after", st.removeAfter ? when(st.removeAfter) : "—"),
      el("h2", {}, "Attempts"),
      (st.attempts || []).length ? el("div", { class: "chart" }, attemptTimeline(r, hist.items, Date.now())) : null,
      // Carried in and Reported show the chain of restore points across
      // failovers: what each attempt restored from, what it wrote, and
      // (Note) why that was not carried on.
      el("table", { id: "attempts" }, el("thead", {}, el("tr", {}, ["#", "Cluster", "Started", "Ended", "Result", "Reason", "Message", "Carried in", "Reported", "Note"].map(h => el("th", {}, h)))),
        el("tbody", {}, (st.attempts || []).length ? st.attempts.map(a => el("tr", {}, el("td", {}, a.number), el("td", { class: "nowrap" }, a.cluster ? link(clusterPath(a.cluster), a.cluster) : ""),
          el("td", { class: "nowrap" }, when(a.startedAt)), el("td", { class: "nowrap" }, a.endedAt ? when(a.endedAt) : el("span", { class: "muted" }, "running")),
          el("td", {}, badge(a.result)), el("td", {}, a.reason || ""), el("td", { class: "message" }, a.message || ""),
          el("td", { class: "carried" }, pairs(a.carriedIn)), el("td", { class: "reported" }, pairs(a.reported)), el("td", { class: "note" }, a.note || "")))
          : [el("tr", {}, el("td", { colspan: 10, class: "muted", id: "no-attempts" }, placementNote(st)))])),
      el("h2", {}, "History"),
      historyTable("runnable-history", hist.items, false),
      el("h2", {}, "Status"),
      yamlBlock("status-yaml", Object.fromEntries(Object.entries(st).filter(([k]) => k !== "attempts"))),
      el("h2", {}, "Spec"),
      yamlBlock("spec-yaml", r.spec));
  });
}

// pairs renders a string map as k=v, sorted; "" for none.
function pairs(m) {
  return Object.entries(m || {}).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => k + "=" + v).join(", ");
}

const EXAMPLE_JOB = `apiVersion: purser.io/v1alpha1
kind: Runnable
metadata:
  generateName: hello-
  namespace: NAMESPACE
spec:
  template:
    apiVersion: batch/v1
    kind: Job
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: hello
            image: busybox:1.36
            command: [echo, hello]
`;

function submitRunnable() {
  stopPolling();
  const ns = writableNamespaces()[0] || "default";
  const text = el("textarea", { id: "yaml", spellcheck: "false" });
  text.value = EXAMPLE_JOB.replace("NAMESPACE", ns);
  const out = el("div", { id: "result" });
  main(el("p", {}, el("a", { href: "#/runnables" }, "← Runnables")),
    el("h1", {}, "Submit a runnable"),
    el("p", { class: "muted" }, "YAML or JSON of a Runnable; submitting the same one again changes nothing."),
    text,
    el("div", { class: "actions" }, el("button", { id: "send", onclick: async () => {
      out.replaceChildren();
      try {
        const r = await api("POST", "/api/v1/runnables", text.value, "application/yaml");
        toast("submitted " + r.metadata.namespace + "/" + r.metadata.name);
        location.hash = "#/runnables/" + encodeURIComponent(r.metadata.namespace) + "/" + encodeURIComponent(r.metadata.name);
      } catch (e) { out.replaceChildren(el("p", { class: "error" }, e.describe ? e.describe() : String(e))); }
    } }, "Submit")),
    out);
}

// moveText is a planned move as purser describe prints it.
function moveText(m) {
  let t = (m.from || "?") + " to " + (m.to || "placement's choice") + " by " + (m.by || "?") + ", " + (m.step || "");
  if (m.savepoint) t += ", savepoint " + m.savepoint;
  if (m.downtimeSeconds !== undefined) t += ", downtime " + Number(m.downtimeSeconds).toFixed(1) + " s";
  if (m.error) t += ": " + m.error;
  return t;
}

// editRunnable changes a runnable's spec as purser apply does: a PUT bound
// to the resourceVersion read (a change made meanwhile is refused, 409),
// after a look at the difference. A running FlinkDeployment takes it in
// place; the API says why a kind or phase cannot.
function editRunnable(ns, name) {
  stopPolling();
  const base = "/api/v1/runnables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  const text = el("textarea", { id: "edit-yaml", spellcheck: "false" });
  const diff = el("pre", { id: "edit-diff", class: "diff" });
  const out = el("div", { id: "result" });
  let original = "";
  main(el("p", {}, link(runnablePath(ns, name), "← " + ns + "/" + name)),
    el("h1", {}, "Edit runnable " + ns + "/" + name),
    el("p", { class: "muted" }, "The change is sent with the resourceVersion read here: if the runnable changed meanwhile it is refused, and nothing changes."),
    text,
    el("div", { class: "actions" },
      el("button", { id: "show-diff", onclick: () => showDiff() }, "Show the difference"),
      el("button", { id: "save", onclick: async () => {
        out.replaceChildren();
        try {
          await api("PUT", base, text.value, "application/yaml");
          toast(name + " updated");
          location.hash = runnablePath(ns, name);
        } catch (e) { out.replaceChildren(el("p", { class: "error" }, e.describe ? e.describe() : String(e))); }
      } }, "Apply")),
    diff, out);
  const showDiff = () => {
    const lines = lineDiff(original.split("\n"), text.value.split("\n"));
    const changedLines = lines.filter(([op]) => op !== " ");
    diff.replaceChildren(...(changedLines.length ? lines.filter(([op], i) => op !== " " || lines.slice(Math.max(0, i - 2), i + 3).some(([o]) => o !== " "))
      .map(([op, line]) => el("div", { class: op === "+" ? "added" : op === "-" ? "removed" : "" }, op + " " + line)) : [el("div", { class: "muted" }, "No change.")]));
  };
  api("GET", base).then(r => {
    const doc = { apiVersion: r.apiVersion, kind: r.kind, metadata: { name, namespace: ns, resourceVersion: r.metadata.resourceVersion } };
    if (r.metadata.labels) doc.metadata.labels = r.metadata.labels;
    if (r.metadata.annotations) doc.metadata.annotations = r.metadata.annotations;
    doc.spec = r.spec;
    original = toYAML(doc);
    text.value = original;
  }).catch(e => out.replaceChildren(el("p", { class: "error" }, e.describe ? e.describe() : String(e))));
}

// lineDiff is the shortest line edit from a to b: [op, line] with op " ",
// "-" or "+".
function lineDiff(a, b) {
  const n = a.length, m = b.length;
  const lcs = Array.from({ length: n + 1 }, () => new Int32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) { out.push([" ", a[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", a[i++]]);
    else out.push(["+", b[j++]]);
  }
  while (i < n) out.push(["-", a[i++]]);
  while (j < m) out.push(["+", b[j++]]);
  return out;
}

// ---- schedules ----
// A schedule's timetable as purser kept it: each tick run (its runnable
// and phase, from status.lastRuns) or not run (skipped by Forbid, missed
// past a deadline or while purser was down, refused by the policy: the
// scheduler's audit entries on the schedule), newest first.
function schedulePath(ns, name) { return "#/schedules/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name); }

function schedules() {
  const body = el("tbody");
  const holder = {};
  main(el("h1", {}, "Schedules"), el("div", { class: "filters" }, namespaceSelect("sns", true)),
    el("table", { id: "schedules", class: "list" },
      el("thead", {}, el("tr", {}, ["Namespace", "Name", "Schedule", "Time zone", "Concurrency", "Active", "Last tick", "Next tick", "Missed"].map(h => el("th", {}, h)))), body));
  live(async () => {
    const q = new URLSearchParams();
    if (filters.sns) q.set("namespace", filters.sns);
    const list = await api("GET", "/api/v1/schedules?" + q);
    if (!changed(holder, [list, Math.floor(Date.now() / 10000)])) return;
    body.replaceChildren(...list.items.map(s => {
      const st = s.status || {};
      return el("tr", { class: "linked", "data-name": s.metadata.name },
        el("td", {}, s.metadata.namespace), el("td", { class: "nowrap" }, rowLink(schedulePath(s.metadata.namespace, s.metadata.name), s.metadata.name)),
        el("td", { class: "nowrap" }, el("code", {}, s.spec.schedule)), el("td", {}, s.spec.timeZone || "UTC"),
        el("td", {}, s.spec.concurrencyPolicy || "Allow"), el("td", { class: "num" }, (st.active || []).length),
        el("td", { class: "nowrap" }, when(st.lastScheduleTime, true)),
        el("td", { class: "nowrap" }, s.spec.suspend ? badge("Suspended") : when(st.nextScheduleTime)),
        el("td", { class: "num", title: st.message || "" }, st.missed || 0));
    }));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No schedules.")));
  });
}

// TICK_NOT_RUN maps the scheduler's audit actions on a schedule to what
// the timeline says of the tick.
const TICK_NOT_RUN = { skip: "skipped", miss: "missed", refuse: "refused" };
// tickOf is the tick an entry speaks of, which its summary names ("tick
// T skipped: ...", "N tick(s) up to T missed: ..."); else when it was written.
function tickOf(e) {
  const m = /^(?:tick|\d+ tick\(s\) up to) (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)/.exec(e.summary || "");
  return m ? m[1] : e.time;
}

function scheduleDetail(ns, name) {
  const view = el("div");
  const holder = {};
  const base = "/api/v1/schedules/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  main(el("p", {}, link("#/schedules", "← Schedules")), view);
  live(async () => {
    let s;
    try { s = await api("GET", base); } catch (e) {
      if (e.status === 404) {
        if (changed(holder, "gone")) fill(view, el("h1", {}, "Schedule " + ns + "/" + name), el("p", { id: "gone", class: "muted" }, "No such schedule (it may have been deleted; its runnables stay)."));
        return;
      }
      throw e;
    }
    const hist = await historyTail(new URLSearchParams({ namespace: ns, kind: "Schedule", name }), 500);
    if (!changed(holder, [s, hist.length, Math.floor(Date.now() / 10000)])) return;
    const st = s.status || {};
    const events = (st.lastRuns || []).map(r => ({ at: r.tick, what: "run", cell: [link(runnablePath(ns, r.name), r.name), " ", badge(r.phase)] }))
      .concat(hist.filter(e => TICK_NOT_RUN[e.action]).map(e => ({ at: tickOf(e), what: TICK_NOT_RUN[e.action], cell: el("span", { class: "message" }, e.summary) })))
      .sort((a, b) => new Date(b.at) - new Date(a.at));
    const actions = [];
    if (may(ns, "write")) actions.push(el("button", { id: "run-now", onclick: async () => {
      try { const r = await api("POST", base + "/run"); toast(r.metadata.name + " created: " + r.status.phase); holder.last = null; }
      catch (e) { toast(describeError(e)); }
    } }, "Run now"));
    fill(view,
      el("h1", {}, "Schedule " + ns + "/" + name, " ", s.spec.suspend ? badge("Suspended") : null),
      el("div", { class: "actions" }, actions),
      kv({ id: "schedule" }, ...[["Schedule", el("code", {}, s.spec.schedule)], ["Time zone", s.spec.timeZone || "UTC"],
        ["Concurrency", s.spec.concurrencyPolicy || "Allow"], ["Catch-up", ((s.spec.catchUp || {}).policy || "Last") + ((s.spec.catchUp || {}).windowSeconds ? " within " + s.spec.catchUp.windowSeconds + " s" : "")],
        ["Last tick", when(st.lastScheduleTime, true)], ["Next tick", s.spec.suspend ? "none while suspended" : when(st.nextScheduleTime)],
        ["Active", (st.active || []).length ? el("span", {}, ...st.active.flatMap(a => [link(runnablePath(ns, a.name), a.name), " "])) : el("span", { class: "muted" }, "none")],
        ["Missed", String(st.missed || 0)], ["Message", el("span", { class: "message" }, st.message || "")]].flat(1)),
      el("h2", {}, "Timeline"),
      el("table", { id: "timeline", class: "list" }, el("thead", {}, el("tr", {}, ["Tick", "What", "Run or why"].map(h => el("th", {}, h)))),
        el("tbody", {}, events.length ? events.map(e => el("tr", { "data-what": e.what }, el("td", { class: "nowrap" }, when(e.at, true)), el("td", {}, badge(e.what)), el("td", {}, e.cell)))
          : [el("tr", {}, el("td", { colspan: 3, class: "muted" }, "No tick yet."))])),
      el("h2", {}, "History"),
      historyTable("schedule-history", hist, false),
      el("h2", {}, "Spec"), yamlBlock("schedule-spec", s.spec));
  });
}

// ---- deployables ----
function deployables() {
  const head = el("thead");
  const body = el("tbody");
  const holder = {};
  main(el("h1", {}, "Deployables"),
    el("div", { class: "filters" }, namespaceSelect("dns", true),
      writableNamespaces().length || (access && access.admin) ? el("a", { id: "apply-new", class: "button", href: "#/apply-deployable" }, "Apply YAML") : null),
    el("table", { id: "deployables", class: "list" }, head, body));
  live(async () => {
    const q = new URLSearchParams();
    if (filters.dns) q.set("namespace", filters.dns);
    const [list, cl] = await Promise.all([api("GET", "/api/v1/deployables?" + q), api("GET", "/api/v1/clusters")]);
    const names = cl.items.map(c => c.metadata.name);
    if (!changed(holder, [list, names])) return;
    head.replaceChildren(el("tr", {}, ["Namespace", "Name", "Kind", "Generation", "Phase", "Rollout"].map(h => el("th", {}, h)),
      names.map(n => el("th", { class: "nowrap" }, link(clusterPath(n), n)))));
    body.replaceChildren(...list.items.map(d => {
      const byCluster = Object.fromEntries((d.status.clusters || []).map(c => [c.cluster, c]));
      // Where a rollout in waves stands, and each cluster's wave in it.
      const ro = d.status.rollout;
      const inWave = Object.fromEntries(((ro && ro.clusters) || []).map(c => [c.cluster, c]));
      const cell = n => {
        const c = byCluster[n], w = inWave[n];
        const title = [(c || {}).message || "", w ? "wave " + w.wave + ": " + w.health + " (generation " + w.generation + ")" : ""].filter(Boolean).join(" · ");
        return el("td", { "data-cluster": n, title }, c ? badge(c.state) : el("span", { class: "muted" }, "—"), w ? el("span", { class: "muted" }, " " + w.wave) : null);
      };
      return el("tr", { class: "linked", "data-name": d.metadata.name },
        el("td", {}, d.metadata.namespace), el("td", { class: "nowrap" }, rowLink(deployablePath(d.metadata.namespace, d.metadata.name), d.metadata.name)),
        el("td", {}, (d.spec.template || {}).kind || ""),
        el("td", { class: "num" }, d.status.generation || 0), el("td", {}, badge(d.status.phase)),
        el("td", { class: "nowrap", title: ro ? ro.message || "" : "" }, ro ? [badge(ro.state), " " + ro.wave] : el("span", { class: "muted" }, "—")),
        names.map(cell));
    }));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 6 + names.length, class: "muted" }, "No deployables.")));
  });
}

function deployableDetail(ns, name) {
  const view = el("div");
  const holder = {};
  const base = "/api/v1/deployables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
  main(el("p", {}, link("#/deployables", "← Deployables")), view);
  live(async () => {
    const q = new URLSearchParams({ namespace: ns, kind: "Deployable", name });
    let d;
    try { d = await api("GET", base); } catch (e) {
      if (e.status === 404) {
        if (changed(holder, "gone")) fill(view, el("h1", {}, "Deployable " + ns + "/" + name), el("p", { id: "gone", class: "muted" }, "No such deployable (it may have been deleted; its history stays in the audit log)."));
        return;
      }
      throw e;
    }
    const [hist, cl] = await Promise.all([historyTail(q, 500).then(items => ({ items })), api("GET", "/api/v1/clusters")]);
    if (!changed(holder, [d, hist.items.length, cl.items.map(c => c.metadata), Math.floor(Date.now() / 10000)])) return;
    const actions = [];
    const act = (id, label, cls, method, suffix, what, confirmText) => el("button", { id, class: cls, onclick: async () => {
      if (confirmText && !confirm(confirmText)) return;
      try { await api(method, base + suffix); toast(name + " " + what); holder.last = null; }
      catch (e) { toast(describeError(e)); }
    } }, label);
    const pc = d.status.pendingChange;
    if (pc && may(ns, "approve") && pc.author !== access.user) {
      // A decision names the version of the change shown on this render,
      // and the object: if its author changes it meanwhile, or removes and
      // makes it again, the server refuses (409).
      const rv = "?resourceVersion=" + encodeURIComponent(pc.resourceVersion) + "&uid=" + encodeURIComponent(d.metadata.uid || "");
      actions.push(act("approve", "Approve change", "", "POST", "/approve" + rv, "approved"), act("reject", "Reject change", "danger", "POST", "/reject" + rv, "rejected"));
    }
    // A rollout in waves is steered from here as with purser rollout.
    const ro = d.status.rollout;
    if (ro && ro.awaitingApproval && may(ns, "approve")) {
      actions.push(act("rollout-approve", "Approve wave " + ro.awaitingApproval, "", "POST", "/approve?generation=" + encodeURIComponent(ro.generation), "wave approved"));
    }
    if (ro && may(ns, "write")) {
      actions.push(act("rollout-pause", "Pause rollout", "", "POST", "/pause", "rollout paused"),
        act("rollout-resume", "Resume rollout", "", "POST", "/resume", "rollout resumed"),
        act("rollout-rollback", "Roll back", "danger", "POST", "/rollback", "rolled back", "Return every cluster of " + ns + "/" + name + " to generation " + (ro.previousGeneration || 0) + "?"));
    }
    if (may(ns, "write")) actions.push(act("delete", "Delete", "danger", "DELETE", "", "deleted", "Delete " + ns + "/" + name + "? Purser removes it from every cluster."));
    // Clusters in data-center order, as the farm shows them.
    const clusters = cl.items.slice().sort((a, b) => ((a.metadata.labels || {}).dc || "~").localeCompare((b.metadata.labels || {}).dc || "~") || a.metadata.name.localeCompare(b.metadata.name));
    fill(view,
      el("h1", {}, "Deployable " + ns + "/" + name, " ", badge(d.status.phase)),
      el("div", { class: "actions" }, actions),
      placedBy(d.metadata) !== "—" ? el("p", { id: "deployable-placed-by" }, "Placed by ", placedBy(d.metadata)) : null,
      el("h2", {}, "Rollout (generation " + (d.status.generation || 0) + ")"),
      el("div", { class: "chart" }, rolloutChart(d, clusters, hist.items, Date.now())),
      ro ? el("div", { id: "waves" },
        el("p", {}, badge(ro.state), " generation " + ro.generation + " (previous " + (ro.previousGeneration || "none") + "), wave " + ro.wave + (ro.reason ? " · " + ro.reason : ""), el("br", {}), el("span", { class: "message" }, ro.message || "")),
        el("table", { id: "rollout" }, el("thead", {}, el("tr", {}, ["Cluster", "Wave", "Generation", "Fallback", "Applied", "Health", "Since", "Message"].map(h => el("th", {}, h)))),
          el("tbody", {}, (ro.clusters || []).map(c => el("tr", { "data-cluster": c.cluster }, el("td", { class: "nowrap" }, link(clusterPath(c.cluster), c.cluster)), el("td", {}, c.wave),
            el("td", { class: "num" }, c.generation || ""), el("td", { class: "num", title: "what the cluster keeps until its wave gives it this generation, and returns to on a rollback" }, c.fallbackGeneration || ""), el("td", { class: "num" }, c.generationApplied || ""), el("td", {}, badge(c.health)),
            el("td", { class: "nowrap" }, when(c.since)), el("td", { class: "message" }, c.message || "")))))) : null,
      el("table", { id: "sync" }, el("thead", {}, el("tr", {}, ["Cluster", "State", "Synced generation", "Last synced", "Message"].map(h => el("th", {}, h)))),
        el("tbody", {}, (d.status.clusters || []).length ? d.status.clusters.map(c => el("tr", { "data-cluster": c.cluster }, el("td", { class: "nowrap" }, link(clusterPath(c.cluster), c.cluster)), el("td", {}, badge(c.state)),
          el("td", { class: "num" }, c.syncedGeneration || ""), el("td", { class: "nowrap" }, when(c.lastSyncedAt)), el("td", { class: "message" }, c.message || "")))
          : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "Not synced to any cluster yet."))])),
      el("h2", {}, "History"),
      historyTable("deployable-history", hist.items, false),
      pc ? el("div", { class: "compare" },
        el("div", {}, el("h2", {}, (d.status.generation ? "Live spec (generation " + d.status.generation + ")" : "Not live yet")), yamlBlock("live-spec", d.spec)),
        el("div", {}, el("h2", {}, "Pending change"), pendingNote(pc, "deployable"),
          pc.delete ? el("pre", { id: "pending-spec" }, "(deletes it from every cluster)") : yamlBlock("pending-spec", pc.spec)))
        : el("div", {}, el("h2", {}, "Spec (generation " + (d.status.generation || 0) + ")"), yamlBlock("live-spec", d.spec)),
      el("p", { class: "muted" }, "Secret values are never shown."));
  });
}

// pendingNote says who made the change that waits, when, and which
// version of it a decision would name.
function pendingNote(pc, what) {
  let change = "Waiting for approval";
  if (pc.delete) change = "Deletion waiting for approval";
  if (pc.revive) change = "Revival of this deleted " + what + " waiting for approval";
  return el("p", { id: "pending-change", class: "pending" }, change + ": by " + pc.author + ", " + age(pc.time) + " ago (resourceVersion " + pc.resourceVersion + ").");
}

function applyDeployable() {
  stopPolling();
  const ns = el("input", { id: "dep-ns", placeholder: "namespace", value: writableNamespaces()[0] || "default" });
  const name = el("input", { id: "dep-name", placeholder: "name", value: "app-config" });
  const text = el("textarea", { id: "dep-yaml", spellcheck: "false" });
  text.value = "apiVersion: purser.io/v1alpha1\nkind: Deployable\nspec:\n  template:\n    apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: app-config}\n    data: {LOG_LEVEL: info}\n";
  const out = el("div");
  main(el("p", {}, link("#/deployables", "← Deployables")),
    el("h1", {}, "Apply a deployable"),
    el("div", { class: "filters" }, ns, name),
    text,
    el("div", { class: "actions" }, el("button", { id: "apply", onclick: async () => {
      out.replaceChildren();
      try {
        const d = await api("PUT", "/api/v1/deployables/" + encodeURIComponent(ns.value.trim()) + "/" + encodeURIComponent(name.value.trim()), text.value, "application/yaml");
        toast("applied, generation " + (d.status.generation || 0));
        location.hash = deployablePath(d.metadata.namespace, d.metadata.name);
      } catch (e) { out.replaceChildren(el("p", { class: "error" }, describeError(e))); }
    } }, "Apply")),
    out);
}

// ---- clusters ----
function clusters() {
  const body = el("tbody");
  const holder = {};
  main(el("h1", {}, "Clusters"),
    el("div", { class: "filters" }, access.admin ? el("a", { id: "register-new", class: "button", href: "#/register-cluster" }, "Register a cluster") : null),
    el("table", { id: "clusters", class: "list" }, el("thead", {}, el("tr", {}, ["Name", "State", "Records", "Labels", "Taints", "Last heartbeat", "Last snapshot", "Last event", "Objects", ""].map(h => el("th", {}, h)))), body));
  live(async () => {
    const list = await api("GET", "/api/v1/clusters");
    if (!changed(holder, [list, Math.floor(Date.now() / 5000)])) return;
    body.replaceChildren(...list.items.map(c => {
      const st = c.status || {};
      const agent = st.agent || {};
      const fr = agent.freshness || {};
      const ready = readyCondition(c);
      return el("tr", { class: "linked", "data-cluster": c.metadata.name },
        el("td", { class: "nowrap" }, rowLink(clusterPath(c.metadata.name), c.metadata.name)),
        el("td", { class: "state" }, badge(st.state || "Unknown", ready ? ready.reason + ": " + (ready.message || "") : ""), ready && st.state !== "Ready" ? el("div", { class: "muted small" }, ready.reason) : null),
        el("td", { class: "freshness" }, badge(fr.fresh ? "fresh" : "stale", fr.message), fr.fresh ? null : el("div", { class: "muted small" }, fr.reason)),
        el("td", { class: "labels" }, Object.entries(c.metadata.labels || {}).map(([k, v]) => k + "=" + v).join(", ")),
        el("td", {}, allTaints(c).map(taintText).join(", ") || "—"),
        el("td", { class: "nowrap" }, ago(agent.lastHeartbeat)), el("td", { class: "nowrap" }, ago(agent.lastSnapshot)), el("td", { class: "nowrap" }, ago(agent.lastEvent)),
        el("td", { class: "num" }, ((st.inventory || {}).objects) ?? "—"),
        el("td", { class: "nowrap" }, cordonButtons(c)));
    }));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 10, class: "muted" }, "No clusters registered.")));
  });
}

function cordonButtons(c) {
  if (!access.admin) return "";
  const cordon = ((c.spec || {}).taints || []).find(t => t.key === "purser.io/cordon");
  if (cordon) return el("button", { class: "secondary uncordon", onclick: () => setCordon(c, null) }, cordon.effect === "NoExecute" ? "Undrain" : "Uncordon");
  return [el("button", { class: "secondary cordon", onclick: () => setCordon(c, "NoSchedule") }, "Cordon"), " ",
    el("button", { class: "danger drain", onclick: () => {
      if (confirm("Drain " + c.metadata.name + "? Work that does not tolerate it moves to other clusters.")) setCordon(c, "NoExecute");
    } }, "Drain")];
}

// setCordon sets or clears purser's own maintenance taint: NoSchedule keeps
// new work away, NoExecute also moves running work off.
async function setCordon(c, effect) {
  const taints = (c.spec.taints || []).filter(t => t.key !== "purser.io/cordon");
  if (effect) taints.push({ key: "purser.io/cordon", effect });
  const body = { apiVersion: "purser.io/v1alpha1", kind: "Cluster", metadata: { name: c.metadata.name, labels: c.metadata.labels || {} }, spec: { taints } };
  try {
    await api("PUT", "/api/v1/clusters/" + encodeURIComponent(c.metadata.name), JSON.stringify(body));
    toast(c.metadata.name + (effect ? " tainted " + effect : " uncordoned"));
    route();
  } catch (e) { toast(describeError(e)); }
}

function clusterDetail(name) {
  const view = el("div");
  const holder = {};
  main(el("p", {}, link("#/clusters", "← Clusters")), view);
  live(async () => {
    const q = new URLSearchParams({ kind: "Cluster", name });
    const c = await api("GET", "/api/v1/clusters/" + encodeURIComponent(name));
    const rq = new URLSearchParams({ cluster: name, limit: "200" });
    if (!access.readsEverywhere) rq.set("namespace", readableNamespaces()[0] || "default");
    const [rn, hist] = await Promise.all([api("GET", "/api/v1/runnables?" + rq).catch(() => ({ items: [] })),
      access.readsEverywhere ? historyTail(q, 200).then(items => ({ items })).catch(() => ({ items: [] })) : { items: [] }]);
    if (!changed(holder, [c, rn.items.map(r => [r.metadata.name, r.status.phase]), hist.items.length, Math.floor(Date.now() / 5000)])) return;
    const st = c.status || {};
    const agent = st.agent || {};
    const fr = agent.freshness || {};
    const k = agent.kubeAPI;
    const actions = [];
    if (access.admin) {
      actions.push(cordonButtons(c), el("button", { id: "remove-cluster", class: "danger", onclick: async () => {
        if (!confirm("Remove cluster " + name + " from purser? Its objects stay on it; purser stops placing work there.")) return;
        try { await api("DELETE", "/api/v1/clusters/" + encodeURIComponent(name)); toast(name + " removed"); location.hash = "#/clusters"; }
        catch (e) { toast(describeError(e)); }
      } }, "Remove"));
    }
    fill(view,
      el("h1", {}, "Cluster " + name, " ", badge(st.state || "Unknown")),
      el("div", { class: "actions" }, actions),
      kv({ id: "cluster" },
        "State", badge(st.state || "Unknown"),
        "Records", el("span", {}, badge(fr.fresh ? "fresh" : "stale"), " ", fr.message || ""),
        "Agent's kube-apiserver", k ? (k.connected ? "answers" : "does not answer" + (k.error ? ": " + k.error : "")) + (k.synced ? "; caches synced" : "; caches not synced") +
          (k.lastContact ? "; last answered " + age(k.lastContact) + " ago" : "") : "not reported",
        "Current until", when(agent.currentUntil, true),
        "Labels", Object.entries(c.metadata.labels || {}).map(([k, v]) => k + "=" + v).join(", ") || "—",
        "Taints", allTaints(c).map(taintText).join(", ") || "—",
        "Capacity", st.capacity ? (st.capacity.milliCPU / 1000) + " CPU, " + gib(st.capacity.memoryBytes) + ", " + st.capacity.pods + " pods on " + st.capacity.nodes + " nodes" : "not known yet",
        "Free for placement", st.resources ? resourceBars("cluster-resources", st.resources) : "not reported by its agent yet",
        "Objects", ((st.inventory || {}).objects) ?? "—",
        "Registered", when(c.metadata.creationTimestamp, true)),
      el("h2", {}, "Conditions"),
      el("table", { id: "conditions" }, el("thead", {}, el("tr", {}, ["Type", "Status", "Reason", "Since", "Message"].map(h => el("th", {}, h)))),
        el("tbody", {}, (st.conditions || []).map(x => el("tr", {}, el("td", {}, x.type), el("td", {}, badge(x.status)), el("td", {}, x.reason || ""),
          el("td", { class: "nowrap" }, when(x.lastTransitionTime)), el("td", { class: "message" }, x.message || ""))))),
      el("h2", {}, "Runnables on it"),
      phaseBar(st.runnables || {}, 400),
      el("table", { id: "cluster-runnables", class: "list" }, el("thead", {}, el("tr", {}, ["Namespace", "Name", "Phase", "Age"].map(h => el("th", {}, h)))),
        el("tbody", {}, rn.items.length ? rn.items.map(r => el("tr", { class: "linked" }, el("td", {}, r.metadata.namespace),
          el("td", {}, rowLink(runnablePath(r.metadata.namespace, r.metadata.name), r.metadata.name)), el("td", {}, badge(r.status.phase)), el("td", {}, ago(r.metadata.creationTimestamp))))
          : [el("tr", {}, el("td", { colspan: 4, class: "muted" }, "None."))])),
      access.readsEverywhere ? [el("h2", {}, "History"), historyTable("cluster-history", hist.items, false)] : null);
  });
}

function registerCluster() {
  stopPolling();
  const text = el("textarea", { id: "cluster-yaml", spellcheck: "false" });
  text.value = "apiVersion: purser.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: dc1-a\n  labels: {dc: dc1}\nspec:\n  kubeconfig: |\n    # the kubeconfig text purser uses to reach the cluster\n";
  const out = el("div");
  main(el("p", {}, link("#/clusters", "← Clusters")),
    el("h1", {}, "Register a cluster"),
    el("p", { class: "muted" }, "The kubeconfig is stored encrypted and never shown again."),
    text,
    el("div", { class: "actions" }, el("button", { id: "register", onclick: async () => {
      out.replaceChildren();
      try {
        const c = await api("POST", "/api/v1/clusters", text.value, "application/yaml");
        toast("registered " + c.metadata.name);
        location.hash = clusterPath(c.metadata.name);
      } catch (e) { out.replaceChildren(el("p", { class: "error" }, describeError(e))); }
    } }, "Register")),
    out);
}

// historyTable lists audit entries newest first; withObject adds their
// object column (with a link to it while it exists).
function historyTable(id, entries, withObject) {
  const head = ["Seq", "Time", "Actor", "Action"].concat(withObject ? ["Object"] : [], ["Outcome", "Summary"]);
  const objectLink = o => {
    const [kind, a, b] = (o || "").split("/");
    if (kind === "Runnable" && b) return link(runnablePath(a, b), o);
    if (kind === "Deployable" && b) return link(deployablePath(a, b), o);
    if (kind === "Cluster" && a) return link(clusterPath(a), o);
    return o;
  };
  return el("table", { id, class: "list history" }, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))),
    el("tbody", {}, entries.length ? entries.slice().reverse().map(e => el("tr", {},
      el("td", { class: "seq" }, e.seq), el("td", { class: "nowrap" }, when(e.time)), el("td", {}, e.actor), el("td", {}, e.action),
      withObject ? el("td", { class: "nowrap" }, objectLink(e.object)) : null,
      el("td", {}, badge(e.outcome)),
      el("td", { class: "message" }, e.summary, e.details ? el("details", {}, el("summary", { class: "muted" }, "change"),
        yamlBlock(null, e.details)) : null)))
      : [el("tr", {}, el("td", { colspan: head.length, class: "muted" }, "No entries."))]));
}
// ---- history ----
// historyTail reads the newest entries matching q: the API lists oldest
// first, so the pages are followed to the end, keeping the last n.
async function historyTail(q, n) {
  let items = [];
  q.set("limit", "1000");
  for (let page = 0; page < 50; page++) {
    const list = await api("GET", "/api/v1/history?" + q);
    items = items.concat(list.items).slice(-n);
    if (!list.continue) break;
    q.set("continue", list.continue);
  }
  return items;
}

function historyPage() {
  const inputs = {};
  const field = (key, placeholder) => {
    inputs[key] = el("input", { id: "h-" + key, placeholder, value: filters["h-" + key] || "",
      onchange: () => { filters["h-" + key] = inputs[key].value.trim(); saveFilters(); route(); } });
    return inputs[key];
  };
  const chain = el("p", { id: "chain", class: "muted" }, "");
  const table = el("div");
  const holder = {};
  const nsField = access.readsEverywhere ? field("namespace", "namespace (all)") : namespaceSelect("h-namespace", false);
  main(el("h1", {}, "History"), chain,
    el("div", { class: "filters" }, nsField, field("kind", "kind"), field("name", "name"), field("actor", "actor"), field("action", "action")),
    table);
  live(async () => {
    const q = new URLSearchParams();
    for (const k of ["namespace", "kind", "name", "actor", "action"]) if (filters["h-" + k]) q.set(k, filters["h-" + k]);
    const items = await historyTail(q, 500);
    if (changed(holder, [items.length, items.length && items[items.length - 1].seq])) fill(table, historyTable("history", items, true));
    if (access.readsEverywhere) {
      const v = await api("GET", "/api/v1/history/verify");
      fill(chain, v.ok ? el("span", { class: "badge Synced" }, "chain intact: " + v.entries + " entries verified, against " + v.anchors + " signed anchors")
        : el("span", { class: "badge Failed" }, (v.brokenSeq ? "chain broken at entry " + v.brokenSeq + ": " : "chain not verified: ") + v.reason),
        v.record && v.record.since ? el("span", { class: "muted" }, " record of anchors begun again at entry " + v.record.since.seq + " by " + v.record.since.actor) : null);
    }
  });
}

// ---- inventory ----
let watchAbort = null; // the inventory page's watch, stopped when it is left

// watchInventory reads the API's Server-Sent Events with fetch, which,
// unlike EventSource, can send the token in a header.
async function watchInventory(query, onEvent, signal) {
  const resp = await fetch("/api/v1/inventory?" + query, { headers: { "Authorization": "Bearer " + token() }, signal });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch (e) { /* not JSON */ }
    throw new APIError(resp.status, body);
  }
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const chunk = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let type = "", data = "";
      for (const line of chunk.split("\n")) {
        if (line.startsWith("event: ")) type = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (!data) continue;
      const ev = JSON.parse(data);
      // The server ended the watch and says why; the caller connects
      // again, and is told if it may no longer read.
      if (type === "CLOSED") return ev.reason;
      onEvent(type, ev.item);
    }
  }
}

function inventoryPage() {
  const inputs = {};
  const field = (key, placeholder) => {
    inputs[key] = el("input", { id: "i-" + key, placeholder, value: filters["i-" + key] || "",
      onchange: () => { filters["i-" + key] = inputs[key].value.trim(); saveFilters(); route(); } });
    return inputs[key];
  };
  const health = el("select", { id: "i-health", onchange: () => { filters["i-health"] = health.value; saveFilters(); route(); } },
    ["", "Healthy", "Unhealthy", "Unknown"].map(h => el("option", { value: h, selected: h === (filters["i-health"] || "") }, h || "any health")));
  const system = el("input", { type: "checkbox", id: "i-system", checked: !!filters["i-system"],
    onchange: () => { filters["i-system"] = system.checked; saveFilters(); route(); } });
  const fresh = el("div", { id: "freshness" });
  const body = el("tbody");
  const note = el("div", { class: "muted" });
  main(el("h1", {}, "Inventory"),
    el("p", { class: "muted" }, "What runs where, from purser's records, updated live: it answers while a cluster is down, and says how fresh each cluster's records are. Seen is when a record was last known to be the object's state."),
    el("div", { class: "filters" }, namespaceSelect("ins", true), field("cluster", "cluster"), field("kind", "kind"), field("name", "name"),
      field("selector", "label selector, e.g. app=web"), health,
      el("label", { class: "check", title: "objects every cluster makes by itself: everything in kube-system, kube-public and kube-node-lease, and each namespace's kube-root-ca.crt and default ServiceAccount" },
        system, " system objects")),
    fresh,
    el("table", { id: "inventory", class: "list" }, el("thead", {}, el("tr", {}, ["Cluster", "Namespace", "Kind", "Name", "Health", "Phase", "Seen", "Labels"].map(h => el("th", { class: "col-" + h.toLowerCase() }, h)))), body),
    note);

  const q = new URLSearchParams({ fields: "meta", watch: "true" });
  if (filters.ins) q.set("namespace", filters.ins);
  for (const [k, p] of [["cluster", "cluster"], ["kind", "kind"], ["name", "name"], ["selector", "labelSelector"], ["health", "health"]]) {
    if (filters["i-" + k]) q.set(p, filters["i-" + k]);
  }
  if (filters["i-system"]) q.set("system", "true");
  const items = new Map();
  let judged = {};
  let pending = false;
  const seen = it => {
    const c = (judged[it.cluster] || {}).currentUntil;
    return c && Date.parse(c) > Date.parse(it.seenAt || it.observedAt) ? c : it.seenAt || it.observedAt;
  };
  const render = () => {
    pending = false;
    const rows = [...items.values()].sort((a, b) =>
      (a.kind + a.namespace + a.name + a.cluster).localeCompare(b.kind + b.namespace + b.name + b.cluster));
    body.replaceChildren(...rows.map(it => el("tr", { "data-name": it.name },
      el("td", { class: "nowrap" }, link(clusterPath(it.cluster), it.cluster), " ", judged[it.cluster] && !judged[it.cluster].fresh
        ? el("span", { class: "badge stale", title: judged[it.cluster].message }, "stale") : null),
      el("td", { class: "nowrap" }, it.namespace || ""), el("td", {}, it.kind), el("td", { class: "name" }, it.name),
      el("td", {}, badge(it.health)), el("td", {}, it.phase || el("span", { class: "muted" }, "—")),
      el("td", { class: "nowrap" }, ago(seen(it))),
      el("td", { class: "muted labels", title: Object.entries(it.labels || {}).map(([k, v]) => k + "=" + v).join("\n") },
        Object.entries(it.labels || {}).map(([k, v]) => k + "=" + v).join(", ")))));
    if (!rows.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No objects match.")));
  };
  const later = () => { if (!pending) { pending = true; setTimeout(render, 100); } };

  // How fresh each cluster's records are: the API's judgement.
  live(async () => {
    const list = await api("GET", "/api/v1/clusters");
    judged = {};
    fill(fresh, list.items.map(c => {
      const f = Object.assign({}, (c.status.agent || {}).freshness);
      f.currentUntil = (c.status.agent || {}).currentUntil;
      judged[c.metadata.name] = f;
      return el("span", { class: "badge " + (f.fresh ? "Synced" : "stale"), "data-cluster": c.metadata.name, title: f.message || "" },
        c.metadata.name + (f.fresh ? " fresh" : " stale: " + (f.message || f.reason || "not reporting")));
    }));
    later();
  });

  if (watchAbort) watchAbort.abort();
  const abort = new AbortController();
  watchAbort = abort;
  (async () => {
    for (let attempt = 0; !abort.signal.aborted; attempt++) {
      try {
        items.clear();
        note.textContent = "";
        const closed = await watchInventory(q, (type, it) => {
          const key = it.cluster + "/" + it.uid;
          if (type === "DELETED") items.delete(key); else items.set(key, it);
          later();
        }, abort.signal);
        if (closed) note.replaceChildren(el("span", { class: "muted" }, "The server ended the watch: " + closed + ". Connecting again ..."));
        attempt = 0;
      } catch (e) {
        if (abort.signal.aborted) return;
        note.replaceChildren(el("span", { class: "error" }, e.describe ? e.describe() : String(e)));
        if (e.status && e.status < 500) return; // a bad filter: retrying will not help
      }
      await new Promise(r => setTimeout(r, Math.min(1000 * 2 ** attempt, 10000)));
    }
  })();
  later();
}

// ---- start ----
// A link #token=T logs in (`purser up` prints one), and #token=T&/page
// opens a page too. The token is in the fragment, which the browser never
// sends: not to the server's logs, not as a Referer. It leaves the address
// bar at once. While a session is open, a link with another token does not
// replace it unasked: a page that sends the user to such a link would
// otherwise sign them in as someone else, and what they do next would be
// done in that name. It reports whether a token was taken.
function tokenFromFragment() {
  const m = location.hash.match(/^#token=([^&]*)(?:&(.*))?$/);
  if (!m) return false;
  const offered = decodeURIComponent(m[1]);
  const page = m[2] && m[2].startsWith("/") ? "#" + m[2] : "#/";
  history.replaceState(null, "", location.pathname + location.search + page);
  const current = token();
  if (!current || current === offered) {
    sessionStorage.setItem("purser-token", offered);
    return !current;
  }
  askToSwitch(offered);
  return false;
}

// askToSwitch asks, above the page, whether to end the current session for
// the token a link carried; nothing changes until the user says so.
function askToSwitch(offered) {
  document.getElementById("switch-session")?.remove();
  const bar = el("div", { id: "switch-session", class: "banner", role: "alertdialog" },
    el("span", {}, "A link asks to sign you in with another token, ending your session as " +
      (access ? access.user : "the current user") + ". Do it only if you opened that link yourself. "),
    el("button", { id: "switch-session-yes", class: "secondary", onclick: () => {
      bar.remove();
      sessionStorage.setItem("purser-token", offered);
      start();
    } }, "Switch session"),
    el("button", { id: "switch-session-no", onclick: () => bar.remove() }, "Keep my session"));
  document.body.prepend(bar);
}
window.addEventListener("hashchange", () => {
  if (tokenFromFragment()) start();
  else if (access) route();
});
if (tokenFromFragment()) start();
else sso.complete().then(
  () => { if (token()) start(); else showLogin(); },
  e => showLogin(e.message));
