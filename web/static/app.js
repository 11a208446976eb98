// purser's console: plain JavaScript over the REST API. The token lives in
// sessionStorage; a link carrying #token= logs in and the token is dropped
// from the address bar. Pages poll the API every two seconds, so phases
// and sync states change on screen without a reload. Every value from the
// API is put in the page as text, never as HTML.
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
function badge(text) { return text ? el("span", { class: "badge " + text }, text) : el("span", { class: "muted" }, "—"); }
function age(ts) {
  if (!ts) return "";
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 120) return Math.floor(s) + "s";
  if (s < 7200) return Math.floor(s / 60) + "m";
  if (s < 172800) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
}
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
    el("p", { class: "muted" }, "Paste your token. `purser up` prints a link that logs you in, and writes the admin token to its data folder."),
    message ? el("p", { class: "error" }, message) : null,
    input,
    el("button", { type: "submit", id: "login" }, "Log in")));
  input.focus();
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
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === (parts[0] || "runnables"));
  switch (parts[0]) {
    case "deployables": return parts[1] ? deployableDetail(parts[1], parts[2]) : deployables();
    case "clusters": return clusters();
    case "history": return historyPage();
    case "inventory": return inventoryPage();
    case "submit": return submitRunnable();
    case "apply-deployable": return applyDeployable();
    case "runnables": if (parts[1]) return runnableDetail(parts[1], parts[2]);
    // fall through
    default: return runnables();
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

// ---- runnables ----
const PHASES = ["", "PendingApproval", "Queued", "Scheduled", "Submitted", "Running", "Succeeded", "Failed", "Expired", "Rejected", "Cancelled", "FailingOver"];

function runnables() {
  const phase = el("select", { id: "phase", onchange: () => { filters.phase = phase.value; saveFilters(); route(); } },
    PHASES.map(p => el("option", { value: p, selected: p === (filters.phase || "") }, p || "any phase")));
  const cluster = el("input", { id: "cluster-filter", placeholder: "cluster", value: filters.cluster || "",
    onchange: () => { filters.cluster = cluster.value.trim(); saveFilters(); route(); } });
  const body = el("tbody");
  const more = el("div", { class: "muted" });
  main(el("h1", {}, "Runnables"),
    el("div", { class: "filters" }, namespaceSelect("ns", true), phase, cluster,
      writableNamespaces().length || (access && access.admin) ? el("button", { id: "submit-new", onclick: () => { location.hash = "#/submit"; } }, "Submit from YAML") : null),
    el("table", { id: "runnables" }, el("thead", {}, el("tr", {}, ["Namespace", "Name", "Kind", "Phase", "Cluster", "Health", "Submitted by", "Age", "Message"].map(h => el("th", {}, h)))), body),
    more);
  live(async () => {
    const q = new URLSearchParams({ limit: "200" });
    if (filters.ns) q.set("namespace", filters.ns);
    if (filters.phase) q.set("phase", filters.phase);
    if (filters.cluster) q.set("cluster", filters.cluster);
    const list = await api("GET", "/api/v1/runnables?" + q);
    body.replaceChildren(...list.items.map(r => el("tr", { class: "link", "data-name": r.metadata.name,
        onclick: () => { location.hash = "#/runnables/" + encodeURIComponent(r.metadata.namespace) + "/" + encodeURIComponent(r.metadata.name); } },
      el("td", {}, r.metadata.namespace), el("td", {}, r.metadata.name), el("td", {}, (r.spec.template || {}).kind || ""),
      el("td", { class: "phase" }, badge(r.status.phase)), el("td", {}, r.status.cluster || ""), el("td", {}, badge(r.status.health)),
      el("td", {}, r.status.submittedBy || ""), el("td", {}, age(r.metadata.creationTimestamp)), el("td", { class: "muted" }, r.status.message || ""))));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 9, class: "muted" }, "No runnables match.")));
    more.textContent = list.continue ? "Showing the first 200; narrow the filters to see the rest." : "";
  });
}

