// browser.test.mjs - etch ui in a real browser (Debian's chromium, driven by
// playwright-core): what the page shows, read from the page itself
// (window.__etch and the DOM), against etch's own answers (etch query on
// the same trace). Run by run_browser_tests.sh (ctest ui_browser).
//
// Environment: ETCH_BIN (etch), UI_TRACE_GEN (writes the test trace,
// ui_trace.h), ETCH_CHROMIUM; ETCH_UI_SHOTS=DIR also saves screenshots of
// the timeline and the flame graph there.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, readFileSync, statSync, copyFileSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const ETCH = process.env.ETCH_BIN;
const dir = mkdtempSync(join(tmpdir(), 'etch-ui-test-'));
const trace = join(dir, 'ui.pftrace');
const bad = join(dir, 'corrupt.pftrace');
execFileSync(process.env.UI_TRACE_GEN, [trace]);
// A record whose length is a varint of 11 bytes: broken framing (a
// malformed packet would be left out and the rest read).
writeFileSync(bad, Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0x01, 0x00]));
const gone = join(dir, 'gone.pftrace');
copyFileSync(trace, gone);
// A store of its own (etch ls's): the test trace, its first packets only
// (fewer events), and a corrupt trace.
const store = join(dir, 'store');
mkdirSync(store);
copyFileSync(trace, join(store, '20261127-040000-app.pftrace'));
writeFileSync(join(store, '20261127-030000-part.pftrace'), firstPackets(readFileSync(trace), 12));
writeFileSync(join(store, '20261127-050000-broken.pftrace'), readFileSync(bad));
// Local time is UTC for etch and the browser alike: the list's start is
// compared with etch ls's.
const env = { ...process.env, ETCH_CACHE_DIR: join(dir, 'cache'), ETCH_STORE: store, TZ: 'UTC' };
const shots = process.env.ETCH_UI_SHOTS;

// The first n packets (Trace.packet, field 1) of a trace.
function firstPackets(buf, n) {
  let off = 0;
  for (let k = 0; k < n && off < buf.length; k++) {
    if (buf[off] !== 0x0a) throw new Error('not a packet at ' + off);
    let len = 0, shift = 0, p = off + 1;
    for (;;) { const b = buf[p++]; len += (b & 0x7f) * 2 ** shift; shift += 7; if (!(b & 0x80)) break; }
    off = p + len;
  }
  return buf.subarray(0, off);
}

// etch ls's table: a row of cells per trace, split where its dashes are.
function lsTable(e) {
  const lines = execFileSync(ETCH, ['ls'], { env: e || env }).toString().split('\n');
  const cols = [...lines[2].matchAll(/-+/g)].map((m) => m.index);
  return lines.slice(3).filter((l) => l.length).map((l) =>
    cols.map((c, i) => l.slice(c, i + 1 < cols.length ? cols[i + 1] : undefined).trim()));
}
const lsJson = (e) => JSON.parse(execFileSync(ETCH, ['ls', '--json'], { env: e || env }).toString());

// etch query --csv's rows, numbers as numbers.
function query(sql) {
  const out = execFileSync(ETCH, ['query', '--csv', trace, sql], { env }).toString();
  const lines = out.trim().split('\n').slice(1).filter((l) => l.length);
  return lines.map((l) => l.split(',').map((v) => (/^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v)));
}

let server, base, browser, page;
const requests = [];

// Starts etch ui with `args`: its process and its address.
async function startUi(args, e) {
  const proc = spawn(ETCH, ['ui', ...args], { env: e || env, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise((resolve, reject) => {
    let text = '';
    proc.stdout.on('data', (d) => {
      text += d;
      const m = /^etch ui: (http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]+)$/m.exec(text);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (c) => reject(new Error('etch ui exited with ' + c + ': ' + text)));
  });
  return { proc, url };
}
async function stopUi(proc) {
  if (proc && proc.exitCode === null) {
    const done = new Promise((r) => proc.on('exit', r));
    proc.kill('SIGINT');
    await done;
  }
}

before(async () => {
  ({ proc: server, url: base } = await startUi([trace, bad, gone]));
  browser = await chromium.launch({ executablePath: process.env.ETCH_CHROMIUM,
                                    args: ['--no-sandbox'], env: { ...process.env, TZ: 'UTC' } });
  // A context of its own: a second page of it shares its storage (the
  // token kept, for an address without it).
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await ctx.newPage();
  page.on('request', (r) => requests.push(r.url()));
});

after(async () => {
  if (browser) await browser.close();
  await stopUi(server);
  rmSync(dir, { recursive: true, force: true });
});

const E = (f, arg) => page.evaluate(f, arg);
// Runs `action` and waits for the timeline's next tile to be drawn.
async function tile(action) {
  const n = await E(() => window.__etch.tiles);
  await action();
  await page.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
}

// What etch's tiles hold per track for a window of px pixels: slices at
// least a pixel wide, plus one per (track, depth, column) of the others.
function expectedPerTrack(s, e, px) {
  const p = Math.ceil((e - s) / px);
  const rows = query(
    `select track_id, count(*) from (
       select track_id from slice where ts < ${e} and ts + dur >= ${s} and dur >= ${p}
       union all
       select track_id from slice where ts < ${e} and ts + dur >= ${s} and dur < ${p}
       group by track_id, depth, floor((ts - ${s}) / ${p}))
     group by track_id order by track_id`);
  return Object.fromEntries(rows.map(([t, n]) => [String(t), n]));
}
async function drawnSlices() {
  const d = await E(() => ({ drawn: window.__etch.drawn, rows: window.__etch.trace }));
  const counters = query("select id from track where type = 'counter'").map((r) => String(r[0]));
  return Object.fromEntries(Object.entries(d.drawn).filter(([k]) => !counters.includes(k)));
}

// The list's rows as the page shows them: id and the cells' text (without
// the compare box).
const listRows = () => page.$$eval('#traces tbody tr', (trs) =>
  trs.map((t) => ({ id: t.dataset.id, cells: [...t.cells].slice(1).map((c) => c.textContent) })));
const COLS = ['name', 'start', 'duration', 'processes', 'threads', 'events', 'size', 'data_loss', 'where'];

test('the list shows the traces named and the store\'s as etch ls does, and nothing is fetched from elsewhere', async () => {
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  const rows = await listRows();
  const list = await E(() => window.__etch.list);
  const ls = lsJson();
  const table = lsTable();
  // The traces named, in their order, then the store's as etch ls lists it.
  // (Newest first: these traces have no wall-clock time of their own, so
  // their files' times order them.)
  assert.deepEqual(ls.map((e) => e.name).sort(), ['20261127-030000-part.pftrace', '20261127-040000-app.pftrace',
                                                 '20261127-050000-broken.pftrace']);
  assert.deepEqual(rows.map((r) => r.cells[0]), ['ui.pftrace', 'corrupt.pftrace', 'gone.pftrace',
                                                 ...ls.map((e) => e.name)]);
  assert.deepEqual(rows.map((r) => r.id), list.map((t) => t.id));
  // The store's rows: every member etch ls --json has, with its value, and
  // every cell as etch ls's table has it.
  for (let i = 0; i < ls.length; i++) {
    const { id, in_store: inStore, open, ...rest } = list[3 + i];
    assert.match(id, /^[0-9a-f]{16}$/);
    assert.equal(inStore, true);
    assert.equal(open, false);
    assert.deepEqual(rest, ls[i]);
    assert.deepEqual(rows[3 + i].cells, [...table[i], 'store']);
  }
  const at = (name) => ls.findIndex((e) => e.name === name);
  assert.match(rows[3 + at('20261127-050000-broken.pftrace')].cells[7], /^error: corrupt trace/);
  // A trace named on the command line: what etch ls would say of it (the
  // store's copy holds the same bytes), its own size and time.
  const a = at('20261127-040000-app.pftrace');
  const named = list[0], copy = ls[a];
  const st = statSync(trace, { bigint: true });
  assert.equal(named.path, trace);
  assert.equal(named.in_store, false);
  assert.equal(named.size, Number(st.size));
  // Beyond a double's 53 bits: the numbers as the server wrote them.
  const u = new URL(base);
  const raw = await (await fetch(u.origin + '/api/traces', { headers: { 'X-Etch-Token': u.searchParams.get('token') } })).text();
  const lsRaw = execFileSync(ETCH, ['ls', '--json'], { env }).toString();
  assert.equal(raw.match(/"mtime_ns":(\d+)/)[1], String(st.mtimeNs));
  for (const e of ls) {
    const tail = (text, from) => { const k = text.indexOf(from); assert.ok(k >= 0, from); return text.slice(k + from.length).split('\n')[0].replace(/\}(,|\]\})?$/, ''); };
    assert.equal(tail(raw, JSON.stringify(e.path) + ',"in_store":true,"open":false'), tail(lsRaw, JSON.stringify(e.path)));
  }
  for (const k of ['duration', 'events', 'slices', 'processes', 'threads', 'data_loss', 'error', 'start_from_trace'])
    assert.deepEqual(named[k], copy[k], k);
  assert.deepEqual(rows[0].cells.slice(2), [...table[a].slice(2, 6), statSync(trace).size + ' bytes', table[a][7], dir]);
  assert.equal(list[1].error, ls[at('20261127-050000-broken.pftrace')].error);
  assert.deepEqual(copy.data_loss, [{ name: 'etch_dropped_events', value: 5 }]);
  assert.equal(await page.textContent('#list-info'), '6 traces');
  assert.equal(await page.isHidden('#list-empty'), true);
  for (const u of requests) assert.ok(u.startsWith(new URL(base).origin + '/'), u);
});

