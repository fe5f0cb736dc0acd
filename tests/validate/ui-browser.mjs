// ui-browser.mjs - `diagport ui`'s page in a real browser (Debian's Chromium, headless, driven by
// playwright-core), against the real server, a real agent and the real test webapp; called by
// tests/integration/ui.sh, which starts them. Prints one "PASS PREFIX/NAME" or "FAIL PREFIX/NAME: why" line
// per check; every check runs every time (a check whose step before failed fails saying so).
//
// env: UI_URL (the URL diagport ui printed, secret included), HOSTILE_UI (a second one's, for a hostile
// stand-in agent named hostile and the real agent named refusing, given a wrong token), AGENT_URL (the real
// agent), APP_URL (the webapp), APP_PID, APP_NAME
// (the process name the list shows), TOKEN (the agent's: in no answer the page gets), SHOTS (a directory for a screenshot of each view), PREFIX
// (integration/ui), CHROMIUM (/usr/bin/chromium); DOC_PNG: also write the flame graph view there (the
// README's picture, made by hand: UI_DOC_PNG=docs/ui.png tests/integration/ui.sh).
import { chromium, request } from 'playwright-core';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const env = (k, d) => process.env[k] || d;
const UI = env('UI_URL');
const APP = env('APP_URL');
const PID = env('APP_PID');
const NAME = env('APP_NAME', 'webapp');
const SHOTS = env('SHOTS', '/tmp');
const PREFIX = env('PREFIX', 'integration/ui');
const base = new URL(UI).origin;
const HOSTILE_UI = env('HOSTILE_UI');
const hbase = new URL(HOSTILE_UI).origin;
const AGENT = env('AGENT_URL');
const LONG = 120_000; // a capture on a shared, busy machine

let failed = 0;
const done = new Set();
async function check(name, fn, needs = []) {
  const missing = needs.filter((n) => !done.has(n));
  if (missing.length) {
    failed++;
    console.log(`FAIL ${PREFIX}/${name}: not checked: ${missing.join(', ')} failed before it`);
    return;
  }
  try {
    await fn();
    done.add(name);
    console.log(`PASS ${PREFIX}/${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${PREFIX}/${name}: ${String(e.message || e).split('\n').slice(0, 6).join(' | ')}`);
  }
}
function assert(ok, why) {
  if (!ok) throw new Error(why);
}
async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
}
const hashField = (url, k) => new URLSearchParams(new URL(url).hash.slice(1)).get(k);
// until: FN's value once truthy (Playwright's own polling, for a state the page reaches by itself)
async function until(page, fn, arg, timeout = 30_000) {
  return (await page.waitForFunction(fn, arg, { timeout, polling: 100 })).jsonValue();
}

const browser = await chromium.launch({ executablePath: env('CHROMIUM', '/usr/bin/chromium'), headless: true });
const ctx = await browser.newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true });
const page = await ctx.newPage();
const problems = [];
page.on('pageerror', (e) => problems.push('page error: ' + e.message));
page.on('console', (m) => {
  if (m.type() === 'error' && /Content.Security.Policy|Refused to/i.test(m.text())) problems.push('console: ' + m.text());
});
// every answer the page got, but the endless live stream and downloads, for token-not-in-page
const TOKEN = env('TOKEN', '');
const bodies = [];
ctx.on('response', (r) => {
  const u = r.url();
  if (u.includes('/api/live') || u.includes('download=1')) return;
  bodies.push({ u, p: r.text().then((t) => t + JSON.stringify(r.headers()), () => null) });
});
// a body that never ends (a relayed stream the page stopped reading) is not waited for
const settle = (p, ms) => Promise.race([p, new Promise((res) => setTimeout(() => res(null), ms))]);
// nothing here may hang the test run: a check that has not ended in 10 minutes is a failure
setTimeout(() => {
  console.log(`FAIL ${PREFIX}/watchdog: the browser checks did not end within 10 minutes`);
  process.exit(1);
}, 600_000).unref();
const artifacts = page.locator('#artifacts');
const artH = page.locator('#artifact-h');
const row = page.getByRole('row', { name: new RegExp(`· ${PID} ${NAME}\\b`) });

