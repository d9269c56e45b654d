#!/usr/bin/env python3
"""bench_fleet.py - etch load into one local ClickHouse server, and a
fleet-sized query there.

  bench_fleet.py --etch ETCH --gen BENCH_QUERY_IMPORT [--files 4]
                 [--events 2000000] [--traces 100] [--dir DIR]

Load: `--files` traces of `--events` events each (bench_query_import's
synthetic trace, each made distinct by a last packet of its own, so that
each has its own trace id) imported by `etch query` (its cache written, as
a first query does; one file at a time and two at once) and by `etch query
--no-cache` (in memory), then loaded by `etch load -j 2` into a fresh
server: events per second of each, and the server's bytes on disk per
event beside the trace file's.

Query: `--traces` such traces loaded (100 x 1 M slices by default), then
p50/p99 of one slice name per trace, run 5 times (the first one reads from
disk, the others from the page cache): each time, and the best.

The server (scripts/clickhouse.py) runs on loopback with a data
directory in DIR (default: a temporary one) and is stopped at the end.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
import clickhouse  # noqa: E402


def variant(base, path, k):
    """The trace `base` plus a packet that only sets a sequence id of
    its own (k): the same events, another trace id."""
    with open(base, "rb") as f:
        data = f.read()
    v, tail = k + 1000, b""
    while True:
        b = v & 0x7F
        v >>= 7
        tail += bytes([b | (0x80 if v else 0)])
        if not v:
            break
    pkt = b"\x50" + tail
    with open(path, "wb") as f:
        f.write(data + b"\x0a" + bytes([len(pkt)]) + pkt)


def cpu_of(pid):
    """CPU seconds (user + system) the process `pid` has used."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmds, parallel, env=None):
    """Seconds to run `cmds`, `parallel` at a time."""
    t0 = time.monotonic()
    for i in range(0, len(cmds), parallel):
        ps = [subprocess.Popen(c, stdout=subprocess.DEVNULL, env=env)
              for c in cmds[i:i + parallel]]
        for p in ps:
            if p.wait() != 0:
                raise RuntimeError("failed: %r" % ps)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--etch", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--files", type=int, default=4)
    ap.add_argument("--events", type=int, default=2000000)
    ap.add_argument("--traces", type=int, default=100)
    ap.add_argument("--dir")
    a = ap.parse_args()
    binary = clickhouse.server_binary()
    if not binary:
        print("clickhouse-server is not installed")
        return 1
    tmp = a.dir or tempfile.mkdtemp(prefix="etch-bench-fleet-")
    os.makedirs(tmp, exist_ok=True)
    base = os.path.join(tmp, "base.pftrace")
    subprocess.run([a.gen, str(a.events), "4", "0"], check=True,
                   stdout=subprocess.DEVNULL,
                   env=dict(os.environ, BENCH_TRACE_OUT=base))
    n = max(a.files, a.traces)
    files = []
    for k in range(n):
        p = os.path.join(tmp, "t%03d.pftrace" % k)
        variant(base, p, k)
        files.append(p)
    size = os.path.getsize(files[0])
    events = a.events * a.files
    print("trace: %d events, %.1f MB (%.1f bytes/event)"
          % (a.events, size / 1e6, size / a.events))

    # ---- load rate ----
    sql = "select count(*) from slice"
    for par in (1, 2):
        cache = os.path.join(tmp, "cache")
        shutil.rmtree(cache, ignore_errors=True)
        env = dict(os.environ, ETCH_CACHE_DIR=cache)
        c0 = children_cpu()
        s = timed([[a.etch, "query", f, sql] for f in files[:a.files]], par, env)
        print("etch query (cache written), %d at once: %5.2f s, %5.2f M events/s,"
              " CPU %.2f s" % (par, s, events / s / 1e6, children_cpu() - c0))
        c0 = children_cpu()
        s = timed([[a.etch, "query", "--no-cache", f, sql]
                   for f in files[:a.files]], par)
        print("etch query --no-cache,      %d at once: %5.2f s, %5.2f M events/s,"
              " CPU %.2f s" % (par, s, events / s / 1e6, children_cpu() - c0))
    srv = clickhouse.Server(binary, os.path.join(tmp, "server"))
    try:
        srv.wait_ready()
        for j in (1, 2):
            srv.sql("DROP DATABASE IF EXISTS etch")
            c0, s0 = children_cpu(), cpu_of(srv.proc.pid)
            s = timed([[a.etch, "load", "-q", "-j", str(j), "--clickhouse",
                        srv.url] + files[:a.files]], 1)
            print("etch load -j %d:                   %5.2f s, %5.2f M events/s,"
                  " CPU %.2f s (etch) + %.2f s (server, merges after it not"
                  " counted)" % (j, s, events / s / 1e6, children_cpu() - c0,
                                 cpu_of(srv.proc.pid) - s0))
        disk = int(srv.sql("select sum(bytes_on_disk) from system.parts"
                           " where database = 'etch' and active"))
        print("server's disk: %.1f bytes/event (the trace file: %.1f)"
              % (disk / events, size / a.events))

        # ---- the fleet-sized query ----
        s = timed([[a.etch, "load", "-q", "-j", "2", "--clickhouse", srv.url]
                   + files[:a.traces]], 1)
        slices = int(srv.sql("select count() from etch.slice"))
        print("%d traces, %d slices loaded in %.1f s (%.2f M events/s)"
              % (a.traces, slices, s, a.events * (a.traces - a.files) / s / 1e6))
        # Merges of the parts just written run in the background: the query
        # is timed once they are over (waiting for that event).
        end = time.monotonic() + 600
        while (time.monotonic() < end and
               srv.sql("select count() from system.merges").strip() != "0"):
            time.sleep(0.5)
        parts = srv.sql("select count() from system.parts where database ="
                        " 'etch' and table = 'slice' and active").strip()
        print("slice: %s parts after the merges" % parts)
        q = ("select trace_id, quantiles(0.5, 0.99)(dur) from slice"
             " where name = 'function_29' group by trace_id")
        times = []
        for _ in range(5):
            times.append(timed([[a.etch, "query", "--clickhouse", srv.url, q]],
                               1))
        print("p50/p99 of one name per trace: %s s (best %.2f s)"
              % (" ".join("%.2f" % t for t in times), min(times)))
    finally:
        srv.stop()
        if not a.dir:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
