// bench_live.mjs - etch ui following a recording: the latency from an
// event written to the page drawing it. bench_ui_live_writer plays the
// trace SRC back into a trace of a store at RATE events a second (an
// append every 100 ms, under the writer's lock); etch ui serves the store,
// the page (Debian's chromium, driven by playwright-core from
// tests/ui/node_modules) opens the trace live, following. For each append
// made while the page showed the trace: the time from the append to the
// first timeline drawn from tables read at or past its bytes (the page's
// window.__etch.liveLog). Also the page's frames (drawing time each), and
// the CPU etch ui spent (every thread, DuckDB's included), and etch ui's
// resident memory (sampled every 100 ms: its peak while the trace was
// recorded and once read whole) with the load (uptime) at the start and
// the end. With BENCH_LIVE_IN_MEMORY=1 etch ui runs with no cache
// directory (no ETCH_CACHE_DIR, HOME or XDG_CACHE_HOME): the live trace's
// tables are then in memory, as before they went to a file of their own.
//   node bench/ui/bench_live.mjs ETCH WRITER SRC RATE
// (WRITER: build/bench/ui/bench_ui_live_writer; SRC e.g. the trace of
// BENCH_TRACE_OUT=F bench_query_import 300000 4 0.)
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const { chromium } = await import(pathToFileURL(
  join(here, '../../tests/ui/node_modules/playwright-core/index.mjs')).href);
const [etchBin, writerBin, src, rate] = process.argv.slice(2);
if (!rate) { console.error('usage: node bench_live.mjs ETCH WRITER SRC RATE'); process.exit(2); }
const dir = mkdtempSync(join(tmpdir(), 'etch-bench-live-'));
const env = { ...process.env, ETCH_STORE: join(dir, 'store'), ETCH_CACHE_DIR: join(dir, 'cache') };
const inMemory = process.env.BENCH_LIVE_IN_MEMORY === '1';
if (inMemory) { delete env.ETCH_CACHE_DIR; delete env.HOME; delete env.XDG_CACHE_HOME; }
const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');
const load0 = load();
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
const rss = () => {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/' + etch.pid + '/status', 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch { return 0; }
};
let rssPeak = 0, rssPeakRecording = 0, recordingDone = false;
const rssTimer = setInterval(() => {
  const v = rss();
  rssPeak = Math.max(rssPeak, v);
  if (!recordingDone) rssPeakRecording = Math.max(rssPeakRecording, v);
}, 100);
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
// The page's frame rate while data arrives: for 3 s (if the recording
// lasts), the window panned right and left (D, A) as fast as the page
// takes keys, the browser's animation frames counted in the page (each
// one a frame the page could show: 60 a second when nothing holds its
// thread up) with the timelines drawn; then follow on again (L).
let fps = null;
if (!closed) {
  const counted = page.evaluate(async () => {
    const f0 = window.__etch.frames, t0 = performance.now();
    let n = 0;
    await new Promise((res) => {
      const tick = () => { n++; if (performance.now() - t0 < 3000) requestAnimationFrame(tick); else res(); };
      requestAnimationFrame(tick);
    });
    return [n, window.__etch.frames - f0, performance.now() - t0];
  });
  let done = false;
  counted.then(() => { done = true; });
  for (let i = 0; !done; i++) await page.keyboard.press(i % 2 ? 'a' : 'd');
  const [n, drawn, ms] = await counted;
  fps = { rate: n * 1000 / ms, drawn, ms, recording: !closed };
  await page.keyboard.press('l');
}
// Until the writer has closed the file and the page has drawn it whole.
while (!closed) await new Promise((r) => { onLine = r; });
recordingDone = true;
const rssClosed = rss();
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
if (fps) console.log(`frame rate while data arrived, the window panned for ${(fps.ms / 1000).toFixed(1)} s: ` +
                    `${fps.rate.toFixed(1)} animation frames/s, ${fps.drawn} timelines drawn` +
                    `${fps.recording ? '' : ' (the recording ended meanwhile)'}`);
console.log(`etch ui CPU while following: ${(cpu1 - cpu0).toFixed(2)} s over ${((done - opened) / 1000).toFixed(1)} s`);
console.log(`etch ui's RSS (${inMemory ? 'live tables in memory' : 'live tables in a file'}): peak while recorded ` +
            `${rssPeakRecording.toFixed(0)} MiB, when the file closed ${rssClosed.toFixed(0)} MiB, peak in all ` +
            `${rssPeak.toFixed(0)} MiB, at the end ${rss().toFixed(0)} MiB`);
console.log(`load (1, 5, 15 min): ${load0} at the start, ${load()} at the end`);
clearInterval(rssTimer);
await browser.close();
etch.kill('SIGINT');
await new Promise((r) => etch.on('exit', r));
rmSync(dir, { recursive: true, force: true });
