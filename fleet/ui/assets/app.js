// app.js - the page of `diagport ui`: the process table, a process's view (live charts, capture buttons,
// artifacts, exceptions, crashes) and the artifact views (flame graph, heap table, their diffs,
// exceptions), all over the server's JSON API (same origin; the session cookie goes with every fetch).
//
// The view lives in the URL fragment (#t=TARGET&p=PID&a=CAPTURE&b=OTHER&z=ZOOM&q=SEARCH), so a link or a
// reload reopens it: navigation sets location.hash (a history entry), zoom and search replace it.
//
// What an agent says (names, states, messages, numbers) is data: it goes into the page as text (textContent,
// or esc() in markup), and a number from an agent is formatted only if it is a finite number (num(); '?'
// otherwise), so that a hostile agent's markup is shown, never run or obeyed.

import { FlameGraph, parseFolded, parseStacks, fmtCount, num } from './flame.js';
import { LiveCharts, fmtBytes, problemOf } from './charts.js';

const $ = (id) => document.getElementById(id);
const KINDS = {
  cpuprofile: { label: 'CPU profile', view: 'flame' },
  stacks: { label: 'Stacks', view: 'flame' },
  gcdump: { label: 'GC heap', view: 'heap' },
  dump: { label: 'Dump' },
  trace: { label: 'Trace' },
  exceptions: { label: 'Exceptions', view: 'exceptions' },
};

const S = {
  procs: null, // the last /api/processes document
  procsText: '',
  captures: [],
  capturesText: '',
  view: {}, // the fragment's fields
  live: null, // LiveCharts of the open process
  liveKey: '',
  artKey: '',
  flame: null,
  pending: new Map(), // capture id -> the fragment when the page started it (opened when done, if unchanged)
  data: new Map(), // capture id -> its parsed artifact
  pollTimer: 0,
  excTimer: 0,
  gen: 0, // counts process views opened: a late answer for an earlier one is dropped
};

function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

function say(msg) {
  $('status').textContent = msg;
}

// banner: a message that stays until its cause is gone: WHY names the cause ('procs': the list could not be
// loaded; 'capture': a capture was refused; 'session': the server refused the page), and clearing a cause
// clears its message only
function banner(msg, why) {
  const b = $('banner');
  if (!msg && b.dataset.why !== why) return;
  b.textContent = msg;
  b.dataset.why = why;
  b.hidden = !msg;
}

// api: a JSON request to the server; throws an Error with the problem's detail on a non-2xx answer. Only
// the server's own refusal of the page (403 with an empty body: no cookie, or another server's) means the
// session has ended; an agent's refusal comes as a problem (502, "Refused by the agent", its sentence).
async function api(path, opts = {}) {
  const r = await fetch(path, { ...opts, headers: opts.body ? { 'Content-Type': 'application/json' } : {} });
  if (!r.ok) {
    const detail = await problemOf(r.clone());
    if (r.status === 403 && (await r.text()) === '') {
      banner('The server refused this page: its session has ended (diagport ui restarted?). Open the URL diagport ui printed again.', 'session');
      throw new Error('refused (403)');
    }
    throw new Error(detail);
  }
  return r;
}

function fmtUptime(s) {
  s = Math.floor(num(s));
  if (!(s >= 0)) return '';
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleTimeString([], { hour12: false });
}

function fmtAgo(t) {
  const s = Math.round((Date.now() - new Date(t)) / 1000);
  if (!(s >= 0)) return '';
  return s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
}

// --- crashes: the target's (its pod's, its task's), of any process it ran: the crashed one has exited

const SIGNALS = { 4: 'SIGILL', 6: 'SIGABRT', 7: 'SIGBUS', 8: 'SIGFPE', 9: 'SIGKILL', 11: 'SIGSEGV', 15: 'SIGTERM' };

function crashWhat(c) {
  const t = c.exception?.typeName || c.exception?.type;
  if (t) return t;
  if (c.exitSignal) return SIGNALS[c.exitSignal] || `signal ${c.exitSignal}`;
  return typeof c.exitCode === 'number' ? `exit code ${c.exitCode}` : 'crash';
}

function crashesNewestFirst(list) {
  return (list || []).slice().sort((a, b) => String(b.time).localeCompare(String(a.time)));
}

// --- the fragment

function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  const v = {};
  for (const k of ['t', 'p', 'a', 'b', 'z', 'q']) if (q.get(k)) v[k] = q.get(k);
  return v;
}

function hashOf(v) {
  return '#' + ['t', 'p', 'a', 'b', 'z', 'q'].filter((k) => v[k]).map((k) => `${k}=${encodeURIComponent(v[k])}`).join('&');
}

