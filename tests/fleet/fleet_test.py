#!/usr/bin/env python3
"""fleet_test.py - etch load and etch query --clickhouse against real
ClickHouse servers (scripts/clickhouse.py starts them on loopback, each with a
data directory of its own, and stops them).

  fleet_test.py --etch ETCH --recordee PROG --basic PROG [--cluster]

One server (default):
  - every table of every trace loaded holds exactly the rows `etch query`
    has for that trace (all columns, compared row for row), and the same
    aggregate SQL gives the same answer locally and with a trace_id filter;
  - the `trace` table has one row per trace with its metadata;
  - a corrupt file among good ones: reported by name, the good ones load,
    exit status 1;
  - loading the same files again adds nothing (counts of every table kept),
    says so, exit status 0;
  - twenty small traces loaded by one worker go in one insert per table,
    each with its content;
  - a trace whose earlier load stopped half-way (its rows there but not its
    `trace` row) loads again with no duplicate rows;
  - etch query --clickhouse: the server's error text shown, exit 1; a
    server that answers short, malformed or with an error body (a fake one
    here) is an error, not output.
With --cluster: two servers as two shards of a cluster, the tables of
`etch load --print-schema --cluster` on both, etch load through the
Distributed tables of the first: rows land on both shards, every trace's
rows on one shard, and queries through the Distributed tables see them all
with the same content as local.

Exit status 77 (ctest: skipped) when clickhouse-server is not installed.
"""
import argparse
import csv
import http.server
import io
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import clickhouse  # noqa: E402

SKIP = 77
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(args, env=None):
    p = subprocess.run(args, capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=600)
    return p.returncode, p.stdout, p.stderr


def norm(v):
    if v == "":
        return None
    try:
        return int(v)
    except ValueError:
        pass
    try:
        return float(v)
    except ValueError:
        return v


def parse_csv(text):
    rows = list(csv.reader(io.StringIO(text)))
    return [tuple(norm(v) for v in r) for r in rows[1:]]  # no header


def key(row):
    return tuple((v is None, str(type(v)), v if v is not None else 0)
                 for v in row)


class Etch:
    def __init__(self, path, cache):
        self.path = path
        self.env = dict(os.environ, ETCH_CACHE_DIR=cache)

    def local(self, trace, sql):
        rc, out, err = run([self.path, "query", "--csv", trace, sql], self.env)
        if rc != 0:
            raise RuntimeError("etch query %s: %s" % (trace, err))
        return parse_csv(out)

    def remote(self, url, sql, db="etch"):
        rc, out, err = run([self.path, "query", "--csv", "--clickhouse", url,
                            "--database", db, sql], self.env)
        if rc != 0:
            raise RuntimeError("etch query --clickhouse: %s" % err)
        return parse_csv(out)

    def load(self, url, traces, *extra):
        return run([self.path, "load", "-q", "--clickhouse", url, *extra,
                    *traces], self.env)


def schema_tables(etch):
    """{table: [columns after trace_id]} from etch load --print-schema."""
    rc, out, err = run([etch.path, "load", "--print-schema"])
    assert rc == 0, err
    tables = {}
    for line in out.splitlines():
        if not line.startswith("CREATE TABLE IF NOT EXISTS etch."):
            continue
        name = line.split("etch.", 1)[1].split(" ", 1)[0]
        cols = line.split("(", 1)[1].split(") ENGINE", 1)[0]
        names = [c.strip().split(" ")[0] for c in cols.split(",")]
        assert names[0] == "trace_id", line
        if name != "trace":
            tables[name] = names[1:]
    return tables


def trace_ids(etch, url, db="etch"):
    return {r[1]: r[0] for r in etch.remote(
        url, "select trace_id, file_name from trace", db)}


