// flame.js - the flame graph of `diagport ui`: CPU profiles (folded stacks) and stack listings read into a
// call tree, drawn on a canvas (root at the top, each frame as wide as its share of samples), with zoom,
// search, a hover tooltip and the top-frames table that is the graph's text alternative; and the diff of
// two profiles, drawn in the newer profile's shape and coloured by how much each frame's share of samples
// grew (red) or shrank (blue).
//
// A 50 MB profile must render in under 2 s: the text is read in one pass (indexOf, no split of the whole
// text), each node keeps its children in a Map keyed by frame string, and only frames at least one pixel
// wide are laid out and drawn.

const ROW = 18; // px per stack level
const FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

function node(name, parent) {
  return { name, parent, total: 0, self: 0, kids: null, sorted: null };
}

function child(n, name) {
  if (n.kids === null) n.kids = new Map();
  let c = n.kids.get(name);
  if (c === undefined) {
    c = node(name, n);
    n.kids.set(name, c);
  }
  return c;
}

// parseFolded: "root;child;leaf COUNT" per line (Brendan Gregg's folded stacks, what the agent's
// format=folded gives) -> the call tree's root ("all"). A line whose count is not a finite positive number
// (Infinity, NaN, -4: not an agent's) is skipped, as is one that would make the total infinite.
export function parseFolded(text) {
  const root = node('all', null);
  const len = text.length;
  let pos = 0;
  while (pos < len) {
    let end = text.indexOf('\n', pos);
    if (end < 0) end = len;
    let le = end;
    if (le > pos && text.charCodeAt(le - 1) === 13) le--;
    const sp = text.lastIndexOf(' ', le - 1);
    if (sp > pos) {
      const count = Number(text.slice(sp + 1, le));
      if (count > 0 && Number.isFinite(count) && Number.isFinite(root.total + count)) {
        root.total += count;
        let n = root;
        let s = pos;
        while (s < sp) {
          let e = text.indexOf(';', s);
          if (e < 0 || e > sp) e = sp;
          n = child(n, text.slice(s, e));
          n.total += count;
          s = e + 1;
        }
        n.self += count;
      }
    }
    pos = end + 1;
  }
  return root;
}

// parseStacks: the agent's /stacks?format=json (a thread per entry, frames innermost first) -> one
// sample per thread, its outermost frame at the root; frames named as the folded format names them
export function parseStacks(threads) {
  const root = node('all', null);
  for (const t of threads) {
    const f = t.frames || [];
    let n = root;
    root.total++;
    for (let i = f.length - 1; i >= 0; i--) {
      const fr = f[i];
      const name = (fr.moduleName ? fr.moduleName + '!' : '') + (fr.typeName ? fr.typeName + '.' : '') + (fr.methodName || '?');
      n = child(n, name);
      n.total++;
    }
    n.self++;
  }
  return root;
}

function sortedKids(n) {
  if (n.sorted === null) n.sorted = n.kids === null ? [] : [...n.kids.values()].sort((a, b) => b.total - a.total || (a.name < b.name ? -1 : 1));
  return n.sorted;
}

// pathOf: the frames from the root's child down to n, joined by ';' (the fragment's z)
export function pathOf(n) {
  const names = [];
  for (; n !== null && n.parent !== null; n = n.parent) names.push(n.name);
  return names.reverse().join(';');
}

// find: the node at PATH (as pathOf gives it), or null
export function find(root, path) {
  if (!path) return root;
  let n = root;
  for (const name of path.split(';')) {
    n = n.kids === null ? undefined : n.kids.get(name);
    if (n === undefined) return null;
  }
  return n;
}

// shortName: the frame without its module ("console.dll!Program.Spin" -> "Program.Spin")
export function shortName(name) {
  const i = name.indexOf('!');
  return i >= 0 ? name.slice(i + 1) : name;
}

// functions: per frame name under TOP (and TOP's own with WITHTOP: a zoomed frame is in its own table):
// self samples, total samples (a recursive frame counted once per stack), and its heaviest node (where
// Enter in the table zooms to)
export function functions(top, withTop = false) {
  const m = new Map();
  const onPath = new Map();
  const walk = (n) => {
    let f = m.get(n.name);
    if (f === undefined) {
      f = { name: n.name, self: 0, total: 0, best: n };
      m.set(n.name, f);
    }
    f.self += n.self;
    const depth = onPath.get(n.name) || 0;
    if (depth === 0) f.total += n.total;
    if (n.total > f.best.total) f.best = n;
    onPath.set(n.name, depth + 1);
    if (n.kids !== null) for (const c of n.kids.values()) walk(c);
    onPath.set(n.name, depth);
  };
  if (withTop) walk(top);
  else if (top.kids !== null) for (const c of top.kids.values()) walk(c);
  return m;
}