function runnableDetail(ns, name) {
  const view = el("div");
  main(el("p", {}, el("a", { href: "#/runnables" }, "← Runnables")), view);
  live(async () => {
    const r = await api("GET", "/api/v1/runnables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name));
    const st = r.status || {};
    const actions = [];
    const pc = st.pendingChange;
    if (pc && may(ns, "approve") && pc.author !== access.user) {
      // A decision names the version shown on this very render.
      const rv = "?resourceVersion=" + encodeURIComponent(pc.resourceVersion);
      actions.push(el("button", { id: "approve", onclick: () => act("POST", "/approve" + rv, "approved") }, "Approve"));
      actions.push(el("button", { id: "reject", class: "danger", onclick: () => act("POST", "/reject" + rv, "rejected") }, "Reject"));
    }
    const ended = ["Succeeded", "Failed", "Expired", "Rejected", "Cancelled"].includes(st.phase);
    if (!ended && may(ns, "write")) actions.push(el("button", { id: "cancel", class: "danger", onclick: () => act("DELETE", "", "cancelled") }, "Cancel"));
    async function act(method, suffix, what) {
      try {
        await api(method, "/api/v1/runnables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) + suffix);
        toast(name + " " + what);
        route();
      } catch (e) { toast(e.describe ? e.describe() : String(e)); }
    }
    fill(view,
      el("h1", {}, "Runnable " + ns + "/" + name, " ", badge(st.phase)),
      pc ? pendingNote(pc, "runnable") : null,
      el("div", { class: "actions" }, actions),
      kv({ id: "runnable" },
        "Kind", (r.spec.template || {}).apiVersion + " " + (r.spec.template || {}).kind,
        "Phase", st.phase || "", "Cluster", st.cluster || "—", "Health", st.health || "—",
        "Message", st.message || "", "Submitted by", st.submittedBy || "", "Approved by", st.approvedBy || "—",
        "Created", r.metadata.creationTimestamp || "", "Deadline", r.spec.deadline || "—",
        "Preserved", Object.entries(st.preserved || {}).map(([k, v]) => k + "=" + v).join(", ") || "—"),
      el("h2", {}, "Attempts"),
      el("table", { id: "attempts" }, el("thead", {}, el("tr", {}, ["#", "Cluster", "Started", "Ended", "Result", "Reason", "Message"].map(h => el("th", {}, h)))),
        el("tbody", {}, (st.attempts || []).length ? st.attempts.map(a => el("tr", {}, el("td", {}, a.number), el("td", {}, a.cluster || ""),
          el("td", {}, a.startedAt || ""), el("td", {}, a.endedAt || ""), el("td", {}, a.result || ""), el("td", {}, a.reason || ""), el("td", {}, a.message || "")))
          : [el("tr", {}, el("td", { colspan: 7, class: "muted" }, "Not placed yet."))])),
      st.result ? el("h2", {}, "Last observed status") : null,
      st.result ? el("pre", {}, JSON.stringify(st.result, null, 2)) : null,
      el("h2", {}, "Spec"),
      el("pre", {}, JSON.stringify(r.spec, null, 2)));
  });
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

// ---- deployables ----
function deployables() {
  const head = el("thead");
  const body = el("tbody");
  main(el("h1", {}, "Deployables"),
    el("div", { class: "filters" }, namespaceSelect("dns", true),
      writableNamespaces().length || (access && access.admin) ? el("button", { id: "apply-new", onclick: () => { location.hash = "#/apply-deployable"; } }, "Apply YAML") : null),
    el("table", { id: "deployables" }, head, body));
  live(async () => {
    const q = new URLSearchParams();
    if (filters.dns) q.set("namespace", filters.dns);
    const [list, cl] = await Promise.all([api("GET", "/api/v1/deployables?" + q), api("GET", "/api/v1/clusters")]);
    const names = cl.items.map(c => c.metadata.name);
    head.replaceChildren(el("tr", {}, ["Namespace", "Name", "Kind", "Generation", "Phase"].concat(names).map(h => el("th", {}, h))));
    body.replaceChildren(...list.items.map(d => {
      const byCluster = Object.fromEntries((d.status.clusters || []).map(c => [c.cluster, c]));
      return el("tr", { class: "link", onclick: () => { location.hash = "#/deployables/" + encodeURIComponent(d.metadata.namespace) + "/" + encodeURIComponent(d.metadata.name); } },
        el("td", {}, d.metadata.namespace), el("td", {}, d.metadata.name), el("td", {}, (d.spec.template || {}).kind || ""),
        el("td", {}, d.status.generation || 0), el("td", {}, badge(d.status.phase)),
        names.map(n => el("td", { "data-cluster": n, title: (byCluster[n] || {}).message || "" }, byCluster[n] ? badge(byCluster[n].state) : el("span", { class: "muted" }, "—"))));
    }));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 5 + names.length, class: "muted" }, "No deployables.")));
  });
}

