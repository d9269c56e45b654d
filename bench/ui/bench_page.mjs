// bench_page.mjs - etch ui as the page sees it: the time from a click on
// a trace's row to its first timeline drawn, then 15 wheel zooms, each from
// the wheel to the tile drawn (the server's answer, the JSON parsed, the
// canvas drawn), in Debian's chromium driven by playwright-core (from
// tests/ui/node_modules: scripts/setup.sh installs it).
//   node bench/ui/bench_page.mjs ETCH TRACE
// The trace's cache should exist (etch query TRACE "select 1"), or the
// first timeline includes the import.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = await import(pathToFileURL(
  join(here, '../../tests/ui/node_modules/playwright-core/index.mjs')).href);
const [etchBin, trace] = process.argv.slice(2);
const etch = spawn(etchBin, ['ui', trace], { stdio: ['ignore', 'pipe', 'inherit'] });
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
const page = await browser.newPage({ viewport: { width: 1820, height: 900 } });
await page.goto(url);
await page.waitForSelector('#traces tbody tr');
const t0 = Date.now();
await page.click('#traces tbody tr');
await page.waitForFunction(() => window.__etch.tiles > 0 && window.__etch.busy === 0);
console.log('first timeline, click to drawn: ' + (Date.now() - t0) + ' ms');
const times = [], parts = [];
for (let i = 0; i < 15; i++) {
  const n = await page.evaluate(() => window.__etch.tiles);
  const s = Date.now();
  await page.mouse.move(900, 300);
  await page.mouse.wheel(0, -300);
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
  times.push(Date.now() - s);
  parts.push(await page.evaluate(() => Math.round(window.__etch.lastFetchMs) + '+' +
                                       Math.round(window.__etch.lastDrawMs)));
}
console.log('wheel zooms, wheel to drawn (ms): ' + times.join(' '));
console.log('  of which fetch (tile and flows, JSON parsed) + draw: ' + parts.join(' '));
await browser.close();
etch.kill('SIGINT');