# The same SQL locally and on the server ({w}: the trace's filter there).
AGGREGATES = [
    "select count(*), sum(dur), sum(depth), sum(self_dur), max(ts) - min(ts)"
    " from slice{w}",
    "select name, count(*), sum(dur), max(dur) from slice{w} group by name"
    " order by name",
    "select count(*), sum(value), min(value), max(value) from counter{w}",
    "select count(*), sum(int_value), count(string_value) from args{w}",
    # Over no rows sum() is NULL in DuckDB and 0 in ClickHouse: coalesce.
    "select count(*), coalesce(sum(slice_out), 0), coalesce(sum(slice_in), 0)"
    " from flow{w}",
    "select count(*) from track{w}",
    "select name, value from stats{w} order by name",
]


def compare_trace(etch, url, tables, trace, tid, db="etch"):
    """Every table of `trace` on the server equals etch query's, row for
    row; and the aggregate SQL agrees."""
    base = os.path.basename(trace)
    for t, cols in tables.items():
        sel = ", ".join(cols)
        loc = sorted(etch.local(trace, "select %s from %s" % (sel, t)), key=key)
        rem = sorted(etch.remote(url, "select %s from %s where trace_id = %d"
                                 % (sel, t, tid), db), key=key)
        check(loc == rem, "%s: table %s differs (%d rows local, %d there)%s"
              % (base, t, len(loc), len(rem),
                 "" if len(loc) != len(rem) else
                 ": first difference %r vs %r" % next(
                     ((a, b) for a, b in zip(loc, rem) if a != b), (None, None))))
    for sql in AGGREGATES:
        loc = etch.local(trace, sql.format(w=""))
        rem = etch.remote(url, sql.format(w=" where trace_id = %d" % tid), db)
        check(loc == rem, "%s: %s: %r local, %r there" % (base, sql, loc, rem))


def counts(etch, url, tables):
    return {t: etch.remote(url, "select count(*) from %s" % t)[0][0]
            for t in list(tables) + ["trace"]}


def make_traces(prog, basic, d, ns, tag):
    paths = []
    for n in ns:
        p = os.path.join(d, "%s-%d.pftrace" % (tag, n))
        subprocess.run([prog, str(n)], env=dict(os.environ, ETCH_OUT=p),
                       check=True, stdout=subprocess.DEVNULL, timeout=120)
        paths.append(p)
    if basic:
        p = os.path.join(d, "%s-basic.pftrace" % tag)
        subprocess.run([basic], env=dict(os.environ, ETCH_OUT=p), check=True,
                       stdout=subprocess.DEVNULL, timeout=120)
        paths.append(p)
    return paths


def wait_mutations(srv):
    """Until the server has applied every mutation (ALTER ... DELETE)."""
    end = time.monotonic() + 120
    while time.monotonic() < end:
        if srv.sql("select count() from system.mutations where not is_done"
                   ).strip() == "0":
            return
        time.sleep(0.05)  # polling the event: the mutation done
    raise RuntimeError("mutations not done after 120 s")


def writer_blocks(srv):
    """(blocks written by inserts, of them already in key order) so far:
    the server's counters (a counter not yet counted is not listed)."""
    ev = dict(l.split("\t") for l in srv.sql(
        "select event, toString(value) from system.events where event in"
        " ('MergeTreeDataWriterBlocks',"
        " 'MergeTreeDataWriterBlocksAlreadySorted')").splitlines() if l)
    return (int(ev.get("MergeTreeDataWriterBlocks", 0)),
            int(ev.get("MergeTreeDataWriterBlocksAlreadySorted", 0)))


def check_sorted(srv, before, what):
    """Every block the server wrote since `before` came in its table's key
    order (etch sorts each insert's rows; the server then does not)."""
    b, s = writer_blocks(srv)
    check(b > before[0] and b - before[0] == s - before[1],
          "%s: %d of %d blocks in key order" % (what, s - before[1],
                                                b - before[0]))


# ---- a fake server for the hostile answers -------------------------------------

class Fake(http.server.BaseHTTPRequestHandler):
    answer = None  # (status, headers, body, declared length)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        status, body, length = Fake.answer
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *a):
        pass


