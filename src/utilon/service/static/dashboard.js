// utilon's dashboard: plain JavaScript over the service's own API, no outside assets.
// It polls (every POLL ms) only what the open tab shows: one page of jobs, one job's detail,
// the new allocation samples since the last poll.  The token stays in this browser
// (localStorage) and goes with every request; the API shows a tenant only its own jobs.
"use strict";

const POLL = 1500;
const PAGE = 50;
const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
                "#ff9da7", "#9c755f", "#bab0ac"];
const S = { token: localStorage.getItem("utilon-token") || "", tab: "jobs", offset: 0,
            state: "", selected: null, samples: [], since: -1e12, run: null, runOffset: 0,
            busy: false };
const $ = (id) => document.getElementById(id);

function esc(x) {
  return String(x ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;",
    '"': "&quot;", "'": "&#39;" }[c]));
}
function secs(x) { return x === null || x === undefined ? "–" : `${Number(x).toFixed(1)} s`; }
function say(text, ok = false) { const m = $("message"); m.textContent = text;
  m.className = ok ? "ok" : ""; }

async function api(path, opts = {}) {
  const headers = { "Content-Type": "application/json" };
  if (S.token) headers.Authorization = `Bearer ${S.token}`;
  const r = await fetch(`/v1${path}`, { ...opts, headers });
  const body = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(`${r.status}: ${body.error || r.statusText}`);
  return body;
}

// ---------------------------------------------------------------------------------- header
async function health() {
  try {
    const h = await api("/health");
    const c = h.jobs;
    $("health").textContent = `${h.status} · ${h.policy} on ${h.backend} · ` +
      `queued ${c.queued} · running ${c.running} · finished ${c.finished} · ` +
      `cancelled ${c.cancelled} · failed ${c.failed} · up ${Math.round(h.uptime_s)} s`;
  } catch (e) { $("health").textContent = `service unreachable (${e.message})`; }
}

// ---------------------------------------------------------------------------------- jobs
function mark(j) {
  const live = j.live || {};
  let status = live.deadline_status;
  if (j.state === "finished") status = j.missed ? "missed" : "met";
  // a cancelled or failed job has no deadline left to keep (issue 46: "on-track")
  if (["cancelled", "failed"].includes(j.state)) status = null;
  if (!status || status === "none") return "–";
  const cls = status === "at-risk" ? "risk" : status;
  return `<span class="mark ${cls}" data-status="${status}">${status}</span>`;
}

function jobRow(j) {
  const live = j.live || {};
  const risky = !["cancelled", "failed"].includes(j.state) &&
    (["at-risk", "late"].includes(live.deadline_status) || j.missed === true);
  const when = j.finished ?? live.estimated_completion;
  const util = j.utility ?? live.utility_now;
  const tasks = live.tasks ? `${live.tasks_done}/${live.tasks} (${live.tasks_running} running)`
    : "–";
  return `<tr data-id="${esc(j.id)}" data-ref="${esc(j.ref || j.id)}"` +
    ` class="${risky ? "risk" : ""}">` +
    `<td>${esc(j.id)}</td><td>${esc(j.tenant)}</td><td data-col="state">${esc(j.state)}</td>` +
    `<td>${mark(j)}</td><td>${secs(when)}</td><td>${secs(j.goal)}</td>` +
    `<td>${util === null || util === undefined ? "–" : Number(util).toFixed(3)}</td>` +
    `<td>${tasks}</td></tr>`;
}

async function jobs() {
  const q = new URLSearchParams({ limit: PAGE, offset: S.offset, live: "true" });
  if (S.state) q.append("state", S.state);
  const page = await api(`/jobs?${q}`);
  $("jobs").innerHTML = page.jobs.map(jobRow).join("");
  const last = Math.min(page.offset + page.jobs.length, page.total);
  $("range").textContent = page.total ? `${page.offset + 1}–${last} of ${page.total}`
    : "no jobs";
  $("prev").disabled = S.offset === 0;
  $("next").disabled = last >= page.total;
  if (S.selected) await detail(S.selected);
}