test('a click on a header sorts the list by its column, a second the other way', async () => {
  const list = await E(() => window.__etch.list);
  const ids = list.map((t) => t.id).sort();
  for (const [i, key] of COLS.entries()) {
    for (const turn of [0, 1]) {
      await page.click(`#traces th[data-key=${key}]`);
      const rows = await listRows();
      assert.deepEqual(rows.map((r) => r.id).sort(), ids);
      const num = !['name', 'data_loss', 'where'].includes(key);
      // Numbers: largest first, then the other way; text: A to Z first.
      const down = num ? turn === 0 : turn === 1;
      assert.equal(await page.getAttribute(`#traces th[data-key=${key}]`, 'class'),
                   'sort' + (num ? ' n' : '') + (down ? ' down' : ' up'));
      const vals = rows.map((r) => (num ? list.find((t) => t.id === r.id)[key] : r.cells[i]));
      for (let k = 1; k < vals.length; k++) {
        const a = vals[k - 1], b = vals[k];
        if (b === null) continue;             // no value: last
        assert.notEqual(a, null, key + ': a row without a value before one with');
        const c = num ? a - b : String(a).localeCompare(String(b));
        assert.ok(down ? c >= 0 : c <= 0, `${key} ${down ? 'down' : 'up'}: ${a} then ${b}`);
      }
    }
  }
  // Events, largest first: the named traces and the store's copy (same
  // counts), then the shorter one, then the two corrupt ones.
  await page.click('#traces th[data-key=events]');
  await page.click('#traces th[data-key=events]');
  await page.click('#traces th[data-key=events]');
  const rows = await listRows();
  assert.deepEqual(rows.slice(4).map((r) => r.cells[5]), ['-', '-']);
  assert.equal(rows[3].cells[0], '20261127-030000-part.pftrace');
});

test('the filter keeps exactly the rows whose name holds its text', async () => {
  const list = await E(() => window.__etch.list);
  const order = (await listRows()).map((r) => r.id);
  for (const q of ['APP', 'corrupt', '.PFTRACE', 'part', '2026112', 'no trace has this']) {
    await page.fill('#list-filter', q);
    const rows = await listRows();
    const want = order.filter((id) => list.find((t) => t.id === id).name.toLowerCase().includes(q.toLowerCase()));
    assert.deepEqual(rows.map((r) => r.id), want, q);
    assert.equal(await page.textContent('#list-info'),
                 want.length === list.length ? list.length + ' traces' : want.length + ' of ' + list.length + ' traces');
  }
  await page.fill('#list-filter', 'app');
  // A row opens its trace: the store's.
  const app = list.find((t) => t.name === '20261127-040000-app.pftrace');
  await tile(() => page.click(`#traces tbody tr[data-id="${app.id}"] td:nth-child(2)`));
  assert.equal(await E(() => window.__etch.trace.id), app.id);
  assert.equal(await page.isHidden('#error'), true);
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  assert.equal(await page.inputValue('#list-filter'), '');
});

test('two traces ticked in the list are compared as etch diff compares them', async () => {
  const list = await E(() => window.__etch.list);
  const a = list.find((t) => t.name === 'ui.pftrace');
  const b = list.find((t) => t.name === '20261127-030000-part.pftrace');
  assert.equal(await page.isDisabled('#compare'), true);
  await page.click(`#traces tbody tr[data-id="${a.id}"] input`);
  assert.equal(await page.isDisabled('#compare'), true);
  assert.equal(await E(() => window.__etch.section), 'list'); // a tick opens nothing
  await page.click(`#traces tbody tr[data-id="${b.id}"] input`);
  assert.equal(await page.isDisabled('#compare'), false);
  await page.click('#compare');
  await page.waitForFunction(() => window.__etch.diff && window.__etch.busy === 0);
  const want = JSON.parse(execFileSync(ETCH, ['diff', '--json', '-n', '0', a.path, b.path], { env }).toString());
  const got = await E(() => window.__etch.diff);
  assert.deepEqual(got.rows, want.rows);
  assert.ok(want.rows.length > 3);
  assert.ok(want.rows.some((r) => r.b.count < r.a.count));
  assert.equal(got.a, 'ui.pftrace');
  assert.equal(got.b, '20261127-030000-part.pftrace');
  const shown = await page.$$eval('#diff-table tbody tr', (trs) =>
    trs.map((t) => [t.cells[0].textContent, Number(t.cells[1].textContent), Number(t.cells[2].textContent)]));
  assert.deepEqual(shown, want.rows.map((r) => [r.name, r.a.count, r.b.count]));
  assert.equal(await page.isHidden('#error'), true);
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
});

test('a corrupt trace of the store is a row with its error, and opening it says why', async () => {
  const list = await E(() => window.__etch.list);
  const broken = list.find((t) => t.name === '20261127-050000-broken.pftrace');
  const err = lsJson().find((e) => e.name === broken.name).error;
  assert.match(err, /^corrupt trace(, or cut short)?: offset \d+: /);
  const cells = (await listRows()).find((r) => r.id === broken.id).cells;
  assert.equal(cells[7], 'error: ' + err);
  assert.deepEqual(cells.slice(2, 6), ['-', '-', '-', '-']);
  await page.click(`#traces tbody tr[data-id="${broken.id}"]`);
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.textContent('#error'), /20261127-050000-broken\.pftrace: cannot be read/);
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
});

test('a trace that comes into the store while etch ui runs is listed at the next look', async () => {
  const name = '20261127-060000-later.pftrace';
  copyFileSync(trace, join(store, name));
  await page.goto(base);
  await page.waitForSelector(`#traces tbody tr:nth-child(7)`);
  const rows = await listRows();
  const ls = lsJson();
  assert.equal(ls[0].name, name);
  assert.deepEqual(rows.slice(3).map((r) => r.cells[0]), ls.map((e) => e.name));
  const { id, in_store: i, open, ...rest } = (await E(() => window.__etch.list))[3];
  assert.deepEqual(rest, ls[0]);
  // And one that leaves it is no longer listed.
  unlinkSync(join(store, name));
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
  assert.deepEqual((await listRows()).slice(3).map((r) => r.cells[0]), lsJson().map((e) => e.name));
});

test('an empty store and no trace named: the page says so', async () => {
  const e = { ...env, ETCH_STORE: join(dir, 'no-store-yet') };
  const ui = await startUi([], e);
  const p = await browser.newPage();
  try {
    await p.goto(ui.url);
    await p.waitForSelector('#list-empty:not([hidden])');
    assert.equal(await p.textContent('#list-empty'),
                 'The trace store (' + join(dir, 'no-store-yet') + ') is empty: etch record without -o ' +
                 'records into it. No trace named on etch ui\'s command line either.');
    assert.equal(await p.$$eval('#traces tbody tr', (t) => t.length), 0);
    assert.equal(await p.isHidden('#error'), true);
    assert.deepEqual(lsJson(e), []);
  } finally {
    await p.close();
    await stopUi(ui.proc);
  }
});

test('a corrupt trace gets a clear message on the page', async () => {
  await page.click('#traces tbody tr:nth-child(2)');
  await page.waitForSelector('#error:not([hidden])');
  const msg = await page.textContent('#error');
  assert.match(msg, /corrupt\.pftrace: cannot be read/);
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
});

