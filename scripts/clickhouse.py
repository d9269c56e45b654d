"""clickhouse.py - ClickHouse servers for the fleet tests: each on loopback
ports of its own, with a data directory of its own, started with a config
written here and stopped at the end.

Readiness is the server's answer on /ping (polled until a deadline): the
event itself, not a guess at how long starting takes.
"""
import os
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

    def __init__(self, binary, root, remote="", ports=None):
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
        self.proc = subprocess.Popen([binary, "--config-file=" + config],
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=root)

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
