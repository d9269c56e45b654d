// samples.test.mjs - CPU samples on etch ui's page, in a real browser
// (Debian's chromium, driven by playwright-core): a trace of
// etch_sample_prog (burn_a and burn_b inside slices of their own names,
// under run_round) recorded with etch record --sample; what the page shows
// (window.__etch and the DOM) against etch query's counts on the same
// trace. And the flame graph of allocation stacks in bytes, allocated and
// still live: a trace of leaky_sites (tests/cli: leak_one, leak_two and
// leak_three never free 1 x 11, 2 x 22 and 3 x 33 bytes) recorded with
// etch record --malloc, against etch leaks. Run by run_browser_tests.sh
// (ctest ui_browser_samples).
//
// Environment: ETCH_BIN (etch), ETCH_SAMPLE_PROG, ETCH_LEAKY_SITES (the
// allocation test is skipped without it), ETCH_CHROMIUM.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const ETCH = process.env.ETCH_BIN;
const dir = mkdtempSync(join(tmpdir(), 'etch-ui-samples-'));
const trace = join(dir, 'samples.pftrace');
const env = { ...process.env, ETCH_CACHE_DIR: join(dir, 'cache'), ETCH_STORE: join(dir, 'store'), TZ: 'UTC' };
execFileSync(ETCH, ['record', '-q', '--sample', '-o', trace, '--', process.env.ETCH_SAMPLE_PROG, '400'],
             { env, stdio: ['ignore', 'ignore', 'inherit'] });
const mtrace = join(dir, 'leaky.pftrace');
const leaky = process.env.ETCH_LEAKY_SITES;
if (leaky) execFileSync(ETCH, ['record', '-q', '--malloc', '-o', mtrace, '--', leaky],
                        { env, stdio: ['ignore', 'ignore', 'inherit'] });

// etch query --csv's rows, numbers as numbers.
function query(sql) {
  const out = execFileSync(ETCH, ['query', '--csv', trace, sql], { env }).toString();
  const lines = out.trim().split('\n').slice(1).filter((l) => l.length);
  return lines.map((l) => l.split(',').map((v) => (/^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v)));
}
// A frame's function as etch names it: its symbol, else its module and
// offset.
const FN = `coalesce((select y.name from stack_profile_symbol y where y.id = f.symbol_set_id), f.name,
            printf('%s+0x%x', coalesce(nullif(regexp_replace(m.name, '^.*/', ''), ''), '?'), f.rel_pc))`;
// A sample's stack, innermost first.
const stackOf = (id) => query(
  `with recursive up(cs, k) as (select callsite_id, 0 from perf_sample where id = ${id}
     union all select c.parent_id, up.k + 1 from up join stack_profile_callsite c on c.id = up.cs
     where c.parent_id is not null)
   select ${FN} from up join stack_profile_callsite c on c.id = up.cs
   join stack_profile_frame f on f.id = c.frame_id left join stack_profile_mapping m on m.id = f.mapping
   order by up.k`).map((r) => String(r[0]));
// fmtDur of the page.
function fmtDur(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return ns + ' ns';
  if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
  if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
  return (ns / 1e9).toFixed(3) + ' s';
}

const samples = query('select count(*) from perf_sample')[0][0];
const skip = samples === 0 ? 'no CPU samples here (perf events not allowed): nothing to show' : false;
const skipAlloc = leaky ? false : 'no ETCH_LEAKY_SITES';