def hostile(etch):
    srv = http.server.HTTPServer(("127.0.0.1", 0), Fake)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    url = "http://127.0.0.1:%d" % srv.server_address[1]
    try:
        cases = [
            ("cut short", (200, b"x\nUInt8\n1\n", 1000), "etch: "),
            ("a row without its fields", (200, b"a\tb\nInt64\tInt64\n1\n", 18),
             "malformed"),
            ("a row without its end", (200, b"a\nInt64\n1", 9), "malformed"),
            ("not the format asked", (200, b"hello", 5), "not the table"),
            ("an error body", (500, b"Code: 1, boom\x1b[31m red\n", 23),
             "boom [31m red"),
        ]
        for what, ans, msg in cases:
            Fake.answer = ans
            rc, out, err = run([etch.path, "query", "--clickhouse", url,
                                "select 1"])
            check(rc == 1 and msg in err and out == "",
                  "fake server, %s: exit %d, stdout %r, stderr %r"
                  % (what, rc, out, err))
            check("\x1b" not in err, "fake server, %s: control characters "
                  "reach the terminal: %r" % (what, err))
    finally:
        srv.shutdown()
        srv.server_close()


# ---- one server ------------------------------------------------------------------

def single(args, binary, tmp):
    etch = Etch(args.etch, os.path.join(tmp, "cache"))
    tables = schema_tables(etch)
    traces = make_traces(args.recordee, args.basic, tmp, [3, 40, 700], "t")
    # A trace that says its machine, as traced writes it: a SystemInfo
    # packet (TracePacket 45) with a utsname (1): sysname (1), machine (4).
    uts = b"\x0a\x05Linux\x22\x06x86_64"
    info = b"\x0a" + bytes([len(uts)]) + uts
    pkt = b"\xea\x02" + bytes([len(info)]) + info
    sysinfo = os.path.join(tmp, "t-sysinfo.pftrace")
    with open(traces[0], "rb") as f, open(sysinfo, "wb") as g:
        g.write(b"\x0a" + bytes([len(pkt)]) + pkt + f.read())
    traces.append(sysinfo)
    bad = os.path.join(tmp, "corrupt.pftrace")
    with open(traces[0], "rb") as f:
        data = f.read()
    with open(bad, "wb") as f:
        f.write(b"not a trace, only words\n" * 8 + data)
    srv = clickhouse.Server(binary, os.path.join(tmp, "server"))
    try:
        srv.wait_ready()
        url = srv.url
        # A corrupt file among good ones.
        blocks = writer_blocks(srv)
        rc, out, err = etch.load(url, traces[:2] + [bad] + traces[2:])
        check_sorted(srv, blocks, "first load")
        check(rc == 1, "load with a corrupt file: exit %d, not 1" % rc)
        errs = [l for l in err.splitlines() if l.startswith("etch: load: ")]
        check(any(bad in l for l in errs),
              "the corrupt file is not named: %r" % err)
        check(not any(t in l for l in errs for t in traces),
              "a good file is reported: %r" % err)
        ids = trace_ids(etch, url)
        check(sorted(ids) == sorted(os.path.basename(t) for t in traces),
              "the trace table holds %r" % sorted(ids))
        for t in traces:
            compare_trace(etch, url, tables, t, ids[os.path.basename(t)])
        # Metadata.
        meta = etch.remote(url, "select file_name, size_bytes, etch_version,"
                                " start_ts, dur from trace order by file_name")
        for row in meta:
            path = os.path.join(tmp, row[0])
            b = etch.local(path, "select start_ts, end_ts - start_ts"
                                 " from trace_bounds")[0]
            check(row[1] == os.path.getsize(path) and row[3:] == b,
                  "trace row of %s: %r (bounds %r)" % (row[0], row, b))
        machines = dict(etch.remote(url, "select file_name, machine from trace"))
        check(machines.get("t-sysinfo.pftrace") == "x86_64" and
              sum(m is not None for m in machines.values()) == 1,
              "machines: %r" % machines)
        # Across the traces: one query for all of them.
        total = sum(etch.local(t, "select count(*) from slice")[0][0]
                    for t in traces)
        per = etch.remote(url, "select trace_id, count(*) from slice"
                               " group by trace_id")
        check(len(per) == len(traces) and sum(r[1] for r in per) == total,
              "slices per trace_id %r, %d in all locally" % (per, total))
        # Loading again adds nothing.
        before = counts(etch, url, tables)
        rc, out, err = etch.load(url, traces + traces[:1])
        check(rc == 0, "second load: exit %d: %s" % (rc, err))
        after = counts(etch, url, tables)
        check(before == after, "second load changed counts: %r -> %r"
              % (before, after))
        rc, out, err = run([etch.path, "load", "--clickhouse", url] + traces,
                           etch.env)
        check(rc == 0 and "0 loaded, %d there already, 0 failed" % len(traces)
              in err, "second load's summary: %r" % err)
        # A load that stopped half-way: rows there, no trace row.
        victim = traces[1]
        vid = ids[os.path.basename(victim)]
        srv.sql("ALTER TABLE etch.trace DELETE WHERE trace_id = %d" % vid)
        wait_mutations(srv)
        check(etch.remote(url, "select count(*) from trace")[0][0]
              == len(traces) - 1, "trace row not deleted")
        rc, out, err = etch.load(url, traces)
        check(rc == 0, "load after a half-way load: exit %d: %s" % (rc, err))
        wait_mutations(srv)
        check(counts(etch, url, tables) == before,
              "after a half-way load: %r, not %r"
              % (counts(etch, url, tables), before))
        compare_trace(etch, url, tables, victim, vid)
        # A database an older etch made (process and thread without
        # machine_id): loading into it adds the column; the rows loaded
        # before read NULL there, the new trace's rows are whole.
        rc, out, err = etch.load(url, traces[:1], "--database", "older")
        check(rc == 0, "load into older: exit %d: %s" % (rc, err))
        for tb in ("process", "thread"):
            srv.sql("alter table older.%s drop column machine_id" % tb)
        rc, out, err = etch.load(url, traces[1:2], "--database", "older")
        check(rc == 0, "load into an older database: exit %d: %s" % (rc, err))
        oids = trace_ids(etch, url, "older")
        compare_trace(etch, url, tables, traces[1],
                      oids[os.path.basename(traces[1])], db="older")
        nulls = etch.remote(url, "select count(*), countIf(isNull(machine_id))"
                                 " from process where trace_id = %s"
                                 % oids[os.path.basename(traces[0])],
                            db="older")
        check(nulls and nulls[0][0] > 0 and nulls[0][0] == nulls[0][1],
              "older rows' machine_id: %r" % nulls)
        # Batches of 4 KiB: traces cut across inserts and inserts across
        # traces; the same rows.
        blocks = writer_blocks(srv)
        rc, out, err = etch.load(url, traces, "--database", "batched",
                                 "--batch", "4096", "-j", "2")
        check(rc == 0, "--batch 4096: exit %d: %s" % (rc, err))
        check_sorted(srv, blocks, "--batch 4096")
        # A full buffer goes out alone, all of them and the trace rows every
        # 8 batches: more trace inserts than the 2 workers' last ones.
        tins = int(srv.sql("select max(max_block_number) from system.parts"
                           " where database = 'batched' and table = 'trace'"))
        check(tins > 2, "--batch 4096: %d inserts into trace" % tins)
        bids = trace_ids(etch, url, "batched")
        for t in traces:
            compare_trace(etch, url, tables, t, bids[os.path.basename(t)],
                          "batched")
        # Many small traces: their rows go out together, one insert per
        # table (a part each on the server, merged or not: level 0).
        small = make_traces(args.recordee, None, tmp,
                            list(range(1, 21)), "small")
        block = int(srv.sql("select max(max_block_number) from system.parts"
                            " where database = 'etch' and table = 'stats'"))
        blocks = writer_blocks(srv)
        rc, out, err = etch.load(url, small, "-j", "1")
        check(rc == 0, "small traces: exit %d: %s" % (rc, err))
        check_sorted(srv, blocks, "20 small traces")
        inserts = int(srv.sql("select count() from system.parts where"
                              " database = 'etch' and table = 'stats' and"
                              " level = 0 and min_block_number > %d" % block))
        check(inserts == 1, "20 small traces: %d inserts into stats" % inserts)
        ids = trace_ids(etch, url)
        check(all(os.path.basename(t) in ids for t in small),
              "small traces without a trace row")
        for t in (small[0], small[-1]):
            compare_trace(etch, url, tables, t, ids[os.path.basename(t)])
        # The same in 4 KiB batches, one worker: flushes of every buffer
        # (and of the trace rows) while a trace is read, several traces
        # waiting; every trace row right.
        rc, out, err = etch.load(url, small, "--database", "smallbatch",
                                 "--batch", "4096", "-j", "1")
        check(rc == 0, "small traces, --batch 4096: exit %d: %s" % (rc, err))
        sids = trace_ids(etch, url, "smallbatch")
        check(sorted(sids) == sorted(os.path.basename(t) for t in small),
              "small traces, --batch 4096: trace rows %r" % sorted(sids))
        for t in small:
            check(sids[os.path.basename(t)] == ids[os.path.basename(t)],
                  "small traces, --batch 4096: id of %s" % t)
        meta = etch.remote(url, "select file_name, size_bytes from trace",
                           "smallbatch")
        check(len(meta) == len(small) and
              all(r[1] == os.path.getsize(os.path.join(tmp, r[0]))
                  for r in meta), "small traces, --batch 4096: %r" % meta)
        for t in (small[0], small[7], small[-1]):
            compare_trace(etch, url, tables, t, sids[os.path.basename(t)],
                          "smallbatch")
        # Errors of etch query --clickhouse: the server's text, exit 1.
        rc, out, err = run([etch.path, "query", "--clickhouse", url,
                            "select nosuchcolumn from slice"])
        check(rc == 1 and "nosuchcolumn" in err and out == "",
              "a bad query: exit %d, %r" % (rc, err))
        rc, out, err = run([etch.path, "load", "--clickhouse",
                            "http://bob:secret@127.0.0.1:%d/?password=hush"
                            % clickhouse.free_port(), traces[0]])
        check(rc == 1 and "127.0.0.1" in err and "secret" not in err and
              "hush" not in err, "no server: exit %d, %r" % (rc, err))
        check("no ClickHouse server there: to try etch, start one on "
              "loopback with scripts/clickhouse.py start DIR" in err,
              "no server: how to start one is not said: %r" % err)
    finally:
        srv.stop()
    hostile(etch)