test('a trace removed while it is open gets a clear message on the page', async () => {
  await tile(() => page.click('#traces tbody tr:nth-child(3)'));
  assert.equal(await page.isHidden('#error'), true);
  unlinkSync(gone);
  await page.evaluate(() => window.__etch.setWindow(2000, 50000));
  await page.waitForSelector('#error:not([hidden])');
  assert.match(await page.textContent('#error'), /gone\.pftrace is no longer there \(removed or moved since etch ui started\)/);
  await page.goto(base);
  await page.waitForSelector('#traces tbody tr');
});

test('the timeline draws the slices etch merges at the screen\'s resolution', async () => {
  await tile(() => page.click('#traces tbody tr:nth-child(1)'));
  const v = await E(() => ({ s: window.__etch.view.s, e: window.__etch.view.e,
                             px: Math.floor(document.getElementById('tl').clientWidth - 220) }));
  const [[start, end]] = query('select min(start_ts), max(end_ts) from trace_bounds');
  assert.equal(v.s, start);
  assert.equal(v.e, end);
  assert.deepEqual(await drawnSlices(), expectedPerTrack(v.s, v.e, v.px));
  // A known zoom: 4 us around the tiny slices, where two of them share a pixel.
  await tile(() => E(() => window.__etch.setWindow(94000, 98000)));
  const px = await E(() => Math.floor(document.getElementById('tl').clientWidth - 220));
  const got = await drawnSlices();
  assert.deepEqual(got, expectedPerTrack(94000, 98000, px));
  // Counters are drawn as well (heap).
  const heap = query("select id from track where name = 'heap'")[0][0];
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  assert.ok((await E(() => window.__etch.drawn))[heap] > 0);
  // Data loss, marked where it happened (the dropped-events instant).
  const lost = query("select ts, track_id from slice where name = 'etch.dropped_events'");
  assert.deepEqual(await E(() => window.__etch.lossMarks), lost);
  if (shots) await page.screenshot({ path: join(shots, 'timeline-test.png') });
});

test('keys zoom and pan', async () => {
  const before0 = await E(() => [window.__etch.view.s, window.__etch.view.e]);
  await page.focus('#tl');
  await tile(() => page.keyboard.press('w'));
  const zoomed = await E(() => [window.__etch.view.s, window.__etch.view.e]);
  assert.ok(zoomed[1] - zoomed[0] < before0[1] - before0[0]);
  await tile(() => page.keyboard.press('d'));
  const panned = await E(() => [window.__etch.view.s, window.__etch.view.e]);
  assert.ok(panned[0] > zoomed[0]);
  assert.equal(panned[1] - panned[0], zoomed[1] - zoomed[0]);
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
});

async function clickRect(pred) {
  const r = await E((src) => window.__etch.rects.find(new Function('r', 'return ' + src)), pred);
  assert.ok(r, 'no drawn rectangle where ' + pred);
  const box = await page.$eval('#tl', (c) => { const b = c.getBoundingClientRect(); return { x: b.x, y: b.y }; });
  await page.mouse.click(box.x + r.x + Math.min(r.w / 2, 20), box.y + r.y + r.h / 2);
  return r;
}

test('a clicked slice shows its details as etch query has them', async () => {
  const r = await clickRect("r.name === 'draw' && r.ts === 2000");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, r.id);
  const d = await E(() => window.__etch.details);
  const [[id, ts, dur, self, name, cat, depth]] =
    query('select id, ts, dur, self_dur, name, category, depth from slice where ts = 2000');
  assert.deepEqual([d.id, d.ts, d.dur, d.self, d.name, d.category, d.depth], [id, ts, dur, self, name, cat, depth]);
  const text = await page.textContent('#details');
  assert.match(text, /duration40\.00 us/);
  assert.match(text, /threadmain 10/);
  // The frame: its arg and the flow to the job.
  const f = await clickRect("r.name === 'frame' && r.ts === 1000");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, f.id);
  const fd = await E(() => window.__etch.details);
  assert.deepEqual(fd.args, query('select key, display_value from args where arg_set_id = ' +
                                  '(select arg_set_id from slice where id = ' + f.id + ')').map((r) => r.map(String)));
  const [[jobId]] = query('select slice_in from flow where slice_out = ' + f.id);
  assert.deepEqual(fd.flows_out.map((x) => x.id), [jobId]);
  assert.match(await page.textContent('#details'), /Flow to.*job/s);
});

test('search highlights the matches and steps through them', async () => {
  await page.fill('#search', 'tiny');
  await page.press('#search', 'Enter');
  await page.waitForFunction(() => window.__etch.search);
  const s = await E(() => window.__etch.search);
  const want = query("select id, name from slice where name ilike '%tiny%' order by ts, id");
  assert.equal(s.total, want.length);
  assert.deepEqual(s.matches.map((m) => [m.id, m.name]), want);
  // The first Enter goes to the first match.
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, want[0][0]);
  assert.equal(await page.textContent('#matches'), '1 / ' + want.length);
  // Drawn at this zoom they are one merged rectangle: highlighted.
  assert.ok((await E(() => window.__etch.rects.filter((r) => r.hit).length)) >= 1);
  await page.click('#next');
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, want[1][0]);
  await page.press('#search', 'Enter');
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, want[2][0]);
  await page.click('#prev');
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, want[1][0]);
  assert.equal(await page.textContent('#matches'), '2 / ' + want.length);
  // A new text: its first Enter goes to its first match (shift+Enter: the last).
  await page.fill('#search', 'draw');
  await page.press('#search', 'Shift+Enter');
  const draws = query("select id from slice where name ilike '%draw%' order by ts, id");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, draws[draws.length - 1][0]);
  await page.fill('#search', 'frame');
  await page.press('#search', 'Enter');
  const frames = query("select id from slice where name = 'frame' order by ts, id");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, frames[0][0]);
  await page.fill('#search', '');
  await page.press('#search', 'Enter');
});

// etch's duration format (the page's fmtDur).
function fmtDur(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return ns + ' ns';
  if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
  if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
  return (ns / 1e9).toFixed(3) + ' s';
}
const canvasBox = (p) => p.$eval('#tl', (c) => { const b = c.getBoundingClientRect(); return { x: b.x, y: b.y }; });
// Moves the pointer to (x, y) of the timeline's canvas and waits for the
// tooltip to say `want` (text or a regular expression).
async function hoverFor(p, x, y, want) {
  const box = await canvasBox(p);
  await p.mouse.move(box.x + x, box.y + y);
  await p.waitForFunction(([w, re]) => {
    const t = window.__etch.tip;
    return t && (re ? new RegExp(w).test(t.text) : t.text === w);
  }, [want instanceof RegExp ? want.source : want, want instanceof RegExp]);
  const t = await p.evaluate(() => window.__etch.tip);
  assert.equal(await p.isHidden('#tip'), false);
  assert.equal(await p.textContent('#tip'), t.text);
  return t;
}

test('hover: a slice, an instant, a merged mark, a counter and a flow say what they are', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  const [[start]] = query('select start_ts from trace_bounds');
  const rect = (pred) => E((src) => window.__etch.rects.find(new Function('r', 'return ' + src)), pred);
  // A slice: name, start, duration, its args (none).
  const draw = await rect("r.name === 'draw' && r.ts === 2000");
  let t = await hoverFor(page, draw.x + 10, draw.y + draw.h / 2,
                         'draw\nstart ' + fmtDur(2000 - start) + '\nduration 40.00 us\nargs: none');
  assert.equal(t.kind, 'slice');
  // The frame's arg, as etch query has it.
  const frame = await rect("r.name === 'frame' && r.ts === 1000");
  const [[key, val]] = query("select key, display_value from args where arg_set_id = " +
                             "(select arg_set_id from slice where name = 'frame' and ts = 1000)");
  await hoverFor(page, frame.x + 3, frame.y + frame.h / 2,
                 'frame\nstart ' + fmtDur(0) + '\nduration 100.00 us\nargs: ' + key + ' = ' + val);
  // An instant (its diamond).
  const vsync = await rect("r.name === 'vsync'");
  t = await hoverFor(page, vsync.x, vsync.y + vsync.h / 2,
                     'vsync\nstart ' + fmtDur(45000 - start) + '\ninstant\nargs: none');
  assert.equal(t.kind, 'instant');
  // Tiny slices, merged at a coarser zoom (which depends on the width).
  let merged;
  for (const e of [400001, 700001, 1000001, 2000001]) {
    await tile(() => E((x) => window.__etch.setWindow(0, x), e));
    if ((merged = await rect('r.count > 1'))) break;
  }
  assert.ok(merged, 'no merged mark');
  t = await hoverFor(page, merged.x + merged.w / 2, merged.y + merged.h / 2, /^\d+ slices merged/);
  assert.equal(t.text, merged.count + ' slices merged (the longest: ' + merged.name + ')\nfrom ' +
               fmtDur(merged.ts - start) + ' to ' + fmtDur(merged.end - start) + ': zoom in to see them');
  assert.equal(t.kind, 'merged');
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  // The counter: the value in force at the pointer.
  const heap = query("select id from track where name = 'heap'")[0][0];
  const row = await E((k) => { const w = document.getElementById('tl').clientWidth - 220;
    return { x: 220 + (60000 - window.__etch.view.s) * w / (window.__etch.view.e - window.__etch.view.s) }; }, heap);
  const heapY = await E((k) => window.__etch.rows.find((r) => r.track === k).y, heap);
  t = await hoverFor(page, row.x, heapY + 20, /^heap/);
  assert.equal(t.kind, 'counter');
  const [[v]] = query(`select value from counter where track_id = ${heap} and ts <= 60000 order by ts desc limit 1`);
  assert.match(t.text, new RegExp('\nat [0-9.]+ us: ' + v + ' '));
  // Nothing under the pointer: no tooltip.
  const box = await canvasBox(page);
  await page.mouse.move(box.x + 5, box.y + 5);
  await page.waitForFunction(() => window.__etch.tip === null);
  assert.equal(await page.isHidden('#tip'), true);
});

