// screenshots.mjs - the pictures of docs/ui.md: the timeline and the flame
// graph of a trace, taken from etch ui in Debian's chromium.
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
await page.screenshot({ path: join(out, 'timeline.png') });
await page.click('#tabs button[data-tab=flame]');
await page.waitForFunction(() => window.__etch.flame && window.__etch.busy === 0);
await page.screenshot({ path: join(out, 'flame.png') });
await page.click('#tabs button[data-tab=sql]');
await page.click('#sql-run');
await page.waitForFunction(() => window.__etch.sql && window.__etch.busy === 0);
await page.screenshot({ path: join(out, 'sql.png') });
await browser.close();
etch.kill('SIGINT');