let server, base, browser, page;
before(async () => {
  server = spawn(ETCH, ['ui', trace, ...(leaky ? [mtrace] : [])], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  base = await new Promise((resolve, reject) => {
    let text = '';
    server.stdout.on('data', (d) => {
      text += d;
      const m = /^etch ui: (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)$/m.exec(text);
      if (m) resolve(m[1]);
    });
    server.on('exit', (c) => reject(new Error('etch ui exited with ' + c + ': ' + text)));
  });
  browser = await chromium.launch({ executablePath: process.env.ETCH_CHROMIUM, args: ['--no-sandbox'] });
  page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
});
after(async () => {
  if (browser) await browser.close();
  if (server && server.exitCode === null) {
    const done = new Promise((r) => server.on('exit', r));
    server.kill('SIGINT');
    await done;
  }
  rmSync(dir, { recursive: true, force: true });
});

const E = (f, arg) => page.evaluate(f, arg);
async function tile(action) {
  const n = await E(() => window.__etch.tiles);
  await action();
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
}
async function canvasAt(id) {
  return page.$eval(id, (c) => { const b = c.getBoundingClientRect(); return { x: b.x, y: b.y }; });
}

test('samples are ticks under their thread\'s slices: per thread as etch query counts them, a tick names its first sample, a click shows its stack', { skip }, async () => {
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  const id = await E(() => window.__etch.list[0].id);
  await page.goto(base + '#trace=' + id);
  await page.waitForFunction(() => window.__etch.trace && window.__etch.tiles > 0 && window.__etch.busy === 0 &&
                             window.__etch.samples);
  const [s, e] = await E(() => [window.__etch.view.s, window.__etch.view.e]);
  const d = await E(() => window.__etch.samples);
  // Every sampled thread's samples in the window, as etch query counts them
  // (the threads with a track: a thread without slices has no row).
  const want = Object.fromEntries(query(`select utid, count(*) from perf_sample where ts >= ${s} and ts < ${e}
                                         and utid in (select utid from thread_track)
                                         group by 1 order by 1`).map(([u, n]) => [String(u), n]));
  assert.ok(Object.keys(want).length >= 2);
  assert.deepEqual(d.perThread, want);
  assert.equal(d.samples, Object.values(want).reduce((a, b) => a + b, 0));
  // Bounded by the width: at most a tick per two pixels a thread.
  const W = await E(() => document.getElementById('tl').clientWidth);
  assert.ok(d.ticks <= Object.keys(want).length * Math.ceil(W / 2), d.ticks + ' ticks');
  assert.ok(d.ticks >= 10);
  // Each tick's first sample is etch query's first sample of its bucket.
  for (const t of d.list.slice(0, 20)) {
    const lo = s + t.bucket * (e - s) / d.buckets, hi = s + (t.bucket + 1) * (e - s) / d.buckets;
    const [[first, ts, n]] = query(`select arg_min(id, ts), min(ts), count(*) from perf_sample
                                    where utid = ${t.utid} and ts >= ${s} and ts < ${e}
                                    and floor((ts - ${s})::double * ${d.buckets} / ${e - s}) = ${t.bucket}`);
    assert.deepEqual([t.first, t.ts, t.count], [first, ts, n]);
    assert.ok(t.ts >= Math.floor(lo) && t.ts <= Math.ceil(hi));
  }
  // Hover: the leaf function and the time of the tick's first sample. The
  // tick of a burn_a sample, taken where it is alone in its bucket.
  const t = d.list.find((x) => x.leaf === 'burn_a' && x.count === 1) || d.list.find((x) => x.leaf === 'burn_a');
  assert.ok(t, 'a tick of burn_a');
  const stack = stackOf(t.first);
  assert.equal(stack[0], 'burn_a');
  assert.ok(stack.includes('run_round'));
  const c = await canvasAt('#tl');
  await page.mouse.move(c.x + t.x + t.w / 2, c.y + t.y + t.h / 2);
  await page.waitForFunction(() => window.__etch.tip && window.__etch.tip.kind === 'sample');
  const tip = (await E(() => window.__etch.tip.text)).split('\n');
  const start = await E(() => window.__etch.trace.start);
  assert.deepEqual(tip.slice(0, 2), ['burn_a', 'at ' + fmtDur(t.ts - start)]);
  // Click: the whole stack in the details panel, innermost first.
  await page.mouse.click(c.x + t.x + t.w / 2, c.y + t.y + t.h / 2);
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.sample &&
                             window.__etch.details.sample.id === k, t.first);
  const det = await E(() => window.__etch.details.sample);
  assert.deepEqual(det.frames, stack);
  assert.equal(det.ts, t.ts);
  assert.deepEqual(await page.$$eval('#details ol.stack li', (li) => li.map((x) => x.textContent)), stack);
  assert.equal(await page.textContent('#details h3'), 'CPU sample: burn_a');
});