function go(v) {
  const h = hashOf(v);
  if (h === location.hash || (h === '#' && location.hash === '')) render();
  else location.hash = h;
}

// replace: the fragment for zoom and search (no history entry per keystroke or click)
function replace(v) {
  S.view = v;
  history.replaceState(null, '', hashOf(v) === '#' ? location.pathname : hashOf(v));
}

// --- the process list

function procKey(t, p) {
  return `${t}\u0000${p}`;
}

function findProc(t, p) {
  for (const it of S.procs?.items || []) {
    if (it.target !== t) continue;
    for (const pr of it.processes || []) if (String(pr.pid) === String(p)) return { item: it, proc: pr };
  }
  return null;
}

function procLabel(t, p, name) {
  return `${t} · ${p}${name ? ' ' + name : ''}`;
}

async function loadProcs() {
  try {
    const r = await api('/api/processes');
    const text = await r.text();
    if (text !== S.procsText) {
      S.procsText = text;
      S.procs = JSON.parse(text);
      renderList();
      if (S.view.t) renderProcHead();
    }
    const d = S.procs;
    $('caller').textContent = d.caller ? `as ${d.caller}` : '';
    $('refreshed').textContent = d.refreshedAt ? `· list from ${fmtTime(d.refreshedAt)}` : '';
    $('refresh-error').hidden = !d.refreshError;
    $('refresh-error').textContent = d.refreshError ? `The last look for the targets failed (${d.refreshError}); this is the list from before.` : '';
    banner('', 'procs');
  } catch (e) {
    if (!e.message.startsWith('refused')) banner(`Could not load the processes: ${e.message}`, 'procs');
  }
}

function renderList() {
  const items = S.procs?.items || [];
  const f = $('filter').value.trim().toLowerCase();
  const rows = [];
  let nprocs = 0;
  let shown = 0;
  for (const it of items) {
    const cr = it.crashes || [];
    const procs = it.processes || [];
    nprocs += procs.length;
    const common = [it.workload, it.target, it.namespace, it.pod, it.container, it.cluster, it.service, it.task].filter(Boolean).join(' ').toLowerCase();
    if (procs.length === 0) {
      if (f && !common.includes(f)) continue;
      shown++;
      rows.push(`<tr class="unavailable"><th scope="row">${esc(it.target)}</th><td>${esc(it.workload || '')}</td><td>${esc(it.target)}</td><td colspan="6">${esc(it.state === 'ready' ? 'no .NET process' : it.state || 'unknown')}${it.reason ? ': ' + esc(it.reason) : ''}</td></tr>`);
      continue;
    }
    const cs = crashesNewestFirst(cr);
    const crashes = cs.length ? `${cs.length} (last ${esc(crashWhat(cs[0]))}, ${esc(fmtAgo(cs[0].time))})` : '0';
    for (const p of procs) {
      if (f && !`${common} ${p.pid} ${p.name || ''}`.toLowerCase().includes(f)) continue;
      shown++;
      rows.push(`<tr tabindex="0" class="proc" data-t="${esc(it.target)}" data-p="${esc(p.pid)}"><th scope="row">${esc(procLabel(it.target, p.pid, p.name))}</th><td>${esc(it.workload || '')}</td><td>${esc(it.target)}</td><td class="num">${esc(p.pid)}</td><td>${esc(p.name || '')}</td><td>${esc(p.runtimeVersion || '')}</td><td class="num">${esc(fmtUptime(p.uptimeSeconds))}</td>${modeCell(it)}<td class="${cs.length ? 'bad' : ''}">${crashes}</td></tr>`);
    }
  }
  // keep the keyboard's place across a refresh
  const a = document.activeElement;
  const focused = a && a.matches && a.matches('tr.proc') ? procKey(a.dataset.t, a.dataset.p) : null;
  const tb = $('processes').tBodies[0];
  tb.innerHTML = rows.join('');
  if (focused) for (const tr of tb.rows) if (procKey(tr.dataset.t, tr.dataset.p) === focused) tr.focus();
  const targets = items.length;
  $('processes-caption').textContent = targets === 0
    ? 'No targets found: check the namespace, selector, cluster or --target that diagport ui was given.'
    : `${nprocs} .NET process${nprocs === 1 ? '' : 'es'} behind ${targets} target${targets === 1 ? '' : 's'}${f ? `; ${shown} shown by the filter` : ''}`;
}

