// bench_live.mjs - etch ui following a recording: the latency from an
// event written to the page drawing it. bench_ui_live_writer plays the
// trace SRC back into a trace of a store at RATE events a second (an
// append every 100 ms, under the writer's lock); etch ui serves the store,
// the page (Debian's chromium, driven by playwright-core from
// tests/ui/node_modules) opens the trace live, following. For each append
// made while the page showed the trace: the time from the append to the
// first timeline drawn from tables read at or past its bytes (the page's
// window.__etch.liveLog). Also the page's frames (drawing time each), and
// the CPU etch ui spent (every thread, DuckDB's included).
//   node bench/ui/bench_live.mjs ETCH WRITER SRC RATE
// (WRITER: build/bench/ui/bench_ui_live_writer; SRC e.g. the trace of
// BENCH_TRACE_OUT=F bench_query_import 300000 4 0.)
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = await import(pathToFileURL(
  join(here, '../../tests/ui/node_modules/playwright-core/index.mjs')).href);
const [etchBin, writerBin, src, rate] = process.argv.slice(2);
if (!rate) { console.error('usage: node bench_live.mjs ETCH WRITER SRC RATE'); process.exit(2); }
const dir = mkdtempSync(join(tmpdir(), 'etch-bench-live-'));
const env = { ...process.env, ETCH_STORE: join(dir, 'store'), ETCH_CACHE_DIR: join(dir, 'cache') };
mkdirSync(env.ETCH_STORE);

const appends = [];
let closed = null, onLine = null;
const writer = spawn(writerBin, [src, join(env.ETCH_STORE, 'live.pftrace'), rate], { stdio: ['ignore', 'pipe', 'inherit'] });
let text = '';
writer.stdout.on('data', (d) => {
  text += d;
  let k;
  while ((k = text.indexOf('\n')) >= 0) {
    const [what, ms, bytes] = text.slice(0, k).split(' ');
    text = text.slice(k + 1);
    if (what === 'append') appends.push([Number(ms), Number(bytes)]);
    else closed = [Number(ms), Number(bytes)];
    if (onLine) onLine();
  }
});
await new Promise((r) => { onLine = r; });
onLine = null;

const etch = spawn(etchBin, ['ui'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve) => {
  let t = '';
  etch.stdout.on('data', (d) => {
    t += d;
    const m = /^etch ui: (\S+)$/m.exec(t);
    if (m) resolve(m[1]);
  });
});
const cpu = () => {
  const f = readFileSync('/proc/' + etch.pid + '/stat', 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
const browser = await chromium.launch({ executablePath: process.env.ETCH_CHROMIUM || '/usr/bin/chromium',
                                        args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1820, height: 900 } });
await page.goto(url);
await page.waitForSelector('#traces tbody tr.live');
const cpu0 = cpu();
await page.click('#traces tbody tr.live');
await page.waitForFunction(() => window.__etch.tiles > 0 && window.__etch.busy === 0, null, { timeout: 600000 });
const opened = Date.now();
await page.evaluate(() => { window.__etch.frameMs.length = 0; window.__etch.frames0 = window.__etch.frames; });
// Until the writer has closed the file and the page has drawn it whole.
while (!closed) await new Promise((r) => { onLine = r; });
await page.waitForFunction(() => window.__etch.live && window.__etch.live.recording === false && window.__etch.busy === 0,
                           null, { timeout: 600000 });
const done = Date.now();
const cpu1 = cpu();
const log = await page.evaluate(() => window.__etch.liveLog || []);
const frames = await page.evaluate(() => [window.__etch.frames - window.__etch.frames0, window.__etch.frameMs.slice()]);
const q = (v, p) => { const a = [...v].sort((x, y) => x - y); return a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN; };
const lat = [];
for (const [ms, bytes] of appends) {
  if (ms < opened) continue;
  const shown = log.find(([t, b]) => t >= ms && b >= bytes);
  if (shown) lat.push([ms, shown[0] - ms]);
}
const ms = lat.map((x) => x[1]);
const third = Math.max(1, Math.floor(lat.length / 3));
console.log(`rate ${rate} events/s, ${appends.length} appends over ${((closed[0] - appends[0][0]) / 1000).toFixed(1)} s, ` +
            `${(closed[1] / 1048576).toFixed(1)} MiB`);
console.log(`latency, append to drawn (${ms.length} appends while shown): p50 ${q(ms, 0.5)} ms, p90 ${q(ms, 0.9)} ms, ` +
            `max ${Math.max(...ms)} ms; first third p50 ${q(ms.slice(0, third), 0.5)} ms, last third p50 ` +
            `${q(ms.slice(-third), 0.5)} ms`);
console.log(`the page drew new data ${log.length} times; the end drawn ${done - closed[0]} ms after the file closed`);
console.log(`frames: ${frames[0]}, drawing p50 ${q(frames[1], 0.5).toFixed(2)} ms, p99 ${q(frames[1], 0.99).toFixed(2)} ms, ` +
            `max ${Math.max(...frames[1]).toFixed(2)} ms`);
console.log(`etch ui CPU while following: ${(cpu1 - cpu0).toFixed(2)} s over ${((done - opened) / 1000).toFixed(1)} s`);
await browser.close();
etch.kill('SIGINT');
await new Promise((r) => etch.on('exit', r));
rmSync(dir, { recursive: true, force: true });
