#!/usr/bin/env python3
"""loss_table.py - where every event goes when the system half loses data.

    bench/service/loss_table.py --build BUILD [--perfetto DIR] [--iters N]

Runs the three scenarios that lose most (a full discard buffer, a ring that
wraps, a shared memory that fills while etchd is stopped), each against a
private etchd, with the interop workload's libetch producer
(tests/interop/workload.h: per thread N iterations of slices outer
{ inner }, a counter, an instant every tenth), and prints per writer
(process and thread):

    emitted   the events the workload recorded: 5 N + ceil(N / 10)
    recorded  the events in the trace: slice begins, ends (not counting the
              ends etchd adds where a discard buffer cut a slice), instants,
              counter values
    lost      the counts of the etch.dropped_events instants that speak for
              it (the producer's own and etchd's, where = "service"; those
              of a writer with no track left, by their pid arg)
    missing   emitted - recorded - lost: must be 0
    open      slices still open at the end (dur -1): must be 0

Scenarios:
    discard   16 processes x 2 threads into a 4 MB DISCARD buffer
    ring      the same into a 4 MB ring that wraps
    smb       4 processes x 2 threads, a 256 KiB shared memory each, etchd
              stopped (SIGSTOP) for 300 ms while they run, 64 MB ring

With --perfetto, trace_processor's count of open slices and of cut slices
is printed beside etch's for each scenario. A measurement, not a test:
the scenario's timing is the machine's (tests/service asserts the same
accounting on smaller runs).
"""
import argparse
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

WAIT_S = 120

SQL = """
select 'slice' as q, p.pid as pid, t.name as thread, count(*) as n,
       sum(case when s.dur >= 0 and coalesce(c.int_value, 0) = 0 then 1 else 0 end) as ends,
       sum(case when s.dur < 0 then 1 else 0 end) as open
  from slice s join thread_track tt on s.track_id = tt.id
  join thread t using (utid) join process p using (upid)
  left join args c on c.arg_set_id = s.arg_set_id and c.key = 'debug.cut_by_loss'
  where s.name in ('outer', 'inner') group by p.pid, t.name
union all
select 'mark', p.pid, t.name, count(*), 0, 0
  from slice s join thread_track tt on s.track_id = tt.id
  join thread t using (utid) join process p using (upid)
  where s.name = 'mark' group by p.pid, t.name
union all
select 'counter', p.pid, 'worker-' || substr(ct.name, 7), count(*), 0, 0
  from counter v join process_counter_track ct on v.track_id = ct.id
  join process p using (upid)
  where ct.name like 'level-%' group by p.pid, ct.name
union all
select 'lost', p.pid, t.name, sum(a.int_value), 0, 0
  from slice s join thread_track tt on s.track_id = tt.id
  join thread t using (utid) join process p using (upid)
  join args a on a.arg_set_id = s.arg_set_id and a.key = 'debug.count'
  where s.name = 'etch.dropped_events' group by p.pid, t.name
union all
select 'lost_pid', w.int_value, '', sum(a.int_value), 0, 0
  from slice s join args a on a.arg_set_id = s.arg_set_id and a.key = 'debug.count'
  join args w on w.arg_set_id = s.arg_set_id and w.key = 'debug.pid'
  where s.name = 'etch.dropped_events'
    and s.track_id not in (select id from thread_track)
  group by w.int_value
"""

TP_SQL = """
select
  (select count(*) from slice where dur < 0) as open,
  (select count(*) from slice s join args a using (arg_set_id)
     where a.key = 'debug.cut_by_loss') as cut,
  (select count(*) from slice where name in ('outer', 'inner')) as slices
"""


def query(etch, trace, sql):
    r = subprocess.run([etch, "query", "--csv", trace, sql],
                       capture_output=True, timeout=WAIT_S * 5)
    if r.returncode != 0:
        sys.exit("etch query failed: " + r.stderr.decode(errors="replace"))
    return list(csv.reader(io.StringIO(r.stdout.decode())))[1:]


def tp_query(tp, trace, sql, workdir):
    qf = os.path.join(workdir, "tp.sql")
    with open(qf, "w") as f:
        f.write(sql)
    r = subprocess.run([tp, "-q", qf, trace], capture_output=True,
                       timeout=WAIT_S * 5)
    if r.returncode != 0:
        return None
    rows = list(csv.reader(io.StringIO(r.stdout.decode().strip())))
    return rows[1] if len(rows) > 1 else None


def wait_path(path, proc):
    deadline = time.monotonic() + WAIT_S
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit("etchd did not start")
        time.sleep(0.01)
    time.sleep(0.05)


