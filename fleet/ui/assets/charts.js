// charts.js - the live counters of `diagport ui`'s process view: one small canvas chart per counter with a
// minute of history, fed by /api/live (the agent's /livemetrics relayed as JSON text sequences: RS, one
// JSON reading, LF; a reading per counter a second). The stream ends after 300 s and is opened again while
// the view lasts; stop() aborts it when the view changes. A record is at most MAX_RECORD bytes: a stream
// that sends more without a record end is dropped (and the page says so) rather than held.

const HISTORY = 60; // readings (seconds) kept per chart
const MAX_RECORD = 64 * 1024;

// fmtBytes: B bytes in B, KB, MB...; '?' for anything but a finite number (what an agent sent in its place)
function fmtBytes(b) {
  if (typeof b !== 'number' || !Number.isFinite(b)) return '?';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (Math.abs(b) >= 1000 && i < u.length - 1) {
    b /= 1000;
    i++;
  }
  return (i === 0 ? Math.round(b) : b.toFixed(b < 10 ? 2 : 1)) + ' ' + u[i];
}

function fmtNum(v) {
  if (v >= 100) return Math.round(v).toLocaleString('en-US');
  return v.toFixed(v >= 10 ? 1 : 2);
}

// the counters charted, in this order; requests-per-second only appears for ASP.NET Core apps
// min: the scale's least top; cap: its most (CPU usage is a share of the machine's CPUs: never over 100 %)
const COUNTERS = [
  { key: 'System.Runtime/cpu-usage', title: 'CPU usage', fmt: (v) => fmtNum(v) + ' %', min: 100, cap: 100, colour: '#dc2626' },
  { key: 'System.Runtime/gc-heap-size', title: 'GC heap size', fmt: (v) => fmtBytes(v * 1e6), min: 1, colour: '#7c3aed' },
  { key: 'System.Runtime/alloc-rate', title: 'Allocation rate', fmt: (v) => fmtBytes(v) + '/s', min: 1e6, colour: '#ea580c' },
  { key: 'System.Runtime/threadpool-queue-length', title: 'Thread pool queue', fmt: (v) => fmtNum(v) + ' items', min: 5, colour: '#0891b2' },
  { key: 'System.Runtime/working-set', title: 'Working set', fmt: (v) => fmtBytes(v * 1e6), min: 1, colour: '#2563eb' },
  { key: 'Microsoft.AspNetCore.Hosting/requests-per-second', title: 'Requests per second', fmt: (v) => fmtNum(v) + ' /s', min: 5, colour: '#16a34a', optional: true },
];

class Chart {
  constructor(parent, spec) {
    this.spec = spec;
    this.values = [];
    this.fig = document.createElement('figure');
    this.fig.className = 'chart';
    const cap = document.createElement('figcaption');
    const t = document.createElement('span');
    t.textContent = spec.title;
    this.now = document.createElement('span');
    this.now.className = 'now';
    this.now.textContent = '…';
    cap.append(t, this.now);
    this.canvas = document.createElement('canvas');
    this.canvas.setAttribute('role', 'img');
    this.canvas.setAttribute('aria-label', spec.title + ' over the last minute: no reading yet');
    this.fig.append(cap, this.canvas);
    if (spec.optional) this.fig.hidden = true;
    parent.appendChild(this.fig);
  }

  push(v) {
    this.values.push(v);
    if (this.values.length > HISTORY) this.values.shift();
    this.fig.hidden = false;
    const s = this.spec.fmt(v);
    this.now.textContent = s;
    this.draw();
    this.canvas.setAttribute('aria-label', `${this.spec.title} over the last minute: now ${s} (scale 0 to ${this.spec.fmt(this.max())})`);
  }

  // max: the top of the scale: a tenth above the highest reading, at least the counter's min, at most its cap
  max() {
    let max = this.spec.min;
    for (const v of this.values) if (v > max) max = v;
    return Math.min(max * 1.1, this.spec.cap ?? Infinity);
  }