function deployableDetail(ns, name) {
  const view = el("div");
  main(el("p", {}, el("a", { href: "#/deployables" }, "← Deployables")), view);
  live(async () => {
    const d = await api("GET", "/api/v1/deployables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name));
    const actions = [];
    const pc = d.status.pendingChange;
    if (pc && may(ns, "approve") && pc.author !== access.user) {
      // A decision names the version of the change shown on this render:
      // if its author changes it meanwhile, the server refuses (409).
      const rv = "?resourceVersion=" + encodeURIComponent(pc.resourceVersion);
      for (const [verb, label] of [["approve", "Approve change"], ["reject", "Reject change"]]) {
        actions.push(el("button", { id: verb, class: verb === "reject" ? "danger" : "", onclick: async () => {
          try { await api("POST", "/api/v1/deployables/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) + "/" + verb + rv); toast(verb + "d"); route(); }
          catch (e) { toast(e.describe ? e.describe() : String(e)); }
        } }, label));
      }
    }
    const live = el("pre", { id: "live-spec" }, JSON.stringify(d.spec, null, 2));
    fill(view,
      el("h1", {}, "Deployable " + ns + "/" + name, " ", badge(d.status.phase)),
      el("div", { class: "actions" }, actions),
      el("h2", {}, "Clusters"),
      el("table", { id: "sync" }, el("thead", {}, el("tr", {}, ["Cluster", "State", "Synced generation", "Last synced", "Message"].map(h => el("th", {}, h)))),
        el("tbody", {}, (d.status.clusters || []).length ? d.status.clusters.map(c => el("tr", {}, el("td", {}, c.cluster), el("td", {}, badge(c.state)),
          el("td", {}, c.syncedGeneration || ""), el("td", {}, c.lastSyncedAt || ""), el("td", {}, c.message || "")))
          : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "Not synced to any cluster yet."))])),
      pc ? el("div", { class: "compare" },
        el("div", {}, el("h2", {}, (d.status.generation ? "Live spec (generation " + d.status.generation + ")" : "Not live yet")), live),
        el("div", {}, el("h2", {}, "Pending change"), pendingNote(pc, "deployable"),
          el("pre", { id: "pending-spec" }, pc.delete ? "(deletes it from every cluster)" : JSON.stringify(pc.spec, null, 2))))
        : el("div", {}, el("h2", {}, "Spec (generation " + (d.status.generation || 0) + ")"), live),
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
  main(el("p", {}, el("a", { href: "#/deployables" }, "← Deployables")),
    el("h1", {}, "Apply a deployable"),
    el("div", { class: "filters" }, ns, name),
    text,
    el("div", { class: "actions" }, el("button", { id: "apply", onclick: async () => {
      out.replaceChildren();
      try {
        const d = await api("PUT", "/api/v1/deployables/" + encodeURIComponent(ns.value.trim()) + "/" + encodeURIComponent(name.value.trim()), text.value, "application/yaml");
        toast("applied, generation " + (d.status.generation || 0));
        location.hash = "#/deployables/" + encodeURIComponent(d.metadata.namespace) + "/" + encodeURIComponent(d.metadata.name);
      } catch (e) { out.replaceChildren(el("p", { class: "error" }, e.describe ? e.describe() : String(e))); }
    } }, "Apply")),
    out);
}

// ---- clusters ----
const STALE_SECONDS = 60;

function clusters() {
  const body = el("tbody");
  main(el("h1", {}, "Clusters"),
    el("table", { id: "clusters" }, el("thead", {}, el("tr", {}, ["Name", "Ready", "Labels", "Taints", "Last heartbeat", "Last snapshot", "Last event", "Objects", ""].map(h => el("th", {}, h)))), body));
  live(async () => {
    const list = await api("GET", "/api/v1/clusters");
    body.replaceChildren(...list.items.map(c => {
      const ready = ((c.status.conditions || []).find(x => x.type === "Ready") || {}).status || "Unknown";
      const agent = c.status.agent || {};
      const fresh = ts => ts ? el("span", { class: (Date.now() - Date.parse(ts)) / 1000 > STALE_SECONDS ? "badge stale" : "" }, age(ts) + " ago" + ((Date.now() - Date.parse(ts)) / 1000 > STALE_SECONDS ? " (stale)" : "")) : el("span", { class: "muted" }, "never");
      const taints = (c.spec.taints || []).concat(c.status.taints || []);
      const cordoned = (c.spec.taints || []).some(t => t.key === "purser.io/cordon");
      return el("tr", { "data-cluster": c.metadata.name },
        el("td", {}, c.metadata.name), el("td", {}, badge(ready)),
        el("td", {}, Object.entries(c.metadata.labels || {}).map(([k, v]) => k + "=" + v).join(", ")),
        el("td", {}, taints.map(t => t.key + (t.value ? "=" + t.value : "") + ":" + t.effect).join(", ") || "—"),
        el("td", {}, fresh(agent.lastHeartbeat)), el("td", {}, fresh(agent.lastSnapshot)), el("td", {}, fresh(agent.lastEvent)),
        el("td", {}, ((c.status.inventory || {}).objects) ?? "—"),
        el("td", {}, access.admin ? (cordoned
          ? el("button", { class: "secondary uncordon", onclick: () => setCordon(c, null) }, "Uncordon")
          : [el("button", { class: "secondary cordon", onclick: () => setCordon(c, "NoSchedule") }, "Cordon"), " ",
             el("button", { class: "danger drain", onclick: () => setCordon(c, "NoExecute") }, "Drain")]) : ""));
    }));
  });
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
  } catch (e) { toast(e.describe ? e.describe() : String(e)); }
}

// ---- history ----
function historyPage() {
  const inputs = {};
  const field = (key, placeholder) => {
    inputs[key] = el("input", { id: "h-" + key, placeholder, value: filters["h-" + key] || "",
      onchange: () => { filters["h-" + key] = inputs[key].value.trim(); saveFilters(); route(); } });
    return inputs[key];
  };
  const chain = el("p", { id: "chain", class: "muted" }, "");
  const body = el("tbody");
  const nsField = access.readsEverywhere ? field("namespace", "namespace (all)") : namespaceSelect("h-namespace", false);
  main(el("h1", {}, "History"), chain,
    el("div", { class: "filters" }, nsField, field("kind", "kind"), field("name", "name"), field("actor", "actor"), field("action", "action")),
    el("table", { id: "history" }, el("thead", {}, el("tr", {}, ["Seq", "Time", "Actor", "Action", "Object", "Outcome", "Summary"].map(h => el("th", {}, h)))), body));
  live(async () => {
    const q = new URLSearchParams({ limit: "500" });
    for (const k of ["namespace", "kind", "name", "actor", "action"]) if (filters["h-" + k]) q.set(k, filters["h-" + k]);
    const list = await api("GET", "/api/v1/history?" + q);
    body.replaceChildren(...list.items.slice().reverse().map(e => el("tr", {},
      el("td", {}, e.seq), el("td", {}, e.time), el("td", {}, e.actor), el("td", {}, e.action), el("td", {}, e.object),
      el("td", {}, badge(e.outcome)),
      el("td", {}, e.summary, e.details ? el("details", {}, el("summary", { class: "muted" }, "change"),
        el("pre", {}, JSON.stringify(e.details, null, 2))) : null))));
    if (!list.items.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 7, class: "muted" }, "No entries match.")));
    if (access.readsEverywhere) {
      const v = await api("GET", "/api/v1/history/verify");
      fill(chain, v.ok ? el("span", { class: "badge Synced" }, "chain intact: " + v.entries + " entries verified, against " + v.anchors + " published heads")
        : el("span", { class: "badge Failed" }, "chain broken at entry " + v.brokenSeq + ": " + v.reason),
        v.anchorError ? el("span", { class: "badge Failed" }, "published heads unreadable: " + v.anchorError) : null);
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
      if (data) onEvent(type, JSON.parse(data).item);
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
  const fresh = el("div", { id: "freshness" });
  const body = el("tbody");
  const note = el("div", { class: "muted" });
  main(el("h1", {}, "Inventory"),
    el("p", { class: "muted" }, "What runs where, from purser's records, updated live: it answers while a cluster is down, and says how fresh each cluster's records are."),
    el("div", { class: "filters" }, namespaceSelect("ins", true), field("cluster", "cluster"), field("kind", "kind"), field("name", "name"),
      field("selector", "label selector, e.g. app=web"), health),
    fresh,
    el("table", { id: "inventory" }, el("thead", {}, el("tr", {}, ["Cluster", "Namespace", "Kind", "Name", "Health", "Phase", "Seen", "Labels"].map(h => el("th", {}, h)))), body),
    note);

  const q = new URLSearchParams({ fields: "meta", watch: "true" });
  if (filters.ins) q.set("namespace", filters.ins);
  for (const [k, p] of [["cluster", "cluster"], ["kind", "kind"], ["name", "name"], ["selector", "labelSelector"], ["health", "health"]]) {
    if (filters["i-" + k]) q.set(p, filters["i-" + k]);
  }
  const items = new Map();
  let ready = {};
  let pending = false;
  const render = () => {
    pending = false;
    const rows = [...items.values()].sort((a, b) =>
      (a.kind + a.namespace + a.name + a.cluster).localeCompare(b.kind + b.namespace + b.name + b.cluster));
    body.replaceChildren(...rows.map(it => el("tr", { "data-name": it.name },
      el("td", {}, it.cluster, " ", ready[it.cluster] === false ? el("span", { class: "badge stale", title: "the cluster is not reporting: this record may be old" }, "stale") : null),
      el("td", {}, it.namespace || ""), el("td", {}, it.kind), el("td", {}, it.name),
      el("td", {}, badge(it.health)), el("td", {}, it.phase || ""), el("td", {}, age(it.observedAt)),
      el("td", { class: "muted" }, Object.entries(it.labels || {}).map(([k, v]) => k + "=" + v).join(", ")))));
    if (!rows.length) body.replaceChildren(el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No objects match.")));
  };
  const later = () => { if (!pending) { pending = true; setTimeout(render, 100); } };

  // How fresh each cluster's records are, from the clusters' agent status.
  live(async () => {
    const list = await api("GET", "/api/v1/clusters");
    ready = {};
    fill(fresh, list.items.map(c => {
      const a = c.status.agent || {};
      const cond = (c.status.conditions || []).find(x => x.type === "Ready");
      const ok = !!a.lastHeartbeat && (Date.now() - Date.parse(a.lastHeartbeat)) / 1000 <= 30 && (!cond || cond.status === "True");
      ready[c.metadata.name] = ok;
      return el("span", { class: "badge " + (ok ? "Synced" : "stale"), "data-cluster": c.metadata.name },
        c.metadata.name + (ok ? " fresh" : " not ready") + (a.lastEvent ? ", last event " + age(a.lastEvent) + " ago" : "") +
        (a.lastSnapshot ? ", last snapshot " + age(a.lastSnapshot) + " ago" : ""));
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
        await watchInventory(q, (type, it) => {
          const key = it.cluster + "/" + it.uid;
          if (type === "DELETED") items.delete(key); else items.set(key, it);
          later();
        }, abort.signal);
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
// bar at once. It reports whether the address carried a token.
function tokenFromFragment() {
  const m = location.hash.match(/^#token=([^&]*)(?:&(.*))?$/);
  if (!m) return false;
  sessionStorage.setItem("purser-token", decodeURIComponent(m[1]));
  const page = m[2] && m[2].startsWith("/") ? "#" + m[2] : "#/";
  history.replaceState(null, "", location.pathname + location.search + page);
  return true;
}
window.addEventListener("hashchange", () => {
  if (tokenFromFragment()) start();
  else if (access) route();
});
if (tokenFromFragment() || token()) start(); else showLogin();