// One scheduler story entry (docs/explain.md) as text: its kind, cause and own fields.
function storyLine(e) {
  if (e.kind === "dropped") return `${e.n} entries dropped`;
  const skip = new Set(["seq", "t", "job", "kind", "cause", "of"]);
  const show = (v) => Array.isArray(v) ? v.join(",")
    : (typeof v === "number" && !Number.isInteger(v) ? v.toFixed(1) : v);
  const fields = Object.entries(e).filter(([k, v]) => !skip.has(k) && v !== null && v !== "")
    .map(([k, v]) => `${k} ${show(v)}${k === "rank" ? ` of ${e.of}` : ""}`).join(", ");
  return `${e.kind.replace("_", " ")}${e.cause ? ` (${e.cause})` : ""}` +
    `${fields ? `: ${fields}` : ""}`;
}

async function detail(id) {
  const box = $("detail");
  let j;
  try { j = await api(`/jobs/${encodeURIComponent(id)}`); } catch (e) {
    box.hidden = true; S.selected = null; return;
  }
  const live = j.live || {};
  const stages = (live.stages || []).map((s) => `<tr><td>${esc(s.name)}</td><td>${s.tasks}` +
    `</td><td>${s.done}</td><td>${s.running}</td></tr>`).join("");
  const attempts = j.attempts.slice(-50).map((a) => `<tr><td>${a.stage}/${a.task}</td>` +
    `<td>${esc(a.machine)}</td><td>${secs(a.start)}</td><td>${secs(a.end)}</td>` +
    `<td>${esc(a.outcome || "running")}</td><td>${a.incarnation}</td></tr>`).join("");
  const events = j.events.map((e) => `<li>${secs(e.at)} ${esc(e.kind)}` +
    `${e.detail ? ` — ${esc(e.detail)}` : ""}</li>`).join("");
  const story = (j.story || []).map((e) => `<li>${e.kind === "dropped" ? "…" : secs(e.t)} ` +
    `${esc(storyLine(e))}</li>`).join("");
  const reason = live.policy_reason || j.reason;
  const open = ["queued", "running"].includes(j.state);
  box.innerHTML = `<h2>${esc(j.id)} <small>${esc(j.tenant)} · ${esc(j.state)}</small></h2>` +
    `<p>deadline ${mark(j)} · goal ${secs(j.goal)} · estimated ` +
    `${secs(j.finished ?? live.estimated_completion)} · utility now ` +
    `${live.utility_now ?? j.utility ?? "–"}</p>` +
    (reason ? `<p class="reason" data-testid="reason">policy: ${esc(reason)}</p>` : "") +
    (open ? `<button id="cancel" data-testid="cancel">Cancel job</button>` : "") +
    `<h3>Tasks per stage</h3><table><thead><tr><th>stage</th><th>tasks</th><th>done</th>` +
    `<th>running</th></tr></thead><tbody>${stages}</tbody></table>` +
    `<h3>Attempts (last 50)</h3><table><thead><tr><th>stage/task</th><th>machine</th>` +
    `<th>start</th><th>end</th><th>outcome</th><th>incarnation</th></tr></thead>` +
    `<tbody>${attempts}</tbody></table><h3>Events</h3><ul>${events}</ul>` +
    `<h3>Story (recent)</h3><ul data-testid="story">${story}</ul>`;
  box.hidden = false;
  if (open) $("cancel").onclick = () => cancel(j.ref || j.id);
}

async function cancel(id) {
  try { await api(`/jobs/${encodeURIComponent(id)}`, { method: "DELETE" });
        say(`cancel of ${id} requested`, true); await jobs(); } catch (e) { say(e.message); }
}

