// bench/ui_page.mjs URL ROWS ROUNDS PROFILE_MB DIR - the browser half of bench/ui.sh: Debian's Chromium (headless)
// driven by playwright-core against a running `diagport ui` (URL: the one it printed, with its secret). Prints one
// JSON document on stdout:
//   weight         the bytes of every response of the first load, by file
//   firstRender    ms from navigation start to the process table holding ROWS rows, ROUNDS fresh pages
//   captureStarted ms from the "CPU profile" button pressed to the capture's row saying running, ROUNDS times
//   flame          ms for the page's own flame graph (flame.js, imported in the page) to parse a PROFILE_MB MB
//                  folded profile, lay it out, draw it and paint the next frame, ROUNDS times (flameParse: the
//                  parse alone)
//   speedscope     ms for speedscope's viewer (its npm package, served here from loopback) to open the same file
//                  (navigation start to its title naming the file), ROUNDS times
import { createRequire } from 'node:module';
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(new URL('../tests/validate/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const [url, rowsArg, roundsArg, mbArg, dir] = process.argv.slice(2);
const ROWS = Number(rowsArg), ROUNDS = Number(roundsArg), MB = Number(mbArg);

// A deterministic profile of about MB megabytes: stacks 20 to 60 frames deep drawn from 4,000 method names
// (Namespace.Type.Method in modules), shared prefixes as real call trees have, counts 1 to 50.
function profileText(mb) {
  let seed = 12345;
  const rnd = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
  const frames = [];
  for (let i = 0; i < 4000; i++)
    frames.push(`App${i % 7}.dll!Company.Service${i % 53}.Component${i % 311}.Method${i}`);
  const lines = [];
  let bytes = 0;
  const prefixes = [];
  for (let i = 0; i < 200; i++) {
    const p = [];
    const d = 10 + rnd(20);
    for (let k = 0; k < d; k++) p.push(frames[rnd(frames.length)]);
    prefixes.push(p);
  }
  while (bytes < mb * 1e6) {
    const stack = prefixes[rnd(prefixes.length)].slice();
    const extra = 10 + rnd(30);
    for (let k = 0; k < extra; k++) stack.push(frames[rnd(frames.length)]);
    const line = `${stack.join(';')} ${1 + rnd(50)}`;
    lines.push(line);
    bytes += line.length + 1;
  }
  return { text: lines.join('\n') + '\n', lines: lines.length, frames: frames.length };
}

const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const out = { rows: ROWS, profileMB: MB, weight: { bytes: 0, requests: 0, files: {} }, firstRender: [],
              captureStarted: [], flame: [], flameParse: [], speedscope: [] };
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true });
try {
  // the cookie, once: the URL with the secret redirects to the page
  const ctx = await browser.newContext();
  const first = await ctx.newPage();
  first.on('response', async (r) => {
    try {
      const b = await r.body();
      const name = new URL(r.url()).pathname;
      if (name.startsWith('/api/')) return;
      out.weight.bytes += b.length;
      out.weight.requests++;
      out.weight.files[name] = b.length;
    } catch { /* a redirect has no body */ }
  });
  await first.goto(url);
  await first.waitForFunction((n) => document.querySelectorAll('#processes tbody tr').length >= n, ROWS,
                              { timeout: 60000 });
  const base = new URL(url).origin;

  for (let i = 0; i < ROUNDS; i++) {
    const p = await ctx.newPage();
    await p.goto(base + '/');
    const ms = await p.waitForFunction((n) => document.querySelectorAll('#processes tbody tr').length >= n
      ? performance.now() : 0, ROWS, { timeout: 60000, polling: 'raf' });
    out.firstRender.push(Math.round(await ms.jsonValue()));
    await p.close();
  }

  // a capture started: the first process's view, then the button
  await first.locator('#processes tbody tr').first().click();
  await first.locator('button.cap[data-kind="cpuprofile"]').waitFor();
  await first.fill('#cpu-duration', '1');
  for (let i = 0; i < ROUNDS; i++) {
    const before = await first.locator('#artifacts tbody tr').count();
    const t = await first.evaluate(() => {
      window.__t0 = performance.now();
      document.querySelector('button.cap[data-kind="cpuprofile"]').click();
      return window.__t0;
    });
    const end = await first.waitForFunction((n) => {
      const rows = document.querySelectorAll('#artifacts tbody tr');
      return rows.length > n && /running/i.test(rows[0].textContent) ? performance.now() : 0;
    }, before, { timeout: 10000, polling: 'raf' });
    out.captureStarted.push(Math.round((await end.jsonValue()) - t));
    await first.waitForFunction(() => !/running/i.test(document.querySelector('#artifacts tbody tr').textContent),
                                null, { timeout: 60000 });
  }

  // the 50 MB flame graph, in the page (the text handed over first, not timed)
  const prof = profileText(MB);
  out.profileLines = prof.lines;
  out.profileFrames = prof.frames;
  const file = path.join(dir, 'big.folded');
  fs.writeFileSync(file, prof.text);
  for (let i = 0; i < ROUNDS; i++) {
    const r = await first.evaluate(async (text) => {
      const m = await import('/flame.js');
      const host = document.createElement('div');
      host.style.width = '1200px';
      document.body.appendChild(host);
      const img = document.createElement('div');
      img.setAttribute('role', 'img');
      const table = document.createElement('table');
      table.appendChild(document.createElement('caption'));
      table.appendChild(document.createElement('thead'));
      table.appendChild(document.createElement('tbody'));
      const info = document.createElement('span');
      const tip = document.createElement('div');
      host.append(img, table, info, tip);
      const t0 = performance.now();
      const root = m.parseFolded(text);
      const t1 = performance.now();
      const g = new m.FlameGraph(img, table, info, tip, () => {});
      g.show(root, null, null, '');
      await new Promise((res) => requestAnimationFrame(() => res()));
      const t2 = performance.now();
      g.destroy();
      host.remove();
      return { parse: t1 - t0, all: t2 - t0, bytes: text.length };
    }, prof.text);
    if (Math.abs(r.bytes - prof.text.length) > 0) throw new Error(`the page's profile is ${r.bytes} bytes, not ${prof.text.length}`);
    out.flameParse.push(Math.round(r.parse));
    out.flame.push(Math.round(r.all));
  }

  // speedscope, the same file, from a loopback server of its own
  const release = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
  const srv = http.createServer((req, res) => {
    const name = decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/^\/+/, '') || 'index.html';
    const f = name === 'big.folded' ? file : path.join(release, path.basename(name));
    fs.readFile(f, (err, data) => {
      if (err) { res.writeHead(404); res.end(); return; }
      res.writeHead(200, { 'Access-Control-Allow-Origin': '*' });
      res.end(data);
    });
  });
  await new Promise((res) => srv.listen(0, '127.0.0.1', res));
  const sp = `http://127.0.0.1:${srv.address().port}`;
  for (let i = 0; i < ROUNDS; i++) {
    const p = await browser.newPage();
    await p.goto(`${sp}/index.html#profileURL=${encodeURIComponent(sp + '/big.folded')}`);
    const ms = await p.waitForFunction(() => document.title.startsWith('big.folded') ? performance.now() : 0, null,
                                       { timeout: 120000, polling: 'raf' });
    out.speedscope.push(Math.round(await ms.jsonValue()));
    await p.close();
  }
  srv.close();
  out.median = { firstRender: median(out.firstRender), captureStarted: median(out.captureStarted),
                 flame: median(out.flame), speedscope: median(out.speedscope) };
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out) + '\n');