try {
  await check('secret-cookie', async () => {
    const r = await page.goto(UI);
    assert(r && r.ok(), `GET the printed URL: ${r && r.status()}`);
    assert(!page.url().includes('secret='), `the secret stays in the address bar: ${page.url()}`);
    // named per port (diagport-ui-PORT): two servers on one host keep their own
    const c = (await ctx.cookies(base)).find((x) => x.name.startsWith('diagport'));
    assert(c && c.httpOnly && c.sameSite === 'Strict', `cookie: ${JSON.stringify(c)}`);
  });

  await check('process-row', async () => {
    await row.waitFor({ timeout: 30_000 });
    const th = await row.getByRole('rowheader').textContent();
    assert(th.includes(`${PID} ${NAME}`), `row header: ${th}`);
    await shot(page, '1-processes');
  }, ['secret-cookie']);

  await check('mode-dash', async () => {
    // the 8th column: Mode; a static target (a URL) does not say how its agent was injected
    const cell = row.locator('td').nth(6);
    const text = await cell.textContent();
    const title = await cell.getAttribute('title');
    assert(text === '—', `the Mode cell says ${JSON.stringify(text)}, not a dash`);
    assert(/Not known/.test(title || ''), `the Mode cell's title: ${title}`);
  }, ['process-row']);

  await check('keyboard-open', async () => {
    await row.focus();
    await page.keyboard.press('Enter');
    await page.locator('#proc-h', { hasText: `${PID} ${NAME}` }).waitFor();
    assert(hashField(page.url(), 'p') === PID, `fragment: ${page.url()}`);
  }, ['process-row']);

  await check('live-charts', async () => {
    // a reading a second, relayed from the agent: every System.Runtime chart says a value
    for (const name of ['CPU usage', 'GC heap size', 'Working set']) {
      const now = page.locator('figure.chart', { hasText: name }).locator('.now');
      await now.filter({ hasText: /[0-9]/ }).waitFor({ timeout: 30_000 });
    }
    await page.locator('#live-status', { hasText: /^Live/ }).waitFor();
  }, ['keyboard-open']);

  await check('cpu-scale', async () => {
    // CPU usage is a share of the machine: its scale tops at 100 %, never "110 %"
    const label = await page.locator('figure.chart', { hasText: 'CPU usage' }).locator('canvas').getAttribute('aria-label');
    assert(/scale 0 to 100 %\)$/.test(label || ''), `the CPU chart: ${label}`);
  }, ['live-charts']);

  // a profile of the app idle, before it spins: the base of cpu-diff
  let idle = null;
  await check('cpu-profile-idle', async () => {
    await page.getByLabel('CPU profile duration in seconds').fill('2');
    await page.getByRole('button', { name: 'CPU profile', exact: true }).click();
    idle = await until(page, () => document.querySelector('#artifact-h').textContent.startsWith('CPU profile') &&
      new URLSearchParams(location.hash.slice(1)).get('a'), null, LONG);
    await page.getByRole('button', { name: 'Close' }).click();
  }, ['keyboard-open']);

  // the app burns CPU in HotLoop.Spin while the profile runs
  const hot = await fetch(`${APP}/high-cpu?seconds=90`).then((r) => r.status, (e) => e.message);

  await check('keyboard-capture', async () => {
    assert(hot === 200, `the webapp's /high-cpu: ${hot}`);
    await page.getByLabel('CPU profile duration in seconds').fill('4');
    await page.locator('#proc-h').focus();
    let on = '';
    for (let i = 0; i < 40 && on !== 'CPU profile'; i++) {
      await page.keyboard.press('Tab');
      on = await page.evaluate(() => (document.activeElement.tagName === 'BUTTON' ? document.activeElement.textContent : ''));
    }
    assert(on === 'CPU profile', 'Tab never reached the CPU profile button');
    await page.keyboard.press('Enter');
    await artifacts.getByRole('row', { name: /CPU profile \(4 s\)/ }).waitFor();
    await shot(page, '2-process');
  }, ['keyboard-open']);

  const img = page.getByRole('img', { name: /flame graph/ });
  await check('flame-graph', async () => {
    await img.waitFor({ timeout: LONG });
    const id = await img.getAttribute('aria-describedby');
    const table = page.locator(`#${id}`);
    const first = table.locator('tbody tr').first();
    await first.waitFor();
    const top = await first.getByRole('rowheader').textContent();
    assert(/HotLoop\.Spin/.test(top), `the top frame is ${top}, not HotLoop.Spin; table: ${(await table.textContent()).slice(0, 400)}`);
    assert(await img.locator('canvas').count() === 1, 'no canvas in the flame graph');
    await shot(page, '3-flame');
    if (process.env.DOC_PNG) await page.locator('#artifact-view').screenshot({ path: process.env.DOC_PNG });
  }, ['keyboard-capture']);

  await check('flame-search', async () => {
    await page.getByLabel('Search frames').fill('HotLoop');
    const info = page.locator('.flame-info');
    await info.filter({ hasText: /match, [0-9.]+% of samples/ }).waitFor();
    assert(hashField(page.url(), 'q') === 'HotLoop', `fragment: ${page.url()}`);
  }, ['flame-graph']);

  await check('frames-arrows', async () => {
    const rows = page.locator('table.frames tbody tr');
    assert(await rows.count() >= 2, 'fewer than two rows in the frames table');
    await rows.first().focus();
    await page.keyboard.press('ArrowDown');
    const second = await page.evaluate(() => document.activeElement === document.querySelectorAll('table.frames tbody tr')[1]);
    assert(second, 'ArrowDown did not move to the second row');
    await page.keyboard.press('ArrowUp');
    const first = await page.evaluate(() => document.activeElement === document.querySelector('table.frames tbody tr'));
    assert(first, 'ArrowUp did not move back to the first row');
  }, ['flame-graph']);

  let zoomedFrame = '';
  await check('flame-zoom-keyboard', async () => {
    const table = page.locator('table.frames');
    await table.locator('tbody tr').first().focus();
    zoomedFrame = await table.locator('tbody tr').first().getByRole('rowheader').textContent();
    await page.keyboard.press('Enter');
    await table.locator('caption', { hasText: /under .*Spin/ }).waitFor();
    assert(/Spin/.test(hashField(page.url(), 'z') || ''), `fragment: ${page.url()}`);
  }, ['flame-graph']);

  await check('frames-refocus', async () => {
    // the table was rebuilt by the zoom: the keyboard stays on the same frame's row
    const on = await page.evaluate(() => {
      const a = document.activeElement;
      return a && a.matches('table.frames tbody tr') ? a.querySelector('th').textContent : `<${a ? a.tagName : 'none'}>`;
    });
    assert(on === zoomedFrame, `after Enter the focus is on ${on}, not the row of ${zoomedFrame}`);
  }, ['flame-zoom-keyboard']);

  await check('fragment-reopens', async () => {
    const url = page.url();
    const p2 = await ctx.newPage();
    try {
      await p2.goto(url);
      for (const sel of ['#proc-h', '#artifact-h', 'table.frames caption']) {
        const want = await page.locator(sel).textContent();
        await p2.locator(sel, { hasText: want }).waitFor();
      }
      assert(await p2.getByLabel('Search frames').inputValue() === 'HotLoop', 'the search is not restored');
      await p2.getByRole('img', { name: /flame graph/ }).waitFor();
      await shot(p2, '4-reopened');
    } finally {
      await p2.close();
    }
  }, ['flame-zoom-keyboard', 'flame-search']);

  await check('escape-resets-zoom', async () => {
    await page.keyboard.press('Escape');
    await until(page, () => !new URLSearchParams(location.hash.slice(1)).get('z'));
    await page.locator('table.frames caption', { hasText: /^Top frames by self time/ }).waitFor();
  }, ['flame-zoom-keyboard']);

  // the spinning profile against the idle one: HotLoop.Spin grew most
  await check('cpu-diff', async () => {
    await page.getByLabel('Compare with').selectOption(idle);
    await page.getByRole('button', { name: 'Compare' }).click();
    await page.getByRole('img', { name: /^Diff flame graph/ }).waitFor();
    const first = page.locator('table.frames tbody tr').first();
    await page.locator('table.frames caption', { hasText: /by growth/ }).waitFor();
    const top = await first.getByRole('rowheader').textContent();
    assert(/HotLoop\.Spin/.test(top), `the frame that grew most is ${top}, not HotLoop.Spin`);
    assert(await first.locator('td.up').count() > 0, 'HotLoop.Spin is not marked as grown');
    await shot(page, '5-cpu-diff');
    await page.getByRole('button', { name: 'Stop comparing' }).click();
    await page.getByRole('img', { name: /^The flame graph/ }).waitFor();
  }, ['escape-resets-zoom', 'cpu-profile-idle']);

  // two stack listings compared: the diff flame graph
  await check('stacks-diff', async () => {
    await page.getByRole('button', { name: 'Close' }).click();
    const ids = [];
    for (let i = 0; i < 2; i++) {
      await page.getByRole('button', { name: 'Stacks', exact: true }).click();
      await until(page, (n) => {
        const a = new URLSearchParams(location.hash.slice(1)).get('a');
        return a && !n.includes(a) && document.querySelector('#artifact-h').textContent.startsWith('Stacks') && a;
      }, ids, LONG).then((a) => ids.push(a));
      await img.waitFor();
    }
    await page.getByLabel('Compare with').selectOption(ids[0]);
    await page.getByRole('button', { name: 'Compare' }).click();
    await page.getByRole('img', { name: /^Diff flame graph/ }).waitFor();
    await page.locator('table.frames caption', { hasText: /by growth/ }).waitFor();
    await shot(page, '6-stacks-diff');
  }, ['flame-graph']);

  // the leak hunt: a GC heap snapshot, the app retains 100,000 more LeakedOrder objects, another, compare
  await check('heap-diff-leak-first', async () => {
    if (await page.getByRole('button', { name: 'Close' }).isVisible()) await page.getByRole('button', { name: 'Close' }).click();
    const ids = [];
    for (let i = 0; i < 2; i++) {
      if (i === 1) {
        const r = await fetch(`${APP}/leak-objects?count=100000`);
        assert(r.status === 200, `the webapp's /leak-objects: ${r.status}`);
      }
      await page.getByRole('button', { name: 'GC heap', exact: true }).click();
      await until(page, (n) => {
        const a = new URLSearchParams(location.hash.slice(1)).get('a');
        return a && !n.includes(a) && document.querySelector('table.heap') && a;
      }, ids, LONG).then((a) => ids.push(a));
      if (i === 0) await shot(page, '7-heap');
    }
    await page.getByLabel('Compare with').selectOption(ids[0]);
    await page.getByRole('button', { name: 'Compare' }).click();
    const table = page.locator('table.heap', { has: page.locator('caption', { hasText: /by growth in bytes/ }) });
    await table.waitFor();
    const first = table.locator('tbody tr').first();
    const type = await first.getByRole('rowheader').textContent();
    const cells = await first.locator('td').allTextContents();
    assert(type === 'LeakedOrder', `the first type is ${type} (${cells.join(' | ')}), not LeakedOrder`);
    assert(cells[5] === '+100,000', `LeakedOrder's count grew by ${cells[5]}, not +100,000`);
    await shot(page, '8-heap-diff');
  }, ['keyboard-open']);

  await check('dump-download-elf', async () => {
    if (await page.getByRole('button', { name: 'Close' }).isVisible()) await page.getByRole('button', { name: 'Close' }).click();
    await page.getByLabel('Dump type').selectOption('Mini');
    await page.getByRole('button', { name: 'Dump', exact: true }).click();
    const link = artifacts.getByRole('row', { name: /^Dump/ }).getByRole('link', { name: 'Download' });
    await link.waitFor({ timeout: LONG });
    const [dl] = await Promise.all([page.waitForEvent('download'), link.click()]);
    const file = await dl.path();
    const head = Buffer.alloc(18);
    const fd = fs.openSync(file, 'r');
    fs.readSync(fd, head, 0, 18, 0);
    fs.closeSync(fd);
    assert(head.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46])), `not ELF: ${head.toString('hex')}`);
    assert(head.readUInt16LE(16) === 4, `e_type ${head.readUInt16LE(16)}, not 4 (ET_CORE)`);
    assert(dl.suggestedFilename().length > 0, 'no file name');
    await shot(page, '9-artifacts');
  }, ['keyboard-open']);

  await check('capture-refused', async () => {
    // the server's problem+json detail is shown, and nothing is listed
    const before = await artifacts.locator('tbody tr').count();
    await page.getByLabel('Trace duration in seconds').fill('5000');
    await page.getByRole('button', { name: 'Trace', exact: true }).click();
    await page.getByRole('alert').filter({ hasText: /Trace not started: .*durationSeconds/ }).waitFor();
    assert(await artifacts.locator('tbody tr').count() === before, 'a refused capture is listed');
  }, ['keyboard-open']);

  await check('cancel', async () => {
    await page.getByLabel('Trace duration in seconds').fill('60');
    await page.getByRole('button', { name: 'Trace', exact: true }).click();
    const trow = artifacts.getByRole('row', { name: /^Trace \(60 s\)/ });
    await trow.getByRole('button', { name: 'Cancel' }).click();
    await trow.filter({ hasText: /cancelled/ }).waitFor({ timeout: 30_000 });
    assert(await trow.getByRole('link', { name: 'Download' }).count() === 0, 'a cancelled trace offers a download');
  }, ['keyboard-open']);

  // flame.js's reading of profiles, in the page itself: folded lines with CRLF, spaces in frame names, a
  // recursive frame (its total counted once per stack), a stack listing's frames innermost first
  await check('flame-parse', async () => {
    const r = await page.evaluate(async () => {
      const m = await import('/flame.js');
      const root = m.parseFolded('a.dll!A.Main;b.dll!B.Run(int, string);c!C.Rec;c!C.Rec 3\r\na.dll!A.Main;b.dll!B.Run(int, string) 2\n\nbad line\na.dll!A.Main 1\nq!Q.Inf Infinity\nq!Q.Neg -4\nq!Q.NaN NaN');
      const f = m.functions(root);
      const rec = m.find(root, 'a.dll!A.Main;b.dll!B.Run(int, string);c!C.Rec;c!C.Rec');
      const st = m.parseStacks([{ frames: [{ methodName: 'Leaf', typeName: 'T', moduleName: 'm.dll' }, { methodName: 'Root', typeName: 'T', moduleName: 'm.dll' }] }, { frames: [] }]);
      return {
        total: root.total, main: f.get('a.dll!A.Main').total, mainSelf: f.get('a.dll!A.Main').self,
        run: f.get('b.dll!B.Run(int, string)').self, recTotal: f.get('c!C.Rec').total, recSelf: f.get('c!C.Rec').self,
        path: rec && m.pathOf(rec), short: m.shortName('b.dll!B.Run(int, string)'),
        stTotal: st.total, stRoot: [...st.kids.keys()], stLeaf: m.find(st, 'm.dll!T.Root;m.dll!T.Leaf')?.self,
        fmt: [m.fmtCount(1234), m.fmtCount('<b>1</b>'), m.fmtCount(NaN), m.fmtCount(Infinity)],
      };
    });
    const want = { total: 6, main: 6, mainSelf: 1, run: 2, recTotal: 3, recSelf: 3, path: 'a.dll!A.Main;b.dll!B.Run(int, string);c!C.Rec;c!C.Rec',
      short: 'B.Run(int, string)', stTotal: 2, stRoot: ['m.dll!T.Root'], stLeaf: 1, fmt: ['1,234', '?', '?', '?'] };
    assert(JSON.stringify(r) === JSON.stringify(want), `got ${JSON.stringify(r)}`);
  }, ['secret-cookie']);

  // a link to a view from another site (a chat, a webmail): the SameSite=Strict cookie does not come with it;
  // the gate page continues to the view by itself when this browser has the cookie, and stays (no loop) when not
  await check('link-from-elsewhere', async () => {
    const view = `${base}/#t=${encodeURIComponent(hashField(page.url(), 't') || '')}&p=${PID}&a=${idle}`;
    const srv = http.createServer((q, a) => {
      a.writeHead(200, { 'Content-Type': 'text/html' });
      a.end(`<!doctype html><title>chat</title><a id="go" href="${view.replace(/&/g, '&amp;')}">the profile</a>`);
    });
    await new Promise((res) => srv.listen(0, '127.0.0.2', res));
    const chat = `http://127.0.0.2:${srv.address().port}/`;
    const fresh = await browser.newContext();
    try {
      const p2 = await ctx.newPage();
      try {
        await p2.goto(chat);
        await p2.click('#go');
        await p2.locator('#proc-h', { hasText: `${PID} ${NAME}` }).waitFor();
        await p2.locator('#artifact-h', { hasText: idle }).waitFor({ timeout: LONG });
        assert(hashField(p2.url(), 'a') === idle && new URL(p2.url()).search === '', `the view opened is ${p2.url()}`);
      } finally {
        await p2.close();
      }
      const p3 = await fresh.newPage();
      const navs = [];
      p3.on('framenavigated', (f) => { if (f === p3.mainFrame()) navs.push(f.url()); });
      await p3.goto(chat);
      await p3.click('#go');
      const link = p3.getByRole('link', { name: 'Continue to diagport ui' });
      await link.waitFor();
      await p3.locator('#gate-why').waitFor();
      const href = await link.getAttribute('href');
      assert(href === '/?continue' + new URL(view).hash, `the gate's link goes to ${href}`);
      const n = navs.length;
      await p3.waitForTimeout(1500); // a loop would navigate again within this
      assert(navs.length === n && n <= 3, `the gate navigated ${navs.length} times: ${navs.join(' ')}`);
      assert(new URL(p3.url()).hash === new URL(view).hash, `the gate's URL lost the view: ${p3.url()}`);
      await shot(p3, '10-gate');
    } finally {
      await fresh.close();
      srv.close();
    }
  }, ['cpu-profile-idle']);

  await check('no-cookie-403', async () => {
    const rq = await request.newContext();
    try {
      for (const u of ['/api/processes', '/api/captures', '/api/captures/c1/data', '/?secret=' + '0'.repeat(64)]) {
        const r = await rq.get(base + u, { maxRedirects: 0 });
        assert(r.status() === 403, `GET ${u} without the cookie: ${r.status()}`);
        assert((await r.body()).length === 0, `GET ${u} without the cookie has a body`);
      }
      // a page without the cookie: the gate (continue.js's), which holds no data
      for (const u of ['/', '/app.js', '/flame.js', '/?continue']) {
        const r = await rq.get(base + u, { maxRedirects: 0 });
        const t = await r.text();
        assert(r.status() === 403, `GET ${u} without the cookie: ${r.status()}`);
        assert(t.includes('id="continue"') && !t.includes('import') && t.length < 2000, `GET ${u} without the cookie: ${t.slice(0, 200)}`);
      }
      const r = await rq.post(base + '/api/refresh', { headers: { Origin: base } });
      assert(r.status() === 403, `POST /api/refresh without the cookie: ${r.status()}`);
    } finally {
      await rq.dispose();
    }
  }, ['secret-cookie']);

  await check('foreign-origin-403', async () => {
    const ok = await page.evaluate(() => fetch('/api/refresh', { method: 'POST' }).then((r) => r.status));
    assert(ok === 202, `the page's own POST /api/refresh: ${ok}`);
    const evil = await page.request.post(base + '/api/refresh', { headers: { Origin: 'http://evil.example' } });
    assert(evil.status() === 403, `POST with Origin http://evil.example: ${evil.status()}`);
    const cap = await page.request.post(base + '/api/captures', {
      headers: { Origin: 'http://127.0.0.1:1' }, data: { target: 'x', pid: Number(PID), kind: 'stacks' } });
    assert(cap.status() === 403, `POST /api/captures with another port's Origin: ${cap.status()}`);
    const none = await page.request.post(base + '/api/refresh');
    assert(none.status() === 403, `POST without Origin: ${none.status()}`);
    const del = await page.request.delete(base + '/api/captures/c1', { headers: { Origin: 'null' } });
    assert(del.status() === 403, `DELETE with Origin null: ${del.status()}`);
  }, ['secret-cookie']);

  // the second UI, whose target "hostile" is a stand-in agent that answers markup for names and numbers: the
  // page shows it as text, never as elements, and goes nowhere
  const hp = await ctx.newPage();
  const navs = [];
  const hproblems = [];
  hp.on('framenavigated', (f) => { if (f === hp.mainFrame()) navs.push(f.url()); });
  hp.on('request', (q) => { if (!q.url().startsWith(hbase) && !q.url().startsWith('data:')) navs.push('request ' + q.url()); });
  hp.on('pageerror', (e) => hproblems.push('page error: ' + e.message));
  const hrow = hp.locator('tr.proc[data-t="hostile"][data-p="7"]');
  const noMarkup = async (where) => {
    const found = await hp.evaluate(() => [...document.querySelectorAll('.pwned, meta[http-equiv], body meta')].map((e) => e.outerHTML));
    assert(found.length === 0, `${where}: elements from the agent's markup: ${found.join(' ').slice(0, 200)}`);
    assert(navs.every((u) => u.startsWith(hbase)), `${where}: the page went elsewhere: ${navs.join(' ')}`);
  };
  await check('hostile-text', async () => {
    await hp.goto(HOSTILE_UI);
    await hrow.waitFor({ timeout: 30_000 });
    assert((await hrow.getByRole('rowheader').textContent()).includes('<b class="pwned">evil</b><meta'), 'the process name is not shown as text');
    await hrow.click();
    await hp.locator('#crashes th', { hasText: '<b class="pwned">evil</b>' }).waitFor();
    await hp.locator('#exceptions th', { hasText: '<b class="pwned">evil</b>' }).first().waitFor({ timeout: 30_000 });
    await noMarkup('the process view');
    await hp.getByRole('button', { name: 'GC heap', exact: true }).click();
    const heap = hp.locator('table.heap');
    await heap.waitFor({ timeout: LONG });
    const cells = await heap.locator('tbody tr', { has: hp.locator('th', { hasText: 'pwned' }) }).locator('td').allTextContents();
    assert(cells[0] === '0' && cells[1] === '0 B', `the hostile type's count and bytes (not numbers: 0): ${cells.join(' | ')}`);
    const summary = await hp.locator('#artifact-body > p').first().textContent();
    assert(/^\? objects, \? in \? types \(after \? GCs\)/.test(summary), `the heap's summary: ${summary}`);
    await shot(hp, '11-hostile-heap');
    await noMarkup('the GC heap view');
    await hp.getByRole('button', { name: 'Close' }).click();
    await hp.getByLabel('CPU profile duration in seconds').fill('10');
    await hp.getByRole('button', { name: 'CPU profile', exact: true }).click();
    const img = hp.getByRole('img', { name: /flame graph/ });
    await img.waitFor({ timeout: LONG });
    const label = await img.getAttribute('aria-label');
    assert(/, 8 samples;/.test(label), `the profile (5 + 3 samples; Infinity, NaN, -4 skipped): ${label}`);
    await hp.locator('table.frames th', { hasText: '<b class="pwned">evil</b>' }).waitFor();
    const table = await hp.locator('table.frames').textContent();
    assert(!/NaN|Infinity/.test(table), `the frames table: ${table.slice(0, 300)}`);
    await shot(hp, '12-hostile-flame');
    await noMarkup('the CPU profile view');
    assert(hproblems.length === 0, hproblems.slice(0, 3).join(' | '));
  });

  await check('hostile-ended-early', async () => {
    const r = hp.locator('#artifacts').getByRole('row', { name: /CPU profile \(10 s\)/ });
    await r.filter({ hasText: /done, ended after 0 s of 10/ }).waitFor();
  }, ['hostile-text']);

  await check('crashes-wrap', async () => {
    const [sw, cw] = await hp.evaluate(() => {
      const p = document.querySelector('#crashes').closest('.panel');
      return [p.scrollWidth, p.clientWidth];
    });
    assert(sw <= cw, `the Crashes card overflows: ${sw} px of content in ${cw}`);
  }, ['hostile-text']);

  await check('live-record-cap', async () => {
    await hp.locator('#live-status', { hasText: /without a record end/ }).waitFor();
  }, ['hostile-text']);

  // the real agent named with a wrong token: it refuses (401), and the page says the agent's sentence
  await check('refused-by-agent', async () => {
    const said = await fetch(`${AGENT}/livemetrics?pid=${PID}`, { headers: { Authorization: 'Bearer not-the-token' } })
      .then(async (r) => ({ s: r.status, d: (await r.json()).detail }));
    assert(said.s === 401 && said.d, `the agent without its token: ${JSON.stringify(said)}`);
    await hp.goto(`${hbase}/#t=refusing&p=${PID}`);
    await hp.locator('#live-status', { hasText: said.d }).waitFor();
    await hp.locator('#exceptions', { hasText: said.d }).waitFor({ timeout: 30_000 });
    const b = hp.locator('#banner');
    assert(!(await b.isVisible()) || !/session has ended/.test(await b.textContent()), `the banner: ${await b.textContent()}`);
    await shot(hp, '13-refused');
  });
  await hp.close();

  await check('token-not-in-page', async () => {
    assert(TOKEN.length >= 8, 'no TOKEN given');
    const got = (await Promise.all(bodies.map(async (b) => ({ u: b.u, t: await settle(b.p, 5000) })))).filter((b) => b.t !== null);
    assert(got.length >= 10, `only ${got.length} of ${bodies.length} answers read`);
    const bad = got.filter((b) => b.t.includes(TOKEN));
    assert(bad.length === 0, `the token is in ${bad.map((b) => b.u).join(', ')}`);
  }, ['flame-graph']);

  await check('page-clean', async () => {
    assert(problems.length === 0, problems.slice(0, 3).join(' | '));
  }, ['secret-cookie']);
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
