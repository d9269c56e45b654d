// screenshots.mjs - the pictures of docs/ui.md: the timeline (a slice's
// tooltip), a counter's value at the pointer, the flame graph (a node's
// tooltip), the find zone of the most frequent name and the SQL box of a
// trace, taken from etch ui in Debian's chromium.
//   ETCH_BIN=build/tools/etch/etch node tests/ui/screenshots.mjs TRACE OUTDIR [START END]
// START END (ns, optional): the timeline's window.
//   ETCH_BIN=... ETCH_STORE=DIR node tests/ui/screenshots.mjs - OUTDIR
// (no trace): the list of the store (list.png) and two readable traces of
// it compared (diff.png): two of the same program if there are, else the
// first two.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [trace, out, start, end] = process.argv.slice(2);
const etch = spawn(process.env.ETCH_BIN, ['ui', ...(trace === '-' ? [] : [trace])],
                   { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve) => {
  let t = '';
  etch.stdout.on('data', (d) => {
    t += d;
    const m = /^etch ui: (\S+)$/m.exec(t);
    if (m) resolve(m[1]);
  });
});
const browser = await chromium.launch({ executablePath: process.env.ETCH_CHROMIUM || '/usr/bin/chromium',
                                        args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1400, height: 800 } });
await page.goto(url);
if (trace === '-') {
  await page.waitForFunction(() => window.__etch.list && window.__etch.busy === 0);
  await page.screenshot({ path: join(out, 'list.png') });
  const ok = await page.evaluate(() => window.__etch.list.filter((t) => t.error === null)
    .map((t) => ({ id: t.id, prog: t.name.replace(/^\d{8}-\d{6}-/, '').replace(/(-\d+)?\.pftrace$/, '') })));
  const same = ok.filter((t) => ok.filter((u) => u.prog === t.prog).length > 1);
  const two = (same.length >= 2 ? same : ok).slice(0, 2);
  if (two.length === 2) {
    for (const t of two) await page.click(`#traces tbody tr[data-id="${t.id}"] input`);
    await page.click('#compare');
    await page.waitForFunction(() => window.__etch.diff && window.__etch.busy === 0);
    await page.screenshot({ path: join(out, 'diff.png') });
  }
  await browser.close();
  etch.kill('SIGINT');
  process.exit(0);
}
await page.click('#traces tbody tr');
await page.waitForFunction(() => window.__etch.tiles > 0 && window.__etch.busy === 0);
if (start) {
  const n = await page.evaluate(() => window.__etch.tiles);
  await page.evaluate(([s, e]) => window.__etch.setWindow(s, e), [Number(start), Number(end)]);
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
}
const r = await page.evaluate(() => window.__etch.rects.find((x) => x.count === 1 && x.w > 30 && x.depth === 1));
if (r) {
  const b = await page.$eval('#tl', (c) => { const q = c.getBoundingClientRect(); return { x: q.x, y: q.y }; });
  await page.mouse.click(b.x + r.x + r.w / 2, b.y + r.y + r.h / 2);
  await page.waitForFunction(() => window.__etch.details && window.__etch.busy === 0);
}
const b = await page.$eval('#tl', (c) => { const q = c.getBoundingClientRect(); return { x: q.x, y: q.y }; });
// The tooltip of a slice (another one than the selected), its args in.
const h = await page.evaluate((sel) => window.__etch.rects.find((x) => x.count === 1 && x.w > 30 && x.id !== sel),
                              r ? r.id : -1);
if (h) {
  await page.mouse.move(b.x + h.x + Math.min(h.w / 2, 60), b.y + h.y + h.h / 2);
  await page.waitForFunction(() => window.__etch.tip && !/args: \.\.\.$/.test(window.__etch.tip.text) &&
                             window.__etch.busy === 0);
}
await page.screenshot({ path: join(out, 'timeline.png') });
// A counter: its scale, and its value where the pointer is.
const c = await page.evaluate(() => window.__etch.rows.find((x) => x.kind === 'counter'));
if (c) {
  await page.mouse.move(b.x + 220 + (await page.$eval('#tl', (x) => x.clientWidth - 220)) * 0.6, b.y + c.y + c.h / 2);
  await page.waitForFunction(() => window.__etch.tip && window.__etch.tip.kind === 'counter');
  await page.screenshot({ path: join(out, 'counters.png'), clip: { x: 0, y: 0, width: 1400, height: Math.min(800, c.y + c.h + 140) } });
}
await page.click('#tabs button[data-tab=flame]');
await page.waitForFunction(() => window.__etch.flame && window.__etch.busy === 0);
const f = await page.$eval('#fl', (x) => { const q = x.getBoundingClientRect(); return { x: q.x, y: q.y, w: q.width }; });
// Zoomed into the root's first child, the pointer on one of its children.
await page.mouse.click(f.x + 5, f.y + 18 + 9);
await page.waitForFunction(() => window.__etch.flame.zoom.name !== '(all)');
await page.mouse.move(f.x + f.w * 0.3, f.y + 18 * 2 + 9);
await page.waitForFunction(() => window.__etch.tip && window.__etch.tip.kind === 'flame');
await page.screenshot({ path: join(out, 'flame.png') });
// The find zone of the name with the most slices, its fullest bar listed.
await page.click('#tabs button[data-tab=zone]');
await page.waitForFunction(() => window.__etch.zone && window.__etch.busy === 0);
const top = await page.evaluate(() => { const hh = window.__etch.zone.zone.histogram;
  return hh.reduce((a, x, k) => (x.count > hh[a].count ? k : a), 0); });
await page.click(`#zone-hist button[data-k="${top}"]`);
await page.waitForFunction(() => window.__etch.zone.instances && window.__etch.busy === 0);
await page.screenshot({ path: join(out, 'zone.png') });
await page.click('#tabs button[data-tab=sql]');
await page.click('#sql-run');
await page.waitForFunction(() => window.__etch.sql && window.__etch.busy === 0);
await page.screenshot({ path: join(out, 'sql.png') });
await browser.close();
etch.kill('SIGINT');
