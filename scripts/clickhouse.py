#!/usr/bin/env python3
"""clickhouse.py - a private ClickHouse server on loopback, in a directory
of its own, to try etch load and etch query --clickhouse (docs/fleet.md);
the fleet tests and benchmark start theirs with it too (import clickhouse).

    scripts/clickhouse.py start DIR [--port N]   start one, print its URL
    scripts/clickhouse.py stop DIR               stop it (SIGTERM, waited)

Each server listens on 127.0.0.1 only (HTTP on 8123 unless taken, or
--port; the native port a free one), with its data, logs, config.xml and
users.xml (user default, no password, loopback only) under DIR, and
nothing of the machine's own ClickHouse config. Readiness is the server's
answer on /ping (polled until a deadline): the event itself, not a guess
at how long starting takes.
"""
import argparse
import os
import sys
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


def server_binary():
    """The clickhouse-server program, or None."""
    for name in ("clickhouse-server",):
        p = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
        if p:
            return p
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USERS = """<?xml version="1.0"?>
<yandex>
  <profiles><default><max_threads>2</max_threads></default></profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
    </default>
  </users>
  <quotas><default></default></quotas>
</yandex>
"""


class Server:
    """A clickhouse-server on 127.0.0.1; `remote` is a <remote_servers>
    body (clusters) or empty."""

    def __init__(self, binary, root, remote="", ports=None, detach=False):
        self.root = root
        self.http_port, self.tcp_port = ports or (free_port(), free_port())
        self.url = "http://127.0.0.1:%d" % self.http_port
        os.makedirs(root, exist_ok=True)
        for d in ("data", "tmp", "user_files"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        config = os.path.join(root, "config.xml")
        with open(os.path.join(root, "users.xml"), "w") as f:
            f.write(USERS)
        with open(config, "w") as f:
            f.write("""<?xml version="1.0"?>
<yandex>
  <logger>
    <level>warning</level>
    <log>%(r)s/server.log</log>
    <errorlog>%(r)s/server.err.log</errorlog>
    <console>0</console>
  </logger>
  <listen_host>127.0.0.1</listen_host>
  <http_port>%(http)d</http_port>
  <tcp_port>%(tcp)d</tcp_port>
  <path>%(r)s/data/</path>
  <tmp_path>%(r)s/tmp/</tmp_path>
  <user_files_path>%(r)s/user_files/</user_files_path>
  <users_config>%(r)s/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>16</max_concurrent_queries>
  <remote_servers>%(remote)s</remote_servers>
</yandex>
""" % {"r": root, "http": self.http_port, "tcp": self.tcp_port,
       "remote": remote})
        self.out = open(os.path.join(root, "stdout"), "w")
        # detach: a session of its own, so that it outlives this script
        # and a Ctrl-C in the terminal that started it.
        self.proc = subprocess.Popen([binary, "--config-file=" + config],
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=root,
                                     start_new_session=detach)

    def wait_ready(self, deadline_s=120):
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("clickhouse-server exited (%d): %s" % (
                    self.proc.returncode, self.log_tail()))
            try:
                with urllib.request.urlopen(self.url + "/ping", timeout=2) as r:
                    if r.read() == b"Ok.\n":
                        return
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            # Polling the event (the port answering), not a fixed wait.
            time.sleep(0.05)
        raise RuntimeError("clickhouse-server not ready after %d s: %s" % (
            deadline_s, self.log_tail()))

    def log_tail(self):
        text = ""
        for name in ("stdout", "server.err.log"):
            try:
                with open(os.path.join(self.root, name)) as f:
                    text += f.read()[-2000:]
            except OSError:
                pass
        return text

    def sql(self, query):
        """The answer to `query` as text (TabSeparated); raises on error."""
        req = urllib.request.Request(self.url + "/", data=query.encode())
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.read().decode()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


# ---- the command line -------------------------------------------------------


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cmd_start(args):
    binary = server_binary()
    if not binary:
        sys.exit("clickhouse.py: clickhouse-server is not installed (Debian: "
                 "apt-get install clickhouse-server; or see clickhouse.com)")
    root = os.path.abspath(args.dir)
    pidfile = os.path.join(root, "server.pid")
    if os.path.exists(pidfile):
        with open(pidfile) as f:
            pid, url = f.read().split()
        if pid_alive(int(pid)):
            sys.exit("clickhouse.py: a server already runs in %s: %s (pid %s)"
                     % (root, url, pid))
    http = args.port or (8123 if port_free(8123) else free_port())
    srv = Server(binary, root, ports=(http, free_port()), detach=True)
    try:
        srv.wait_ready()
    except RuntimeError as e:
        srv.stop()
        sys.exit("clickhouse.py: %s" % e)
    with open(pidfile, "w") as f:
        f.write("%d %s\n" % (srv.proc.pid, srv.url))
    print("ClickHouse %s on %s (pid %d; data, logs and config in %s)"
          % (srv.sql("select version()").strip(), srv.url, srv.proc.pid,
             root))
    print("  etch load --clickhouse %s TRACE..." % srv.url)
    print("  etch query --clickhouse %s \"select count() from slice\""
          % srv.url)
    print("  %s stop %s" % (sys.argv[0], args.dir))


def cmd_stop(args):
    root = os.path.abspath(args.dir)
    try:
        with open(os.path.join(root, "server.pid")) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        sys.exit("clickhouse.py: no server started in %s" % root)
    if pid_alive(pid):
        os.kill(pid, signal.SIGTERM)
        # Until it has gone (its pid answers no more), at most a minute.
        end = time.monotonic() + 60
        while pid_alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        if pid_alive(pid):
            sys.exit("clickhouse.py: pid %d did not end after SIGTERM" % pid)
    os.unlink(os.path.join(root, "server.pid"))
    print("stopped the server of %s" % root)


def main():
    p = argparse.ArgumentParser(
        description="A private ClickHouse server on loopback to try etch "
                    "load and etch query --clickhouse.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("start", help="start a server with its files in DIR")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--port", type=int, default=0,
                   help="its HTTP port (default 8123, or a free one)")
    s.set_defaults(fn=cmd_start)
    s = sub.add_parser("stop", help="stop the server started in DIR")
    s.add_argument("dir", metavar="DIR")
    s.set_defaults(fn=cmd_stop)
    args = p.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