// modeCell: how the target's agent was injected (sidecar, in-image...), which only a pod or task says: a
// static target (a URL given to diagport ui) has a dash that says why
function modeCell(it) {
  if (it.mode) return `<td>${esc(it.mode)}</td>`;
  const why = it.pod || it.task ? 'Not known: this target does not say how its agent was injected'
    : 'Not known: only Kubernetes pods and ECS tasks say how their agent was injected, and this target is a URL given to diagport ui';
  return `<td title="${esc(why)}">—</td>`;
}

function openRow(tr) {
  if (tr && tr.dataset.t) go({ t: tr.dataset.t, p: tr.dataset.p });
}

// --- the process view

function renderProcHead() {
  const v = S.view;
  const f = findProc(v.t, v.p);
  const name = f?.proc.name;
  $('proc-h').textContent = procLabel(v.t, v.p, name);
  $('crumb-here').textContent = procLabel(v.t, v.p, name);
  document.title = `${name || v.p} · diagport`;
  $('proc-gone').hidden = !S.procs || !!f;
  if (f) {
    const it = f.item;
    const p = f.proc;
    const facts = [
      it.workload && `workload ${it.workload}`,
      it.container && `container ${it.container}`,
      p.runtimeVersion && `.NET ${p.runtimeVersion}`,
      typeof p.uptimeSeconds === 'number' && `up ${fmtUptime(p.uptimeSeconds)}`,
      it.mode && `injected, ${it.mode}`,
      p.commandLine && `command line: ${p.commandLine}`,
    ].filter(Boolean);
    $('proc-facts').textContent = facts.join(' · ');
    const cr = crashesNewestFirst(it.crashes);
    $('crashes').innerHTML = cr.length === 0 ? '<p class="hint">No crash recorded for this target.</p>'
      : `<table class="data"><caption>The target's crashes (of any of its processes), newest first</caption><thead><tr><th scope="col">When</th><th scope="col">Process</th><th scope="col">What</th><th scope="col">Message</th></tr></thead><tbody>${cr.map((c) =>
        `<tr><td>${esc(fmtTime(c.time))} <span class="id">${esc(fmtAgo(c.time))}</span></td><td>${esc(c.pid ?? '')} ${esc(c.processName || '')}</td><th scope="row">${esc(crashWhat(c))}</th><td>${esc(c.exception?.message || '')}</td></tr>`).join('')}</tbody></table>`;
  }
}

function exceptionRows(list) {
  return list.map((x) => {
    const at = thrownAt(x);
    return `<tr><td>${esc(fmtTime(x.timestamp))}</td><th scope="row">${esc(x.typeName)}</th><td>${esc(x.message)}</td><td><code>${esc(at)}</code></td></tr>`;
  }).join('');
}

function exceptionTable(list, caption) {
  return `<table class="data"><caption>${esc(caption)}</caption><thead><tr><th scope="col">When</th><th scope="col">Type</th><th scope="col">Message</th><th scope="col">Thrown at</th></tr></thead><tbody>${exceptionRows(list)}</tbody></table>`;
}

function thrownAt(x) {
  const f = x.stack?.frames?.[0];
  return f ? `${f.typeName ? f.typeName + '.' : ''}${f.methodName}` : '';
}

// exceptionsView: a capture of exceptions: how many of each type from each place, then the latest 100
function exceptionsView(list) {
  if (list.length === 0) return '<p class="hint">No exceptions in this capture.</p>';
  const groups = new Map();
  for (const x of list) {
    const k = `${x.typeName}\u0000${thrownAt(x)}`;
    const g = groups.get(k) || { type: x.typeName, at: thrownAt(x), n: 0, last: x };
    g.n++;
    g.last = x;
    groups.set(k, g);
  }
  const rows = [...groups.values()].sort((a, b) => b.n - a.n).slice(0, 100).map((g) =>
    `<tr><th scope="row">${esc(g.type)}</th><td><code>${esc(g.at)}</code></td><td class="num">${fmtCount(g.n)}</td><td>${esc(fmtTime(g.last.timestamp))}</td><td>${esc(g.last.message)}</td></tr>`);
  const latest = list.slice(-100).reverse();
  return `<p>${fmtCount(list.length)} exceptions of ${groups.size} kinds (type and the method that threw).</p>
<div class="table-wrap"><table class="data"><caption>By type and where thrown, most frequent first</caption><thead><tr><th scope="col">Type</th><th scope="col">Thrown at</th><th scope="col">Count</th><th scope="col">Last</th><th scope="col">Last message</th></tr></thead><tbody>${rows.join('')}</tbody></table></div>
<div class="table-wrap">${exceptionTable(latest, `The latest ${latest.length}, newest first`)}</div>`;
}