// ---------------------------------------------------------------------------------- cluster
function stacked(svg, legend, t, series, capacity, unit) {
  const W = 900, H = 260, P = 28;
  const names = Object.keys(series);
  const n = t.length;
  if (!n) { svg.innerHTML = `<text x="20" y="40">no allocation yet</text>`; return; }
  const t0 = t[0], t1 = Math.max(t[n - 1], t0 + 1e-9);
  let top = Math.max(1e-9, ...capacity, ...t.map((_, i) =>
    names.reduce((a, k) => a + (series[k][i] || 0), 0)));
  const x = (v) => P + (W - 2 * P) * (v - t0) / (t1 - t0);
  const y = (v) => H - P - (H - 2 * P) * v / top;
  const base = new Array(n).fill(0);
  let out = "";
  names.forEach((k, c) => {
    const upper = base.map((b, i) => b + (series[k][i] || 0));
    const pts = t.map((v, i) => `${x(v)},${y(upper[i])}`).concat(
      t.map((v, i) => `${x(v)},${y(base[i])}`).reverse());
    out += `<polygon points="${pts.join(" ")}" fill="${COLORS[c % COLORS.length]}" ` +
      `fill-opacity=".8" data-series="${esc(k)}"><title>${esc(k)}</title></polygon>`;
    upper.forEach((u, i) => { base[i] = u; });
  });
  if (capacity.length === n) {
    out += `<polyline points="${t.map((v, i) => `${x(v)},${y(capacity[i])}`).join(" ")}" ` +
      `fill="none" stroke="#111" stroke-width="1.5" data-series="capacity"/>`;
  }
  out += `<text x="${P}" y="${H - 8}" font-size="11">${secs(t0)}</text>` +
    `<text x="${W - P}" y="${H - 8}" font-size="11" text-anchor="end">${secs(t1)}</text>` +
    `<text x="4" y="${P - 8}" font-size="11">${top.toFixed(1)} ${esc(unit)}</text>`;
  svg.innerHTML = out;
  legend.innerHTML = names.map((k, c) => `<span><i style="background:` +
    `${COLORS[c % COLORS.length]}"></i>${esc(k)}</span>`).join("") +
    `<span><i style="background:#111"></i>capacity</span>`;
}

async function cluster() {
  const [cl, pol, tl] = await Promise.all([api("/cluster"), api("/policy"),
    api(`/timeline?since=${S.since}`)]);
  S.samples = S.samples.concat(tl.samples).slice(-3600);
  if (tl.samples.length) S.since = tl.samples[tl.samples.length - 1].t;
  const names = [...new Set(S.samples.flatMap((s) => Object.keys(s.tenants)))].sort();
  const series = Object.fromEntries(names.map((k) => [k, S.samples.map((s) =>
    s.tenants[k] || 0)]));
  $("alloc-unit").textContent = `(${cl.slot_resource} per tenant; black: capacity)`;
  stacked($("alloc"), $("alloc-legend"), S.samples.map((s) => s.t), series,
    S.samples.map((s) => s.capacity), cl.slot_resource);
  const slot = cl.slot_resource;
  $("machines").innerHTML = cl.machines.map((m) => `<tr><td>${esc(m.id)}</td>` +
    `<td>${m.up ? "yes" : "no"}</td><td>${m.used[slot] ?? 0} / ${m.capacity[slot] ?? 0}` +
    `</td><td>${m.tasks}</td></tr>`).join("");
  $("tenants").innerHTML = Object.entries(cl.allocation.tenants).map(([k, v]) =>
    `<tr><td>${esc(k)}</td><td>${v}</td></tr>`).join("");
  const f = (v) => (v === null || v === undefined ? "–" : `${v.toFixed(3)} ms`);
  $("latency").textContent = `decision latency of ${pol.name}: p50 ${f(pol.decide_ms_p50)}, ` +
    `p95 ${f(pol.decide_ms_p95)}, max ${f(pol.decide_ms_max)} over the last ` +
    `${pol.window} of ${pol.decisions} decisions`;
}

// ---------------------------------------------------------------------------------- runs
async function runs() {
  const r = await api("/runs");
  $("runs").innerHTML = r.runs.length ? r.runs.map((x) => `<tr data-run="${esc(x.path)}">` +
    `<td><a href="#">${esc(x.path)}</a></td><td>${esc(x.scenario)}</td>` +
    `<td>${esc(x.policy)}</td><td>${x.jobs ?? "–"}</td><td>${x.misses ?? "–"}</td></tr>`)
    .join("") : `<tr><td colspan="5">no runs under ${esc(r.root)}</td></tr>`;
}