// The flame graph's node under `parent` named `name`, or undefined.
function child(flame, name) { return flame.find((k) => k.name === name); }

test('the flame graph of a burn_a slice\'s samples names burn_a under run_round with the samples etch query counts inside it', { skip }, async () => {
  // The burn_a slice holding the most samples (the first of them), its
  // thread's samples inside its time.
  const [[sid, utid, ts, dur]] = query(
    `select s.id, t.utid, s.ts, s.dur from slice s join thread_track t on t.id = s.track_id
     where s.name = 'burn_a' order by (select count(*) from perf_sample p where p.utid = t.utid
       and p.ts >= s.ts and p.ts <= s.ts + s.dur and p.callsite_id is not null) desc, s.id limit 1`);
  const [[inSlice]] = query(`select count(*) from perf_sample where utid = ${utid} and ts >= ${ts}
                             and ts <= ${ts + dur} and callsite_id is not null`);
  const [[burnA]] = query(
    `select count(*) from perf_sample s join stack_profile_callsite c on c.id = s.callsite_id
     join stack_profile_frame f on f.id = c.frame_id join stack_profile_symbol y on y.id = f.symbol_set_id
     where s.utid = ${utid} and s.ts >= ${ts} and s.ts <= ${ts + dur} and y.name = 'burn_a'`);
  assert.ok(inSlice >= 1);
  assert.equal(burnA, inSlice);
  // Select it (by its address), then the details' link to its samples.
  const id = await E(() => window.__etch.trace.id);
  await page.goto(base.replace(/\?.*$/, '') + '#trace=' + id + '&sel=' + sid);
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k, sid);
  await page.click('#slice-samples');
  await page.waitForFunction((k) => window.__etch.section === 'flame' && window.__etch.flame &&
                             window.__etch.flame.args && window.__etch.flame.args.slice === k, sid);
  const f = await E(() => window.__etch.flame);
  assert.equal(f.unit, 'samples');
  assert.equal(f.root.total, inSlice);
  // Down the single path to run_round, then burn_a: every sample of the
  // slice, and no burn_b.
  const nodes = await E(() => window.__etch.flameNodes());
  const run = nodes.find((n) => n.name === 'run_round');
  assert.ok(run, 'run_round in ' + JSON.stringify(nodes.map((n) => n.name)));
  assert.equal(run.total, inSlice);
  const a = child(nodes.filter((n) => n.parent === run.i), 'burn_a');
  assert.ok(a);
  assert.equal(a.total, inSlice);
  assert.equal(child(nodes.filter((n) => n.parent === run.i), 'burn_b'), undefined);
  // The labels and the tooltips speak of samples.
  const text = await E(() => document.getElementById('fl-funcs').textContent);
  assert.match(text, new RegExp('burn_a' + inSlice + ' samples?'));
});

test('the flame graph of a thread\'s samples and of a range\'s, with etch query\'s counts', { skip }, async () => {
  // The thread: burn_a and burn_b under run_round with its samples of each.
  const [[utid]] = query(`select utid from perf_sample group by 1 order by count(*) desc limit 1`);
  await page.uncheck('#fl-slice');
  await page.waitForFunction(() => window.__etch.flame.args && window.__etch.flame.args.slice === undefined);
  await page.selectOption('#fl-thread', String(utid));
  await page.waitForFunction((u) => window.__etch.flame.args && window.__etch.flame.args.utid === String(u), utid);
  const count = (fn, extra) => query(
    `select count(*) from perf_sample s join stack_profile_callsite c on c.id = s.callsite_id
     join stack_profile_frame f on f.id = c.frame_id join stack_profile_symbol y on y.id = f.symbol_set_id
     where y.name = '${fn}' ${extra}`)[0][0];
  let nodes = await E(() => window.__etch.flameNodes());
  let run = nodes.find((n) => n.name === 'run_round');
  const kids = nodes.filter((n) => n.parent === run.i);
  assert.equal(child(kids, 'burn_a').total, count('burn_a', `and s.utid = ${utid}`));
  assert.equal(child(kids, 'burn_b').total, count('burn_b', `and s.utid = ${utid}`));
  assert.ok(child(kids, 'burn_a').total > child(kids, 'burn_b').total);
  assert.equal(nodes[0].total, query(`select count(*) from perf_sample where utid = ${utid} and callsite_id is not null`)[0][0]);
  // A range: the middle of the trace, all threads.
  const [[lo, hi]] = query('select min(ts), max(ts) from perf_sample');
  const rs = lo + Math.floor((hi - lo) / 3), re = hi - Math.floor((hi - lo) / 3);
  await E(([a, b]) => window.__etch.selectRange(a, b), [rs, re]);
  await page.selectOption('#fl-thread', '-1');
  await page.check('#fl-sel');
  await page.waitForFunction((a) => window.__etch.flame.args && window.__etch.flame.args.start === a &&
                             window.__etch.flame.args.utid === undefined, rs);
  nodes = await E(() => window.__etch.flameNodes());
  const range = `and s.ts >= ${rs} and s.ts < ${re}`;
  assert.equal(nodes[0].total, query(`select count(*) from perf_sample s where callsite_id is not null ${range}`)[0][0]);
  const aTotal = nodes.filter((n) => n.name === 'burn_a').reduce((x, n) => x + n.total, 0);
  assert.equal(aTotal, count('burn_a', range));
  // Back to slices: the flame graph of slices, in time.
  await page.selectOption('#fl-of', 'slices');
  await page.waitForFunction(() => window.__etch.flame.unit === 'ns');
});