test('counters show their scale (greatest value and the bottom, with the unit)', async () => {
  const heap = query("select id from track where name = 'heap'")[0][0];
  const [[lo, hi]] = query(`select min(value), max(value) from counter where track_id = ${heap}`);
  const s = await E(() => window.__etch.counterScales);
  const unit = s[heap][0].replace(/^\S+/, '');
  assert.deepEqual(s[heap], [hi + unit, Math.min(0, lo) + unit]);
  assert.match(unit, /^ \S+$/);
});

test('flows: the selected slice\'s only, every one with "all flows"', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  const draw = await clickRect("r.name === 'draw' && r.ts === 2000");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, draw.id);
  assert.equal(await E(() => window.__etch.flowsDrawn), 0);
  const f = await clickRect("r.name === 'frame' && r.ts === 1000");
  await page.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, f.id);
  assert.equal(await E(() => window.__etch.flowsDrawn), 1);
  // Its tooltip: the slices it links and when.
  const [x0, y0, x1, y1] = (await E(() => window.__etch.flowLines))[0];
  const t = await hoverFor(page, (x0 + x1) / 2, (y0 + y1) / 2, /^flow: /);
  const [[start]] = query('select start_ts from trace_bounds');
  assert.equal(t.text, 'flow: frame \u2192 job\nfrom ' + fmtDur(101000 - start) + ' to ' + fmtDur(5000 - start));
  await clickRect("r.name === 'draw' && r.ts === 2000");
  await page.waitForFunction(() => window.__etch.flowsDrawn === 0);
  await page.check('#all-flows');
  const [[n]] = query('select count(*) from flow');
  await page.waitForFunction((k) => window.__etch.flowsDrawn === k, n);
  await page.uncheck('#all-flows');
  await page.waitForFunction(() => window.__etch.flowsDrawn === 0);
});

test('the time axis: labels in the unit and with the decimals the window needs, never one twice', async () => {
  const [[start, end]] = query('select start_ts, end_ts from trace_bounds');
  for (const [s, e] of [[start, end], [94000, 98000], [95000, 96000], [150000, 151000], [2000, 61000]]) {
    await tile(() => E(([a, b]) => window.__etch.setWindow(a, b), [s, e]));
    const labels = await E(() => window.__etch.axisLabels);
    assert.ok(labels.length >= 2, labels.join(' | '));
    assert.equal(new Set(labels).size, labels.length, labels.join(' | '));
    const unit = labels[0].split(' ')[1];
    const nums = labels.map((l) => { assert.equal(l.split(' ')[1], unit, l); return Number(l.split(' ')[0]); });
    for (let k = 1; k < nums.length; k++) assert.ok(nums[k] > nums[k - 1], labels.join(' | '));
  }
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
});

// The second trace (ui_trace.h, ui_zone_trace): 100 back-to-back steps.
const zoneTrace = join(dir, 'zone.pftrace');
execFileSync(process.env.UI_TRACE_GEN, [zoneTrace, 'zone']);
const zquery = (sql) => {
  const out = execFileSync(ETCH, ['query', '--csv', zoneTrace, sql], { env }).toString();
  return out.trim().split('\n').slice(1).filter((l) => l.length).map((l) => l.split(',').map((v) => (/^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v)));
};
let zui = null, zpage = null;
async function zoneUi() {
  if (zpage) return zpage;
  zui = await startUi([zoneTrace]);
  zpage = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await zpage.goto(zui.url);
  await zpage.waitForSelector('#traces tbody tr');
  const n = await zpage.evaluate(() => window.__etch.tiles);
  await zpage.click('#traces tbody tr:nth-child(1)');
  await zpage.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
  return zpage;
}
after(async () => { if (zpage) await zpage.close(); if (zui) await stopUi(zui.proc); });
const ztile = async (p, action) => {
  const n = await p.evaluate(() => window.__etch.tiles);
  await action();
  await p.waitForFunction((k) => window.__etch.tiles > k && window.__etch.busy === 0, n);
};

test('back-to-back slices of one name are drawn with a border between them', async () => {
  const p = await zoneUi();
  await ztile(p, () => p.evaluate(() => window.__etch.setWindow(1000, 301000)));
  const rects = (await p.evaluate(() => window.__etch.rects)).filter((r) => r.name === 'step' && r.count === 1)
    .sort((a, b) => a.ts - b.ts);
  assert.ok(rects.length >= 5);
  // Each step ends where the next starts: at the start of each, a darker
  // column than the middle of its fill.
  let checked = 0;
  for (let k = 1; k < rects.length; k++) {
    const a = rects[k - 1], b = rects[k];
    assert.equal(a.end, b.ts);
    if (b.w < 8 || b.x + b.w > 1390) continue;
    const [edge, mid] = await p.evaluate(([x, m, y]) => {
      const g = document.getElementById('tl').getContext('2d');
      const px = (xx) => Array.from(g.getImageData(xx, y, 1, 1).data);
      return [px(x), px(m)];
    }, [Math.round(b.x), Math.round(b.x + b.w / 2), Math.round(b.y + b.h / 2)]);
    const sum = (c) => c[0] + c[1] + c[2];
    assert.ok(sum(edge) < sum(mid) - 60, `step at ${b.ts}: the edge ${edge} against the fill ${mid}`);
    checked++;
  }
  assert.ok(checked >= 5, 'steps wide enough: ' + checked);
  assert.ok((await p.evaluate(() => window.__etch.borders)) >= checked);
});

test('the time axis of a 59 us window at 2.44 ms reads each label once', async () => {
  const p = await zoneUi();
  const [[start]] = zquery('select start_ts from trace_bounds');
  await ztile(p, () => p.evaluate((s) => window.__etch.setWindow(s + 2440000, s + 2499000), start));
  const labels = await p.evaluate(() => window.__etch.axisLabels);
  assert.deepEqual(labels, ['2.440 ms', '2.445 ms', '2.450 ms', '2.455 ms', '2.460 ms', '2.465 ms',
                            '2.470 ms', '2.475 ms', '2.480 ms', '2.485 ms', '2.490 ms', '2.495 ms']);
  // The counter's scale on this trace: 100 at the top, 0 at the bottom.
  const load = zquery("select id from track where name = 'load'")[0][0];
  const sc = await p.evaluate(() => window.__etch.counterScales);
  assert.equal(sc[load][0].split(' ')[0], '100');
  assert.equal(sc[load][1].split(' ')[0], '0');
});

// Nearest rank: the ceil(k * n / 100)-th smallest.
const nearest = (sorted, k) => sorted[Math.max(1, Math.ceil(k * sorted.length / 100)) - 1];