function hash(s) {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

function pct(x) {
  return (x * 100).toFixed(x < 0.001 && x > 0 ? 3 : 1) + '%';
}

function signedPct(x) {
  return (x > 0 ? '+' : x < 0 ? '−' : '±') + (Math.abs(x) * 100).toFixed(1);
}

// num: V if it is a finite number, else NaN: what an agent sends is a number only if it is one (a string in
// its place, markup perhaps, is never formatted or written into the page)
export function num(v) {
  return typeof v === 'number' && Number.isFinite(v) ? v : NaN;
}

// fmtCount: a count with thousands separators; '?' for anything but a finite number
export function fmtCount(n) {
  const x = num(n);
  return Number.isNaN(x) ? '?' : x.toLocaleString('en-US');
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// FlameGraph: the graph in ROOT_EL (the role="img" element, a canvas inside), its table in TABLE, the
// search box's message in INFO. onZoom(path) when a click or the table changes the zoom.
export class FlameGraph {
  constructor(imgEl, table, info, tooltip, onZoom) {
    this.el = imgEl;
    this.table = table;
    this.info = info;
    this.tip = tooltip;
    this.onZoom = onZoom;
    this.canvas = document.createElement('canvas');
    this.el.appendChild(this.canvas);
    this.root = null;
    this.base = null; // the older profile of a diff
    this.zoom = null;
    this.query = '';
    this.rects = [];
    this.canvas.addEventListener('click', (e) => this.click(e));
    this.canvas.addEventListener('mousemove', (e) => this.hover(e));
    this.canvas.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    // the keyboard as in the process table: Enter (or Space) zooms, the arrows move between rows
    this.table.addEventListener('keydown', (e) => {
      const tr = e.target.closest('tr[data-i]');
      if (!tr) return;
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        this.zoomToRow(tr);
      } else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
        e.preventDefault();
        const n = e.key === 'ArrowDown' ? tr.nextElementSibling : tr.previousElementSibling;
        if (n) n.focus();
      }
    });
    this.table.addEventListener('click', (e) => {
      const tr = e.target.closest('tr[data-i]');
      if (tr) this.zoomToRow(tr);
    });
    this.width = 0;
    this.ro = new ResizeObserver(() => {
      if (this.el.clientWidth !== this.width) this.draw();
    });
    this.ro.observe(this.el);
  }

  destroy() {
    this.ro.disconnect();
  }

  // show: ROOT (and BASE, the older profile, for a diff); ZOOM a path, QUERY the search
  show(root, base, zoom, query) {
    this.root = root;
    this.base = base;
    if (base) this.baseFns = functions(base);
    this.zoom = find(root, zoom) || root;
    this.query = query || '';
    this.lq = this.query.toLowerCase();
    this.update();
  }

  setZoom(path) {
    const z = find(this.root, path) || this.root;
    if (z === this.zoom) return;
    this.zoom = z;
    this.update();
  }

  setQuery(q) {
    if (q === this.query) return;
    this.query = q;
    this.lq = q.toLowerCase();
    this.draw();
    this.searchInfo();
  }

  update() {
    this.draw();
    this.fillTable();
    this.searchInfo();
  }

  zoomTo(n) {
    this.zoom = n;
    this.update();
    this.onZoom(pathOf(n));
  }

  zoomToRow(tr) {
    const f = this.rows[Number(tr.dataset.i)];
    if (f) this.zoomTo(f.best);
  }

  matches(n) {
    return this.query !== '' && n.name.toLowerCase().includes(this.lq);
  }

  // baseShare: the share of the base profile's samples in the frame at N's path
  baseShare(n) {
    const names = [];
    for (let m = n; m.parent !== null; m = m.parent) names.push(m.name);
    let b = this.base;
    for (let i = names.length - 1; i >= 0 && b; i--) b = b.kids === null ? undefined : b.kids.get(names[i]);
    return b && this.base.total > 0 ? b.total / this.base.total : 0;
  }

  colour(n, dim) {
    if (this.base) {
      // a search in a diff: what does not match fades, what matches keeps its colour
      if (this.query !== '' && !this.matches(n)) return '#f4f4f5';
      const d = n.share - n.before;
      const k = Math.min(1, Math.abs(d) / this.maxDelta);
      if (Math.abs(d) < 0.0005 || k < 0.02) return this.query !== '' ? '#a1a1aa' : '#e6e6e6';
      const l = 92 - 42 * k;
      return d > 0 ? `hsl(0 75% ${l}%)` : `hsl(215 75% ${l}%)`;
    }
    if (this.query !== '') return this.matches(n) ? '#c026d3' : '#e4e4e7';
    const h = hash(n.name);
    const bang = n.name.indexOf('!');
    const mod = bang > 0 ? n.name.slice(0, bang) : '';
    // managed runtime frames in a cooler yellow, the app's own in warm orange-red, natives grey-brown
    const hue = mod.startsWith('System.') || mod.startsWith('Microsoft.') ? 45 : mod === '' ? 25 : 12;
    return `hsl(${hue + (h % 12)} ${dim ? 30 : 70 + (h >> 8) % 20}% ${58 + (h >> 16) % 14}%)`;
  }

  // layout: the frames to draw (at least 1 px wide), as rects [x, w, depth, node, dim]
  layout(width) {
    const rects = [];
    const chain = [];
    for (let n = this.zoom; n !== null; n = n.parent) chain.push(n);
    chain.reverse();
    // the zoomed frame's ancestors, full width and muted, above it
    for (let d = 0; d < chain.length - 1; d++) rects.push([0, width, d, chain[d], true]);
    const top = this.zoom;
    const scale = width / top.total;
    const diff = this.base !== null;
    let maxDelta = 0;
    const walk = (n, x, depth) => {
      const w = n.total * scale;
      if (w < 1) return;
      if (diff) {
        n.share = n.total / this.root.total;
        n.before = this.baseShare(n);
        maxDelta = Math.max(maxDelta, Math.abs(n.share - n.before));
      }
      rects.push([x, w, depth, n, false]);
      for (const c of sortedKids(n)) {
        const cw = c.total * scale;
        if (cw < 1) break; // sorted by total: the rest are narrower
        walk(c, x, depth + 1);
        x += cw;
      }
    };
    walk(top, 0, chain.length - 1);
    if (diff) {
      this.maxDelta = Math.max(maxDelta, 0.01);
      for (const r of rects) if (r[4]) { r[3].share = r[3].total / this.root.total; r[3].before = this.baseShare(r[3]); }
    }
    return rects;
  }

  draw() {
    if (!this.root) return;
    const width = this.el.clientWidth;
    this.width = width;
    if (width === 0) return;
    const rects = this.layout(width);
    let depth = 0;
    for (const r of rects) if (r[2] > depth) depth = r[2];
    const height = (depth + 1) * ROW;
    const dpr = window.devicePixelRatio || 1;
    const c = this.canvas;
    c.width = Math.round(width * dpr);
    c.height = Math.round(height * dpr);
    c.style.width = width + 'px';
    c.style.height = height + 'px';
    const g = c.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, width, height);
    g.font = FONT;
    g.textBaseline = 'middle';
    const charW = g.measureText('m').width * 0.85;
    for (const [x, w, d, n, dim] of rects) {
      const y = d * ROW;
      g.fillStyle = this.colour(n, dim);
      g.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
      if (w > 28) {
        const label = n === this.root ? `all (${fmtCount(n.total)} samples)` : shortName(n.name);
        const fit = Math.floor((w - 8) / charW);
        const text = label.length > fit ? label.slice(0, Math.max(fit - 1, 1)) + '…' : label;
        g.fillStyle = dim ? '#52525b' : '#18181b';
        g.fillText(text, x + 4, y + ROW / 2);
      }
    }
    this.rects = rects;
  }

  at(e) {
    const b = this.canvas.getBoundingClientRect();
    const x = e.clientX - b.left;
    const d = Math.floor((e.clientY - b.top) / ROW);
    for (const r of this.rects) if (r[2] === d && x >= r[0] && x < r[0] + r[1]) return r[3];
    return null;
  }

  click(e) {
    const n = this.at(e);
    if (n) this.zoomTo(n);
  }

  hover(e) {
    const n = this.at(e);
    if (!n) {
      this.tip.hidden = true;
      return;
    }
    const all = this.root.total;
    let s = `<strong>${esc(n === this.root ? 'all' : n.name)}</strong><br>${fmtCount(n.total)} samples (${pct(n.total / all)}), self ${fmtCount(n.self)} (${pct(n.self / all)})`;
    if (this.base) s += `<br>before ${pct(n.before)}, after ${pct(n.share)}: ${signedPct(n.share - n.before)} points`;
    s += '<br><em>click to zoom</em>';
    this.tip.innerHTML = s;
    this.tip.hidden = false;
    const b = this.el.getBoundingClientRect();
    const x = e.clientX - b.left + 14;
    this.tip.style.left = Math.min(x, Math.max(0, b.width - 340)) + 'px';
    this.tip.style.top = e.clientY - b.top + 18 + 'px';
  }

  // searchInfo: how many frames match the search and what share of samples they hold
  searchInfo() {
    if (this.query === '') {
      this.info.textContent = '';
      return;
    }
    let frames = 0;
    let samples = 0;
    const names = new Set();
    const walk = (n, under) => {
      const m = this.matches(n);
      if (m) {
        frames++;
        names.add(n.name);
        if (!under) samples += n.total;
      }
      if (n.kids !== null) for (const c of n.kids.values()) walk(c, under || m);
    };
    walk(this.root, false);
    this.info.textContent = frames === 0 ? 'No frame matches.'
      : `${fmtCount(frames)} frame${frames === 1 ? '' : 's'} (${names.size} function${names.size === 1 ? '' : 's'}) match, ${pct(samples / this.root.total)} of samples.`;
  }

  // fillTable: the top 50 functions under the zoomed frame by self samples (a diff: whole profiles, by
  // growth of their share of self samples)
  fillTable() {
    // the table is rebuilt: the keyboard's place (a row's frame) is kept, not dropped to <body>
    const a = document.activeElement;
    const tb = this.table.tBodies[0];
    const had = a && a !== tb && tb.contains(a) && this.rows ? this.rows[Number(a.dataset.i)]?.name : undefined;
    const all = this.zoom.total || 1;
    const fns = [...functions(this.base ? this.root : this.zoom, !this.base && this.zoom !== this.root).values()];
    let head;
    let body = '';
    if (this.base) {
      const total = this.root.total || 1;
      const btotal = this.base.total || 1;
      const bf = this.baseFns;
      const names = new Set([...fns.map((f) => f.name), ...bf.keys()]);
      const mine = new Map(fns.map((f) => [f.name, f]));
      const rows = [];
      for (const name of names) {
        const a = bf.get(name);
        const b = mine.get(name);
        const sb = a ? a.self / btotal : 0;
        const sa = b ? b.self / total : 0;
        const tb = a ? a.total / btotal : 0;
        const ta = b ? b.total / total : 0;
        rows.push({ name, best: b ? b.best : null, sb, sa, tb, ta });
      }
      rows.sort((x, y) => (y.sa - y.sb) - (x.sa - x.sb) || (y.ta - y.tb) - (x.ta - x.tb));
      this.rows = rows.slice(0, 50);
      this.table.querySelector('caption').textContent = `Frames by growth of their share of samples (self time; change in percentage points); top ${this.rows.length} of ${rows.length}`;
      head = '<tr><th scope="col">Frame</th><th scope="col">Self, before → after</th><th scope="col">Δ self</th><th scope="col">Total, before → after</th><th scope="col">Δ total</th></tr>';
      const cls = (d) => (d >= 0.0005 ? 'up' : d <= -0.0005 ? 'down' : '');
      this.rows.forEach((r, i) => {
        const ds = r.sa - r.sb;
        const dt = r.ta - r.tb;
        body += `<tr tabindex="0" data-i="${i}"><th scope="row" title="${esc(r.name)}">${esc(shortName(r.name))}</th><td>${pct(r.sb)} → ${pct(r.sa)}</td><td class="${cls(ds)}">${signedPct(ds)}</td><td>${pct(r.tb)} → ${pct(r.ta)}</td><td class="${cls(dt)}">${signedPct(dt)}</td></tr>`;
      });
    } else {
      fns.sort((x, y) => y.self - x.self || y.total - x.total);
      this.rows = fns.slice(0, 50);
      const where = this.zoom === this.root ? '' : ` under ${shortName(this.zoom.name)}`;
      this.table.querySelector('caption').textContent = `Top frames${where} by self time (samples in the frame itself), ${fmtCount(all)} samples; top ${this.rows.length} of ${fns.length}`;
      head = '<tr><th scope="col">Frame</th><th scope="col">Self</th><th scope="col">Self %</th><th scope="col">Total</th><th scope="col">Total %</th></tr>';
      this.rows.forEach((f, i) => {
        body += `<tr tabindex="0" data-i="${i}"><th scope="row" title="${esc(f.name)}">${esc(shortName(f.name))}</th><td>${fmtCount(f.self)}</td><td>${pct(f.self / all)}</td><td>${fmtCount(f.total)}</td><td>${pct(f.total / all)}</td></tr>`;
      });
    }
    this.table.tHead.innerHTML = head;
    tb.innerHTML = body;
    if (had !== undefined) {
      const i = this.rows.findIndex((r) => r.name === had);
      const to = tb.rows[i >= 0 ? i : 0];
      if (to) to.focus();
      else {
        this.table.tabIndex = -1;
        this.table.focus();
      }
    }
  }
}