function parseNdjson(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch { /* a partial last line */ }
  }
  return out;
}

async function loadExceptions() {
  const v = S.view;
  const key = S.gen;
  try {
    const r = await api(`/api/exceptions?target=${encodeURIComponent(v.t)}&pid=${encodeURIComponent(v.p)}`);
    const list = parseNdjson(await r.text());
    if (key !== S.gen) return;
    const last = list.slice(-20).reverse();
    $('exceptions').innerHTML = last.length === 0 ? '<p class="hint">No exception thrown recently.</p>'
      : exceptionTable(last, `The last ${last.length} of ${list.length} exceptions, newest first`);
  } catch (e) {
    if (key === S.gen) $('exceptions').innerHTML = `<p class="hint">No exceptions to show (${esc(e.message)}).</p>`;
  }
  if (key === S.gen) S.excTimer = setTimeout(loadExceptions, 10000);
}

function openProcess() {
  const v = S.view;
  const key = procKey(v.t, v.p);
  if (S.liveKey === key) return false;
  closeProcess();
  banner('', 'capture');
  S.liveKey = key;
  S.live = new LiveCharts($('charts'), $('live-status'), v.t, v.p);
  S.live.start();
  $('exceptions').innerHTML = '<p class="hint">Loading…</p>';
  loadExceptions();
  renderProcHead();
  return true;
}

function closeProcess() {
  if (S.live) S.live.stop();
  S.live = null;
  S.liveKey = '';
  S.gen++;
  clearTimeout(S.excTimer);
}

// --- captures

async function loadCaptures() {
  clearTimeout(S.pollTimer);
  try {
    const r = await api('/api/captures');
    const text = await r.text();
    S.captures = JSON.parse(text).items || [];
    const running = S.captures.some((c) => c.state === 'running');
    if (text !== S.capturesText || running) {
      S.capturesText = text;
      renderCaptures();
    }
    for (const c of S.captures) {
      const h = S.pending.get(c.id);
      if (h === undefined || c.state === 'running') continue;
      S.pending.delete(c.id);
      say(`${KINDS[c.kind]?.label || c.kind} ${c.state}${c.error ? ': ' + c.error : ''}.`);
      // opened when done, unless the user has gone elsewhere meanwhile
      if (c.state === 'succeeded' && KINDS[c.kind]?.view && location.hash === h) go({ t: c.target, p: String(c.pid), a: c.id });
    }
    if (running) S.pollTimer = setTimeout(loadCaptures, 500);
  } catch (e) {
    say(`Could not list the captures: ${e.message}`);
  }
}

function captureName(c) {
  const k = KINDS[c.kind]?.label || c.kind;
  return num(c.durationSeconds) > 0 ? `${k} (${c.durationSeconds} s)` : k;
}

// endedEarly: the seconds a CPU profile or trace of C ran when they fell well short of its duration (the
// process exited, or its agent ended the capture), else null
function endedEarly(c) {
  const dur = num(c.durationSeconds);
  const ran = (new Date(c.finishedAt) - new Date(c.startedAt)) / 1000;
  if (!(dur > 0) || !Number.isFinite(ran)) return null;
  return ran + Math.max(1, dur * 0.1) < dur ? Math.max(0, Math.round(ran)) : null;
}

function stateCell(c) {
  const dur = num(c.durationSeconds);
  if (c.state === 'running') {
    const el = (Date.now() - new Date(c.startedAt)) / 1000;
    const bar = dur > 0
      ? `<progress max="${dur}" value="${Math.min(el, dur).toFixed(1)}" aria-label="progress of ${esc(captureName(c))}"></progress> running, ${Math.min(Math.floor(el), dur)} of ${dur} s`
      : `<progress aria-label="progress of ${esc(captureName(c))}"></progress> running`;
    return `${bar} <button type="button" data-act="cancel" data-id="${esc(c.id)}">Cancel</button>`;
  }
  if (c.state === 'failed') return `<span class="bad">failed</span>: ${esc(c.error || '')}`;
  if (c.state !== 'succeeded') return esc(c.state);
  const ran = endedEarly(c);
  return ran === null ? '<span class="ok">done</span>'
    : `<span class="ok">done</span>, <span class="bad" title="The capture ended well before its duration: the process may have exited">ended after ${ran} s of ${dur}</span>`;
}