async function showRun(path) {
  S.run = path;
  const r = await api(`/runs/${path.split("/").map(encodeURIComponent).join("/")}` +
    `?limit=${PAGE}&offset=${S.runOffset}`);
  const s = r.summary;
  const keys = ["scenario", "policy", "jobs", "misses", "miss_rate", "utility_sum",
    "utility_min", "penalty", "makespan", "response_mean", "utilisation", "servers"];
  const rows = r.jobs.map((j) => `<tr class="${j.missed ? "risk" : ""}"><td>${esc(j.id)}</td>` +
    `<td>${esc(j.tenant)}</td><td>${secs(j.submit)}</td><td>${secs(j.finish)}</td>` +
    `<td>${secs(j.goal)}</td><td>${j.utility ?? "–"}</td>` +
    `<td>${j.missed ? '<span class="mark missed">missed</span>' : ""}</td></tr>`).join("");
  const box = $("run");
  box.innerHTML = `<h2>${esc(path)}</h2><table><tbody>` + keys.filter((k) => k in s)
    .map((k) => `<tr><th>${k}</th><td>${esc(s[k])}</td></tr>`).join("") + `</tbody></table>` +
    `<div class="legend" id="run-legend"></div><svg id="run-alloc" viewBox="0 0 900 260" ` +
    `preserveAspectRatio="none"></svg><p>${r.offset + 1}–${r.offset + r.jobs.length} of ` +
    `${r.total} jobs <button id="run-prev">‹</button><button id="run-next">›</button></p>` +
    `<table><thead><tr><th>job</th><th>tenant</th><th>submit</th><th>finish</th><th>goal</th>` +
    `<th>utility</th><th></th></tr></thead><tbody>${rows}</tbody></table>`;
  box.hidden = false;
  stacked($("run-alloc"), $("run-legend"), r.allocation.t, r.allocation.series,
    r.allocation.capacity, "");
  $("run-prev").onclick = () => { S.runOffset = Math.max(0, S.runOffset - PAGE);
    showRun(path); };
  $("run-next").onclick = () => { if (S.runOffset + PAGE < r.total) {
    S.runOffset += PAGE; showRun(path); } };
}

// ---------------------------------------------------------------------------------- wiring
async function refresh() {
  if (S.busy) return;
  S.busy = true;
  try {
    await health();
    if (!S.token) { say("enter an API token (utilon token create NAME) to see jobs"); return; }
    if (S.tab === "jobs") await jobs();
    else if (S.tab === "cluster") await cluster();
  } catch (e) { say(e.message); } finally { S.busy = false; }
}

function show(tab) {
  S.tab = tab;
  document.querySelectorAll("nav button").forEach((b) =>
    b.classList.toggle("on", b.dataset.tab === tab));
  document.querySelectorAll("main > section").forEach((s) => {
    s.hidden = s.id !== `tab-${tab}`;
  });
  if (tab === "runs") runs().catch((e) => say(e.message));
  refresh();
}

$("login").onsubmit = (ev) => {
  ev.preventDefault();
  S.token = $("token").value.trim();
  localStorage.setItem("utilon-token", S.token);
  S.samples = []; S.since = -1e12; S.selected = null; S.offset = 0; S.runOffset = 0;
  // another token is another tenant: nothing the last one saw stays on the page (issue 46)
  for (const id of ["detail", "run"]) { $(id).innerHTML = ""; $(id).hidden = true; }
  for (const id of ["jobs", "machines", "tenants", "runs"]) $(id).innerHTML = "";
  $("alloc").innerHTML = ""; $("alloc-legend").innerHTML = ""; $("latency").textContent = "";
  say("token set", true);
  refresh();
};
document.querySelectorAll("nav button").forEach((b) => { b.onclick = () => show(b.dataset.tab); });
$("state-filter").onchange = (ev) => { S.state = ev.target.value; S.offset = 0; refresh(); };
$("prev").onclick = () => { S.offset = Math.max(0, S.offset - PAGE); refresh(); };
$("next").onclick = () => { S.offset += PAGE; refresh(); };
$("jobs").onclick = (ev) => {
  const tr = ev.target.closest("tr");
  if (tr) { S.selected = tr.dataset.ref || tr.dataset.id; detail(S.selected); }
};
$("runs").onclick = (ev) => {
  const tr = ev.target.closest("tr");
  if (tr && tr.dataset.run) { ev.preventDefault(); S.runOffset = 0;
    showRun(tr.dataset.run).catch((e) => say(e.message)); }
};
$("submit-job").onclick = async () => {
  let job;
  try { job = JSON.parse($("job-json").value); } catch (e) {
    say(`not valid JSON: ${e.message}`); return;
  }
  try {
    const j = await api("/jobs", { method: "POST", body: JSON.stringify(job) });
    say(`submitted ${j.id} (${j.state})`, true);
    S.selected = j.ref || j.id; show("jobs");
  } catch (e) { say(e.message); }
};
$("token").value = S.token;
refresh();
setInterval(refresh, POLL);