test('find zone: a name\'s histogram and percentiles, as etch stats --slice has them; a bar lists its slices, a row goes there', async () => {
  const p = await zoneUi();
  await p.click('#tabs button[data-tab=zone]');
  await p.waitForFunction(() => window.__etch.zone && window.__etch.busy === 0);
  const names = await p.$$eval('#zone-names option', (o) => o.map((x) => x.value));
  assert.deepEqual(names, zquery('select name from slice where dur >= 0 group by name order by count(*) desc, name').map((r) => r[0]));
  assert.equal(await p.inputValue('#zone-name'), 'step');
  const z = await p.evaluate(() => window.__etch.zone.zone);
  const cli = JSON.parse(execFileSync(ETCH, ['stats', '--slice', 'step', '--json', zoneTrace], { env }).toString());
  assert.deepEqual(z, cli);
  const durs = zquery("select dur from slice where name = 'step' and dur >= 0 order by dur").map((r) => r[0]);
  assert.deepEqual([z.count, z.min, z.p50, z.p90, z.p99, z.max],
                   [durs.length, durs[0], nearest(durs, 50), nearest(durs, 90), nearest(durs, 99), durs[durs.length - 1]]);
  assert.equal(z.histogram.reduce((a, b) => a + b.count, 0), z.count);
  for (const b of z.histogram) assert.equal(b.count, durs.filter((d) => d >= b.lo && d < b.hi).length);
  // What the page shows: the numbers and a bar a bucket.
  const cells = await p.$$eval('#zone-table tbody td', (t) => t.map((c) => c.textContent));
  assert.deepEqual(cells, [String(z.count), ...['min', 'p50', 'p90', 'p99', 'max'].map((k) => fmtDur(z[k]))]);
  const bars = await p.$$eval('#zone-hist button', (b) => b.map((x) => Number(x.dataset.count)));
  assert.deepEqual(bars, z.histogram.map((b) => b.count));
  // The page's histogram and etch stats' at another bucket count agree too.
  const cli10 = JSON.parse(execFileSync(ETCH, ['stats', '--slice', 'step', '--json', '--buckets', '10', zoneTrace], { env }).toString());
  assert.deepEqual(cli10.histogram.map((b) => b.count), Array(10).fill(10));
  // The last non-empty bar: its slices by time.
  const k = z.histogram.length - 1, b = z.histogram[k];
  await p.click(`#zone-hist button[data-k="${k}"]`);
  await p.waitForFunction(() => window.__etch.zone.instances && window.__etch.busy === 0);
  const want = zquery(`select id, ts, dur from slice where name = 'step' and dur >= ${b.lo} and dur < ${b.hi} order by ts, id`);
  const inst = await p.evaluate(() => window.__etch.zone.instances);
  assert.deepEqual(inst.map((x) => [x[0], x[1], x[2]]), want);
  const rows = await p.$$eval('#zone-slices tbody tr', (t) => t.map((r) => [Number(r.dataset.id), r.cells[1].textContent]));
  assert.deepEqual(rows, want.map(([id, , dur]) => [id, fmtDur(dur)]));
  // A row: the timeline, that slice selected and in view.
  await ztile(p, () => p.click('#zone-slices tbody tr:first-child'));
  await p.waitForFunction((id) => window.__etch.details && window.__etch.details.id === id, want[0][0]);
  assert.equal(await p.evaluate(() => window.__etch.section), 'timeline');
  const v = await p.evaluate(() => [window.__etch.view.s, window.__etch.view.e]);
  assert.ok(v[0] < want[0][1] && want[0][1] + want[0][2] < v[1]);
  assert.ok(await p.evaluate((id) => window.__etch.rects.some((r) => r.id === id && r.count === 1), want[0][0]));
  if (shots) {
    await p.click('#tabs button[data-tab=zone]');
    await p.waitForFunction(() => window.__etch.zone && window.__etch.busy === 0);
    await p.screenshot({ path: join(shots, 'zone-test.png') });
  }
});

test('track control: a process folds, a track collapses, a track pinned goes to the top', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  const box = await canvasBox(page);
  const rows = () => E(() => window.__etch.rows);
  const main = query("select t.id from track t join thread using (utid) where thread.name = 'main'")[0][0];
  const worker = query("select t.id from track t join thread using (utid) where thread.name = 'worker'")[0][0];
  const tracks = (await E(() => window.__etch.layout)).filter((r) => r.track !== undefined).length;
  assert.equal(tracks, 3); // main, worker, heap
  // Fold the process: its header says how many tracks, none drawn.
  let proc = (await rows()).find((r) => r.kind === 'process');
  assert.equal(proc.label, '\u25be app 10');
  await tile(() => page.mouse.click(box.x + 40, box.y + proc.y + 10));
  const folded = await E(() => window.__etch.layout);
  assert.deepEqual(folded.map((r) => [r.kind, r.label]), [['process', '\u25b8 app 10  (' + tracks + ' tracks)']]);
  assert.deepEqual(await E(() => window.__etch.drawn), {});
  proc = (await rows()).find((r) => r.kind === 'process');
  await tile(() => page.mouse.click(box.x + 40, box.y + proc.y + 10));
  assert.equal((await E(() => window.__etch.layout)).filter((r) => r.track !== undefined).length, tracks);
  // Collapse main: one row, its depth-0 slices only; expand it again.
  let row = (await rows()).find((r) => r.track === main);
  assert.ok(row.h > 30);
  await tile(() => page.mouse.click(box.x + 5, box.y + row.y + 10));
  row = (await rows()).find((r) => r.track === main);
  assert.equal(row.h, 22);
  assert.equal(row.collapsed, true);
  let depths = new Set((await E(() => window.__etch.rects)).filter((r) => r.track === main).map((r) => r.depth));
  assert.deepEqual([...depths], [0]);
  await tile(() => page.mouse.click(box.x + 5, box.y + row.y + 10));
  depths = new Set((await E(() => window.__etch.rects)).filter((r) => r.track === main).map((r) => r.depth));
  assert.deepEqual([...depths].sort(), [0, 1]);
  // Pin the worker: first under the axis, under "Pinned", and only there.
  row = (await rows()).find((r) => r.track === worker);
  await tile(() => page.mouse.click(box.x + 220 - 14, box.y + row.y + 10));
  let lay = await E(() => window.__etch.layout);
  assert.deepEqual(lay.slice(0, 2).map((r) => [r.kind, r.track === undefined ? r.label : r.track]),
                   [['group', 'Pinned'], ['slices', worker]]);
  assert.equal(lay.filter((r) => r.track === worker).length, 1);
  assert.ok((await E(() => window.__etch.drawn))[worker] > 0);
  row = (await rows()).find((r) => r.track === worker);
  assert.equal(row.pinned, true);
  await tile(() => page.mouse.click(box.x + 220 - 14, box.y + row.y + 10));
  lay = await E(() => window.__etch.layout);
  assert.equal(lay[0].kind, 'process');
  assert.deepEqual(await E(() => window.__etch.ctl), { folded: [], collapsed: [], pinned: [] });
});