test('the flame graph of allocation stacks: bytes still live names leak_one, leak_two and leak_three with their bytes, as etch leaks has every site', { skip: skipAlloc }, async () => {
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  const id = await E(() => window.__etch.list[1].id);
  await page.goto(base.replace(/\?.*$/, '') + '#trace=' + id + '&tab=flame');
  await page.waitForFunction((k) => window.__etch.trace && window.__etch.trace.id === k && window.__etch.flame, id);
  assert.equal(await page.isHidden('#fl-of-box'), false);
  const leaks = JSON.parse(execFileSync(ETCH, ['leaks', '--json', '--top', '0', mtrace], { env }).toString());
  assert.equal(leaks.exact, true);
  // Per function: the bytes of the sites whose innermost function it is.
  const bySite = (key) => {
    const m = {};
    for (const x of leaks.sites) if (x[key]) m[x.function] = (m[x.function] || 0) + x[key];
    return m;
  };
  const selfOf = (nodes) => {
    const m = {};
    for (const n of nodes) if (n.i !== 0 && n.self) m[n.name] = (m[n.name] || 0) + n.self;
    return m;
  };
  for (const [mode, key, total] of [['live', 'never_freed_bytes', leaks.never_freed_bytes],
                                    ['allocated', 'bytes', leaks.allocated_bytes]]) {
    await page.selectOption('#fl-of', mode);
    await page.waitForFunction((m) => window.__etch.flame.unit === 'bytes' && window.__etch.flame.args &&
                               window.__etch.flame.args.mode === m, mode);
    const nodes = await E(() => window.__etch.flameNodes());
    assert.equal(nodes[0].total, total, mode);
    assert.deepEqual(selfOf(nodes), bySite(key), mode);
    if (mode === 'live') {
      const totalOf = (fn) => nodes.filter((n) => n.name === fn).reduce((x, n) => x + n.total, 0);
      assert.deepEqual(['leak_one', 'leak_two', 'leak_three'].map(totalOf), [11, 44, 99]);
      // leak_three under three_caller under main
      const three = nodes.find((n) => n.name === 'leak_three');
      assert.equal(nodes[three.parent].name, 'three_caller');
      assert.equal(nodes[nodes[three.parent].parent].name, 'main');
      const text = await E(() => document.getElementById('fl-funcs').textContent);
      assert.match(text, /leak_two44 B44 B2/); // name, self, total, allocations
    }
  }
  // Refused: no mode, another mode.
  const u = new URL(base);
  for (const q of ['', '&mode=', '&mode=bogus', '&mode=LIVE']) {
    const r = await fetch(u.origin + '/api/alloc_flame?id=' + id + q, { headers: { 'X-Etch-Token': u.searchParams.get('token') } });
    assert.equal(r.status, 400, q);
    assert.match((await r.json()).error, /mode is allocated or live/);
  }
});