# ---- two shards --------------------------------------------------------------------

def cluster(args, binary, tmp):
    etch = Etch(args.etch, os.path.join(tmp, "cache"))
    tables = schema_tables(etch)
    ports = [(clickhouse.free_port(), clickhouse.free_port()) for _ in range(2)]
    remote = "<two>%s</two>" % "".join(
        "<shard><replica><host>127.0.0.1</host><port>%d</port></replica>"
        "</shard>" % p[1] for p in ports)
    rc, schema, err = run([etch.path, "load", "--print-schema",
                           "--cluster", "two"])
    assert rc == 0, err
    sql_file = os.path.join(tmp, "schema.sql")
    with open(sql_file, "w") as f:
        f.write(schema)
    servers = [clickhouse.Server(binary, os.path.join(tmp, "shard%d" % i),
                                 remote, ports[i]) for i in range(2)]
    try:
        for s in servers:
            s.wait_ready()
        for s in servers:
            rc, out, err = run([etch.path, "query", "--clickhouse", s.url,
                                "--database", "default", "-f", sql_file])
            check(rc == 0, "schema on %s: %s" % (s.url, err))
        url = servers[0].url
        traces = []
        # Rows go to the shard of trace_id: a few traces, more until both
        # shards have some (each new trace: one chance in two for each).
        for round_ in range(4):
            new = make_traces(args.recordee, None, tmp,
                              [5 + 10 * i + round_ for i in range(8)],
                              "c%d" % round_)
            rc, out, err = etch.load(url, new)
            check(rc == 0, "load through Distributed: exit %d: %s" % (rc, err))
            traces += new
            shard = [int(s.sql("select count() from etch.slice_local"))
                     for s in servers]
            if all(shard):
                break
        check(all(shard), "slices per shard: %r" % shard)
        print("%d traces, slices per shard: %r" % (len(traces), shard))
        total = sum(etch.local(t, "select count(*) from slice")[0][0]
                    for t in traces)
        check(sum(shard) == total, "shards hold %r slices, %d locally"
              % (shard, total))
        seen = etch.remote(url, "select count(*) from slice")[0][0]
        check(seen == total, "the Distributed table sees %d of %d"
              % (seen, total))
        # Every trace's rows on one shard, its trace row with them.
        for s in servers:
            a = s.sql("select distinct trace_id from etch.slice_local"
                      " order by trace_id").split()
            b = s.sql("select trace_id from etch.trace_local"
                      " order by trace_id").split()
            check(a == b, "shard %s: traces %r, trace rows %r" % (s.url, a, b))
        ids = trace_ids(etch, url)
        check(len(ids) == len(traces), "trace rows %d of %d"
              % (len(ids), len(traces)))
        for t in traces[:3]:
            compare_trace(etch, url, tables, t, ids[os.path.basename(t)])
        # A join within each trace, through the Distributed tables: each
        # shard joins its own rows (docs/fleet.md).
        joined = etch.remote(url + "/?distributed_product_mode=local",
                             "select count() from slice all inner join"
                             " (select trace_id, file_name from trace)"
                             " using trace_id")[0][0]
        check(joined == total, "a join through Distributed: %d of %d"
              % (joined, total))
        rc, out, err = etch.load(url, traces)
        check(rc == 0 and etch.remote(url, "select count(*) from slice")[0][0]
              == total, "a second load through Distributed: %s" % err)
    finally:
        for s in servers:
            s.stop()