test('tracks move: a drag of a track\'s name, Alt+arrows; the order in the address; pinned tracks stay while the rest scrolls', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  const box = await canvasBox(page);
  const rows = () => E(() => window.__etch.rows);
  const tracksShown = async () => (await E(() => window.__etch.layout)).filter((r) => r.track !== undefined).map((r) => r.track);
  const main = query("select t.id from track t join thread using (utid) where thread.name = 'main'")[0][0];
  const worker = query("select t.id from track t join thread using (utid) where thread.name = 'worker'")[0][0];
  const [[heap]] = query("select id from track where name = 'heap'");
  assert.deepEqual(await tracksShown(), [heap, main, worker]);
  // Drag worker's name above heap's middle: worker first.
  let r = await rows();
  const from = r.find((x) => x.track === worker), to = r.find((x) => x.track === heap);
  await page.mouse.move(box.x + 80, box.y + from.y + 10);
  await page.mouse.down();
  await page.mouse.move(box.x + 80, box.y + to.y + 4, { steps: 6 });
  await tile(() => page.mouse.up());
  assert.deepEqual(await tracksShown(), [worker, heap, main]);
  assert.deepEqual(await E(() => window.__etch.order), [worker, heap, main]);
  // A click (no drag) does not move it: a click on main's name collapses
  // it as before.
  r = await rows();
  await tile(() => page.mouse.click(box.x + 80, box.y + r.find((x) => x.track === main).y + 10));
  assert.deepEqual(await E(() => window.__etch.ctl.collapsed), [main]);
  await tile(async () => page.mouse.click(box.x + 80, box.y + (await rows()).find((x) => x.track === main).y + 10));
  assert.deepEqual(await E(() => window.__etch.ctl.collapsed), []);
  // The keyboard: the selected slice's track one place down, then up.
  await page.focus('#tl');
  const frame = query("select id from slice where name = 'frame' order by ts limit 1")[0][0];
  await E((k) => window.__etch.selectSlice({ id: k, count: 1, ts: 0, end: 0, name: '' }), frame);
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k && window.__etch.busy === 0, frame);
  await page.keyboard.press('Alt+ArrowDown'); // the last already: stays
  assert.deepEqual(await tracksShown(), [worker, heap, main]);
  await tile(() => page.keyboard.press('Alt+ArrowUp'));
  assert.deepEqual(await tracksShown(), [worker, main, heap]);
  await tile(() => page.keyboard.press('Alt+ArrowDown'));
  assert.deepEqual(await tracksShown(), [worker, heap, main]);
  // In the address, and so after a reload (with what is pinned).
  await tile(async () => page.mouse.click(box.x + 220 - 14, box.y + (await rows()).find((x) => x.track === worker).y + 10));
  await page.waitForFunction((o) => new URLSearchParams(location.hash.slice(1)).get('order') === o &&
                             new URLSearchParams(location.hash.slice(1)).get('pin') === o.split(',')[0],
                             [worker, heap, main].join(','));
  const url = await E(() => location.href);
  const p = await page.context().newPage();
  await p.goto(url);
  await p.waitForFunction(() => window.__etch && window.__etch.tiles > 0 && window.__etch.busy === 0);
  assert.deepEqual((await p.evaluate(() => window.__etch.layout)).filter((x) => x.track !== undefined).map((x) => x.track),
                   [worker, heap, main]);
  assert.deepEqual(await p.evaluate(() => window.__etch.ctl.pinned), [worker]);
  await p.close();
  // Pinned, with a timeline too short for its rows: the pinned rows stay
  // where they are while the others scroll under them, and nothing of
  // those is drawn over the pinned area.
  await E(() => { document.getElementById('tl-scroll').style.flex = '0 0 130px'; window.dispatchEvent(new Event('resize')); });
  await page.waitForFunction(() => window.__etch.busy === 0 && document.getElementById('tl-scroll').clientHeight === 130);
  const pinTop = await E(() => window.__etch.pinTop);
  const before = await rows();
  const pinnedY = before.find((x) => x.track === worker).y;
  assert.equal(pinTop, 24 + 20 + before.find((x) => x.track === worker).h);
  const n = await E(() => window.__etch.frames);
  await E(() => { document.getElementById('tl-scroll').scrollTop = 30; });
  await page.waitForFunction((k) => window.__etch.frames > k && window.__etch.busy === 0, n);
  const after = await rows();
  assert.equal(after.find((x) => x.track === worker).y, pinnedY);
  assert.equal(after.find((x) => x.track === heap).y, before.find((x) => x.track === heap).y - 30);
  // The process's header wholly under the pinned rows, heap's row partly.
  assert.equal(after.find((x) => x.kind === 'process'), undefined);
  const hr = after.find((x) => x.track === heap);
  assert.ok(hr.y < pinTop && hr.y + hr.h > pinTop && hr.top === pinTop, JSON.stringify(hr));
  const rects = await E(() => window.__etch.rects);
  assert.ok(rects.some((x) => x.track === worker));
  for (const x of rects) if (x.track !== worker) assert.ok(x.y >= pinTop, JSON.stringify(x));
  // A click in the pinned area is the pinned track's.
  const job = query("select id from slice where name = 'job' order by ts limit 1")[0][0];
  const jr = rects.find((x) => x.id === job);
  await page.mouse.click(box.x + jr.x + 3, box.y + jr.y + 5);
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k && window.__etch.busy === 0, job);
  // Back as it was.
  await E(() => { const s = document.getElementById('tl-scroll'); s.scrollTop = 0; s.style.flex = ''; window.dispatchEvent(new Event('resize')); });
  await tile(() => page.mouse.click(box.x + 220 - 14, box.y + pinnedY + 10));
  await tile(() => E(() => window.__etch.resetTracks()));
  assert.deepEqual(await tracksShown(), [heap, main, worker]);
  await page.keyboard.press('Escape');
});

test('the keyboard alone: ? shows the keys, arrows select slices, F fits, C P G control the track, digits change tab', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  await page.focus('#tl');
  await page.keyboard.press('Escape');
  await page.keyboard.press('?');
  assert.equal(await page.isHidden('#keys'), false);
  assert.match(await page.textContent('#keys'), /select the previous, next slice/);
  await page.keyboard.press('Escape');
  assert.equal(await page.isHidden('#keys'), true);
  const id = (sql) => query(sql)[0][0];
  const sel = async (key, want) => {
    await page.keyboard.press(key);
    await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k && window.__etch.busy === 0, want);
  };
  await sel('ArrowRight', id("select id from slice where name = 'frame' order by ts limit 1"));
  await sel('ArrowDown', id("select id from slice where name = 'draw' order by ts limit 1"));
  await sel('ArrowRight', id("select id from slice where name = 'vsync'"));
  await sel('ArrowLeft', id("select id from slice where name = 'draw' order by ts limit 1"));
  await sel('ArrowUp', id("select id from slice where name = 'frame' order by ts limit 1"));
  await tile(() => page.keyboard.press('f'));
  assert.deepEqual(await E(() => [window.__etch.view.s, window.__etch.view.e]), [1000 - 25000, 101000 + 25000]);
  const main = query("select t.id from track t join thread using (utid) where thread.name = 'main'")[0][0];
  await tile(() => page.keyboard.press('c'));
  assert.deepEqual(await E(() => window.__etch.ctl.collapsed), [main]);
  await tile(() => page.keyboard.press('c'));
  await tile(() => page.keyboard.press('p'));
  assert.deepEqual(await E(() => window.__etch.ctl.pinned), [main]);
  await tile(() => page.keyboard.press('p'));
  await tile(() => page.keyboard.press('g'));
  assert.equal((await E(() => window.__etch.ctl.folded)).length, 1);
  await tile(() => page.keyboard.press('g'));
  assert.deepEqual(await E(() => window.__etch.ctl), { folded: [], collapsed: [], pinned: [] });
  await page.keyboard.press('2');
  await page.waitForFunction(() => window.__etch.section === 'flame' && window.__etch.flame);
  await page.keyboard.press('1');
  await page.waitForFunction(() => window.__etch.section === 'timeline');
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
});