def run(args, name, procs, threads, cfg, smb_kb=None, stop_ms=0):
    d = tempfile.mkdtemp(prefix="etch-loss-")
    env = dict(os.environ)
    env.pop("ETCH_OUT", None)
    env["PERFETTO_PRODUCER_SOCK_NAME"] = os.path.join(d, "p.sock")
    env["PERFETTO_CONSUMER_SOCK_NAME"] = os.path.join(d, "c.sock")
    b = args.build
    etchd = subprocess.Popen([os.path.join(b, "tools/etchd/etchd")], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_path(env["PERFETTO_CONSUMER_SOCK_NAME"], etchd)
    wait_path(env["PERFETTO_PRODUCER_SOCK_NAME"], etchd)
    cfgf = os.path.join(d, "cfg.pbtx")
    with open(cfgf, "w") as f:
        f.write(cfg)
    out = os.path.join(d, name + ".pftrace")
    etch = os.path.join(b, "tools/etch/etch")
    rec = subprocess.Popen([etch, "record", "--system", "--config", cfgf, "-o",
                            out, "-q"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    penv = dict(env)
    if smb_kb:
        penv["ETCH_SYSTEM_SMB_KB"] = str(smb_kb)
    ps = [subprocess.Popen([os.path.join(b, "tests/interop/ip_etch"),
                            "loss-%d" % i, str(threads), str(args.iters),
                            "exit"], env=penv, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL) for i in range(procs)]
    pids = []
    for p in ps:
        line = p.stdout.readline().decode()
        if not line.startswith("started"):
            sys.exit("a producer did not start")
        pids.append(int(line.split()[1]))
    if stop_ms:
        etchd.send_signal(signal.SIGSTOP)
        time.sleep(stop_ms / 1000)
        etchd.send_signal(signal.SIGCONT)
    for p in ps:
        p.wait(WAIT_S)
    rec.send_signal(signal.SIGINT)
    rec.wait(WAIT_S)
    etchd.send_signal(signal.SIGTERM)
    etchd.wait(WAIT_S)
    return d, out, pids


def table(args, name, out, pids, threads, workdir):
    n = args.iters
    emitted = 5 * n + (n + 9) // 10
    got = {}
    lost_pid = {}
    for q, pid, thread, v, ends, open_ in query(
            os.path.join(args.build, "tools/etch/etch"), out, SQL):
        if q == "lost_pid":
            lost_pid[int(pid)] = int(v)
            continue
        w = got.setdefault((int(pid), thread), {"rec": 0, "lost": 0,
                                                "open": 0})
        if q == "slice":
            w["rec"] += int(v) + int(ends)
            w["open"] += int(open_)
        elif q in ("mark", "counter"):
            w["rec"] += int(v)
        elif q == "lost":
            w["lost"] += int(v)
    print("\n%s: %d processes x %d threads, %d iterations each (%d events "
          "per writer)" % (name, len(pids), threads, n, emitted))
    print("  %-8s %-9s %9s %9s %9s %8s %5s" % ("pid", "thread", "emitted",
                                              "recorded", "lost", "missing",
                                              "open"))
    tot = [0, 0, 0, 0, 0]
    for pid in pids:
        # A process's writers with no track left share its pid's count.
        trackless = [t for t in range(threads)
                     if (pid, "worker-%d" % t) not in got]
        for t in range(threads):
            k = (pid, "worker-%d" % t)
            w = got.get(k, {"rec": 0, "lost": 0, "open": 0})
            lost = w["lost"]
            if t in trackless:
                continue
            miss = emitted - w["rec"] - lost
            print("  %-8d %-9s %9d %9d %9d %8d %5d" % (pid, k[1], emitted,
                                                     w["rec"], lost, miss,
                                                     w["open"]))
            for i, v in enumerate((emitted, w["rec"], lost, miss, w["open"])):
                tot[i] += v
        if trackless:
            lost = lost_pid.get(pid, 0)
            e = emitted * len(trackless)
            miss = e - lost
            print("  %-8d %-9s %9d %9d %9d %8d %5d" % (
                pid, "%d other" % len(trackless), e, 0, lost, miss, 0))
            for i, v in enumerate((e, 0, lost, miss, 0)):
                tot[i] += v
    print("  %-18s %9d %9d %9d %8d %5d" % ("all", *tot))
    if args.perfetto:
        tp = tp_query(os.path.join(args.perfetto, "bin/trace_processor_shell"),
                      out, TP_SQL, workdir)
        et = query(os.path.join(args.build, "tools/etch/etch"), out,
                   TP_SQL.replace("\n", " "))
        if tp:
            print("  open slices: trace_processor %s, etch %s; cut by loss: "
                  "%s and %s; slices: %s and %s"
                  % (tp[0], et[0][0], tp[1], et[0][1], tp[2], et[0][2]))
    return tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--perfetto", default="")
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    bad = 0
    for name, procs, cfg, smb, stop in (
            ("discard", 16,
             "buffers { size_kb: 4096 fill_policy: DISCARD }\n"
             "data_sources { config { name: \"track_event\" } }\n", None, 0),
            ("ring", 16,
             "buffers { size_kb: 4096 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"track_event\" } }\n", None, 0),
            ("smb", 4,
             "buffers { size_kb: 65536 fill_policy: RING_BUFFER }\n"
             "data_sources { config { name: \"track_event\" } }\n", 256, 300)):
        d, out, pids = run(args, name, procs, 2, cfg, smb, stop)
        tot = table(args, name, out, pids, 2, d)
        bad += tot[3] != 0 or tot[4] != 0
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
        else:
            print("  (kept: %s)" % out)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
