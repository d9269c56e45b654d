// bench_page.mjs - etch ui as the page sees it: the time from a click on
// a trace's row to its first timeline drawn, then 15 wheel zooms in, each
// from the wheel to its first frame (the tile in hand, re-scaled) and to
// the new tile drawn (the server's answer, the JSON parsed, the canvas
// drawn), 15 zooms out, a drag of 60 moves, and every frame's drawing
// time; in Debian's chromium driven by playwright-core (from
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
// Measured in the page (window.__etch): from the input event to the first
// frame drawn (the tile in hand, re-scaled) and to the new tile drawn, and
// every frame's drawing time.
const q = (v, p) => { const a = [...v].sort((x, y) => x - y); return a[Math.min(a.length - 1, Math.floor(p * a.length))]; };
const fmt = (v) => v.map((x) => Math.round(x)).join(' ');
const times = [], parts = [], toFrame = [], toTile = [];
await page.evaluate(() => { window.__etch.frameMs.length = 0; });
for (let i = 0; i < 15; i++) {
  const n = await page.evaluate(() => window.__etch.tiles);
  const s = Date.now();
  await page.mouse.move(900, 300);
  await page.mouse.wheel(0, -300);
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
  times.push(Date.now() - s);
  const d = await page.evaluate(() => [window.__etch.lastFetchMs, window.__etch.lastDrawMs,
                                       window.__etch.inputToFrameMs, window.__etch.inputToTileMs]);
  parts.push(Math.round(d[0]) + '+' + Math.round(d[1]));
  toFrame.push(d[2]);
  toTile.push(d[3]);
}
const zoomFrames = await page.evaluate(() => window.__etch.frameMs.slice());
console.log('wheel zooms, wheel to drawn as the driver sees it (ms): ' + fmt(times));
console.log('  of which fetch (tile and flows, JSON parsed) + draw: ' + parts.join(' '));
console.log('  in the page: wheel to the first frame (the tile in hand, re-scaled): ' + fmt(toFrame));
console.log('  in the page: wheel to the new tile drawn: ' + fmt(toTile));
console.log('  frames drawn: ' + zoomFrames.length + ', drawing time median ' + q(zoomFrames, 0.5).toFixed(1) +
            ' ms, p95 ' + q(zoomFrames, 0.95).toFixed(1) + ' ms, max ' + Math.max(...zoomFrames).toFixed(1) + ' ms');
// Zoomed out again (wheel down): the first frames re-scale a finer tile.
const outFrame = [];
await page.evaluate(() => { window.__etch.frameMs.length = 0; });
for (let i = 0; i < 15; i++) {
  const n = await page.evaluate(() => window.__etch.tiles);
  await page.mouse.wheel(0, 300);
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
  outFrame.push(await page.evaluate(() => window.__etch.inputToFrameMs));
}
const outFrames = await page.evaluate(() => window.__etch.frameMs.slice());
console.log('wheel zooms out: wheel to the first frame: ' + fmt(outFrame));
console.log('  frames drawn: ' + outFrames.length + ', drawing time median ' + q(outFrames, 0.5).toFixed(1) +
            ' ms, p95 ' + q(outFrames, 0.95).toFixed(1) + ' ms, max ' + Math.max(...outFrames).toFixed(1) + ' ms');
// A drag across the timeline, 60 moves: a frame per move.
await page.evaluate(() => { window.__etch.frameMs.length = 0; });
const f0 = await page.evaluate(() => window.__etch.frames);
const d0 = Date.now();
await page.mouse.move(1500, 400);
await page.mouse.down();
for (let i = 1; i <= 60; i++) await page.mouse.move(1500 - i * 15, 400);
await page.mouse.up();
const dragMs = Date.now() - d0;
await page.waitForFunction(() => window.__etch.busy === 0);
const dragFrames = await page.evaluate(() => window.__etch.frameMs.slice());
const f1 = await page.evaluate(() => window.__etch.frames);
console.log('drag of 60 moves in ' + dragMs + ' ms: ' + (f1 - f0) + ' frames, drawing time median ' +
            q(dragFrames, 0.5).toFixed(1) + ' ms, p95 ' + q(dragFrames, 0.95).toFixed(1) + ' ms, max ' +
            Math.max(...dragFrames).toFixed(1) + ' ms');
await browser.close();
etch.kill('SIGINT');