test('the page\'s state is in its address, without the token: reloaded or opened elsewhere it shows the same view', async () => {
  await tile(() => E(() => window.__etch.setWindow(2000, 61000)));
  const d = await clickRect("r.name === 'draw' && r.ts === 2000");
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k, d.id);
  await page.waitForFunction((k) => new RegExp('[#&]sel=' + k + '(&|$)').test(location.hash) &&
                          /[#&]s=2000(&|$)/.test(location.hash), d.id);
  const url = page.url();
  assert.ok(!url.includes('token'), url);
  assert.ok(!url.includes(new URL(base).searchParams.get('token')), url);
  const id = await E(() => window.__etch.trace.id);
  const h = new URLSearchParams(new URL(url).hash.slice(1));
  assert.deepEqual([h.get('trace'), h.get('s'), h.get('e'), h.get('sel')], [id, '2000', '61000', String(d.id)]);
  // Another page of this browser, at that address (no token in it).
  const p = await page.context().newPage();
  await p.goto(url);
  await p.waitForFunction((k) => window.__etch && window.__etch.tiles > 0 && window.__etch.busy === 0 && window.__etch.details &&
                          window.__etch.details.id === k, d.id);
  assert.deepEqual(await p.evaluate(() => [window.__etch.view.s, window.__etch.view.e, window.__etch.section]),
                   [2000, 61000, 'timeline']);
  assert.equal(await p.isHidden('#error'), true);
  // The tab and the range too.
  await p.click('#tabs button[data-tab=flame]');
  await p.waitForFunction(() => window.__etch.flame);
  await p.evaluate(() => window.__etch.selectRange(3000, 50000));
  await p.waitForFunction(() => /tab=flame/.test(location.hash) && /range=3000%2C50000/.test(location.hash));
  await p.reload();
  await p.waitForFunction(() => window.__etch && window.__etch.section === 'flame' && window.__etch.flame &&
                          window.__etch.range && window.__etch.busy === 0);
  assert.deepEqual(await p.evaluate(() => [window.__etch.range.start, window.__etch.range.end]), [3000, 50000]);
  await p.close();
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
});

test('a range selected with shift+drag gets the table of its slices by name', async () => {
  await tile(() => E(() => window.__etch.setWindow(0, 200001)));
  const box = await page.$eval('#tl', (c) => { const b = c.getBoundingClientRect(); return { x: b.x, y: b.y }; });
  const w = await E(() => document.getElementById('tl').clientWidth - 220);
  // From inside the first frame (it starts at 1000) to 55 % of the window.
  const x0 = box.x + 220 + w * 0.03, x1 = box.x + 220 + w * 0.55;
  await E(() => { window.__etch.range = null; });
  await page.keyboard.down('Shift');
  await page.mouse.move(x0, box.y + 60);
  await page.mouse.down();
  await page.mouse.move((x0 + x1) / 2, box.y + 60, { steps: 4 });
  await page.mouse.move(x1, box.y + 60, { steps: 4 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForFunction(() => window.__etch.range && window.__etch.range.rows);
  const r = await E(() => window.__etch.range);
  assert.ok(r.start > 1000 && r.end > r.start && r.end < 200000);
  // As Perfetto's area selection: the slices that overlap the range, the
  // frame that starts before it included; durations whole.
  const sql = `select name, count(*), sum(dur), sum(self_dur), min(dur), avg(dur), max(dur) from slice
               where dur >= 0 and ts < ${r.end} and (ts + dur > ${r.start} or (dur = 0 and ts >= ${r.start}))
               group by name order by 3 desc, 1`;
  const want = query(sql);
  assert.ok(want.some((x) => x[0] === 'frame'));
  assert.deepEqual(r.rows.map((x) => x.map((v) => (typeof v === 'number' ? Number(v.toFixed(3)) : v))),
                   want.map((x) => x.map((v) => (typeof v === 'number' ? Number(v.toFixed(3)) : v))));
  // What the page shows: name, count, total, self, avg, max, min.
  const heads = await page.$$eval('#range-table th', (t) => t.map((c) => c.textContent));
  assert.deepEqual(heads, ['name', 'count', 'total', 'self', 'avg', 'max', 'min']);
  const cells = await page.$$eval('#range-table tbody tr', (t) => t.map((x) => [...x.cells].map((c) => c.textContent)));
  assert.deepEqual(cells, want.map(([name, count, total, self, min, avg, max]) =>
    [name, String(count), fmtDur(total), fmtDur(self), fmtDur(Math.round(avg)), fmtDur(max), fmtDur(min)]));
  // A header sorts by its column: count, largest first.
  await page.click('#range-table th:nth-child(2)');
  const counts = await page.$$eval('#range-table tbody tr', (t) => t.map((x) => Number(x.cells[1].textContent)));
  assert.deepEqual(counts, want.map((x) => x[1]).sort((a, b) => b - a));
  // Its length is on the time axis.
  assert.equal(await E(() => window.__etch.rangeLabel), fmtDur(r.end - r.start));
  // A row finds its name's slices (the search box), outlined.
  await page.click('#range-table tbody tr >> text=draw');
  await page.waitForFunction(() => window.__etch.search && window.__etch.search.q === 'draw');
  assert.equal(await page.inputValue('#search'), 'draw');
  assert.equal(await E(() => window.__etch.search.total), query("select count(*) from slice where name like '%draw%'")[0][0]);
  await page.fill('#search', '');
  await page.press('#search', 'Enter');
  await page.waitForFunction(() => window.__etch.search === null);
  // M: the selected slice's time as the range (the first frame: 1000 ..
  // 101000), its table below.
  await page.focus('#tl');
  const [[frame]] = query("select id from slice where name = 'frame' order by ts limit 1");
  await E((k) => window.__etch.selectSlice({ id: k, count: 1, ts: 0, end: 0, name: '' }), frame);
  await page.waitForFunction((k) => window.__etch.details && window.__etch.details.id === k && window.__etch.busy === 0, frame);
  await E(() => { window.__etch.range = null; });
  await page.keyboard.press('m');
  await page.waitForFunction(() => window.__etch.range && window.__etch.range.rows);
  assert.deepEqual(await E(() => [window.__etch.range.start, window.__etch.range.end]), [1000, 101000]);
  assert.equal(await E(() => window.__etch.rangeLabel), '100.00 us');
  assert.deepEqual((await E(() => window.__etch.range.rows)).map((x) => [x[0], x[1]]),
                   query(`select name, count(*) from slice where dur >= 0 and ts < 101000 and
                          (ts + dur > 1000 or (dur = 0 and ts >= 1000)) group by name order by sum(dur) desc, name`));
  await page.keyboard.press('Escape');
});

test('the flame graph\'s root and children are etch\'s totals', async () => {
  await page.click('#tabs button[data-tab=flame]');
  await page.waitForFunction(() => window.__etch.flame);
  const f = await E(() => window.__etch.flame);
  const [[total]] = query('select sum(dur) from slice where depth = 0 and dur > 0');
  assert.equal(f.root.total, total);
  const kids = query('select name, sum(dur), count(*) from slice where depth = 0 and dur > 0 group by name order by 2 desc');
  assert.deepEqual(f.rootChildren.map((k) => [k.name, k.total, k.count]), kids);
  // A click on the root's first child (the biggest): its subtree. The
  // root is row 0, its children row 1 (18 px a row), left to right.
  const box = await page.$eval('#fl', (c) => { const r = c.getBoundingClientRect(); return { x: r.x, y: r.y }; });
  const w = await page.$eval('#fl', (c) => c.clientWidth);
  await page.mouse.click(box.x + 5, box.y + 18 + 9);
  await page.waitForFunction((n) => window.__etch.flame.zoom.name === n, kids[0][0]);
  const z = await E(() => window.__etch.flame);
  const sub = query(`select name, sum(dur), count(*) from slice where dur > 0 and parent_id in
                     (select id from slice where depth = 0 and name = '${kids[0][0]}') group by name order by 2 desc, 1`);
  assert.deepEqual(z.children.map((k) => [k.name, k.total, k.count]).sort((a, c) => c[1] - a[1] || (a[0] < c[0] ? -1 : 1)), sub);
  assert.ok(w > 0);
  if (shots) await page.screenshot({ path: join(shots, 'flame-test.png') });
});

test('the flame graph: labels where they fit, a tooltip on every node, names highlighted by the search', async () => {
  await page.click('#tabs button[data-tab=flame]');
  await page.waitForFunction(() => window.__etch.flame && window.__etch.busy === 0);
  await page.click('#fl-reset');
  const f = await E(() => window.__etch.flame);
  assert.ok(f.labels > 0 && f.labels <= f.boxes);
  // Hover: the root's first child.
  const box = await page.$eval('#fl', (c) => { const r = c.getBoundingClientRect(); return { x: r.x, y: r.y }; });
  await page.mouse.move(box.x + 5, box.y + 18 + 9);
  await page.waitForFunction(() => window.__etch.tip && window.__etch.tip.kind === 'flame');
  const k = f.rootChildren[0];
  assert.equal((await E(() => window.__etch.tip.text)),
               [k.name, 'total ' + fmtDur(k.total) + ' (' + (100 * k.total / f.root.total).toFixed(2) + '% of the whole)',
                'self ' + fmtDur(k.self), k.count + ' slices', 'click: zoom into it'].join('\n'));
  // The search: the draw nodes, their time.
  await page.fill('#fl-search', 'DRAW');
  await page.waitForFunction(() => window.__etch.flame.search === 'draw');
  const g = await E(() => window.__etch.flame);
  const [[total]] = query("select sum(dur) from slice where name = 'draw' and dur > 0");
  assert.equal(g.matchTotal, total);
  assert.ok(g.matches >= 1);
  assert.match(await page.textContent('#fl-info'), new RegExp('^' + g.matches + ' nodes drawn match "draw": ' + fmtDur(total).replace('.', '\\.')));
  await page.fill('#fl-search', '');
  await page.mouse.move(box.x - 5, box.y - 5);
});

// A third trace (ui_trace.h, ui_flame_trace): 300 names under each frame,
// most of their nodes too narrow for a label.
test('a flame graph too wide to label: the table beside it lists its names by self time, filters and highlights', async () => {
  const flameTrace = join(dir, 'flame.pftrace');
  execFileSync(process.env.UI_TRACE_GEN, [flameTrace, 'flame']);
  const fquery = (sql) => execFileSync(ETCH, ['query', '--csv', flameTrace, sql], { env }).toString()
    .trim().split('\n').slice(1).map((l) => l.split(',').map((v) => (/^-?\d+$/.test(v) ? Number(v) : v)));
  const ui = await startUi([flameTrace]);
  const p = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  try {
    await p.goto(ui.url);
    await p.waitForSelector('#traces tbody tr');
    await p.click('#traces tbody tr:nth-child(1)');
    await p.waitForFunction(() => window.__etch.tiles > 0 && window.__etch.busy === 0);
    await p.click('#tabs button[data-tab=flame]');
    await p.waitForFunction(() => window.__etch.flame && window.__etch.flameFunctions);
    const f = await p.evaluate(() => window.__etch.flame);
    // Most nodes have no room for a label.
    assert.ok(f.boxes > 300 && f.labels < f.boxes / 10, JSON.stringify([f.boxes, f.labels]));
    // Every name of the trace, by self time (then name): self, total and
    // count as etch query has them (no name nests in itself here).
    const want = fquery(`select name, sum(self_dur) as self, sum(dur), count(*) from slice where dur > 0
                         group by name order by self desc, name`);
    assert.equal(want.length, 306);
    const got = await p.evaluate(() => window.__etch.flameFunctions.rows);
    assert.deepEqual(got, want);
    // What the table shows: the same, formatted.
    const cells = await p.$$eval('#fl-table tbody tr', (t) => t.map((r) => [...r.cells].map((c) => c.textContent)));
    assert.deepEqual(cells, want.map(([n, self, total, count]) => [n, fmtDur(self), fmtDur(total), String(count)]));
    // A header sorts: count, largest first.
    await p.click('#fl-table th:nth-child(4)');
    const counts = await p.$$eval('#fl-table tbody tr', (t) => t.map((r) => Number(r.cells[3].textContent)));
    assert.deepEqual(counts, want.map((r) => r[3]).sort((a, b) => b - a));
    // The box keeps the names holding its text.
    await p.fill('#fl-search', 'LEAF');
    await p.waitForFunction(() => window.__etch.flame.search === 'leaf');
    const leaves = await p.$$eval('#fl-table tbody tr', (t) => t.map((r) => r.cells[0].textContent).sort());
    assert.deepEqual(leaves, ['leaf_0', 'leaf_1', 'leaf_2', 'leaf_3', 'leaf_4']);
    // A row highlights that name's nodes and only them (fn_010, not fn_0100).
    await p.fill('#fl-search', 'fn_01');
    await p.click('#fl-table tbody tr >> text=fn_010');
    await p.waitForFunction(() => window.__etch.flameFunctions.exact === 'fn_010');
    const g = await p.evaluate(() => window.__etch.flame);
    const [[total]] = fquery("select sum(dur) from slice where name = 'fn_010'");
    assert.equal(g.matches, 1);
    assert.equal(g.matchTotal, total);
    assert.equal(await p.inputValue('#fl-search'), 'fn_010');
    // Zoomed into a frame's name: the table holds that subtree's names.
    await p.fill('#fl-search', '');
    await p.mouse.click((await p.$eval('#fl', (c) => c.getBoundingClientRect().x)) + 5,
                        (await p.$eval('#fl', (c) => c.getBoundingClientRect().y)) + 18 + 9);
    await p.waitForFunction(() => window.__etch.flame.zoom.name === 'frame');
    assert.equal((await p.evaluate(() => window.__etch.flameFunctions.rows)).length, 306);
    if (shots) await p.screenshot({ path: join(shots, 'flame-table.png') });
  } finally {
    await p.close();
    await stopUi(ui.proc);
  }
});

test('the stats tables are etch\'s and sort by a click', async () => {
  await page.click('#tabs button[data-tab=stats]');
  await page.waitForSelector('#stats-total tbody tr');
  const names = await page.$$eval('#stats-total tbody tr', (t) => t.map((r) => r.cells[0].textContent));
  const want = query('select name from slice where dur >= 0 group by name order by sum(dur) desc, name');
  assert.deepEqual(names, want.map((r) => r[0]).filter((n) => names.includes(n)).slice(0, names.length));
  assert.equal(names[0], want[0][0]);
  await page.click('#stats-total th:nth-child(2)'); // count, largest first
  const counts = await page.$$eval('#stats-total tbody tr', (t) => t.map((r) => Number(r.cells[1].textContent)));
  assert.deepEqual(counts, [...counts].sort((a, b) => b - a));
});

test('the SQL box answers what etch query answers, and refuses writes', async () => {
  await page.click('#tabs button[data-tab=sql]');
  const sql = 'select name, count(*) as n, sum(dur) as total from slice group by name order by total desc, name';
  await page.fill('#sql-text', sql);
  await page.click('#sql-run');
  await page.waitForFunction(() => window.__etch.sql);
  const r = await E(() => window.__etch.sql);
  assert.deepEqual(r.columns, ['name', 'n', 'total']);
  assert.deepEqual(r.rows, query(sql).map((x) => x.map(String)));
  assert.equal(await page.$$eval('#sql-table tbody tr', (t) => t.length), r.rows.length);
  await page.fill('#sql-text', 'delete from slice');
  await page.click('#sql-run');
  await page.waitForFunction(() => window.__etch.sql && window.__etch.sql.error);
  assert.match(await page.textContent('#sql-msg'), /only a SELECT, WITH or EXPLAIN/);
  assert.deepEqual(query('select count(*) from slice'), [[13]]);
});

test('requests without the token, with another Host or an unknown id are refused', async () => {
  const u = new URL(base);
  const token = u.searchParams.get('token');
  const id = await E(() => window.__etch.trace.id);
  const get = (path, headers) => fetch(u.origin + path, { headers });
  assert.equal((await get('/api/traces', {})).status, 401);
  assert.equal((await get('/api/traces', { 'X-Etch-Token': token.slice(1) })).status, 401);
  assert.equal((await get('/api/traces', { 'X-Etch-Token': token })).status, 200);
  assert.equal((await get('/api/trace?id=' + id.replace(/./, (c) => (c === '0' ? '1' : '0')), { 'X-Etch-Token': token })).status, 404);
  const q = encodeURIComponent("insert into stats values ('x', 0, 'info', 'x', 1, '')");
  assert.equal((await get('/api/sql?id=' + id + '&q=' + q, { 'X-Etch-Token': token })).status, 403);
  // fetch() will not set Host: a raw request does.
  const net = await import('node:net');
  const status = await new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), '127.0.0.1', () =>
      s.write(`GET /api/traces HTTP/1.1\r\nHost: rebound.example:${u.port}\r\nX-Etch-Token: ${token}\r\nConnection: close\r\n\r\n`));
    let t = '';
    s.on('data', (d) => { t += d; });
    s.on('end', () => resolve(Number(/^HTTP\/1\.\d (\d+)/.exec(t)[1])));
    s.on('error', reject);
  });
  assert.equal(status, 403);
});