def script(etch, tmp):
    """scripts/clickhouse.py's command line, as docs/fleet.md has a user
    start a server: start prints the URL etch load takes, a second start
    in the same directory is refused, stop ends the server."""
    cli = os.path.join(os.path.dirname(clickhouse.__file__), "clickhouse.py")
    root = os.path.join(tmp, "tryme")
    port = clickhouse.free_port()
    rc, out, err = run([sys.executable, cli, "start", root, "--port",
                        str(port)])
    url = "http://127.0.0.1:%d" % port
    check(rc == 0 and ("on %s (pid " % url) in out and
          ("etch load --clickhouse %s TRACE..." % url) in out,
          "clickhouse.py start: exit %d, %r %r" % (rc, out, err))
    try:
        with open(os.path.join(root, "server.pid")) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError):
        check(False, "clickhouse.py start wrote no server.pid")
        return
    try:
        rc, out, err = run([etch.path, "query", "--csv", "--clickhouse", url,
                            "--database", "default", "select 40 + 2 as x"])
        check(rc == 0 and out == "x\n42\n",
              "etch query against the script's server: %d %r %r"
              % (rc, out, err))
        rc, out, err = run([sys.executable, cli, "start", root])
        check(rc == 1 and "a server already runs in" in err,
              "a second start: exit %d, %r" % (rc, err))
    finally:
        rc, out, err = run([sys.executable, cli, "stop", root])
    check(rc == 0 and out.startswith("stopped the server of "),
          "clickhouse.py stop: exit %d, %r %r" % (rc, out, err))
    gone = True
    try:
        os.kill(pid, 0)
        gone = False
    except ProcessLookupError:
        pass
    check(gone, "clickhouse.py stop: pid %d still runs" % pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etch", required=True)
    ap.add_argument("--recordee", required=True)
    ap.add_argument("--basic", required=True)
    ap.add_argument("--cluster", action="store_true")
    args = ap.parse_args()
    binary = clickhouse.server_binary()
    if not binary:
        print("SKIP: clickhouse-server is not installed (Debian: apt-get "
              "install clickhouse-server; scripts/setup.sh installs it)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="etch-fleet-") as tmp:
        (cluster if args.cluster else single)(args, binary, tmp)
        if not args.cluster:
            script(Etch(args.etch, os.path.join(tmp, "cache")), tmp)
    if failures:
        print("%d failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