function renderCaptures() {
  const v = S.view;
  const all = $('all-artifacts').checked;
  const list = S.captures.filter((c) => all || (c.target === v.t && String(c.pid) === v.p));
  const a = document.activeElement;
  const keep = a && a.dataset && a.dataset.act ? { act: a.dataset.act, id: a.dataset.id } : null;
  const rows = list.map((c) => {
    const f = findProc(c.target, c.pid);
    const acts = [];
    if (c.state === 'succeeded') {
      if (KINDS[c.kind]?.view) acts.push(`<button type="button" data-act="open" data-id="${esc(c.id)}"${v.a === c.id ? ' aria-pressed="true"' : ''}>Open</button>`);
      acts.push(`<a class="button" href="/api/captures/${encodeURIComponent(c.id)}/data?download=1" download="${esc(c.fileName || '')}">Download</a>`);
    }
    if (c.state !== 'running') acts.push(`<button type="button" data-act="remove" data-id="${esc(c.id)}" aria-label="Remove ${esc(captureName(c))} ${esc(c.id)}">Remove</button>`);
    return `<tr data-id="${esc(c.id)}"${v.a === c.id || v.b === c.id ? ' class="current"' : ''}><th scope="row">${esc(captureName(c))} <span class="id">${esc(c.id)}</span></th><td>${esc(procLabel(c.target, c.pid, f?.proc.name))}</td><td>${esc(fmtTime(c.startedAt))}</td><td class="num">${esc(fmtBytes(c.bytes || 0))}</td><td>${stateCell(c)}</td><td class="acts">${acts.join(' ')}</td></tr>`;
  });
  $('artifacts').tBodies[0].innerHTML = rows.join('');
  $('artifacts').hidden = rows.length === 0;
  $('no-artifacts').hidden = rows.length !== 0;
  if (keep) {
    const b = $('artifacts').querySelector(`[data-act="${CSS.escape(keep.act)}"][data-id="${CSS.escape(keep.id)}"]`);
    if (b) b.focus();
  }
  fillCompare();
}

async function startCapture(kind) {
  const v = S.view;
  const body = { target: v.t, pid: Number(v.p), kind };
  if (kind === 'cpuprofile') {
    body.durationSeconds = Number($('cpu-duration').value) || 10;
    body.engine = $('cpu-engine').value;
  } else if (kind === 'trace') {
    body.durationSeconds = Number($('trace-duration').value) || 10;
  } else if (kind === 'dump') {
    body.type = $('dump-type').value;
  }
  try {
    const r = await api('/api/captures', { method: 'POST', body: JSON.stringify(body) });
    const c = await r.json();
    S.pending.set(c.id, location.hash);
    banner('', 'capture');
    say(`${KINDS[kind].label} started.`);
    await loadCaptures();
  } catch (e) {
    say(`${KINDS[kind].label} not started: ${e.message}`);
    banner(`${KINDS[kind].label} not started: ${e.message}`, 'capture');
  }
}

async function captureAction(act, id) {
  if (act === 'open') {
    const c = S.captures.find((x) => x.id === id);
    if (c) go({ t: c.target, p: String(c.pid), a: id });
    return;
  }
  try {
    await api(`/api/captures/${encodeURIComponent(id)}`, { method: 'DELETE' });
    say(act === 'cancel' ? 'Capture cancelled.' : 'Artifact removed.');
    S.data.delete(id);
    if (act === 'remove' && (S.view.a === id || S.view.b === id)) go({ t: S.view.t, p: S.view.p });
  } catch (e) {
    say(`Could not ${act}: ${e.message}`);
  }
  loadCaptures();
}

// --- artifact views

function fillCompare() {
  const v = S.view;
  const cur = S.captures.find((c) => c.id === v.a);
  const sel = $('compare-with');
  if (!cur || !(cur.kind === 'cpuprofile' || cur.kind === 'stacks' || cur.kind === 'gcdump')) {
    $('compare-box').hidden = true;
    return;
  }
  const others = S.captures.filter((c) => c.id !== cur.id && c.kind === cur.kind && c.state === 'succeeded');
  // the same process's latest first, then the others (another pod's)
  others.sort((x, y) => (y.target === cur.target && y.pid === cur.pid) - (x.target === cur.target && x.pid === cur.pid));
  const opts = others.map((c) => `<option value="${esc(c.id)}">${esc(c.id)}: ${esc(fmtTime(c.startedAt))}, ${esc(procLabel(c.target, c.pid, findProc(c.target, c.pid)?.proc.name))}</option>`).join('');
  const was = sel.value;
  if (sel.dataset.opts !== opts) {
    sel.innerHTML = opts;
    sel.dataset.opts = opts;
    if (others.some((c) => c.id === was)) sel.value = was;
  }
  $('compare-box').hidden = others.length === 0 || !!v.b;
}

