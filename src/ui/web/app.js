// app.js - etch's viewer: the trace list, the timeline (canvas), slice
// details, search, range table, flame graph, stats and the SQL box.
//
// The page asks the server (etch ui, src/ui/api.c) for what the screen
// shows: a tile of the visible window at the screen's width, one request
// per change of the view. In a report (etch report) the same questions are
// answered from the data embedded in the page (window.ETCH_REPORT), and no
// request leaves the page.
//
// window.__etch exposes what was drawn (for the browser tests and for
// anyone debugging): the rectangles of the last timeline, the flame
// graph's nodes, and the view's state.
'use strict';
(function () {
  const REPORT = window.ETCH_REPORT || null;
  // The token: from the address etch ui printed (?token=), kept in this
  // origin's storage and taken out of the address bar, so that the
  // address - the page's state, in its #hash - can be shared or reloaded
  // without it.
  const TOKEN = (() => {
    if (REPORT) return '';
    const q = new URLSearchParams(location.search), t = q.get('token');
    let kept = null;
    try {
      if (t) localStorage.setItem('etch-token', t);
      kept = localStorage.getItem('etch-token');
    } catch (e) { /* storage refused: the address keeps the token */ return t || ''; }
    if (t) {
      q.delete('token');
      const rest = q.toString();
      history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
    }
    return t || kept || '';
  })();
  const $ = (id) => document.getElementById(id);
  const LABEL_W = 220, AXIS_H = 24, ROW_H = 18, PROC_H = 20, COUNTER_H = 40;
  // The row of CPU-sample ticks under a sampled thread's slices.
  const SAMPLE_H = 10;

  const dbg = window.__etch = {
    report: !!REPORT, tiles: 0, drawn: {}, flame: null,
    frames: 0, frameMs: [], inputAt: null, inputToFrameMs: null, inputToTileMs: null,
    trace: null, view: null, busy: 0, errors: 0,
    setWindow: (s, e) => { setWindow(s, e); },
    selectRange: (s, e) => { selectRange(s, e); },
    selectSlice: (r) => { selectSlice(r); },
    resetTracks: () => { T.ctl.order = null; relayout(); },
    open: (id) => { location.hash = '#trace=' + id; },
    flameNodes: () => (flameState.data ? flameState.data.map((n) => ({ i: n.i, parent: n.parent, name: n.name,
                                                                       total: n.total, self: n.self })) : null),
  };

  // ---- talking to the server ---------------------------------------------

  // `signal` (optional): an AbortController's, to drop the request.
  async function api(path, args, signal) {
    dbg.busy++;
    try {
      if (REPORT) return reportApi(path, args || {});
      const q = new URLSearchParams(args || {}).toString();
      const r = await fetch(path + (q ? '?' + q : ''),
                            { headers: { 'X-Etch-Token': TOKEN }, cache: 'no-store', signal });
      let body;
      try { body = await r.json(); } catch (e) {
        throw new Error('the server answered ' + r.status + ' without a usable answer');
      }
      if (r.status === 401) throw new Error('this page needs the token etch ui printed: open the address it printed ' +
                                            '(with ?token=) once in this browser, then this one');
      if (!r.ok) throw new Error(body.error || 'HTTP ' + r.status);
      return body;
    } finally { dbg.busy--; }
  }

  function showError(e) {
    const box = $('error');
    if (!e) { box.hidden = true; box.textContent = ''; return; }
    dbg.errors++;
    box.textContent = String(e.message || e);
    box.hidden = false;
  }
  function status(text) { $('status').textContent = text; }

  // ---- numbers ---------------------------------------------------------------

  function fmtDur(ns) {
    if (ns === null || ns === undefined) return '';
    const a = Math.abs(ns);
    if (a < 1e3) return ns + ' ns';
    if (a < 1e6) return (ns / 1e3).toFixed(2) + ' us';
    if (a < 1e9) return (ns / 1e6).toFixed(2) + ' ms';
    return (ns / 1e9).toFixed(3) + ' s';
  }
  // A label of the time axis: in the unit of the largest label shown, with
  // as many decimals as the tick needs (a 59 us window at 2.44 ms reads
  // 2.440, 2.445, 2.450 ms; never one label twice).
  function fmtTick(t, tick, top) {
    const units = [[1, 'ns'], [1e3, 'us'], [1e6, 'ms'], [1e9, 's']];
    let u = units[0];
    for (const x of units) if (Math.abs(top) >= x[0]) u = x;
    const dec = Math.max(0, Math.min(9, Math.ceil(-Math.log10(tick / u[0]) - 1e-9)));
    return (t / u[0]).toFixed(dec) + ' ' + u[1];
  }
  // A counter's value: a whole number as it is, else 4 significant digits.
  function fmtVal(v) {
    if (v === null || v === undefined || !isFinite(v)) return String(v);
    return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(4)));
  }
  function fmtSize(b) {
    if (b < 1024) return b + ' B';
    if (b < 1048576) return (b / 1024).toFixed(1) + ' KiB';
    if (b < 1073741824) return (b / 1048576).toFixed(1) + ' MiB';
    return (b / 1073741824).toFixed(2) + ' GiB';
  }
  function hashStr(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  const colors = [new Map(), new Map()]; // alone, merged
  function colorOf(name, merged) {
    const m = colors[merged ? 1 : 0];
    let c = m.get(name);
    if (!c) {
      const h = hashStr(name || '') % 360;
      c = merged ? 'hsl(' + h + ',25%,62%)' : 'hsl(' + h + ',55%,64%)';
      m.set(name, c);
    }
    return c;
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    if (attrs) for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // A table whose headers sort it (numbers as numbers). cols: [{name, num}].
  // onRow (optional): called with a row's values when it is clicked (or
  // Enter pressed on it).
  function sortableTable(cols, rows, fmt, onRow) {
    const t = el('table');
    const head = el('tr');
    const body = el('tbody');
    let key = -1, dir = 1;
    function fill() {
      body.textContent = '';
      for (const r of rows) {
        const tr = el('tr');
        r.forEach((v, i) => tr.appendChild(el('td', cols[i].num ? { class: 'n' } : null,
                                                fmt ? fmt(i, v) : (v === null ? 'NULL' : String(v)))));
        if (onRow) {
          tr.tabIndex = 0;
          tr.className = 'pick';
          tr.addEventListener('click', () => onRow(r));
          tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') onRow(r); });
        }
        body.appendChild(tr);
      }
    }
    cols.forEach((c, i) => {
      const th = el('th', { class: 'sort' + (c.num ? ' n' : '') }, c.name);
      th.addEventListener('click', () => {
        dir = key === i ? -dir : (c.num ? -1 : 1);
        key = i;
        rows.sort((a, b) => {
          const x = a[i], y = b[i];
          if (x === y) return 0;
          if (x === null) return 1;
          if (y === null) return -1;
          return (c.num ? (Number(x) - Number(y)) : String(x).localeCompare(String(y))) * dir;
        });
        fill();
      });
      head.appendChild(th);
    });
    const thead = el('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    t.appendChild(body);
    fill();
    return t;
  }

  // ---- the list ---------------------------------------------------------------
  //
  // The store's traces and those named on etch ui's command line, with what
  // etch ls shows of each (the server's /api/traces: the same members as
  // `etch ls --json`, from the store's cached metadata), formatted as etch
  // ls formats them. A header sorts by its column (again: the other way),
  // the box keeps the rows whose name holds its text (any case), a click
  // opens a trace, two ticked are compared.

  // etch__fmt_dur's and cli_fmt_size's formats (etch ls's).
  function lsDur(ns) {
    const a = Math.abs(ns), sign = ns < 0 ? '-' : '';
    if (a < 1000) return sign + a.toFixed(0) + ' ns';
    const units = [[1e3, 'us'], [1e6, 'ms'], [1e9, 's']];
    for (let i = 0; i < units.length; i++) {
      const v = a / units[i][0];
      if (i + 1 < units.length && Math.round(v * 100) >= 100000) continue;
      return sign + v.toFixed(2) + ' ' + units[i][1];
    }
  }
  function lsSize(b) {
    if (b < 10 * 1024) return b + ' bytes';
    if (b < 10 * 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
    if (b < 10 * 1024 * 1024 * 1024) return (b / 1048576).toFixed(1) + ' MiB';
    return (b / 1073741824).toFixed(1) + ' GiB';
  }
  function lsTime(ns) { // local time, to the second
    const d = new Date(Math.floor(ns / 1e9) * 1000), p = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
      p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }
  function lsLoss(t) {
    const rec = t.recording ? 'recording' : '';
    if (t.error !== null) return (rec ? rec + '; ' : '') + 'error: ' + t.error;
    if (!t.data_loss.length) return rec || '-';
    return (rec ? rec + '; ' : '') + t.data_loss.map((l) => l.name + ' ' + l.value).join(', ');
  }
  // Each column: its header, the value it sorts by (null: last) and its text.
  const LIST_COLS = [
    { name: 'Name', key: 'name', v: (t) => t.name, text: (t) => t.name },
    { name: 'Start', key: 'start', num: true, v: (t) => t.start, text: (t) => lsTime(t.start) },
    { name: 'Duration', key: 'duration', num: true, v: (t) => t.duration, text: (t) => (t.error !== null ? '-' : lsDur(t.duration)) },
    { name: 'Processes', key: 'processes', num: true, v: (t) => t.processes, text: (t) => (t.error !== null ? '-' : String(t.processes)) },
    { name: 'Threads', key: 'threads', num: true, v: (t) => t.threads, text: (t) => (t.error !== null ? '-' : String(t.threads)) },
    { name: 'Events', key: 'events', num: true, v: (t) => t.events, text: (t) => (t.error !== null ? '-' : String(t.events)) },
    { name: 'Size', key: 'size', num: true, v: (t) => t.size, text: (t) => lsSize(t.size) },
    { name: 'Data lost', key: 'data_loss', v: (t) => lsLoss(t), text: (t) => lsLoss(t) },
    { name: 'Where', key: 'where', v: (t) => where(t), text: (t) => where(t) },
  ];
  // "store", or the directory of a trace named on the command line.
  function where(t) {
    if (t.in_store) return 'store';
    const k = t.path.lastIndexOf('/');
    return k < 0 ? '.' : t.path.slice(0, k) || '/';
  }
  const L = { traces: [], key: -1, dir: 1, picked: [] };

  function listHead() {
    const head = $('traces').tHead.rows[0];
    if (head.cells.length) return;
    head.appendChild(el('th', { title: 'tick two traces to compare them' }, ''));
    LIST_COLS.forEach((c, i) => {
      const th = el('th', { class: 'sort' + (c.num ? ' n' : ''), 'data-key': c.key }, c.name);
      th.addEventListener('click', () => {
        L.dir = L.key === i ? -L.dir : (c.num ? -1 : 1);
        L.key = i;
        fillList();
      });
      head.appendChild(th);
    });
    $('list-filter').addEventListener('input', fillList);
    $('compare').addEventListener('click', () => {
      if (L.picked.length === 2) location.hash = '#diff=' + L.picked.join(',');
    });
  }

  function fillList() {
    const body = $('traces').tBodies[0];
    body.textContent = '';
    let rows = L.traces.slice();
    if (L.key >= 0) {
      const c = LIST_COLS[L.key];
      rows.sort((a, b) => {
        const x = c.v(a), y = c.v(b);
        if (x === y) return 0;
        if (x === null) return 1;
        if (y === null) return -1;
        return (c.num ? x - y : String(x).localeCompare(String(y))) * L.dir;
      });
    }
    const sorted = L.key >= 0 ? LIST_COLS[L.key].key : null;
    for (const th of $('traces').tHead.rows[0].cells) {
      th.classList.toggle('up', th.dataset.key === sorted && L.dir > 0);
      th.classList.toggle('down', th.dataset.key === sorted && L.dir < 0);
    }
    const f = $('list-filter').value.toLowerCase();
    if (f) rows = rows.filter((t) => LIST_COLS[0].text(t).toLowerCase().includes(f));
    for (const t of rows) {
      const tr = el('tr', { 'data-id': t.id });
      if (t.error !== null) tr.classList.add('bad');
      if (!t.in_store) tr.classList.add('named');
      // A trace being recorded: marked (a red dot before its name, drawn by
      // the style: the cell's text stays etch ls's), opened live.
      if (t.recording) { tr.classList.add('live'); tr.title = 'being recorded: opens live'; }
      const box = el('input', { type: 'checkbox', title: 'compare' });
      box.checked = L.picked.includes(t.id);
      box.addEventListener('click', (ev) => {
        ev.stopPropagation();
        L.picked = L.picked.filter((x) => x !== t.id);
        if (box.checked) L.picked.push(t.id);
        while (L.picked.length > 2) L.picked.shift();
        fillList();
      });
      const td0 = el('td');
      td0.appendChild(box);
      td0.addEventListener('click', (ev) => { // the box's cell ticks, never opens
        ev.stopPropagation();
        if (ev.target === td0) box.click();
      });
      tr.appendChild(td0);
      LIST_COLS.forEach((c, i) => {
        const td = el('td', c.num ? { class: 'n' } : null, c.text(t));
        if (i === 0) td.title = t.path;
        if (c.key === 'where' && !t.in_store) td.title = 'named on the command line';
        tr.appendChild(td);
      });
      tr.addEventListener('click', () => { location.hash = '#trace=' + t.id; });
      tr.tabIndex = 0;
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') location.hash = '#trace=' + t.id; });
      body.appendChild(tr);
    }
    $('compare').disabled = L.picked.length !== 2;
    const shown = rows.length, all = L.traces.length;
    $('list-info').textContent = all ? (shown === all ? all + ' trace' + (all === 1 ? '' : 's')
                                                      : shown + ' of ' + all + ' traces') : '';
    dbg.listShown = rows.map((t) => t.id);
  }

  async function showList() {
    show('list');
    $('tabs').hidden = true;
    $('searchbox').hidden = true;
    $('title').textContent = '';
    listHead();
    try {
      const r = await api('/api/traces');
      L.traces = r.traces;
      L.picked = L.picked.filter((id) => r.traces.some((t) => t.id === id));
      fillList();
      const empty = $('list-empty'), store = r.store || null;
      let msg = '';
      if (r.store_error) msg = 'The trace store could not be listed: ' + r.store_error;
      else if (!r.traces.some((t) => t.in_store))
        msg = store ? 'The trace store (' + store + ') is empty: etch record without -o records into it.'
                    : 'No trace store.';
      if (!r.traces.length) msg += (msg ? ' ' : '') + 'No trace named on etch ui\'s command line either.';
      empty.textContent = msg;
      empty.hidden = !msg;
      empty.classList.toggle('err', !!r.store_error);
      dbg.list = r.traces;
      showError(null);
    } catch (e) { showError(e); }
  }

  // ---- two traces compared (etch diff) -----------------------------------------

  async function showDiff(a, b) {
    show('diff');
    $('tabs').hidden = true;
    $('searchbox').hidden = true;
    const out = $('diff');
    out.textContent = '';
    dbg.diff = null;
    const names = (id) => { const t = (L.traces || []).find((x) => x.id === id); return t ? t.name : id; };
    $('title').textContent = names(a) + ' vs ' + names(b);
    status('comparing...');
    try {
      const d = await api('/api/diff', { a, b });
      $('title').textContent = d.a + ' vs ' + d.b;
      out.appendChild(el('p', { class: 'hint' }, 'A: ' + d.a + ', B: ' + d.b + '. Slices by name, ' +
        'largest change of the total first (etch diff). ' + d.names + ' names' +
        (d.rows.length < d.names ? ', the first ' + d.rows.length + ' shown' : '') + '.'));
      const cols = [{ name: 'name' }, { name: 'count A', num: true }, { name: 'count B', num: true },
        { name: 'total A', num: true }, { name: 'total B', num: true }, { name: 'change', num: true },
        { name: 'mean A', num: true }, { name: 'mean B', num: true }, { name: 'p50 A', num: true },
        { name: 'p50 B', num: true }, { name: 'p99 A', num: true }, { name: 'p99 B', num: true }];
      const rows = d.rows.map((r) => [r.name, r.a.count, r.b.count, r.a.total, r.b.total, r.change.total,
        r.a.mean, r.b.mean, r.a.p50, r.b.p50, r.a.p99, r.b.p99]);
      const dur = new Set([3, 4, 5, 6, 7, 8, 9, 10, 11]);
      const t = sortableTable(cols, rows, (i, v) => (v === null ? (i === 0 ? '(no name)' : '-')
        : dur.has(i) ? (i === 5 && v > 0 ? '+' : '') + fmtDur(i === 6 || i === 7 ? Math.round(v) : v) : String(v)));
      t.id = 'diff-table';
      out.appendChild(t);
      dbg.diff = d;
      showError(null);
      status('');
    } catch (e) { showError(e); status(''); }
  }

  function show(section) {
    for (const s of ['list', 'timeline', 'flame', 'zone', 'stats', 'sql', 'diff']) $(s).hidden = s !== section;
    for (const b of $('tabs').querySelectorAll('button')) b.classList.toggle('on', b.dataset.tab === section);
    dbg.section = section;
  }

  // ---- a trace -----------------------------------------------------------------

  let T = null;        // the trace: /api/trace's answer plus layout
  let V = null;        // the view: window, selection, tile
  let tileSeq = 0;

  // The page's state in the address (#trace=ID&tab=T&s=&e=&sel=&range=A,B):
  // written as it changes (at most every 200 ms: a drag changes it at every
  // frame), read by route() when the page opens or the address changes.
  let saveTimer = 0;
  function stateHash() {
    if (!T || !V) return null;
    const h = new URLSearchParams();
    h.set('trace', T.id);
    if (dbg.section && dbg.section !== 'timeline') h.set('tab', dbg.section);
    h.set('s', String(V.s));
    h.set('e', String(V.e));
    if (V.slice && V.slice.count === 1) h.set('sel', String(V.slice.id));
    if (V.range) h.set('range', V.range[0] + ',' + V.range[1]);
    if (dbg.section === 'zone' && Z.data) h.set('zone', Z.data.zone.name);
    // The tracks: moved (their order), pinned, folded processes, collapsed.
    const c = T.ctl;
    if (c && c.order) h.set('order', c.order.join(','));
    if (c && c.pinned.length) h.set('pin', c.pinned.join(','));
    if (c && c.folded.size) h.set('fold', [...c.folded].join(','));
    if (c && c.collapsed.size) h.set('col', [...c.collapsed].join(','));
    return '#' + h.toString();
  }
  // The address route() read or this wrote last: one that differs was
  // set since (a tab, a trace opened) and is route()'s to read, not to be
  // written over.
  let knownHash = null;
  function saveState() {
    if (saveTimer) return;
    saveTimer = setTimeout(() => {
      saveTimer = 0;
      if (knownHash !== null && location.hash !== knownHash) return;
      const h = stateHash();
      if (h && h !== location.hash) {
        history.replaceState(null, '', location.pathname + location.search + h);
        knownHash = location.hash;
        dbg.saved = h;
      }
    }, 200);
  }

  async function openTrace(id, tab, at) {
    if (!T || T.id !== id) {
      T = null;
      dbg.trace = null;
      status('opening...');
      show('timeline');
      $('tabs').hidden = false;
      $('searchbox').hidden = false;
      let t;
      const t0 = performance.now();
      try { t = await api('/api/trace', { id }); } catch (e) {
        showError(e); status(''); $('timeline').hidden = true; return;
      }
      showError(null);
      // The sampled threads (a row of ticks under their slices).
      try {
        const sm = await api('/api/samples', { id });
        t.sampled = new Map(sm.threads);
        t.samples = sm.total;
        t.allocStacks = sm.allocation_stacks || 0;
      } catch (e) { t.sampled = new Map(); t.samples = 0; t.allocStacks = 0; }
      T = t;
      layout(T);
      dbg.trace = { id: t.id, start: t.start, end: t.end, rows: t.rows.length, slices: t.slices };
      $('title').textContent = t.name;
      const span = Math.max(1, t.end - t.start);
      V = { s: t.start, e: t.start + span, sel: null, slice: null, range: null,
            tile: null, flows: [], search: null, match: -1 };
      dbg.view = V;
      status((t.imported ? 'imported' : 'opened from the cache') + ' in ' +
             Math.round(performance.now() - t0) + ' ms: ' + t.slices + ' slices, ' +
             t.rows.length + ' tracks' + lossText(t));
      liveStart(t);
      if (t.recording) liveStatus();
      fillThreads();
      // The flame graph's other sources: CPU samples, allocation stacks.
      const ofs = { samples: !!t.samples, allocated: !!t.allocStacks, live: !!t.allocStacks };
      for (const o of $('fl-of').options) o.hidden = o.value !== 'slices' && !ofs[o.value];
      $('fl-of-box').hidden = !t.samples && !t.allocStacks;
      if ($('fl-of').value !== 'slices' && !ofs[$('fl-of').value]) $('fl-of').value = 'slices';
      $('fl-slice-box').hidden = $('fl-of').value !== 'samples';
      $('details').innerHTML = '<p class="hint">Click a slice for its details.</p>';
      $('range').textContent = '';
      flameState.zoom = 0;
      flameState.data = null;
      Z.names = null; Z.data = null;
      $('zone-name').value = '';
      argsOf.clear();
    }
    tab = tab || 'timeline';
    // A view from the address: its window, selection and range.
    if (at) {
      const s = Number(at.get('s')), e = Number(at.get('e'));
      if (at.has('s') && at.has('e') && Number.isFinite(s) && Number.isFinite(e) && e > s) {
        V.s = s; V.e = e;
        if (LIVE.follow) setFollow(false); // the address's window, not the newest
      }
      const range = (at.get('range') || '').split(',').map(Number);
      if (range.length === 2 && range.every(Number.isFinite) && range[1] > range[0]) selectRange(range[0], range[1]);
      const sel = Number(at.get('sel'));
      if (at.has('sel') && Number.isInteger(sel) && (!V.slice || V.slice.id !== sel)) selectSlice({ id: sel, count: 1, ts: 0, end: 0, name: '' });
      if (at.has('zone')) $('zone-name').value = at.get('zone');
      if (trackState(at)) layout(T);
    }
    show(tab);
    saveState();
    if (tab === 'timeline') { resize(); requestTile(); }
    if (tab === 'flame') loadFlame();
    if (tab === 'zone') loadZone();
    if (tab === 'stats') loadStats();
  }

  // The tracks' state from the address (order, pin, fold, col: lists of
  // track ids, upids for fold); ids the trace does not have are dropped.
  // True when it said any.
  function trackState(at) {
    const ids = (k) => (at.get(k) || '').split(',').filter((x) => x !== '').map(Number).filter(Number.isInteger);
    const tracks = new Set(T.rows.map((r) => r.track)), upids = new Set(T.rows.map((r) => r.upid));
    const ctl = T.ctl;
    let any = false;
    if (at.has('order')) { ctl.order = [...new Set(ids('order').filter((k) => tracks.has(k)))]; any = true; }
    if (at.has('pin')) { ctl.pinned = [...new Set(ids('pin').filter((k) => tracks.has(k)))]; any = true; }
    if (at.has('fold')) { ctl.folded = new Set(ids('fold').filter((k) => upids.has(k))); any = true; }
    if (at.has('col')) { ctl.collapsed = new Set(ids('col').filter((k) => tracks.has(k))); any = true; }
    if (any) {
      dbg.ctl = { folded: [...ctl.folded], collapsed: [...ctl.collapsed], pinned: ctl.pinned.slice() };
      dbg.order = ordered(T).map((r) => r.track);
    }
    return any;
  }

  function lossText(t) {
    if (!t.loss_stats.length && !t.loss.length) return '';
    const n = t.loss_stats.map((x) => x[0] + '=' + x[1]).join(', ');
    return ' - DATA LOSS: ' + (n || (t.loss.length + ' drops marked'));
  }

  // Rows: the pinned tracks first (under a "Pinned" header), then a
  // process header and its tracks (none while the process is folded); in a
  // trace of several machines a machine header above its processes; y
  // offsets in CSS pixels. A collapsed track is one row high (its depth 0).
  // What is folded, collapsed, pinned or moved is kept in t.ctl across
  // layouts. The pinned rows (t.pinH high under the axis) stay in view
  // while the others scroll under them.
  function layout(t) {
    const ctl = t.ctl || (t.ctl = { folded: new Set(), collapsed: new Set(), pinned: [], order: null });
    const rows = [];
    let y = AXIS_H, upid = null, machine = null;
    const trackRow = (r, pinned) => {
      const counter = r.type === 'counter';
      const collapsed = !counter && ctl.collapsed.has(r.track);
      const ticks = r.type === 'thread' && !!t.sampled && t.sampled.has(r.utid);
      const h = counter ? COUNTER_H : (collapsed ? 0 : Math.max(0, r.maxdepth)) * ROW_H + ROW_H + 4 +
                (ticks ? SAMPLE_H : 0);
      let label = r.name || r.type;
      if (r.type === 'thread') label = (r.thread || r.name || 'thread') + ' ' + r.tid;
      if (counter && r.unit) label += ' (' + r.unit + ')';
      if (pinned && r.process) label += ' \u00b7 ' + r.process;
      rows.push({ kind: counter ? 'counter' : 'slices', track: r.track, y, h, label, r, pinned,
                  collapsed, deep: !counter && r.maxdepth > 0, maxDepth: collapsed ? 0 : Infinity, ticks });
      y += h;
    };
    const byTrack = new Map(t.rows.map((r) => [r.track, r]));
    ctl.pinned = ctl.pinned.filter((k) => byTrack.has(k));
    if (ctl.pinned.length) {
      rows.push({ kind: 'group', y, h: PROC_H, label: 'Pinned' });
      y += PROC_H;
      for (const k of ctl.pinned) trackRow(byTrack.get(k), true);
    }
    t.pinH = y - AXIS_H;
    const counts = {};
    for (const r of t.rows) counts[r.upid] = (counts[r.upid] || 0) + 1;
    for (const r of ordered(t)) {
      if (t.machines > 1 && r.machine !== machine) {
        machine = r.machine;
        upid = null;
        rows.push({ kind: 'machine', y, h: PROC_H, label: r.machine_label });
        y += PROC_H;
      }
      const folded = ctl.folded.has(r.upid);
      if (r.upid !== upid) {
        upid = r.upid;
        rows.push({ kind: 'process', upid, folded, y, h: PROC_H,
                    label: (folded ? '\u25b8 ' : '\u25be ') + (r.process || 'process') +
                      (r.pid >= 0 ? ' ' + r.pid : '') + (folded ? '  (' + counts[r.upid] + ' tracks)' : '') });
        y += PROC_H;
      }
      if (folded || ctl.pinned.includes(r.track)) continue;
      trackRow(r, false);
    }
    t.layout = rows;
    t.height = y + 8;
    t.byTrack = {};
    for (const row of rows) if (row.track !== undefined) t.byTrack[row.track] = row;
  }

  // The tracks in the order shown: a process's tracks where it first
  // comes, in the order they were moved to (t.ctl.order: track ids), else
  // in the trace's order.
  function ordered(t) {
    const order = t.ctl && t.ctl.order;
    if (!order) return t.rows;
    const rank = new Map(order.map((k, i) => [k, i])), proc = new Map();
    t.rows.forEach((r, i) => { if (!proc.has(r.upid)) proc.set(r.upid, i); });
    const key = (r, i) => (rank.has(r.track) ? rank.get(r.track) : order.length + i);
    return t.rows.map((r, i) => [r, i]).sort((a, b) => proc.get(a[0].upid) - proc.get(b[0].upid) ||
                                                key(a[0], a[1]) - key(b[0], b[1])).map((x) => x[0]);
  }
  // Moves a track before (after: after) another: a pinned one among the
  // pinned, another among its process's tracks; false when it cannot go
  // there.
  function moveTrack(track, to, after) {
    const ctl = T.ctl;
    if (track === to) return false;
    const pa = ctl.pinned.indexOf(track), pb = ctl.pinned.indexOf(to);
    if ((pa < 0) !== (pb < 0)) return false;
    if (pa >= 0) {
      ctl.pinned.splice(pa, 1);
      ctl.pinned.splice(ctl.pinned.indexOf(to) + (after ? 1 : 0), 0, track);
    } else {
      const list = ordered(T), a = list.find((r) => r.track === track), b = list.find((r) => r.track === to);
      if (!a || !b || a.upid !== b.upid) return false;
      const ids = list.map((r) => r.track).filter((k) => k !== track);
      ids.splice(ids.indexOf(to) + (after ? 1 : 0), 0, track);
      ctl.order = ids;
    }
    relayout();
    return true;
  }
  // The keyboard's move: one place up (dir -1) or down (1), staying with
  // its process's tracks (or the pinned ones).
  function stepTrack(track, dir) {
    const pinned = T.ctl.pinned.includes(track);
    const list = pinned ? T.ctl.pinned.map((k) => ({ track: k })) : ordered(T);
    const i = list.findIndex((r) => r.track === track), j = i + dir;
    if (i < 0 || j < 0 || j >= list.length || (!pinned && list[j].upid !== list[i].upid)) return false;
    return moveTrack(track, list[j].track, dir > 0);
  }
  function relayout() {
    const ctl = T.ctl;
    layout(T);
    resize();
    requestTile();
    dbg.ctl = { folded: [...ctl.folded], collapsed: [...ctl.collapsed], pinned: ctl.pinned.slice() };
    dbg.order = ordered(T).map((r) => r.track);
    saveState();
  }

  // Track control, from the labels: a process header folds or unfolds its
  // process; a track's arrow collapses or expands it; its pin (the dot at
  // the right of the label) keeps it at the top.
  const PIN_X = LABEL_W - 14;
  function trackControl(row, x) {
    const ctl = T.ctl;
    if (row.kind === 'process') {
      if (ctl.folded.has(row.upid)) ctl.folded.delete(row.upid); else ctl.folded.add(row.upid);
    } else if (row.track !== undefined && x >= PIN_X - 6) {
      const k = ctl.pinned.indexOf(row.track);
      if (k >= 0) ctl.pinned.splice(k, 1); else ctl.pinned.push(row.track);
    } else if (row.kind === 'slices' && row.deep) {
      if (ctl.collapsed.has(row.track)) ctl.collapsed.delete(row.track); else ctl.collapsed.add(row.track);
    } else {
      return false;
    }
    relayout();
    return true;
  }

  // ---- a trace being recorded -------------------------------------------------------
  //
  // A trace still being recorded opens live: the page asks /api/live about
  // once a second (the server reads what the file gained first); when its
  // generation changes the trace's rows and bounds are asked for again and
  // the tile redrawn, and what the other tabs computed is dropped (the
  // flame graph, stats, Find zone and search take the new data when opened
  // or run again). "follow" (L) keeps the newest data in view, Tracy's way:
  // the window's width kept, its end at the trace's end (a window from the
  // trace's start grows with it); a pan or a zoom turns it off.
  const LIVE = { timer: 0, id: null, follow: false, busy: false };
  dbg.liveState = LIVE;
  function setFollow(on) {
    LIVE.follow = on;
    $('follow').classList.toggle('on', on);
    dbg.follow = on;
    if (on && T && V) followEnd(true);
  }
  // The window moved to the trace's end (`force`: even when it is there).
  function followEnd(force) {
    const span = V.e - V.s, end = Math.max(T.end, T.start + 1);
    if (V.s <= T.start) { V.s = T.start; V.e = end; }
    else if (force || V.e !== end) { V.e = end; V.s = end - span; }
    requestTile();
  }
  function liveStatus() {
    const l = dbg.live;
    status((T.recording ? 'live, recording: ' : 'recorded live, now finished: ') + T.slices + ' slices, ' +
           T.rows.length + ' tracks' + (l && l.error ? ' - could not read the new data: ' + l.error : '') + lossText(T));
  }
  function liveStart(t) {
    clearTimeout(LIVE.timer);
    LIVE.timer = 0;
    LIVE.id = t.recording ? t.id : null;
    $('follow').hidden = !t.recording;
    dbg.live = t.recording ? { recording: true, generation: t.generation, slices: t.slices, error: null } : null;
    LIVE.follow = false;
    if (!t.recording) return;
    setFollow(true);
    LIVE.timer = setTimeout(livePoll, 1000);
  }
  async function livePoll() {
    LIVE.timer = 0;
    const id = LIVE.id, t0 = performance.now();
    if (!T || T.id !== id) return;
    try {
      const l = await api('/api/live', { id });
      if (!T || T.id !== id) return;
      if (l.generation !== T.generation) {
        await liveReload(id);
        LIVE.shown = l.bytes; // logged once its tile is drawn (bench/ui)
      }
      if (!T || T.id !== id) return;
      dbg.live = l;
      T.recording = l.recording;
      liveStatus();
      if (!l.recording) { LIVE.id = null; $('follow').hidden = true; dbg.follow = LIVE.follow = false; return; }
    } catch (e) { showError(e); }
    // Once a second, counted from this look's start (a quarter of a second
    // between looks at least).
    if (T && T.id === id) LIVE.timer = setTimeout(livePoll, Math.max(250, 1000 - (performance.now() - t0)));
  }
  // The trace's new rows and bounds; the view, the tracks' state and the
  // selection kept.
  async function liveReload(id) {
    const t = await api('/api/trace', { id });
    if (!T || T.id !== id) return;
    for (const k of ['start', 'end', 'slices', 'flows', 'machines', 'rows', 'loss', 'loss_stats', 'generation',
                     'recording', 'imported'])
      T[k] = t[k];
    layout(T);
    resize();
    dbg.trace = { id: T.id, start: T.start, end: T.end, rows: T.rows.length, slices: T.slices };
    // What the tabs computed from the old data: computed again when asked.
    flameState.data = null;
    flameState.zoom = 0;
    Z.names = null;
    Z.data = null;
    argsOf.clear();
    if (V.search) V.search = undefined; // the next Enter searches again
    const thread = $('fl-thread').value;
    fillThreads();
    $('fl-thread').value = thread;
    if (!$('fl-thread').value) $('fl-thread').value = '-1';
    if (LIVE.follow) followEnd(false); else requestTile();
    if (dbg.section === 'flame') loadFlame();
    if (dbg.section === 'stats') loadStats();
    if (dbg.section === 'zone') loadZone();
  }
  $('follow').addEventListener('click', () => setFollow(!LIVE.follow));

  // ---- the timeline ---------------------------------------------------------------

  const cv = $('tl');
  function width() { return Math.max(200, $('tl-scroll').clientWidth); }
  function timeW() { return width() - LABEL_W; }
  // The canvas is the height of what shows (it stays at the top of the
  // scrolled area); a spacer below it gives the rows' whole height.
  const scroller = $('tl-scroll');
  function resize() {
    if (!T) return;
    const dpr = window.devicePixelRatio || 1;
    const w = width(), h = Math.max(AXIS_H + 40, Math.min(T.height, scroller.clientHeight || T.height));
    $('tl-spacer').style.height = Math.max(0, T.height - h) + 'px';
    cv.style.width = w + 'px';
    cv.style.height = h + 'px';
    cv.width = Math.round(w * dpr);
    cv.height = Math.round(h * dpr);
  }
  // The rows in view (y on the canvas), with a screen's margin for tiles.
  // The pinned ones (and their header) do not scroll; the others scroll
  // under them: what of a row is above its top (top) is not drawn.
  function visibleRows(margin) {
    const sy = scroller.scrollTop, H = cv.clientHeight || T.height;
    const pinTop = AXIS_H + (T.pinH || 0);
    const out = [];
    for (const r of T.layout) {
      const fixed = r.pinned || r.kind === 'group';
      const y = fixed ? r.y : r.y - sy, top = fixed ? AXIS_H : pinTop;
      if (y + r.h > top - margin && y < H + margin) out.push(Object.assign({}, r, { y, top }));
    }
    return out;
  }
  scroller.addEventListener('scroll', () => {
    if (!T || !V || !V.tile) return;
    const want = visibleRows(cv.clientHeight).filter((r) => r.track !== undefined);
    if (want.some((r) => !V.tileTracks.has(r.track))) requestTile();
    else draw();
  });
  function xOf(ts) { return LABEL_W + (ts - V.s) * timeW() / (V.e - V.s); }
  function tsOf(x) { return V.s + (x - LABEL_W) * (V.e - V.s) / timeW(); }

  function setWindow(s, e) {
    if (!T) return;
    if (LIVE.follow) setFollow(false); // the user's window: following ends
    const min = 1000; // 1 us across at most
    s = Math.round(s); e = Math.round(e);
    if (e - s < min) { const c = (s + e) / 2; s = Math.round(c - min / 2); e = s + min; }
    V.s = s; V.e = e;
    requestTile();
  }

  // A change of the view is drawn at the next frame from the tile in hand,
  // re-scaled (so a wheel or a drag shows at once), and the tile of the new
  // view is asked for; it replaces the old one when it comes.
  let pending = false;
  function requestTile() {
    if (!T || pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      if (V.tile) draw();
      fetchTile();
    });
  }

  // A tile names its rectangles by index into its names: put the names in,
  // after prepare() has read the indexes.
  function namesIn(tile) {
    if (!tile.names) return;
    for (const r of tile.slices) r[6] = tile.names[r[6]];
    delete tile.names;
  }

  // What drawing a tile needs, made once when it comes (not at every
  // frame): its rectangles' tracks (as indexes), depths, times, counts and
  // names (indexes) in typed arrays, and a colour index per rectangle.
  function prepare(tile) {
    const sl = tile.slices, n = sl.length;
    const tr = new Int32Array(n), dp = new Int32Array(n), cnt = new Float64Array(n);
    const ts = new Float64Array(n), te = new Float64Array(n), nm = new Int32Array(n);
    const trackIdx = new Map(), tracks = [];
    let names = tile.names;
    const nameIdx = names ? null : new Map();
    if (!names) names = [];
    for (let i = 0; i < n; i++) {
      const s = sl[i];
      let t = trackIdx.get(s[0]);
      if (t === undefined) { t = tracks.length; tracks.push(s[0]); trackIdx.set(s[0], t); }
      tr[i] = t; dp[i] = s[1]; ts[i] = s[2]; te[i] = s[3]; cnt[i] = s[4];
      if (nameIdx) {
        let k = nameIdx.get(s[6]);
        if (k === undefined) { k = names.length; names.push(s[6]); nameIdx.set(s[6], k); }
        nm[i] = k;
      } else {
        nm[i] = s[6];
      }
    }
    // Colours: two a name (alone, merged), as strings once each.
    const palette = [];
    for (const name of names) {
      palette.push(name === 'etch.dropped_events' ? '#d32f2f' : colorOf(name, false));
      palette.push(name === 'etch.dropped_events' ? '#d32f2f' : colorOf(name, true));
    }
    tile.prep = { n, tr, dp, cnt, ts, te, nm, tracks, names, palette, hitsFor: null, hitOf: null };
  }

  // The tile being fetched is dropped when a newer view asks for its own
  // (a drag or a wheel asks at every frame): no stale answer is parsed.
  let tileAbort = null;
  async function fetchTile() {
    const seq = ++tileSeq;
    if (tileAbort) tileAbort.abort();
    const ac = tileAbort = new AbortController();
    // The tracks in view and a screen's height around them: not the others.
    const tracks = [], counters = [];
    for (const row of visibleRows(cv.clientHeight || 0))
      if (row.track !== undefined) (row.kind === 'counter' ? counters : tracks).push(row.track);
    const args = { id: T.id, start: V.s, end: V.e, px: Math.floor(timeW()),
                   tracks: tracks.join(','), counters: counters.join(',') };
    const t0 = performance.now();
    try {
      // A trace without flows (its /api/trace says so) asks for none: the
      // server answers one request at a time.
      // The samples per thread and bucket of two pixels (bounded by the
      // width, not by the samples), when the trace has any.
      const buckets = Math.max(1, Math.min(8192, Math.floor(args.px / 2)));
      const [tile, flows, samples] = await Promise.all([
        api('/api/tile', args, ac.signal),
        T.flows === 0 ? { flows: [] }
          : api('/api/flows', { id: T.id, start: V.s, end: V.e, px: args.px }, ac.signal),
        !T.samples ? null
          : api('/api/samples', { id: T.id, start: V.s, end: V.e, buckets }, ac.signal)]);
      if (seq !== tileSeq) return; // a newer view is on its way
      prepare(tile);
      namesIn(tile);
      V.tile = tile;
      V.tileTracks = new Set(tracks.concat(counters));
      V.flows = flows.flows;
      V.samples = samples ? { s: args.start, e: args.end, n: buckets, b: samples.buckets } : null;
      const d0 = performance.now();
      dbg.lastFetchMs = d0 - t0;
      draw();
      dbg.lastDrawMs = performance.now() - d0;
      dbg.tiles = seq;
      dbg.lastTileMs = performance.now() - t0;
      // A live trace's new data drawn: when, and up to which byte of its
      // file (bench/ui/bench_live.mjs reads it).
      if (LIVE.shown !== undefined) {
        (dbg.liveLog || (dbg.liveLog = [])).push([Date.now(), LIVE.shown]);
        if (dbg.liveLog.length > 10000) dbg.liveLog.shift();
        LIVE.shown = undefined;
      }
      saveState();
      if (dbg.inputAt !== null) { dbg.inputToTileMs = performance.now() - dbg.inputAt; dbg.inputAt = null; }
      showError(null);
    } catch (e) {
      if (seq === tileSeq) { showError(e); dbg.tiles = seq; }
    }
  }

  // A frame's arrays, kept from frame to frame (grown when a tile is
  // bigger): no garbage a frame. The last frame's are what `shown` reads.
  let scratchN = 0, scratchArrays = null;
  function scratch(n) {
    if (n > scratchN || !scratchArrays) {
      scratchN = Math.max(n, 1024, scratchN * 2);
      scratchArrays = { geo: new Float64Array(scratchN * 4), idx: new Int32Array(scratchN),
                        hits: new Uint8Array(scratchN), cidx: new Int32Array(scratchN),
                        byColor: new Int32Array(scratchN) };
    }
    return scratchArrays;
  }

  function draw() {
    if (!T || !V) return;
    const f0 = performance.now();
    const dpr = window.devicePixelRatio || 1;
    const g = cv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const W = width();
    const HT = cv.clientHeight || T.height;
    const rowsIn = visibleRows(0);
    const byRow = {};
    for (const r of rowsIn) if (r.track !== undefined) byRow[r.track] = r;
    g.clearRect(0, 0, W, HT);
    g.font = '11px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const span = V.e - V.s;
    const step = Math.pow(10, Math.floor(Math.log10(span / 8)));
    const tick = step * (span / step > 40 ? 5 : span / step > 16 ? 2 : 1);
    // The ticks: times from the trace's start, k * tick (not a running
    // sum: no rounding carried from one to the next).
    const ticks = [];
    for (let j = Math.ceil((V.s - T.start) / tick); T.start + j * tick <= V.e; j++) ticks.push(j * tick);
    g.strokeStyle = '#eceff1';
    for (const t of ticks) {
      const x = xOf(T.start + t);
      g.beginPath(); g.moveTo(x, AXIS_H); g.lineTo(x, HT); g.stroke();
    }
    // Rows and their labels. A row scrolled partly under the pinned ones
    // is drawn below them only (clipped to its top).
    const pinTop = AXIS_H + (T.pinH || 0);
    const under = (row) => row.y < row.top && row.top > AXIS_H;
    const clipTop = (row, x, w) => { g.save(); g.beginPath(); g.rect(x, row.top, w, HT - row.top); g.clip(); };
    for (const row of rowsIn) {
      if (under(row)) clipTop(row, 0, W);
      if (row.kind === 'process' || row.kind === 'machine' || row.kind === 'group') {
        g.fillStyle = row.kind === 'machine' ? '#90a4ae' : row.kind === 'group' ? '#ffe0b2' : '#cfd8dc';
        g.fillRect(0, row.y, W, row.h);
        g.fillStyle = '#263238';
        g.fillText(row.label, 6, row.y + row.h / 2);
      } else {
        g.strokeStyle = '#eceff1';
        g.beginPath(); g.moveTo(0, row.y + row.h); g.lineTo(W, row.y + row.h); g.stroke();
      }
      if (under(row)) g.restore();
    }
    const drawn = {};
    const q = V.search ? V.search.toLowerCase() : null;
    g.save();
    g.beginPath(); g.rect(LABEL_W, AXIS_H, W - LABEL_W, HT - AXIS_H); g.clip();
    // Geometry first, kept in typed arrays (a tile has tens of thousands of
    // rectangles), then one path per colour, then outlines and labels. A
    // tile drawn at a coarser view than its own (zooming out, before the
    // new tile comes) is capped: a rectangle under a pixel that starts in
    // the pixel its (track, depth)'s last one ended in is not drawn.
    const sl = V.tile.slices, P = V.tile.prep, n = P.n;
    const { geo, idx, hits, cidx, byColor } = scratch(n);
    const ccount = new Int32Array(P.palette.length + 1);
    const labels = [], outlines = [];
    const rowY = new Float64Array(P.tracks.length), drawnBy = new Int32Array(P.tracks.length);
    const rowDepth = new Float64Array(P.tracks.length), rowTop = new Float64Array(P.tracks.length);
    for (let t = 0; t < P.tracks.length; t++) {
      const row = byRow[P.tracks[t]];
      rowY[t] = row === undefined ? NaN : row.y;
      rowDepth[t] = row === undefined ? 0 : row.maxDepth;
      // A depth that scrolled under the pinned tracks is not drawn.
      rowTop[t] = row === undefined || row.top === AXIS_H ? -Infinity : row.top;
    }
    if (P.hitsFor !== q) {
      P.hitsFor = q;
      P.hitOf = new Uint8Array(P.names.length);
      if (q !== null) for (let k = 0; k < P.names.length; k++) P.hitOf[k] = P.names[k].toLowerCase().includes(q) ? 1 : 0;
    }
    const hitOf = P.hitOf;
    const k = timeW() / span, vs = V.s;
    const cap = span / timeW() > 1.5 * (V.tile.ns_per_px || 0);
    let m = 0, lastPair = -1, lastPx = -Infinity;
    const sel = V.slice ? V.slice.id : null;
    const { tr, dp, ts, te, cnt, nm } = P;
    const h = ROW_H - 2;
    for (let i = 0; i < n; i++) {
      const y0 = rowY[tr[i]];
      if (y0 !== y0) continue; // NaN: the track is not in view
      if (dp[i] > rowDepth[tr[i]]) continue; // collapsed
      const y = y0 + 2 + dp[i] * ROW_H;
      if (y + h < AXIS_H || y > HT || y < rowTop[tr[i]]) continue;
      const x0 = LABEL_W + (ts[i] - vs) * k, x1 = LABEL_W + (te[i] - vs) * k;
      if (x0 > W + 6 || x1 < LABEL_W - 6) continue;
      const count = cnt[i];
      const instant = count === 1 && te[i] === ts[i];
      if (cap && x1 - x0 < 1) {
        const pair = tr[i] * 65536 + dp[i];
        if (pair === lastPair && Math.floor(x0) <= lastPx) continue;
        lastPair = pair; lastPx = Math.floor(x1);
      } else if (cap) {
        lastPair = tr[i] * 65536 + dp[i]; lastPx = Math.floor(x1);
      }
      const x = instant ? x0 : Math.max(x0, LABEL_W - 2);
      const w = instant ? 0 : Math.max(1, Math.min(x1, W + 2) - x);
      cidx[m] = nm[i] * 2 + (count > 1 ? 1 : 0);
      ccount[cidx[m] + 1]++;
      geo[m * 4] = x; geo[m * 4 + 1] = y; geo[m * 4 + 2] = w; geo[m * 4 + 3] = h;
      idx[m] = i;
      if (w > 40) labels.push(m);
      const hit = q !== null && hitOf[nm[i]] === 1;
      hits[m] = hit ? 1 : 0;
      if (hit || (sel === sl[i][5] && count === 1)) outlines.push(m);
      drawnBy[tr[i]]++;
      m++;
    }
    // One path per colour: the rectangles by colour (a counting sort).
    for (let c = 1; c < ccount.length; c++) ccount[c] += ccount[c - 1];
    const at = ccount.slice();
    for (let j = 0; j < m; j++) byColor[at[cidx[j]]++] = j;
    for (let c = 0; c < P.palette.length; c++) {
      const from = ccount[c], to = ccount[c + 1];
      if (from === to) continue;
      g.fillStyle = P.palette[c];
      g.beginPath();
      for (let j = from; j < to; j++) {
        const kk = byColor[j];
        const x = geo[kk * 4], y = geo[kk * 4 + 1], w = geo[kk * 4 + 2], hh = geo[kk * 4 + 3];
        if (w === 0) { // an instant: a diamond
          g.moveTo(x, y); g.lineTo(x + 4, y + hh / 2); g.lineTo(x, y + hh); g.lineTo(x - 4, y + hh / 2); g.closePath();
        } else {
          g.rect(x, y, w, hh);
        }
      }
      g.fill();
    }
    // A border on every slice wide enough to show one (4 px): back-to-back
    // slices of one name are told apart. On whole pixels, one path.
    g.strokeStyle = 'rgba(0,0,0,0.45)';
    g.beginPath();
    let borders = 0;
    for (let j = 0; j < m; j++) {
      const w = geo[j * 4 + 2];
      if (w < 4) continue;
      const x = Math.round(geo[j * 4]), y = Math.round(geo[j * 4 + 1]);
      g.rect(x + 0.5, y + 0.5, Math.round(geo[j * 4] + w) - x - 1, Math.round(geo[j * 4 + 3]) - 1);
      borders++;
    }
    g.stroke();
    dbg.borders = borders;
    for (let t = 0; t < P.tracks.length; t++) if (drawnBy[t]) drawn[P.tracks[t]] = drawnBy[t];
    g.lineWidth = 2;
    for (const kk of outlines) {
      g.strokeStyle = hits[kk] && sl[idx[kk]][5] !== sel ? '#000' : '#ff6f00';
      g.strokeRect(geo[kk * 4] + 1, geo[kk * 4 + 1] + 1, Math.max(1, geo[kk * 4 + 2] - 2), geo[kk * 4 + 3] - 2);
    }
    g.lineWidth = 1;
    g.fillStyle = '#111';
    for (const kk of labels) {
      const s = sl[idx[kk]], w = geo[kk * 4 + 2];
      const label = s[4] > 1 ? s[6] + ' +' + (s[4] - 1) : s[6];
      g.fillText(label.length * 6 > w - 6 ? label.slice(0, Math.max(1, Math.floor((w - 6) / 6))) : label,
                 geo[kk * 4] + 3, geo[kk * 4 + 1] + geo[kk * 4 + 3] / 2);
    }
    shown = { sl, geo, idx, hits, n: m, objects: null };
    drawSamples(g, rowsIn, k);
    // Counters: a line of the last value per column, the column's range shaded.
    const byTrack = {};
    for (const c of V.tile.counters) (byTrack[c[0]] = byTrack[c[0]] || []).push(c);
    for (const k in byTrack) {
      const row = byRow[k];
      if (!row) continue;
      if (under(row)) clipTop(row, LABEL_W, W - LABEL_W);
      const lo = Math.min(0, row.r.lo), hi = row.r.hi > lo ? row.r.hi : lo + 1;
      const yOf = (v) => row.y + row.h - 3 - (v - lo) * (row.h - 6) / (hi - lo);
      g.strokeStyle = colorOf(row.label, false);
      g.fillStyle = 'rgba(96,125,139,0.25)';
      g.beginPath();
      let started = false, lastY = 0;
      for (const [, ts, mn, mx, last] of byTrack[k]) {
        const x = Math.max(LABEL_W, xOf(ts));
        if (mx !== mn) g.fillRect(x, yOf(mx), 1, yOf(mn) - yOf(mx));
        if (!started) { g.moveTo(x, yOf(last)); started = true; } else { g.lineTo(x, lastY); g.lineTo(x, yOf(last)); }
        lastY = yOf(last);
      }
      g.lineTo(W, lastY);
      g.stroke();
      if (under(row)) g.restore();
      drawn[k] = byTrack[k].length;
    }
    // Each counter's scale: its greatest value at the top, the bottom of
    // the scale (0, or its least value when that is below 0) at the bottom.
    const scales = {};
    g.font = '10px system-ui, sans-serif';
    for (const row of rowsIn) {
      if (row.kind !== 'counter' || under(row)) continue;
      const lo = Math.min(0, row.r.lo), hi = row.r.hi > lo ? row.r.hi : lo + 1;
      const unit = row.r.unit ? ' ' + row.r.unit : '';
      const top = fmtVal(hi) + unit, bottom = fmtVal(lo) + unit;
      g.fillStyle = 'rgba(255,255,255,0.75)';
      g.fillRect(LABEL_W + 1, row.y + 1, g.measureText(top).width + 6, 11);
      g.fillRect(LABEL_W + 1, row.y + row.h - 12, g.measureText(bottom).width + 6, 11);
      g.fillStyle = '#455a64';
      g.fillText(top, LABEL_W + 4, row.y + 7);
      g.fillText(bottom, LABEL_W + 4, row.y + row.h - 6);
      scales[row.track] = [top, bottom];
    }
    g.font = '11px system-ui, sans-serif';
    dbg.counterScales = scales;
    // Flows: arrows from the end of one slice to the start of the next;
    // the selected slice's only, unless "all flows" is ticked.
    g.strokeStyle = '#6a1b9a';
    g.fillStyle = '#6a1b9a';
    const allFlows = $('all-flows').checked, flowsDrawn = [], flowLines = [];
    for (const f of V.flows) {
      const a = byRow[f[0]], b = byRow[f[4]];
      if (!a || !b) continue;
      if (!allFlows && (sel === null || (f[3] !== sel && f[7] !== sel))) continue;
      flowsDrawn.push(f);
      const x0 = xOf(f[2]), y0 = a.y + 2 + f[1] * ROW_H + ROW_H / 2;
      const x1 = xOf(f[6]), y1 = b.y + 2 + f[5] * ROW_H + ROW_H / 2;
      g.beginPath(); g.moveTo(x0, y0);
      g.bezierCurveTo(x0 + 30, y0, x1 - 30, y1, x1, y1); g.stroke();
      flowLines.push([x0, y0, x1, y1]);
      g.beginPath(); g.moveTo(x1, y1); g.lineTo(x1 - 7, y1 - 4); g.lineTo(x1 - 7, y1 + 4); g.fill();
    }
    shownFlows = flowsDrawn;
    dbg.flowsDrawn = flowsDrawn.length;
    dbg.flowLines = flowLines;
    // Data loss where it happened: red lines across the track and the axis.
    g.strokeStyle = '#d32f2f';
    g.lineWidth = 2;
    const lossMarks = [];
    for (const [ts, track] of T.loss) {
      if (ts < V.s || ts > V.e) continue;
      lossMarks.push([ts, track]);
      const row = byRow[track], x = xOf(ts);
      if (row) { g.beginPath(); g.moveTo(x, Math.max(row.y, row.top)); g.lineTo(x, row.y + row.h); g.stroke(); }
    }
    g.lineWidth = 1;
    // The selected range.
    if (V.range) {
      const a = xOf(V.range[0]), b = xOf(V.range[1]);
      g.fillStyle = 'rgba(33,150,243,0.15)';
      g.fillRect(a, AXIS_H, b - a, HT - AXIS_H);
      g.strokeStyle = '#1976d2';
      g.strokeRect(a, 0, b - a, HT);
    }
    g.restore();
    // Labels last, over anything drawn left of the time area.
    g.fillStyle = '#fafafa';
    g.fillRect(0, AXIS_H, LABEL_W, HT - AXIS_H);
    for (const row of rowsIn) {
      const head = row.kind === 'process' || row.kind === 'machine' || row.kind === 'group';
      if (under(row)) clipTop(row, 0, LABEL_W);
      g.fillStyle = row.kind === 'machine' ? '#90a4ae' : row.kind === 'group' ? '#ffe0b2' : head ? '#cfd8dc' : '#fafafa';
      g.fillRect(0, row.y, LABEL_W, row.h);
      g.fillStyle = '#263238';
      const mid = row.y + Math.min(row.h, ROW_H + 4) / 2;
      g.save();
      g.beginPath(); g.rect(0, row.y, head ? LABEL_W : PIN_X - 8, row.h); g.clip();
      g.fillText(row.label, row.kind === 'machine' ? 2 : head ? 6 : 16, mid);
      g.restore();
      if (row.deep) g.fillText(row.collapsed ? '\u25b8' : '\u25be', 5, mid);
      if (row.track !== undefined) { // the pin
        g.beginPath(); g.arc(PIN_X, mid, 4, 0, 2 * Math.PI);
        if (row.pinned) { g.fillStyle = '#ff6f00'; g.fill(); } else { g.strokeStyle = '#90a4ae'; g.stroke(); }
      }
      if (under(row)) g.restore();
    }
    // The pinned tracks' lower edge; where a dragged track would go.
    if (T.pinH) {
      g.strokeStyle = '#ff6f00';
      g.beginPath(); g.moveTo(0, pinTop - 0.5); g.lineTo(W, pinTop - 0.5); g.stroke();
    }
    if (trackDrag && trackDrag.to) {
      g.strokeStyle = '#1976d2';
      g.lineWidth = 3;
      g.beginPath(); g.moveTo(0, trackDrag.to.y); g.lineTo(W, trackDrag.to.y); g.stroke();
      g.lineWidth = 1;
    }
    // The axis last, over rows scrolled under it; data loss marked on it.
    g.fillStyle = '#eceff1';
    g.fillRect(0, 0, W, AXIS_H);
    g.fillStyle = '#455a64';
    g.strokeStyle = '#90a4ae';
    const axisLabels = [];
    for (const t of ticks) {
      const x = xOf(T.start + t), label = fmtTick(t, tick, V.e - T.start);
      g.beginPath(); g.moveTo(x, AXIS_H - 6); g.lineTo(x, AXIS_H); g.stroke();
      g.fillText(label, x + 3, AXIS_H / 2);
      axisLabels.push(label);
    }
    dbg.axisLabels = axisLabels;
    g.strokeStyle = '#d32f2f';
    g.lineWidth = 2;
    for (const [ts] of T.loss) {
      if (ts < V.s || ts > V.e) continue;
      const x = xOf(ts);
      g.beginPath(); g.moveTo(x, 0); g.lineTo(x, AXIS_H); g.stroke();
    }
    g.lineWidth = 1;
    // The selected range's length on the axis, between its edges (as
    // Perfetto marks an area).
    dbg.rangeLabel = null;
    if (V.range) {
      const a = Math.max(LABEL_W, xOf(V.range[0])), b = Math.min(W, xOf(V.range[1]));
      if (b > a) {
        const text = fmtDur(V.range[1] - V.range[0]), tw = g.measureText(text).width + 8;
        const x = Math.min(Math.max(LABEL_W, (a + b) / 2 - tw / 2), W - tw);
        g.fillStyle = '#1976d2';
        g.fillRect(x, 3, tw, AXIS_H - 6);
        g.fillStyle = '#fff';
        g.fillText(text, x + 4, AXIS_H / 2);
        dbg.rangeLabel = text;
      }
    }
    g.fillStyle = '#eceff1';
    g.fillRect(0, 0, LABEL_W, AXIS_H);
    g.fillStyle = '#455a64';
    g.fillText(fmtDur(V.s - T.start) + ' + ' + fmtDur(V.e - V.s), 6, AXIS_H / 2);
    dbg.drawn = drawn;
    dbg.lossMarks = lossMarks;
    dbg.pinTop = pinTop;
    dbg.rows = rowsIn.map((r) => ({ kind: r.kind, track: r.track, y: r.y, h: r.h, top: r.top, label: r.label,
                                    pinned: !!r.pinned, collapsed: !!r.collapsed, upid: r.upid }));
    dbg.layout = T.layout.map((r) => ({ kind: r.kind, track: r.track, label: r.label, upid: r.upid }));
    // How long frames take, and the first one after an input (a wheel, a
    // drag, a key) comes: for bench/ui/bench_page.mjs.
    const f1 = performance.now();
    dbg.frames++;
    dbg.frameMs.push(f1 - f0);
    if (dbg.frameMs.length > 1000) dbg.frameMs.shift();
    if (dbg.inputAt !== null && dbg.inputToFrameMs === null) dbg.inputToFrameMs = f1 - dbg.inputAt;
  }
  // An input changed the view: the times above count from now.
  function input() {
    dbg.inputAt = performance.now();
    dbg.inputToFrameMs = null;
    dbg.inputToTileMs = null;
  }

  // What the last draw showed: the tile's rows and their geometry. As
  // objects ({track, depth, ts, end, count, id, name, x, y, w, h, hit}),
  // made when asked for (window.__etch.rects).
  let shown = { n: 0, objects: null };
  // ---- CPU samples on their thread's track ----------------------------------------
  //
  // A tick per bucket holding samples (V.samples: a bucket is two pixels of
  // the window the tile was asked for), darker the more samples it holds,
  // in the row under the thread's slices; hover names the leaf function of
  // its first sample, a click shows that sample's whole stack.
  let shownTicks = [];
  function drawSamples(g, rowsIn, k) {
    shownTicks = [];
    const S = V.samples;
    if (!S) { dbg.samples = null; return; }
    const byUtid = new Map();
    for (const row of rowsIn) if (row.ticks && !byUtid.has(row.r.utid)) byUtid.set(row.r.utid, row);
    const bw = (S.e - S.s) / S.n;
    let max = 1, drawnTicks = 0, drawnSamples = 0;
    for (const b of S.b) max = Math.max(max, b[2]);
    const perThread = {};
    for (const b of S.b) {
      const row = byUtid.get(b[0]);
      if (!row) continue;
      const y = row.y + row.h - SAMPLE_H;
      if (y < row.top) continue;
      const x0 = LABEL_W + (S.s + b[1] * bw - V.s) * k;
      const w = Math.max(1, bw * k - 0.5);
      if (x0 + w < LABEL_W || x0 > LABEL_W + timeW()) continue;
      g.fillStyle = 'rgba(69,39,160,' + (0.35 + 0.65 * b[2] / max).toFixed(3) + ')';
      g.fillRect(x0, y + 1, w, SAMPLE_H - 3);
      shownTicks.push({ x: x0, w, y: y + 1, h: SAMPLE_H - 3, b, utid: b[0] });
      drawnTicks++;
      drawnSamples += b[2];
      perThread[b[0]] = (perThread[b[0]] || 0) + b[2];
    }
    dbg.samples = { buckets: S.n, ticks: drawnTicks, samples: drawnSamples, perThread,
                    list: shownTicks.slice(0, 200).map((t) => ({ x: t.x, y: t.y, w: t.w, h: t.h, utid: t.utid, bucket: t.b[1],
                                                                 count: t.b[2], first: t.b[3], ts: t.b[4], leaf: t.b[5] })) };
  }
  function tickAt(x, y) {
    for (const t of shownTicks) if (x >= t.x - 1 && x <= t.x + t.w + 1 && y >= t.y - 1 && y <= t.y + t.h + 1) return t;
    return null;
  }
  async function selectSample(t) {
    const box = $('details');
    try {
      const d = await api('/api/samples', { id: T.id, sample: t.b[3] });
      box.textContent = '';
      box.appendChild(el('h3', null, 'CPU sample: ' + (d.frames.length ? d.frames[0] : 'no stack')));
      const dl = el('dl');
      const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
      add('time', fmtDur(d.ts - T.start) + ' (ts ' + d.ts + ')');
      add('thread', d.tid === null ? 'utid ' + d.utid : String(d.tid));
      if (d.cpu !== null) add('cpu', String(d.cpu));
      if (t.b[2] > 1) add('in this tick', t.b[2] + ' samples (this is the first)');
      box.appendChild(dl);
      box.appendChild(el('h4', null, 'Stack (innermost first)'));
      const ol = el('ol', { class: 'stack' });
      for (const f of d.frames) ol.appendChild(el('li', null, f));
      box.appendChild(ol);
      dbg.details = { sample: d };
      showError(null);
    } catch (e) { showError(e); }
  }
  let shownFlows = [];
  function shownRect(k) {
    const s = shown.sl[shown.idx[k]], g4 = shown.geo;
    return { track: s[0], depth: s[1], ts: s[2], end: s[3], count: s[4], id: s[5], name: s[6],
             x: g4[k * 4], y: g4[k * 4 + 1], w: g4[k * 4 + 2], h: g4[k * 4 + 3], hit: shown.hits[k] === 1 };
  }
  Object.defineProperty(dbg, 'rects', {
    get() {
      if (!shown.objects) {
        shown.objects = [];
        for (let k = 0; k < shown.n; k++) shown.objects.push(shownRect(k));
      }
      return shown.objects;
    },
  });

  function hitTest(x, y) {
    let best = -1;
    const g4 = shown.geo;
    for (let k = 0; k < shown.n; k++) {
      const rx = g4[k * 4], ry = g4[k * 4 + 1], w = g4[k * 4 + 2], h = g4[k * 4 + 3];
      const pad = w === 0 ? 4 : 0;
      if (x >= rx - pad && x <= rx + w + pad && y >= ry && y <= ry + h &&
          (best < 0 || w < g4[best * 4 + 2])) best = k;
    }
    return best < 0 ? null : shownRect(best);
  }

  // ---- hover: what is under the pointer, in a tooltip ---------------------------
  //
  // A slice or an instant: its name, start, duration and args (asked for
  // once the pointer rests on it, then kept); a merged mark: how many and
  // the longest's name; a counter: its value at the pointer (the last one
  // at or before it) and the pixel column's least and greatest; a flow
  // drawn: the slices it links.
  const argsOf = new Map(); // slice id -> its args as text
  let hovered = null, argsTimer = 0;
  const tip = $('tip');
  function hideTip() {
    tip.hidden = true;
    hovered = null;
    dbg.tip = null;
  }
  function rowAt(y) {
    for (const r of visibleRows(0)) if (y >= r.y && y < r.y + r.h && y >= r.top) return r;
    return null;
  }
  function flowAt(x, y) {
    const rows = {};
    for (const r of visibleRows(0)) if (r.track !== undefined) rows[r.track] = r;
    for (const f of shownFlows) {
      const a = rows[f[0]], b = rows[f[4]];
      if (!a || !b) continue;
      const x0 = xOf(f[2]), y0 = a.y + 2 + f[1] * ROW_H + ROW_H / 2;
      const x1 = xOf(f[6]), y1 = b.y + 2 + f[5] * ROW_H + ROW_H / 2;
      for (let i = 0; i <= 24; i++) { // the curve drawn, at 25 points
        const u = i / 24, v = 1 - u;
        const px = v * v * v * x0 + 3 * v * v * u * (x0 + 30) + 3 * v * u * u * (x1 - 30) + u * u * u * x1;
        const py = v * v * v * y0 + 3 * v * v * u * y0 + 3 * v * u * u * y1 + u * u * u * y1;
        if (Math.abs(px - x) <= 5 && Math.abs(py - y) <= 5) return f;
      }
    }
    return null;
  }
  function nameOfSlice(id) {
    for (let k = 0; k < shown.n; k++) {
      const s = shown.sl[shown.idx[k]];
      if (s[5] === id && s[4] === 1) return s[6];
    }
    return 'slice ' + id;
  }
  function counterAt(row, t) {
    let c = null;
    for (const x of V.tile.counters) if (x[0] === row.track && x[1] <= t) c = x;
    return c;
  }
  function tipLines(x, y) {
    if (!T || !V || !V.tile || x < LABEL_W) return null;
    const tk = tickAt(x, y);
    if (tk) return { kind: 'sample', key: 'k' + tk.b[3], lines: [
      tk.b[5] === null ? '(no stack)' : tk.b[5], 'at ' + fmtDur(tk.b[4] - T.start),
      tk.b[2] > 1 ? tk.b[2] + ' samples here (the first named)' : '1 sample', 'click: its stack'] };
    const f = flowAt(x, y);
    if (f) return { kind: 'flow', key: 'f' + f[3] + '-' + f[7], lines: [
      'flow: ' + nameOfSlice(f[3]) + ' \u2192 ' + nameOfSlice(f[7]),
      'from ' + fmtDur(f[2] - T.start) + ' to ' + fmtDur(f[6] - T.start)] };
    const r = hitTest(x, y);
    if (r && r.count > 1) return { kind: 'merged', key: 'm' + r.id, lines: [
      r.count + ' slices merged (the longest: ' + r.name + ')',
      'from ' + fmtDur(r.ts - T.start) + ' to ' + fmtDur(r.end - T.start) + ': zoom in to see them'] };
    if (r) {
      const instant = r.end === r.ts;
      const a = argsOf.get(r.id);
      return { kind: instant ? 'instant' : 'slice', key: 's' + r.id, id: r.id, lines: [
        r.name, 'start ' + fmtDur(r.ts - T.start),
        instant ? 'instant' : 'duration ' + fmtDur(r.end - r.ts),
        'args: ' + (a === undefined ? '...' : a)] };
    }
    const row = rowAt(y);
    if (row && row.kind === 'counter') {
      const t = tsOf(x), c = counterAt(row, t);
      const unit = row.r.unit ? ' ' + row.r.unit : '';
      const lines = [row.label, 'at ' + fmtDur(Math.round(t) - T.start) + ': ' +
                     (c ? fmtVal(c[4]) + unit : 'no value yet')];
      if (c && c[2] !== c[3]) lines.push('in this pixel: ' + fmtVal(c[2]) + ' .. ' + fmtVal(c[3]) + unit);
      return { kind: 'counter', key: 'c' + row.track + ':' + (c ? c[1] : ''), track: row.track, lines };
    }
    return null;
  }
  function showTip(h, cx, cy) {
    tip.textContent = h.lines.join('\n');
    tip.hidden = false;
    const w = tip.offsetWidth, hh = tip.offsetHeight;
    tip.style.left = Math.min(cx + 14, window.innerWidth - w - 4) + 'px';
    tip.style.top = (cy + 16 + hh > window.innerHeight ? cy - hh - 8 : cy + 16) + 'px';
    dbg.tip = { kind: h.kind, text: h.lines.join('\n') };
  }
  function hover(x, y, cx, cy) {
    const h = tipLines(x, y);
    if (!h) { hideTip(); return; }
    hovered = h;
    showTip(h, cx, cy);
    if (h.id !== undefined && !argsOf.has(h.id)) {
      // Asked for once the pointer rests on the slice: moving across
      // many sends no request for each.
      clearTimeout(argsTimer);
      argsTimer = setTimeout(async () => {
        if (!hovered || hovered.id !== h.id || argsOf.has(h.id)) return;
        try {
          const d = await api('/api/slice', { id: T.id, slice: h.id });
          argsOf.set(h.id, d.args.length ? d.args.map(([k, v]) => k + ' = ' + v).join(', ') : 'none');
        } catch (e) { argsOf.set(h.id, 'not known (' + (e.message || e) + ')'); }
        if (hovered && hovered.id === h.id) hover(x, y, cx, cy);
      }, 120);
    }
  }
  cv.addEventListener('mousemove', (ev) => {
    // A track's name can be dragged: the pointer says so.
    const x = ev.offsetX, row = x < LABEL_W && ev.offsetY >= AXIS_H ? rowAt(ev.offsetY) : null;
    cv.style.cursor = trackDrag && trackDrag.moved ? 'grabbing' :
      row && row.track !== undefined && x > 14 && x < PIN_X - 6 ? 'grab' : '';
    if (drag && drag.moved) { hideTip(); return; }
    hover(ev.offsetX, ev.offsetY, ev.clientX, ev.clientY);
  });
  cv.addEventListener('mouseleave', hideTip);

  async function selectSlice(r) {
    V.slice = r;
    if (V.tile) draw();
    saveState();
    const box = $('details');
    if (r.count > 1) {
      box.textContent = '';
      box.appendChild(el('p', null, r.count + ' slices narrower than a pixel, merged (the longest: ' +
                                     r.name + '), from ' + fmtDur(r.ts - T.start) + ' to ' +
                                     fmtDur(r.end - T.start) + ': zoom in to see them.'));
      dbg.details = { merged: r.count };
      return;
    }
    try {
      const d = await api('/api/slice', { id: T.id, slice: r.id });
      // A slice selected by its id alone (the address, a link): its track
      // and times from its details, for the keys that act on them.
      if (V.slice === r) Object.assign(r, { track: d.track, depth: d.depth, ts: d.ts, name: d.name,
                                            end: d.dur < 0 ? d.ts : d.ts + d.dur });
      box.textContent = '';
      const dl = el('dl');
      const add = (k, v) => { dl.appendChild(el('dt', null, k)); dl.appendChild(el('dd', null, v)); };
      add('name', d.name);
      add('category', d.category === null ? '' : d.category);
      add('start', fmtDur(d.ts - T.start) + ' (ts ' + d.ts + ')');
      add('end', d.dur < 0 ? 'did not end' : fmtDur(d.ts + d.dur - T.start));
      add('duration', d.dur < 0 ? 'did not end' : fmtDur(d.dur));
      add('self time', fmtDur(d.self));
      add('depth', String(d.depth));
      add('thread', d.thread === null ? (d.track_name || '') : d.thread + ' ' + d.tid);
      if (d.process !== null) add('process', d.process + ' ' + d.pid);
      box.appendChild(el('h3', null, d.name));
      box.appendChild(dl);
      if (T.samples && d.thread !== null) {
        const a = el('a', { tabindex: '0', id: 'slice-samples' }, 'What the CPU did inside this slice: its samples\' flame graph');
        a.addEventListener('click', () => sampleFlameOf(d.id));
        a.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') sampleFlameOf(d.id); });
        box.appendChild(el('p', null)).appendChild(a);
      }
      if (d.args.length) {
        box.appendChild(el('h4', null, 'Args'));
        box.appendChild(sortableTable([{ name: 'key' }, { name: 'value' }], d.args));
      }
      for (const [key, title] of [['flows_in', 'Flow from'], ['flows_out', 'Flow to']]) {
        if (!d[key] || !d[key].length) continue;
        box.appendChild(el('h4', null, title));
        const ul = el('ul');
        for (const f of d[key]) {
          const li = el('li');
          const a = el('a', { tabindex: '0' }, f.name + ' at ' + fmtDur(f.ts - T.start));
          a.addEventListener('click', () => goTo(f));
          a.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') goTo(f); });
          li.appendChild(a);
          ul.appendChild(li);
        }
        box.appendChild(ul);
      }
      dbg.details = d;
      showError(null);
    } catch (e) { showError(e); }
  }

  // Centres the view on a slice (keeping the zoom unless it is not shown)
  // and shows its details.
  function goTo(m) {
    const span = V.e - V.s;
    if (m.ts < V.s || m.ts > V.e) setWindow(m.ts - span / 2, m.ts + span / 2);
    selectSlice({ id: m.id, count: 1, ts: m.ts, end: m.ts, name: m.name });
  }

  async function selectRange(s, e) {
    if (e < s) [s, e] = [e, s];
    V.range = [Math.round(s), Math.round(e)];
    if (V.tile) draw();
    saveState();
    const box = $('range');
    box.textContent = '';
    try {
      const r = await api('/api/range', { id: T.id, start: V.range[0], end: V.range[1] });
      box.appendChild(el('h3', null, 'Slices in ' + fmtDur(V.range[0] - T.start) + ' .. ' +
                                      fmtDur(V.range[1] - T.start) + ' (' + fmtDur(V.range[1] - V.range[0]) + ')'));
      // The columns as Perfetto's area selection has them: count, total,
      // self, avg, max (and min); the answer's order is name, count,
      // total, self, min, avg, max.
      const rows = r.rows.map((x) => [x[0], x[1], x[2], x[3], x[5], x[6], x[4]]);
      const t = sortableTable(
        [{ name: 'name' }, { name: 'count', num: true }, { name: 'total', num: true },
         { name: 'self', num: true }, { name: 'avg', num: true }, { name: 'max', num: true },
         { name: 'min', num: true }],
        rows, (i, v) => (i >= 2 ? (v === null ? '-' : fmtDur(Math.round(v))) : String(v)),
        // A name: its slices found (the search box), outlined on the timeline.
        (x) => { $('search').value = x[0]; search(); });
      t.id = 'range-table';
      box.appendChild(t);
      dbg.range = { start: V.range[0], end: V.range[1], rows: r.rows };
      showError(null);
    } catch (e) { showError(e); }
  }

  // Mouse: drag pans, shift+drag (or a drag on the axis) selects a range,
  // a click shows a slice; the wheel zooms around the pointer.
  // A track's name dragged up or down moves the track (among its
  // process's tracks, or among the pinned ones); a click on it is the
  // label's click (collapse).
  let drag = null, trackDrag = null;
  cv.addEventListener('mousedown', (ev) => {
    if (!T) return;
    cv.focus();
    const x = ev.offsetX, y = ev.offsetY;
    if (x < LABEL_W && y >= AXIS_H) {
      const row = rowAt(y);
      if (row && row.track !== undefined && x > 14 && x < PIN_X - 6) trackDrag = { row, x, y0: y, moved: false, to: null };
      else if (row) trackControl(row, x);
      return;
    }
    drag = { x0: x, y0: y, s: V.s, e: V.e, select: ev.shiftKey || y < AXIS_H, moved: false };
  });
  window.addEventListener('mousemove', (ev) => {
    if (trackDrag) {
      const y = ev.clientY - cv.getBoundingClientRect().top;
      if (Math.abs(y - trackDrag.y0) > 4) trackDrag.moved = true;
      if (!trackDrag.moved) return;
      const row = rowAt(y);
      trackDrag.to = null;
      if (row && row.track !== undefined && row.track !== trackDrag.row.track) {
        const after = y > row.y + row.h / 2;
        trackDrag.to = { track: row.track, after, y: after ? row.y + row.h : row.y };
      }
      draw();
      return;
    }
    if (!drag) return;
    const x = ev.clientX - cv.getBoundingClientRect().left;
    if (Math.abs(x - drag.x0) > 3) drag.moved = true;
    if (!drag.moved) return;
    if (drag.select) {
      V.range = [tsOf(Math.min(drag.x0, x)), tsOf(Math.max(drag.x0, x))];
      draw();
    } else {
      const dt = (x - drag.x0) * (drag.e - drag.s) / timeW();
      V.s = Math.round(drag.s - dt); V.e = Math.round(drag.e - dt);
      if (LIVE.follow) setFollow(false);
      input();
      requestTile();
    }
  });
  window.addEventListener('mouseup', (ev) => {
    if (trackDrag) {
      const d = trackDrag;
      trackDrag = null;
      if (!d.moved) trackControl(d.row, d.x);
      else if (!d.to || !moveTrack(d.row.track, d.to.track, d.to.after)) draw();
      return;
    }
    if (!drag) return;
    const d = drag;
    drag = null;
    const x = ev.clientX - cv.getBoundingClientRect().left;
    if (d.moved && d.select) { selectRange(tsOf(Math.min(d.x0, x)), tsOf(Math.max(d.x0, x))); return; }
    if (d.moved) return;
    const tk = tickAt(d.x0, d.y0);
    if (tk) { selectSample(tk); return; }
    const r = hitTest(d.x0, d.y0);
    if (r) selectSlice(r);
  });
  cv.addEventListener('wheel', (ev) => {
    if (!T) return;
    ev.preventDefault();
    hideTip();
    const f = Math.pow(1.0015, ev.deltaY);
    const c = tsOf(Math.max(LABEL_W, ev.offsetX));
    input();
    setWindow(c - (c - V.s) * f, c + (V.e - c) * f);
  }, { passive: false });
  // The keyboard: the keys below (? shows them) and Tab through the
  // page's controls (the list's rows, the tabs, the bars, the links).
  function toggleKeys(on) {
    $('keys').hidden = on === undefined ? !$('keys').hidden : !on;
    dbg.keysShown = !$('keys').hidden;
  }
  // The slice drawn next to the selected one: left/right on its track and
  // depth, down to its first child, up to its parent; with none selected,
  // the first slice drawn (top row, earliest).
  function moveSelection(dir) {
    const rs = dbg.rects.filter((r) => r.count === 1);
    const cur = V.slice ? rs.find((r) => r.id === V.slice.id) : null;
    let pick = null;
    if (!cur) {
      pick = rs.slice().sort((a, b) => a.y - b.y || a.ts - b.ts)[0];
    } else if (dir === 'left' || dir === 'right') {
      const row = rs.filter((r) => r.track === cur.track && r.depth === cur.depth).sort((a, b) => a.ts - b.ts || a.id - b.id);
      pick = row[row.findIndex((r) => r.id === cur.id) + (dir === 'left' ? -1 : 1)];
    } else if (dir === 'down') {
      pick = rs.filter((r) => r.track === cur.track && r.depth === cur.depth + 1 && r.ts >= cur.ts && r.ts < cur.end)
        .sort((a, b) => a.ts - b.ts)[0];
    } else {
      pick = rs.find((r) => r.track === cur.track && r.depth === cur.depth - 1 && r.ts <= cur.ts && r.end >= cur.end);
    }
    if (!pick) return;
    selectSlice(pick);
  }
  function fitSelection() {
    const r = V.slice && dbg.rects.find((x) => x.id === V.slice.id && x.count === 1);
    if (!r) return;
    const pad = Math.max((r.end - r.ts) / 4, 500);
    input();
    setWindow(r.ts - pad, r.end + pad);
  }
  function controlSelected(what) {
    const r = V.slice && T.rows.find((x) => x.track === V.slice.track);
    if (!r) return;
    if (what === 'fold') trackControl(T.layout.find((x) => x.kind === 'process' && x.upid === r.upid), 0);
    else if (T.byTrack[r.track]) trackControl(T.byTrack[r.track], what === 'pin' ? PIN_X : 0);
  }
  const TABS = ['timeline', 'flame', 'zone', 'stats', 'sql'];
  window.addEventListener('keydown', (ev) => {
    if (ev.target.tagName === 'INPUT' || ev.target.tagName === 'TEXTAREA' || ev.target.tagName === 'SELECT') {
      if (ev.key === 'Escape') ev.target.blur();
      return;
    }
    // Alt+up, Alt+down: the selected slice's track one place up, down.
    if (ev.altKey && !ev.ctrlKey && !ev.metaKey && (ev.key === 'ArrowUp' || ev.key === 'ArrowDown') &&
        T && V && dbg.section === 'timeline') {
      if (V.slice && V.slice.track !== undefined) stepTrack(V.slice.track, ev.key === 'ArrowUp' ? -1 : 1);
      ev.preventDefault();
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === '?') { toggleKeys(); ev.preventDefault(); return; }
    if (ev.key === 'Escape' && !$('keys').hidden) { toggleKeys(false); return; }
    if (!T) return;
    if (ev.key === '/') { $('search').focus(); ev.preventDefault(); return; }
    const n = Number(ev.key);
    if (Number.isInteger(n) && n >= 1 && n <= TABS.length) {
      location.hash = '#trace=' + T.id + '&tab=' + TABS[n - 1];
      ev.preventDefault();
      return;
    }
    if (dbg.section !== 'timeline') return;
    const span = V.e - V.s, c = (V.s + V.e) / 2;
    const k = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    if ('wsad'.includes(k) && k.length === 1) input();
    if (k === 'w') setWindow(c - span * 0.35, c + span * 0.35);
    else if (k === 's') setWindow(c - span * 0.7, c + span * 0.7);
    else if (k === 'a') setWindow(V.s - span * 0.15, V.e - span * 0.15);
    else if (k === 'd') setWindow(V.s + span * 0.15, V.e + span * 0.15);
    else if (k === 'ArrowLeft') moveSelection('left');
    else if (k === 'ArrowRight') moveSelection('right');
    else if (k === 'ArrowUp') moveSelection('up');
    else if (k === 'ArrowDown') moveSelection('down');
    else if (k === 'f') fitSelection();
    else if (k === 'l') { if (T.recording) setFollow(!LIVE.follow); }
    else if (k === 'm') { if (V.slice && V.slice.count === 1 && V.slice.end > V.slice.ts) selectRange(V.slice.ts, V.slice.end); }
    else if (k === 'c') controlSelected('collapse');
    else if (k === 'p') controlSelected('pin');
    else if (k === 'g') controlSelected('fold');
    else if (k === 'Escape') { V.slice = null; V.range = null; $('range').textContent = ''; draw(); saveState(); }
    else return;
    ev.preventDefault();
  });
  $('keys-close').addEventListener('click', () => toggleKeys(false));
  window.addEventListener('resize', () => {
    if (dbg.section === 'timeline' && T) { resize(); requestTile(); }
    if (dbg.section === 'flame') drawFlame();
  });

  // ---- search ---------------------------------------------------------------------

  async function search() {
    const q = $('search').value.trim();
    V.search = q || null;
    V.matches = [];
    V.match = -1;
    dbg.search = null;
    if (!q) { $('matches').textContent = ''; draw(); return; }
    try {
      const r = await api('/api/search', { id: T.id, q });
      V.matches = r.matches;
      dbg.search = { q, total: r.total, matches: r.matches };
      $('matches').textContent = r.total ? r.total + ' matches' : 'no match';
      draw();
      showError(null);
    } catch (e) { showError(e); }
  }
  function step(d) {
    if (!V || !V.matches || !V.matches.length) return;
    V.match = V.match < 0 && d < 0 ? V.matches.length - 1
      : (V.match + d + V.matches.length) % V.matches.length;
    const m = V.matches[V.match];
    $('matches').textContent = (V.match + 1) + ' / ' + dbg.search.total;
    dbg.search.current = V.match;
    show('timeline');
    goTo(m);
  }
  // Enter: the next match (shift: the previous); the first Enter after
  // the text changed finds the matches and goes to the first.
  $('search').addEventListener('keydown', async (ev) => {
    if (ev.key !== 'Enter' || !V) return;
    ev.preventDefault();
    if (V.search !== ($('search').value.trim() || null)) {
      await search();
      if (V.matches.length) step(ev.shiftKey ? -1 : 1);
    } else {
      step(ev.shiftKey ? -1 : 1);
    }
  });
  $('all-flows').addEventListener('change', () => { if (T && V && V.tile) draw(); });
  $('next').addEventListener('click', () => step(1));
  $('prev').addEventListener('click', () => step(-1));

  // ---- the flame graph ------------------------------------------------------------

  const flameState = { data: null, zoom: 0, key: '', exact: null, unit: 'ns', args: null };
  function fillThreads() {
    const s = $('fl-thread');
    s.textContent = '';
    s.appendChild(el('option', { value: '-1' }, 'all threads'));
    for (const r of T.rows) if (r.type === 'thread' && r.utid >= 0)
      s.appendChild(el('option', { value: String(r.utid) }, (r.thread || 'thread') + ' ' + r.tid));
  }
  // The flame graph of slices (/api/flame, nanoseconds), or, when the
  // trace has CPU samples and "CPU samples" is chosen, of the samples
  // (/api/sample_flame: a thread's, a range's, or the selected slice's
  // "what the CPU did inside this slice"), counted in samples.
  // Allocation stacks (etch record --malloc): "bytes allocated" or "bytes
  // still live" (/api/alloc_flame), the whole trace's.
  const fmtFlame = (v, exact) => (flameState.unit === 'samples' ? v + (v === 1 ? ' sample' : ' samples')
    : flameState.unit === 'bytes' ? (v < 1024 || !exact ? fmtSize(v) : fmtSize(v) + ' (' + v + ' B)') : fmtDur(v));
  async function loadFlame() {
    const of = $('fl-of').value;
    if (T.allocStacks && (of === 'allocated' || of === 'live')) return loadAllocFlame(of);
    const args = { id: T.id };
    const samples = !!T.samples && of === 'samples';
    $('fl-slice-box').hidden = !samples;
    const utid = $('fl-thread').value;
    if (utid !== '-1') args.utid = utid;
    if ($('fl-sel').checked && V.range) { args.start = V.range[0]; args.end = V.range[1]; }
    if (samples && $('fl-slice').checked && V.slice && V.slice.count === 1) { args.slice = V.slice.id; delete args.utid; }
    const path = samples ? '/api/sample_flame' : '/api/flame';
    const key = path + JSON.stringify(args);
    if (flameState.data && flameState.key === key) { drawFlame(); return; }
    const t0 = performance.now();
    try {
      const d = await api(path, args);
      flameGot(d, key, args, t0);
      showError(null);
    } catch (e) { showError(e); }
  }
  async function loadAllocFlame(mode) {
    $('fl-slice-box').hidden = true;
    const args = { id: T.id, mode };
    const key = '/api/alloc_flame' + JSON.stringify(args);
    if (flameState.data && flameState.key === key) { drawFlame(); return; }
    const t0 = performance.now();
    try {
      flameGot(await api('/api/alloc_flame', args), key, args, t0);
      showError(null);
    } catch (e) { showError(e); }
  }
  function flameGot(d, key, args, t0) {
    flameState.unit = d.unit === 'samples' || d.unit === 'bytes' ? d.unit : 'ns';
    flameState.args = args;
    const nodes = d.nodes.map(([parent, name, total, self, count], i) =>
      ({ i, parent, name: name < 0 ? '(all)' : d.names[name], total, self, count, kids: [] }));
    for (const n of nodes) if (n.parent >= 0) nodes[n.parent].kids.push(n);
    for (const n of nodes) n.kids.sort((a, b) => b.total - a.total);
    flameState.data = nodes;
    flameState.key = key;
    flameState.zoom = 0;
    $('fl-info').textContent = nodes.length + ' nodes, ' + Math.round(performance.now() - t0) + ' ms';
    drawFlame();
  }
  const fcv = $('fl');
  function drawFlame() {
    const nodes = flameState.data;
    if (!nodes) return;
    const dpr = window.devicePixelRatio || 1;
    const W = fcv.clientWidth || 800;
    const H = Math.max(200, $('flame').clientHeight - 40);
    fcv.style.height = H + 'px';
    fcv.width = Math.round(W * dpr); fcv.height = Math.round(H * dpr);
    const g = fcv.getContext('2d');
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, W, H);
    g.font = '10px system-ui, sans-serif';
    g.textBaseline = 'middle';
    const z = nodes[flameState.zoom];
    const boxes = [];
    const scale = z.total > 0 ? W / z.total : 0;
    // The search: the nodes whose name holds the text (any case) outlined,
    // the others paler.
    const q = ($('fl-search').value || '').trim().toLowerCase();
    let matches = 0, matchTotal = 0, labels = 0;
    // The text cut to fit w px, or null: its head and an ellipsis, or,
    // when fewer than 4 characters of the head fit, its tail (names that
    // share a prefix, function_18 and function_29, differ there).
    const fits = (t, w) => g.measureText(t).width <= w;
    const cut = (text, w, tail) => {
      let lo = 0, hi = text.length;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (fits(tail ? '\u2026' + text.slice(text.length - mid) : text.slice(0, mid) + '\u2026', w)) lo = mid; else hi = mid - 1;
      }
      return lo;
    };
    const ellipsis = (text, w) => {
      if (fits(text, w)) return text;
      const head = cut(text, w, false);
      if (head >= 4) return text.slice(0, head) + '\u2026';
      const tail = cut(text, w, true);
      if (tail >= 2 && tail >= head) return '\u2026' + text.slice(text.length - tail);
      return head >= 2 ? text.slice(0, head) + '\u2026' : null;
    };
    // The zoomed node's ancestors first, full width, then its subtree.
    const chain = [];
    for (let n = z; n; n = n.parent >= 0 ? nodes[n.parent] : null) chain.unshift(n);
    let depth = 0;
    function box(n, x, d, w) {
      const y = d * ROW_H;
      if (y > H) return;
      const hit = q !== '' && n.i !== 0 && (flameState.exact !== null ? n.name === flameState.exact : n.name.toLowerCase().includes(q));
      if (hit) { matches++; matchTotal += n.total; }
      g.globalAlpha = q !== '' && !hit ? 0.35 : 1;
      g.fillStyle = n.i === 0 ? '#b0bec5' : colorOf(n.name, false);
      g.fillRect(x, y, Math.max(1, w - 1), ROW_H - 1);
      if (hit) { g.strokeStyle = '#000'; g.lineWidth = 2; g.strokeRect(x + 1, y + 1, Math.max(1, w - 3), ROW_H - 3); g.lineWidth = 1; }
      // A label wherever one fits: the name and total, else the name, cut.
      if (w >= 16) {
        const full = n.name + ' ' + fmtFlame(n.total);
        const label = fits(full, w - 6) ? full : ellipsis(n.name, w - 6);
        if (label) { g.fillStyle = '#111'; g.fillText(label, x + 3, y + ROW_H / 2); labels++; }
      }
      g.globalAlpha = 1;
      boxes.push({ i: n.i, name: n.name, total: n.total, self: n.self, count: n.count, x, y, w, h: ROW_H - 1, hit });
    }
    for (const n of chain.slice(0, -1)) box(n, 0, depth++, W);
    function sub(n, x, d) {
      const w = n.total * scale;
      if (w < 0.5) return;
      box(n, x, d, w);
      let cx = x;
      for (const k of n.kids) { sub(k, cx, d + 1); cx += k.total * scale; }
    }
    sub(z, 0, depth);
    flameState.boxes = boxes;
    const kid = (n) => ({ name: n.name, total: n.total, self: n.self, count: n.count });
    dbg.flame = { root: kid(nodes[0]), zoom: kid(z), children: z.kids.map(kid),
                  rootChildren: nodes[0].kids.map(kid), boxes: boxes.length, labels,
                  search: q, matches, matchTotal, unit: flameState.unit, args: flameState.args, nodes: nodes.length };
    if (q !== '') $('fl-info').textContent = matches + ' nodes drawn match "' + q + '": ' + fmtFlame(matchTotal) +
      (z.total ? ' (' + (100 * matchTotal / z.total).toFixed(1) + '% of ' + (z.i === 0 ? 'the whole' : z.name) + ')' : '');
    flameFunctions(nodes, z, q);
  }

  // ---- the flame graph's functions: a table beside it ----------------------------
  //
  // Where most nodes are too narrow for a label (a big trace, hundreds of
  // names under one parent), the names of the graph shown (the zoomed
  // node's subtree, or the whole) as Tracy's statistics and pprof's top
  // list them: self, total (a name nested in itself counted once), count;
  // by self time first, a click on a header sorts by it; the box above
  // keeps the names holding its text; a click on a row highlights that
  // name's nodes (that name only).
  const FT = { nodes: null, zoom: -1, rows: [], col: 1, dir: -1, q: null, shown: 0 };
  const FT_COLS = ['name', 'self', 'total', 'count'];
  function flameFunctions(nodes, z, q) {
    if (FT.nodes !== nodes || FT.zoom !== z.i) {
      const by = new Map(), depth = new Map();
      const stack = [[z, false]];
      while (stack.length) {
        const [n, leave] = stack.pop();
        if (n.i === 0) { for (const k of n.kids) stack.push([k, false]); continue; }
        if (leave) { depth.set(n.name, depth.get(n.name) - 1); continue; }
        let e = by.get(n.name);
        if (!e) by.set(n.name, e = [n.name, 0, 0, 0]);
        e[1] += n.self;
        if (!depth.get(n.name)) e[2] += n.total;
        e[3] += n.count;
        depth.set(n.name, (depth.get(n.name) || 0) + 1);
        stack.push([n, true]);
        for (const k of n.kids) stack.push([k, false]);
      }
      FT.nodes = nodes; FT.zoom = z.i; FT.rows = [...by.values()]; FT.q = null;
      sortFunctions();
    } else if (FT.q === q) {
      return;
    }
    FT.q = q;
    fillFunctions();
  }
  function sortFunctions() {
    const c = FT.col, d = FT.dir;
    FT.rows.sort((a, b) => (c === 0 ? a[0].localeCompare(b[0]) * d : (a[c] - b[c]) * d || (a[0] < b[0] ? -1 : 1)));
  }
  function fillFunctions() {
    const box = $('fl-funcs');
    box.textContent = '';
    const q = FT.q || '';
    const rows = q === '' ? FT.rows : FT.rows.filter((r) => r[0].toLowerCase().includes(q));
    const t = el('table');
    t.id = 'fl-table';
    const head = el('tr');
    FT_COLS.forEach((c, i) => {
      const th = el('th', { class: 'sort' + (i ? ' n' : '') + (FT.col === i ? (FT.dir < 0 ? ' down' : ' up') : '') }, c);
      th.addEventListener('click', () => {
        FT.dir = FT.col === i ? -FT.dir : (i ? -1 : 1);
        FT.col = i;
        sortFunctions();
        fillFunctions();
      });
      head.appendChild(th);
    });
    const thead = el('thead');
    thead.appendChild(head);
    t.appendChild(thead);
    const body = el('tbody');
    for (const r of rows.slice(0, 1000)) {
      const tr = el('tr', { tabindex: '0' });
      tr.appendChild(el('td', null, r[0]));
      tr.appendChild(el('td', { class: 'n' }, fmtFlame(r[1])));
      tr.appendChild(el('td', { class: 'n' }, fmtFlame(r[2])));
      tr.appendChild(el('td', { class: 'n' }, String(r[3])));
      if (flameState.exact === r[0]) tr.className = 'on';
      const pick = () => {
        flameState.exact = flameState.exact === r[0] ? null : r[0];
        $('fl-search').value = flameState.exact === null ? '' : r[0];
        drawFlame();
        fillFunctions();
      };
      tr.addEventListener('click', pick);
      tr.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') pick(); });
      body.appendChild(tr);
    }
    t.appendChild(body);
    box.appendChild(el('div', { class: 'hint' }, rows.length + (q === '' ? ' names' : ' names hold "' + q + '"') +
                                                 (rows.length > 1000 ? ' (the first 1000 shown)' : '')));
    box.appendChild(t);
    FT.shown = Math.min(rows.length, 1000);
    dbg.flameFunctions = { rows: rows.map((r) => r.slice()), col: FT_COLS[FT.col], dir: FT.dir, exact: flameState.exact };
  }
  function flameBoxAt(x, y) {
    if (!flameState.boxes) return null;
    for (const b of flameState.boxes) if (x >= b.x && x <= b.x + b.w && y >= b.y && y <= b.y + b.h) return b;
    return null;
  }
  // Hover: every node, however narrow, says what it is.
  fcv.addEventListener('mousemove', (ev) => {
    const b = flameBoxAt(ev.offsetX, ev.offsetY), nodes = flameState.data;
    if (!b || !nodes) { hideTip(); return; }
    const root = nodes[0].total;
    showTip({ kind: 'flame', lines: [b.i === 0 ? '(all)' : b.name,
      'total ' + fmtFlame(b.total, true) + (root ? ' (' + (100 * b.total / root).toFixed(2) + '% of the whole)' : ''),
      'self ' + fmtFlame(b.self, true)].concat(flameState.unit === 'samples' ? [] : [b.count + (flameState.unit === 'bytes' ? ' allocations' : ' slices')],
                                         ['click: zoom into it']) },
      ev.clientX, ev.clientY);
  });
  fcv.addEventListener('mouseleave', hideTip);
  $('fl-search').addEventListener('input', () => { flameState.exact = null; drawFlame(); });
  fcv.addEventListener('click', (ev) => {
    if (!flameState.boxes) return;
    for (const b of flameState.boxes) {
      if (ev.offsetX >= b.x && ev.offsetX <= b.x + b.w && ev.offsetY >= b.y && ev.offsetY <= b.y + b.h) {
        flameState.zoom = b.i;
        $('fl-info').textContent = b.name + ': total ' + fmtFlame(b.total) + ', self ' + fmtFlame(b.self) +
          (flameState.unit === 'samples' ? '' : ', ' + b.count + (flameState.unit === 'bytes' ? ' allocations' : ' slices'));
        drawFlame();
        return;
      }
    }
  });
  $('fl-reset').addEventListener('click', () => { flameState.zoom = 0; drawFlame(); });
  $('fl-thread').addEventListener('change', loadFlame);
  $('fl-of').addEventListener('change', loadFlame);
  $('fl-slice').addEventListener('change', loadFlame);
  // The details' link: the flame graph of the CPU samples inside a slice.
  function sampleFlameOf(id) {
    $('fl-of').value = 'samples';
    $('fl-slice').checked = true;
    $('fl-sel').checked = false;
    if (V.slice && V.slice.id === id) location.hash = '#trace=' + T.id + '&tab=flame';
  }
  $('fl-sel').addEventListener('change', loadFlame);

  // ---- find zone (Tracy's) -------------------------------------------------------
  //
  // One slice name's durations (/api/zone, what `etch stats --slice NAME`
  // prints): count, min, p50, p90, p99 (nearest rank) and max, and the
  // histogram as bars; a bar lists its slices (the first 1000 by time), a
  // row goes to its slice on the timeline.
  const Z = { names: null, data: null, bar: -1 };
  async function loadZone() {
    try {
      if (!Z.names) {
        const d = await api('/api/zone', { id: T.id });
        Z.names = d.names;
        const dl = $('zone-names');
        dl.textContent = '';
        for (const [n, c] of d.names) dl.appendChild(el('option', { value: n }, c + ' slices'));
        if (!$('zone-name').value && d.names.length) $('zone-name').value = d.names[0][0];
      }
      const name = $('zone-name').value;
      if (name && (!Z.data || Z.data.zone.name !== name)) await showZone(name);
      showError(null);
    } catch (e) { showError(e); }
  }
  async function showZone(name) {
    const d = await api('/api/zone', { id: T.id, name });
    Z.data = d;
    Z.bar = -1;
    const z = d.zone, body = $('zone-table').tBodies[0];
    body.textContent = '';
    const tr = el('tr');
    tr.appendChild(el('td', { class: 'n' }, String(z.count)));
    for (const k of ['min', 'p50', 'p90', 'p99', 'max'])
      tr.appendChild(el('td', { class: 'n', title: z[k] === null ? '' : z[k] + ' ns' }, z[k] === null ? '-' : fmtDur(z[k])));
    body.appendChild(tr);
    $('zone-info').textContent = z.count ? z.histogram.length + ' buckets of ' +
      fmtDur(z.histogram[0].hi - z.histogram[0].lo) + '; a bar lists its slices' : 'no slice of that name';
    const hist = $('zone-hist');
    hist.textContent = '';
    const top = Math.max(1, ...z.histogram.map((b) => b.count));
    z.histogram.forEach((b, k) => {
      const bar = el('button', { 'data-k': String(k), 'data-count': String(b.count),
                                 title: fmtDur(b.lo) + ' .. ' + fmtDur(b.hi) + ': ' + b.count + ' slices' });
      bar.style.height = (b.count ? Math.max(2, 100 * b.count / top) : 0) + '%';
      bar.addEventListener('click', () => zoneBar(k));
      hist.appendChild(bar);
    });
    const axis = $('zone-axis');
    axis.textContent = '';
    if (z.count) { axis.appendChild(el('span', null, fmtDur(z.min))); axis.appendChild(el('span', null, fmtDur(z.max))); }
    $('zone-list').textContent = '';
    dbg.zone = { zone: z, instances: null };
  }
  async function zoneBar(k) {
    const z = Z.data.zone, b = z.histogram[k];
    Z.bar = k;
    for (const x of $('zone-hist').children) x.classList.toggle('on', Number(x.dataset.k) === k);
    try {
      const d = await api('/api/zone', { id: T.id, name: z.name, lo: b.lo, hi: b.hi });
      const box = $('zone-list');
      box.textContent = '';
      box.appendChild(el('h3', null, d.instances_total + ' slices of ' + fmtDur(b.lo) + ' to ' + fmtDur(b.hi) +
                         (d.instances.length < d.instances_total ? ' (the first ' + d.instances.length + ')' : '')));
      const t = el('table', { id: 'zone-slices' });
      const head = el('tr');
      for (const h of ['start', 'duration', 'track']) head.appendChild(el('th', null, h));
      const thead = el('thead'); thead.appendChild(head); t.appendChild(thead);
      const tb = el('tbody');
      for (const [id, ts, dur, track, depth] of d.instances) {
        const r = el('tr', { 'data-id': String(id), tabindex: '0' });
        r.appendChild(el('td', { class: 'n' }, fmtDur(ts - T.start)));
        r.appendChild(el('td', { class: 'n' }, fmtDur(dur)));
        r.appendChild(el('td', null, T.byTrack[track] ? T.byTrack[track].label : String(track)));
        const go = () => zoneGo({ id, ts, dur, track, depth, name: z.name });
        r.addEventListener('click', go);
        r.addEventListener('keydown', (ev) => { if (ev.key === 'Enter') go(); });
        tb.appendChild(r);
      }
      t.appendChild(tb);
      box.appendChild(t);
      dbg.zone.instances = d.instances;
      dbg.zone.instancesTotal = d.instances_total;
      showError(null);
    } catch (e) { showError(e); }
  }
  // The timeline, the slice in the middle third of the window, selected.
  function zoneGo(m) {
    location.hash = '#trace=' + T.id + '&tab=timeline';
    const pad = Math.max(m.dur, 1000);
    V.s = Math.round(m.ts - pad); V.e = Math.round(m.ts + m.dur + pad);
    if (LIVE.follow) setFollow(false);
    selectSlice({ id: m.id, count: 1, ts: m.ts, end: m.ts + m.dur, name: m.name });
  }
  $('zone-go').addEventListener('click', () => { if (T) loadZone(); });
  $('zone-name').addEventListener('keydown', (ev) => { if (ev.key === 'Enter' && T) { ev.preventDefault(); loadZone(); } });
  $('zone-name').addEventListener('change', () => { if (T) loadZone(); });

  // ---- stats -------------------------------------------------------------------

  async function loadStats() {
    const box = $('stats');
    box.textContent = '';
    try {
      const d = await api('/api/stats', { id: T.id });
      const dur = (i, v) => (typeof v === 'number' && i > 0 ? String(v) : String(v));
      box.appendChild(el('h3', null, 'Trace'));
      box.appendChild(sortableTable([{ name: 'what' }, { name: 'value', num: true }], [
        ['duration', fmtDur(d.end - d.start)], ['events', d.events], ['slices', d.slices],
        ['instants', d.instants], ['counter values', d.counter_values], ['flows', d.flows],
        ['tracks', d.tracks], ['processes', d.processes], ['threads', d.threads]]));
      const top = [{ name: 'name' }, { name: 'count', num: true }, { name: 'total', num: true },
                   { name: 'self', num: true }, { name: 'max', num: true }];
      const fmt = (i, v) => (i >= 2 ? fmtDur(v) : String(v));
      box.appendChild(el('h3', null, 'Slices by total time'));
      const a = sortableTable(top, d.by_total, fmt); a.id = 'stats-total'; box.appendChild(a);
      box.appendChild(el('h3', null, 'Slices by self time'));
      const b = sortableTable(top, d.by_self, fmt); b.id = 'stats-self'; box.appendChild(b);
      box.appendChild(el('h3', null, 'Threads'));
      box.appendChild(sortableTable([{ name: 'thread' }, { name: 'tid', num: true }, { name: 'process' },
                                     { name: 'pid', num: true }, { name: 'busy', num: true }],
                                    d.threads_busy, (i, v) => (i === 4 ? fmtDur(v) : v === null ? '' : String(v))));
      if (d.counters.length) {
        box.appendChild(el('h3', null, 'Counters'));
        box.appendChild(sortableTable([{ name: 'track' }, { name: 'unit' }, { name: 'values', num: true },
                                       { name: 'min', num: true }, { name: 'max', num: true },
                                       { name: 'mean', num: true }, { name: 'last', num: true }],
                                      d.counters, dur));
      }
      await statsSamples(box, d);
      if (d.loss.length) {
        box.appendChild(el('h3', null, 'Data loss'));
        box.appendChild(sortableTable([{ name: 'stat' }, { name: 'value', num: true }, { name: 'what' }], d.loss));
      }
      dbg.stats = d;
      showError(null);
    } catch (e) { showError(e); }
  }

  // ---- stats: CPU samples and allocation sites (api_samples.c) ---------------------

  // The functions the CPU samples were in (as `etch stats` lists them), and
  // the allocation sites by bytes allocated and by bytes never freed (as
  // `etch leaks --hotspots`): tables of their own, after the threads.
  async function statsSamples(box, d) {
    if (d.cpu_samples > 0) {
      const pct = (v) => (100 * v / d.cpu_samples).toFixed(1);
      const rows = (by) => d.functions.slice().sort((x, y) => y[by] - x[by] || y[3 - by] - x[3 - by] ||
                                                       (x[0] < y[0] ? -1 : x[0] > y[0]))
        .slice(0, 20).map((f) => [f[0], f[1], pct(f[1]), f[2], pct(f[2])]);
      const cols = [{ name: 'function' }, { name: 'self', num: true }, { name: 'self %', num: true },
                    { name: 'total', num: true }, { name: 'total %', num: true }];
      box.appendChild(el('h3', null, 'Functions by self samples (' + d.cpu_samples + ' CPU samples)'));
      const a = sortableTable(cols, rows(1)); a.id = 'stats-fn-self'; box.appendChild(a);
      box.appendChild(el('h3', null, 'Functions by total samples'));
      const b = sortableTable(cols, rows(2)); b.id = 'stats-fn-total'; box.appendChild(b);
    }
    const m = await api('/api/leaks', { id: T.id });
    if (!m.sites || !m.sites.length) return;
    const site = (s) => s.function + (s.file ? ' (' + s.file + (s.line ? ':' + s.line : '') + ')' : '');
    const cols = [{ name: 'site' }, { name: 'allocations', num: true }, { name: 'bytes', num: true },
                  { name: 'never freed', num: true }, { name: 'never freed bytes', num: true }];
    const rows = (key) => m.sites.slice().sort((x, y) => y[key] - x[key] || (site(x) < site(y) ? -1 : 1))
      .filter((s) => s[key] > 0).slice(0, 20)
      .map((s) => [site(s), s.allocations, s.bytes, s.never_freed, s.never_freed_bytes]);
    box.appendChild(el('h3', null, 'Allocation sites by bytes'));
    const c = sortableTable(cols, rows('bytes')); c.id = 'stats-alloc-sites'; box.appendChild(c);
    const leaks = rows('never_freed_bytes');
    if (leaks.length) {
      box.appendChild(el('h3', null, 'Leak sites (never freed)'));
      const e = sortableTable(cols, leaks); e.id = 'stats-leak-sites'; box.appendChild(e);
    }
  }

  // ---- SQL ---------------------------------------------------------------------

  async function runSql() {
    const out = $('sql-out'), msg = $('sql-msg');
    out.textContent = '';
    msg.textContent = '';
    dbg.sql = null;
    try {
      const r = await api('/api/sql', { id: T.id, q: $('sql-text').value });
      const t = sortableTable(r.columns.map((c) => ({ name: c })), r.rows);
      t.id = 'sql-table';
      out.appendChild(t);
      if (r.more) msg.textContent = 'the first ' + r.rows.length + ' rows (there are more)';
      dbg.sql = r;
    } catch (e) { msg.textContent = String(e.message || e); dbg.sql = { error: String(e.message || e) }; }
  }
  $('sql-run').addEventListener('click', runSql);
  $('sql-text').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); runSql(); }
  });

  // ---- the report's answers --------------------------------------------------------

  // The whole trace's rectangles, merged again for the window: those
  // narrower than a pixel that start in the same column become one.
  function reportTile(a) {
    const s = Number(a.start), e = Number(a.end), px = Math.max(1, Number(a.px));
    const p = Math.max(1, Math.ceil((e - s) / px));
    const out = [];
    let run = null;
    for (const r of REPORT.tile.slices) {
      const [track, depth, ts, end, count, id, name] = r;
      if (ts >= e || end < s) continue;
      if (end - ts >= p) { out.push(r); continue; }
      const col = Math.floor((ts - s) / p);
      if (run && run[0] === track && run[1] === depth && run.col === col) {
        run[3] = Math.max(run[3], end);
        run[4] += count;
        if (end - ts > run.len) { run.len = end - ts; run[6] = name; }
        continue;
      }
      run = [track, depth, ts, end, count, id, name];
      run.col = col; run.len = end - ts;
      out.push(run);
    }
    const counters = REPORT.tile.counters.filter((c) => c[1] < e);
    return { ns_per_px: (e - s) / px, slices: out, counters };
  }

  function reportApi(path, a) {
    const R = REPORT;
    const no = (what) => Promise.reject(new Error(what + ' needs etch ui (this is a report: it holds ' +
                                                   'the timeline at ' + R.columns + ' columns, the flame graph and the stats)'));
    switch (path) {
      case '/api/traces':
        return Promise.resolve({ store: null, store_error: null, traces: [{
          id: R.trace.id, name: R.trace.name, path: R.trace.path, in_store: false, open: true, size: 0,
          start: 0, duration: null, events: null, processes: null, threads: null, data_loss: null,
          error: 'a report holds one trace' }] });
      case '/api/trace': return Promise.resolve(R.trace);
      case '/api/tile': return Promise.resolve(reportTile(a));
      case '/api/flows': return Promise.resolve(R.flows);
      case '/api/stats': return Promise.resolve(R.stats);
      case '/api/leaks': return Promise.resolve(R.leaks || { sites: [] });
      case '/api/samples': // no samples in a report's timeline
        return Promise.resolve({ threads: [], total: 0 });
      case '/api/flame':
        if (a.utid !== undefined || a.start !== undefined) return no('a flame graph of a thread or a range');
        return Promise.resolve(R.flame);
      case '/api/slice': {
        const r = R.tile.slices.find((x) => x[5] === Number(a.slice) && x[4] === 1);
        if (!r) return Promise.reject(new Error('no slice ' + a.slice + ' in the report'));
        return Promise.resolve({ id: r[5], ts: r[2], dur: r[3] - r[2], self: null, depth: r[1], track: r[0],
                                 category: null, name: r[6], thread: null, track_name: T.byTrack[r[0]].label,
                                 process: null, args: [], flows_in: [], flows_out: [] });
      }
      case '/api/search': {
        const q = String(a.q).toLowerCase();
        const m = R.tile.slices.filter((x) => x[4] === 1 && x[6].toLowerCase().includes(q))
          .map((x) => ({ id: x[5], ts: x[2], track: x[0], depth: x[1], name: x[6] }));
        return Promise.resolve({ matches: m.slice(0, 1000), total: m.length });
      }
      case '/api/range': {
        const s = Number(a.start), e = Number(a.end), by = {};
        for (const x of R.tile.slices) {
          if (x[4] !== 1 || x[2] >= e || (x[3] <= s && !(x[3] === x[2] && x[2] >= s))) continue;
          const d = x[3] - x[2], b = by[x[6]] = by[x[6]] || [x[6], 0, 0, 0, Infinity, 0, 0];
          b[1]++; b[2] += d; b[4] = Math.min(b[4], d); b[6] = Math.max(b[6], d);
        }
        const rows = Object.values(by).map((b) => { b[3] = null; b[5] = b[2] / b[1]; return b; });
        rows.sort((x, y) => y[2] - x[2]);
        return Promise.resolve({ rows });
      }
      default: return no(path === '/api/sql' ? 'SQL' : path);
    }
  }

  // ---- navigation ---------------------------------------------------------------

  for (const b of $('tabs').querySelectorAll('button'))
    b.addEventListener('click', () => {
      if (T) location.hash = '#trace=' + T.id + '&tab=' + b.dataset.tab;
    });

  function route() {
    knownHash = location.hash;
    const h = new URLSearchParams(location.hash.slice(1));
    const id = h.get('trace'), diff = (h.get('diff') || '').split(',');
    if (REPORT && !id) { location.hash = '#trace=' + REPORT.trace.id; return; }
    if (id) openTrace(id, h.get('tab'), h);
    else if (diff.length === 2 && !REPORT) showDiff(diff[0], diff[1]);
    else showList();
  }
  window.addEventListener('hashchange', route);
  if (REPORT) {
    namesIn(REPORT.tile);
    $('home').removeAttribute('href');
    $('sql-run').disabled = true;
  }
  route();
})();