test('etch ui and etch report refuse what they cannot do, saying why', async () => {
  const run = (args) => {
    try {
      execFileSync(ETCH, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      return { status: 0, err: '' };
    } catch (e) { return { status: e.status, err: String(e.stderr) }; }
  };
  let r = run(['report', trace]);
  assert.equal(r.status, 2);
  assert.match(r.err, /missing -o OUT\.html/);
  r = run(['report', '--columns', '5', trace, '-o', join(dir, 'x.html')]);
  assert.equal(r.status, 2);
  r = run(['ui', '--port', '70000', trace]);
  assert.equal(r.status, 2);
  assert.match(r.err, /not a port/);
  r = run(['ui', join(dir, 'nothing-here.pftrace')]);
  assert.equal(r.status, 1);
  assert.match(r.err, /nothing-here\.pftrace: No such file or directory/);
  r = run(['ui', '--address', 'example', trace]);
  assert.equal(r.status, 1);
  assert.match(r.err, /not an IPv4 address/);
  r = run(['ui', '--address', '0.0.0.0', trace]);
  assert.equal(r.status, 1);
  assert.match(r.err, /give the address the browser will use/);
  r = run(['report', bad, '-o', join(dir, 'bad.html')]);
  assert.equal(r.status, 1);
  assert.match(r.err, /corrupt\.pftrace/);
});

test('etch report: one file that opens from disk with no request at all', async () => {
  const out = join(dir, 'report.html');
  execFileSync(ETCH, ['report', trace, '-o', out, '--columns', '1000'], { env });
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const p = await ctx.newPage();
  const seen = [];
  p.on('request', (r) => seen.push(r.url()));
  const fileUrl = pathToFileURL(out).href;
  await p.goto(fileUrl);
  await p.waitForFunction(() => window.__etch && window.__etch.tiles > 0 && window.__etch.busy === 0);
  assert.deepEqual(seen, [fileUrl]);
  assert.equal(await p.evaluate(() => window.__etch.report), true);
  const drawn = await p.evaluate(() => window.__etch.drawn);
  const main = query("select t.id from track t join thread using (utid) where thread.name = 'main'")[0][0];
  assert.ok(drawn[main] > 0);
  await p.click('#tabs button[data-tab=flame]');
  await p.waitForFunction(() => window.__etch.flame);
  const [[total]] = query('select sum(dur) from slice where depth = 0 and dur > 0');
  assert.equal(await p.evaluate(() => window.__etch.flame.root.total), total);
  assert.deepEqual(seen, [fileUrl]);
  await ctx.close();
});