async function artifactData(c) {
  if (S.data.has(c.id)) return S.data.get(c.id);
  const r = await api(`/api/captures/${encodeURIComponent(c.id)}/data`);
  const text = await r.text();
  let d;
  if (c.kind === 'cpuprofile') d = parseFolded(text);
  else if (c.kind === 'stacks') d = parseStacks(JSON.parse(text));
  else if (c.kind === 'gcdump') d = JSON.parse(text);
  else if (c.kind === 'exceptions') d = parseNdjson(text);
  else d = text;
  S.data.set(c.id, d);
  // a 50 MB profile's tree is large: keep the last four artifacts read
  if (S.data.size > 4) S.data.delete(S.data.keys().next().value);
  return d;
}

function closeArtifact() {
  if (S.flame) S.flame.destroy();
  S.flame = null;
  S.artKey = '';
  $('artifact-view').hidden = true;
  $('artifact-body').textContent = '';
}

async function openArtifact(focus) {
  const v = S.view;
  const key = `${v.a}/${v.b || ''}`;
  if (key === S.artKey) {
    if (S.flame) {
      S.flame.setZoom(v.z || '');
      S.flame.setQuery(v.q || '');
      const s = $('artifact-body').querySelector('.flame-search');
      if (s && s.value !== (v.q || '')) s.value = v.q || '';
    }
    return;
  }
  closeArtifact();
  S.artKey = key;
  const view = $('artifact-view');
  const body = $('artifact-body');
  const c = S.captures.find((x) => x.id === v.a);
  const o = v.b ? S.captures.find((x) => x.id === v.b) : null;
  view.hidden = false;
  if (!c || (v.b && !o)) {
    $('artifact-h').textContent = `Artifact ${v.b && c ? v.b : v.a}`;
    $('artifact-sub').textContent = '';
    body.innerHTML = '<p class="warn">This artifact is no longer listed by the server (it was removed, or diagport ui restarted).</p>';
    $('compare-box').hidden = true;
    $('artifact-download').hidden = true;
    return;
  }
  $('artifact-download').hidden = false;
  $('artifact-download').href = `/api/captures/${encodeURIComponent(c.id)}/data?download=1`;
  $('artifact-download').setAttribute('download', c.fileName || '');
  $('uncompare').hidden = !o;
  // a diff: before is the older of the two
  let [older, newer] = o && new Date(o.startedAt) > new Date(c.startedAt) ? [c, o] : [o, c];
  if (!o) [older, newer] = [null, c];
  const who = (x) => `${x.id} (${fmtTime(x.startedAt)}, ${procLabel(x.target, x.pid, findProc(x.target, x.pid)?.proc.name)})`;
  $('artifact-h').textContent = o ? `${KINDS[c.kind].label}: ${older.id} → ${newer.id}` : `${captureName(c)} ${c.id}`;
  $('artifact-sub').textContent = o ? `Before: ${who(older)}. After: ${who(newer)}.` : `Taken ${fmtTime(c.startedAt)} from ${procLabel(c.target, c.pid, findProc(c.target, c.pid)?.proc.name)}, ${fmtBytes(c.bytes || 0)}.`;
  fillCompare();
  body.innerHTML = '<p class="hint">Loading…</p>';
  if (focus) {
    $('artifact-h').focus();
    view.scrollIntoView({ block: 'start' });
  }
  try {
    const nd = await artifactData(newer);
    const od = older ? await artifactData(older) : null;
    if (S.artKey !== key) return;
    const kind = KINDS[c.kind].view;
    if (kind === 'flame' && nd.total === 0) body.innerHTML = `<p class="warn">The ${c.id === newer.id ? '' : 'newer '}profile has no samples: the process ran no managed code while it was taken.</p>`;
    else if (kind === 'flame') showFlame(c, nd, od);
    else if (kind === 'heap') body.innerHTML = od ? heapDiff(od, nd) : heapTable(nd);
    else if (kind === 'exceptions') body.innerHTML = exceptionsView(nd);
    if (kind === 'heap') body.querySelector('.heap-filter')?.addEventListener('input', filterHeap);
  } catch (e) {
    if (S.artKey === key) body.innerHTML = `<p class="warn">Could not load it: ${esc(e.message)}</p>`;
  }
}