  draw() {
    const c = this.canvas;
    const w = c.clientWidth;
    const h = c.clientHeight;
    if (w === 0) return;
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    const max = this.max();
    g.strokeStyle = '#e4e4e7';
    g.lineWidth = 1;
    for (let i = 1; i < 4; i++) {
      const y = Math.round((h * i) / 4) + 0.5;
      g.beginPath();
      g.moveTo(0, y);
      g.lineTo(w, y);
      g.stroke();
    }
    g.fillStyle = '#71717a';
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'top';
    g.fillText(this.spec.fmt(max), 3, 2);
    const n = this.values.length;
    if (n === 0) return;
    const step = w / (HISTORY - 1);
    const x0 = w - (n - 1) * step;
    const y = (v) => h - 1 - (Math.min(v, max) / max) * (h - 2);
    g.beginPath();
    g.moveTo(x0, y(this.values[0]));
    for (let i = 1; i < n; i++) g.lineTo(x0 + i * step, y(this.values[i]));
    g.strokeStyle = this.spec.colour;
    g.lineWidth = 1.5;
    g.stroke();
    g.lineTo(x0 + (n - 1) * step, h);
    g.lineTo(x0, h);
    g.closePath();
    g.globalAlpha = 0.12;
    g.fillStyle = this.spec.colour;
    g.fill();
    g.globalAlpha = 1;
  }
}

// LiveCharts: the charts of one process in CONTAINER, STATUS saying whether readings come
export class LiveCharts {
  constructor(container, status, target, pid) {
    this.status = status;
    this.url = `/api/live?target=${encodeURIComponent(target)}&pid=${encodeURIComponent(pid)}`;
    container.textContent = '';
    this.charts = new Map(COUNTERS.map((s) => [s.key, new Chart(container, s)]));
    this.ac = null;
    this.stopped = false;
    this.timer = 0;
  }

  start() {
    this.run();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ac) this.ac.abort();
  }

  async run() {
    this.ac = new AbortController();
    let ok = false;
    this.status.textContent = 'Connecting to the process’s counters…';
    try {
      const r = await fetch(this.url, { signal: this.ac.signal });
      if (!r.ok) throw new Error(await problemOf(r));
      const rd = r.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await rd.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const rec = buf.slice(0, i).replace(/^\x1e/, '').trim();
          buf = buf.slice(i + 1);
          if (rec === '') continue;
          let m;
          try {
            m = JSON.parse(rec);
          } catch {
            continue;
          }
          const ch = this.charts.get(m.provider + '/' + m.name);
          if (ch && typeof m.value === 'number') {
            ch.push(m.value);
            if (!ok) this.status.textContent = 'Live: a reading a second.';
            ok = true;
          }
        }
        // what is left is part of one record
        if (buf.length > MAX_RECORD) {
          this.stopped = true;
          this.ac.abort();
          this.status.textContent = `No live counters: the agent sent over ${MAX_RECORD / 1024} KiB without a record end, so the stream was dropped (open the process again to retry).`;
          return;
        }
      }
    } catch (e) {
      if (this.stopped) return;
      this.status.textContent = `No live counters (${e.message}); trying again in 5 s.`;
      this.timer = setTimeout(() => this.run(), 5000);
      return;
    }
    // the agent's stream lasts 300 s: open the next one
    if (!this.stopped) this.timer = setTimeout(() => this.run(), ok ? 0 : 5000);
  }

  redraw() {
    for (const c of this.charts.values()) c.draw();
  }
}

// problemOf: what an error answer R says: its problem's detail (or title), else its status. The server's
// own refusals and an agent's refusal it relays (502, "Refused by the agent") both come as problem+json.
export async function problemOf(r) {
  let text = '';
  try {
    text = await r.text();
  } catch { /* the body could not be read: the status says enough */ }
  try {
    const p = JSON.parse(text);
    const str = (x) => (typeof x === 'string' ? x : '');
    if (p && (str(p.detail) || str(p.title))) return str(p.detail) || str(p.title);
  } catch { /* not JSON */ }
  return `the server answered ${r.status}${r.statusText ? ' ' + r.statusText : ''}`;
}

export { fmtBytes };
