// live.test.mjs - etch ui following a trace while it is recorded, in a
// real browser (Debian's chromium, driven by playwright-core): a trace of
// the store written piece by piece by ui_live_writer, which holds the lock
// etch's writers hold until it closes the file. The list marks it; opened,
// the page follows it: after each piece its slice count (the page's own
// status: window.__etch) becomes etch query's count of the same file, the
// window following the newest data until a zoom; when the writer closes
// the file the page says the recording ended and shows the trace whole.
// Every wait is for an event (a line of the writer, the page's state),
// never for a time. Run by run_browser_tests.sh (ctest ui_browser_live).
//
// Environment: ETCH_BIN (etch), UI_TRACE_GEN, ETCH_UI_LIVE_WRITER,
// ETCH_CHROMIUM.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const ETCH = process.env.ETCH_BIN;
const WRITER = process.env.ETCH_UI_LIVE_WRITER;
const skip = WRITER ? false : 'no ETCH_UI_LIVE_WRITER';
const dir = mkdtempSync(join(tmpdir(), 'etch-ui-live-'));
const store = join(dir, 'store');
mkdirSync(store);
const src = join(dir, 'zone.pftrace');
execFileSync(process.env.UI_TRACE_GEN, [src, 'zone']);
const live = join(store, 'live.pftrace');
const env = { ...process.env, ETCH_CACHE_DIR: join(dir, 'cache'), ETCH_STORE: store, TZ: 'UTC' };
const PIECES = 5;

// The slices etch query counts in the file as it is now.
const slicesNow = () =>
  Number(execFileSync(ETCH, ['query', '--csv', live, 'select count(*) from slice'], { env, stdio: ['ignore', 'pipe', 'ignore'] })
    .toString().trim().split('\n')[1]);

let writer, lines = [], waiting = null, server, base, browser, page;
// The writer's next line.
function nextLine() {
  if (lines.length) return Promise.resolve(lines.shift());
  return new Promise((resolve) => { waiting = resolve; });
}
before(async () => {
  if (skip) return;
  writer = spawn(WRITER, [src, live, String(PIECES)], { stdio: ['pipe', 'pipe', 'inherit'] });
  let text = '';
  writer.stdout.on('data', (d) => {
    text += d;
    let k;
    while ((k = text.indexOf('\n')) >= 0) {
      const line = text.slice(0, k);
      text = text.slice(k + 1);
      if (waiting) { const w = waiting; waiting = null; w(line); } else lines.push(line);
    }
  });
  assert.match(await nextLine(), /^piece 1 \d+$/);
  server = spawn(ETCH, ['ui'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  base = await new Promise((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = /^etch ui: (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)$/m.exec(out);
      if (m) resolve(m[1]);
    });
    server.on('exit', (c) => reject(new Error('etch ui exited with ' + c + ': ' + out)));
  });
  browser = await chromium.launch({ executablePath: process.env.ETCH_CHROMIUM, args: ['--no-sandbox'] });
  page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
});
after(async () => {
  if (browser) await browser.close();
  if (writer && writer.exitCode === null) { writer.stdin.end(); await new Promise((r) => writer.on('exit', r)); }
  if (server && server.exitCode === null) {
    const done = new Promise((r) => server.on('exit', r));
    server.kill('SIGINT');
    await done;
  }
  rmSync(dir, { recursive: true, force: true });
});

const E = (f, arg) => page.evaluate(f, arg);
// The page's slice count (what it shows in its status line) once it is `n`.
async function pageSlices(n) {
  await page.waitForFunction((w) => window.__etch.trace && window.__etch.trace.slices === w &&
                             window.__etch.live && window.__etch.live.slices === w && window.__etch.busy === 0, n);
  assert.match(await page.textContent('#status'), new RegExp(': ' + n + ' slices,'));
}

test('a trace being recorded is marked in the list, opens live and grows to the trace\'s slice count', { skip }, async () => {
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  const row = page.locator('#traces tbody tr.live');
  assert.equal(await row.count(), 1);
  assert.equal(await row.locator('td').nth(1).textContent(), 'live.pftrace');
  assert.equal(await row.locator('td').nth(8).textContent(), 'recording');
  await row.click();
  await page.waitForFunction(() => window.__etch.trace && window.__etch.tiles > 0 && window.__etch.busy === 0);
  assert.equal(await E(() => window.__etch.follow), true);
  assert.equal(await page.isVisible('#follow'), true);
  let want = slicesNow();
  await pageSlices(want);
  const first = want;
  for (let k = 2; k <= PIECES; k++) {
    writer.stdin.write('\n');
    assert.match(await nextLine(), new RegExp('^piece ' + k + ' \\d+$'));
    want = slicesNow();
    await pageSlices(want);
    // Following: the window shows the trace to its newest data.
    const [ve, te] = await E(() => [window.__etch.view.e, window.__etch.trace.end]);
    if (k !== 3) assert.equal(ve, te, 'piece ' + k + ': the window ends where the trace does');
    if (k === 2) {
      // A zoom stops following; L follows again.
      const box = await page.$eval('#tl', (c) => { const b = c.getBoundingClientRect(); return { x: b.x, y: b.y }; });
      await page.mouse.move(box.x + 600, box.y + 100);
      await page.mouse.wheel(0, -300);
      await page.waitForFunction(() => window.__etch.follow === false);
      assert.equal(await page.$eval('#follow', (b) => b.classList.contains('on')), false);
    }
    if (k === 3) {
      await page.focus('#tl');
      await page.keyboard.press('l');
      await page.waitForFunction(() => window.__etch.follow === true &&
                                 window.__etch.view.e === window.__etch.trace.end);
    }
  }
  assert.ok(want > first, 'the count grew: ' + first + ' then ' + want);
  // The writer lets go: the page says so and shows the trace whole.
  writer.stdin.write('\n');
  assert.equal(await nextLine(), 'closed');
  want = slicesNow();
  assert.equal(want, 101);
  await page.waitForFunction(() => window.__etch.live && window.__etch.live.recording === false);
  await pageSlices(want);
  assert.match(await page.textContent('#status'), /now finished/);
  assert.equal(await page.isVisible('#follow'), false);
  // The stats, asked for now, hold every slice.
  const id = await E(() => window.__etch.trace.id);
  await page.goto(base + '#trace=' + id + '&tab=stats');
  await page.waitForFunction(() => document.querySelector('#stats table') && window.__etch.busy === 0);
  const cells = await page.$$eval('#stats table tr', (rows) => rows.map((r) => [...r.cells].map((c) => c.textContent)));
  assert.ok(cells.some((r) => r[0] === 'slices' && r[1] === '101'), JSON.stringify(cells.slice(0, 12)));
  // The list no longer marks it.
  await page.goto(base + '#');
  await page.waitForFunction(() => window.__etch.list && window.__etch.list.length === 1 && window.__etch.section === 'list');
  assert.equal(await page.locator('#traces tbody tr.live').count(), 0);
});