function showFlame(c, root, base) {
  const v = S.view;
  const body = $('artifact-body');
  body.textContent = '';
  body.appendChild($('flame-tpl').content.cloneNode(true));
  const img = body.querySelector('.flame');
  const table = body.querySelector('table.frames');
  table.id = 'top-frames';
  img.setAttribute('aria-describedby', 'top-frames');
  const what = c.kind === 'stacks' ? 'thread stacks' : 'CPU profile';
  img.setAttribute('aria-label', base
    ? `Diff flame graph of two ${what}s: red frames grew, blue shrank; the table of frames by growth describes it`
    : `The flame graph of the ${what} ${c.id}, ${fmtCount(root.total)} samples; the top-frames table describes it`);
  body.querySelector('.legend').hidden = !base;
  // a diff's table has twice the columns: under the graph rather than beside it
  body.querySelector('.flame-layout').classList.toggle('diff', !!base);
  const search = body.querySelector('.flame-search');
  search.value = v.q || '';
  S.flame = new FlameGraph(img, table, body.querySelector('.flame-info'), body.querySelector('.tooltip'), (z) => replace({ ...S.view, z }));
  S.flame.show(root, base, v.z || '', v.q || '');
  search.addEventListener('input', () => {
    S.flame.setQuery(search.value);
    replace({ ...S.view, q: search.value });
  });
  body.querySelector('.flame-reset').addEventListener('click', resetZoom);
}

function resetZoom() {
  if (!S.flame) return;
  S.flame.setZoom('');
  replace({ ...S.view, z: '' });
}

// heapTypes: a snapshot's types as the page uses them: a name (text) and a count and bytes that are numbers
// (0 for what is not one: a hostile agent's string, a negative)
function heapTypes(d) {
  const n = (v) => (num(v) >= 0 ? v : 0);
  return (Array.isArray(d?.types) ? d.types : []).filter((t) => t && typeof t === 'object')
    .map((t) => ({ type: String(t.type ?? '?'), count: n(t.count), bytes: n(t.bytes) }));
}

function heapTable(d) {
  const types = heapTypes(d).sort((x, y) => y.bytes - x.bytes);
  const total = num(d.bytes) > 0 ? d.bytes : types.reduce((s, t) => s + t.bytes, 0) || 1;
  const rows = types.slice(0, 300).map((t) => `<tr><th scope="row">${esc(t.type)}</th><td class="num">${fmtCount(t.count)}</td><td class="num">${fmtBytes(t.bytes)}</td><td class="num">${((t.bytes / total) * 100).toFixed(1)}%</td></tr>`);
  const gcs = d.gcCount !== undefined ? ` (after ${fmtCount(d.gcCount)} GCs)` : '';
  return `<p>${fmtCount(d.objects ?? 0)} objects, ${fmtBytes(d.bytes ?? 0)} in ${fmtCount(d.typeCount ?? types.length)} types${gcs}. To find a leak: take another GC heap snapshot later and press Compare.</p>
<label class="filter">Filter types <input type="search" class="heap-filter" autocomplete="off"></label>
<div class="table-wrap"><table class="data heap"><caption>Types by bytes (top ${rows.length} of ${types.length})</caption><thead><tr><th scope="col">Type</th><th scope="col">Count</th><th scope="col">Bytes</th><th scope="col">Share</th></tr></thead><tbody>${rows.join('')}</tbody></table></div>`;
}

function signed(n, f) {
  return n > 0 ? '+' + f(n) : n < 0 ? '−' + f(-n) : '0';
}

// heapDiff: the leak hunt: every type of either snapshot, by growth in bytes (then in count)
function heapDiff(before, after) {
  const m = new Map();
  for (const t of heapTypes(before)) m.set(t.type, { type: t.type, b0: t.bytes, c0: t.count, b1: 0, c1: 0 });
  for (const t of heapTypes(after)) {
    const e = m.get(t.type) || { type: t.type, b0: 0, c0: 0, b1: 0, c1: 0 };
    e.b1 = t.bytes;
    e.c1 = t.count;
    m.set(t.type, e);
  }
  const rows = [...m.values()].sort((x, y) => (y.b1 - y.b0) - (x.b1 - x.b0) || (y.c1 - y.c0) - (x.c1 - x.c0));
  const top = rows[0];
  const n = (v) => num(v) || 0;
  const db = n(after.bytes) - n(before.bytes);
  const dc = n(after.objects) - n(before.objects);
  const bc = (n) => fmtBytes(n);
  const cls = (n) => (n > 0 ? 'up' : n < 0 ? 'down' : '');
  const lead = top && top.b1 > top.b0
    ? `Grew most: <strong>${esc(top.type)}</strong>, ${signed(top.b1 - top.b0, bc)} (${signed(top.c1 - top.c0, fmtCount)} objects).`
    : 'No type grew.';
  const body = rows.slice(0, 300).map((r) => `<tr><th scope="row">${esc(r.type)}</th><td class="num">${fmtBytes(r.b0)}</td><td class="num">${fmtBytes(r.b1)}</td><td class="num ${cls(r.b1 - r.b0)}">${signed(r.b1 - r.b0, bc)}</td><td class="num">${fmtCount(r.c0)}</td><td class="num">${fmtCount(r.c1)}</td><td class="num ${cls(r.c1 - r.c0)}">${signed(r.c1 - r.c0, fmtCount)}</td></tr>`);
  return `<p>The heap ${db >= 0 ? 'grew' : 'shrank'} by ${fmtBytes(Math.abs(db))} (${signed(dc, fmtCount)} objects). ${lead}</p>
<label class="filter">Filter types <input type="search" class="heap-filter" autocomplete="off"></label>
<div class="table-wrap"><table class="data heap"><caption>Types by growth in bytes, before → after (top ${body.length} of ${rows.length})</caption><thead><tr><th scope="col">Type</th><th scope="col">Bytes before</th><th scope="col">Bytes after</th><th scope="col">Δ bytes</th><th scope="col">Count before</th><th scope="col">Count after</th><th scope="col">Δ count</th></tr></thead><tbody>${body.join('')}</tbody></table></div>`;
}

function filterHeap(e) {
  const f = e.target.value.trim().toLowerCase();
  for (const tr of $('artifact-body').querySelectorAll('table.heap tbody tr')) tr.hidden = !!f && !tr.cells[0].textContent.toLowerCase().includes(f);
}

// --- the router

function render(focus) {
  const v = readHash();
  const prev = S.view;
  S.view = v;
  const inProc = !!(v.t && v.p);
  $('list-view').hidden = inProc;
  $('process-view').hidden = !inProc;
  $('crumbs').hidden = !inProc;
  if (!inProc) {
    closeArtifact();
    closeProcess();
    document.title = 'diagport';
    renderList();
    return;
  }
  const fresh = openProcess();
  renderCaptures();
  if (v.a) openArtifact(focus && v.a !== prev.a);
  else closeArtifact();
  if (fresh && focus) $('proc-h').focus();
}

function wire() {
  const tb = $('processes').tBodies[0];
  tb.addEventListener('click', (e) => openRow(e.target.closest('tr.proc')));
  tb.addEventListener('keydown', (e) => {
    if ((e.key === 'Enter' || e.key === ' ') && e.target.matches('tr.proc')) {
      e.preventDefault();
      openRow(e.target);
    } else if ((e.key === 'ArrowDown' || e.key === 'ArrowUp') && e.target.matches('tr')) {
      e.preventDefault();
      const n = e.key === 'ArrowDown' ? e.target.nextElementSibling : e.target.previousElementSibling;
      if (n && n.tabIndex >= 0) n.focus();
    }
  });
  $('filter').addEventListener('input', renderList);
  $('refresh').addEventListener('click', async () => {
    try {
      await api('/api/refresh', { method: 'POST' });
      say('Refreshing the list…');
      setTimeout(loadProcs, 1200);
    } catch (e) {
      say(`Could not refresh: ${e.message}`);
    }
  });
  for (const b of document.querySelectorAll('button.cap')) b.addEventListener('click', () => startCapture(b.dataset.kind));
  $('artifacts').addEventListener('click', (e) => {
    const b = e.target.closest('button[data-act]');
    if (b) captureAction(b.dataset.act, b.dataset.id);
  });
  $('all-artifacts').addEventListener('change', renderCaptures);
  $('compare').addEventListener('click', () => {
    const b = $('compare-with').value;
    if (b) go({ t: S.view.t, p: S.view.p, a: S.view.a, b });
  });
  $('uncompare').addEventListener('click', () => go({ t: S.view.t, p: S.view.p, a: S.view.a }));
  $('close-artifact').addEventListener('click', () => go({ t: S.view.t, p: S.view.p }));
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && S.flame) resetZoom();
  });
  window.addEventListener('hashchange', () => render(true));
  window.addEventListener('resize', () => S.live && S.live.redraw());
}

async function main() {
  // this page loaded with the cookie: a link's gate (continue.js) may continue to it by itself again
  try {
    sessionStorage.removeItem('diagport-continue');
  } catch { /* no storage: the gate then shows its link */ }
  if (location.search === '?continue') history.replaceState(null, '', '/' + location.hash);
  wire();
  await Promise.all([loadProcs(), loadCaptures()]);
  render(false);
  setInterval(loadProcs, 5000);
  // the list of captures changes from other tabs too: a slow poll when none of ours runs
  setInterval(() => { if (!S.captures.some((c) => c.state === 'running')) loadCaptures(); }, 5000);
}

main();
