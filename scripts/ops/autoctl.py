"""A pg_auto_failover formation on one machine for the failover drill: a monitor and two data
nodes (pg_autoctl of the Debian package postgresql-15-auto-failover), each with its own port and
data folder under the drill's work folder, loopback only. pg_autoctl's own configuration and state
files go to a home folder inside the work folder (XDG_* variables), never the postgres user's.

Every keeper runs as `pg_autoctl run` in a process group of its own (started here, stopped here by
that group's id): a node "crashes" by SIGKILL to its group (keeper, its services and its server
together), as when its machine dies.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psycopg
from pgcluster import Tools, _runuser, free_port

# the tuning pg_autoctl computes (a quarter of the machine's memory as shared_buffers) is for a
# dedicated machine; three servers of a drill share this one with other work
SMALL = {"listen_addresses": "'127.0.0.1'", "shared_buffers": "'64MB'", "effective_cache_size": "'256MB'",
         "maintenance_work_mem": "'64MB'", "work_mem": "'4MB'", "max_connections": "100"}
# The monitor's health checks and timeouts stay at pg_auto_failover's defaults (a dead primary is
# replaced in ~50 s). Shortened (1 s checks, a 6 s demote timeout) on this loaded 2-core machine, the
# monitor took the standby for dead in the middle of a switchover, left the old primary writable
# (wait_primary) while it promoted the standby, and this drill counted 139 acknowledged appends lost
# in a split brain: the demote timeout must stay above the keepers' network_partition_timeout.
DATABASE = "mcp_memory"


def find_autoctl() -> str:
    found = shutil.which("pg_autoctl") or next((p for p in ("/usr/bin/pg_autoctl",) if os.access(p, os.X_OK)), None)
    if found is None:
        raise FileNotFoundError("pg_autoctl is missing (Debian package postgresql-15-auto-failover)")
    return found


class Node:
    def __init__(self, name: str, data: Path, port: int, log: Path) -> None:
        self.name, self.data, self.port, self.log = name, data, port, log
        self.keeper: subprocess.Popen[bytes] | None = None

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None


class Formation:
    def __init__(self, tools: Tools, work: Path, pg_bin: Path) -> None:
        self.tools, self.work, self.pg_bin = tools, work, pg_bin
        self.autoctl = find_autoctl()
        home = tools.folder(work / "autoctl-home", 0o700)
        self.env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"), "XDG_DATA_HOME": str(home / "data"),
                    "XDG_RUNTIME_DIR": str(home / "run"), "PATH": f"{pg_bin}:/usr/bin:/bin", "PG_CONFIG": ""}
        for sub in ("config", "data", "run"):
            tools.folder(home / sub, 0o700)
        self.monitor = self._node("monitor")
        self.nodes: list[Node] = []

    def _node(self, name: str) -> Node:
        log = self.work / f"{name}.log"
        log.touch()
        os.chown(log, self.tools.owner.pw_uid, self.tools.owner.pw_gid)
        # pg_autoctl writes beside the data folders (backup/): a parent the server user owns
        parent = self.tools.folder(self.work / "pg", 0o755)
        return Node(name, self.tools.folder(parent / name), free_port(), log)

    def argv(self, *args: str) -> list[str]:
        environment = [f"{key}={value}" for key, value in self.env.items() if value]
        prefix = [_runuser(), "-u", self.tools.owner.pw_name, "--"] if self.tools.as_root else []
        return [*prefix, "/usr/bin/env", *environment, self.autoctl, *args]

    def run(self, *args: str, timeout: float = 180) -> str:
        done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout, check=False, cwd="/")
        if done.returncode != 0:
            raise RuntimeError(f"pg_autoctl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-1500:]}")
        return done.stdout

    def monitor_uri(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover?sslmode=disable"

    # -- set-up ---------------------------------------------------------------------------------
    def create_monitor(self) -> None:
        self.run("create", "monitor", "--pgdata", str(self.monitor.data), "--pgport", str(self.monitor.port),
                 "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--pgctl", str(self.pg_bin / "pg_ctl"))
        self._configure(self.monitor, SMALL)
        self.start(self.monitor)

    def create_node(self, name: str) -> Node:
        node = self._node(name)
        self.nodes.append(node)
        self.run("create", "postgres", "--pgdata", str(node.data), "--pgport", str(node.port), "--listen", "127.0.0.1",
                 "--hostname", "127.0.0.1", "--name", name, "--dbname", DATABASE, "--auth", "trust", "--no-ssl",
                 "--monitor", self.monitor_uri(), "--pgctl", str(self.pg_bin / "pg_ctl"), timeout=300)
        self._configure(node, SMALL)
        self.start(node)
        return node

    def _configure(self, node: Node, settings: dict[str, str]) -> None:
        """After pg_autoctl's include (the first line of postgresql.conf): the last setting wins."""
        with (node.data / "postgresql.conf").open("a", encoding="utf-8") as fh:
            fh.write("\n# failover drill\n" + "".join(f"{key} = {value}\n" for key, value in settings.items()))

    # -- keepers --------------------------------------------------------------------------------
    def start(self, node: Node) -> None:
        """`pg_autoctl run` for the node, in a process group of its own."""
        with node.log.open("ab") as log:
            node.keeper = subprocess.Popen(self.argv("run", "--pgdata", str(node.data)), stdin=subprocess.DEVNULL,
                                           stdout=log, stderr=subprocess.STDOUT, cwd="/", start_new_session=True)

    def crash(self, node: Node) -> None:
        """SIGKILL to the node's whole process group: keeper, services and server die at once."""
        if node.keeper is not None and node.keeper.poll() is None:
            os.killpg(node.keeper.pid, signal.SIGKILL)
            node.keeper.wait(timeout=30)
        node.keeper = None
        self._wait_gone(node)

    def _wait_gone(self, node: Node, timeout: float = 30) -> None:
        """Until the node's server process has exited (its children see the postmaster gone)."""
        deadline = time.monotonic() + timeout
        while (pid := node.postmaster_pid()) is not None and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)

    def stop(self, node: Node) -> None:
        """SIGTERM to the keeper's group (it stops its server), SIGKILL when it does not within 60 s."""
        if node.keeper is None or node.keeper.poll() is not None:
            return
        os.killpg(node.keeper.pid, signal.SIGTERM)
        try:
            node.keeper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(node.keeper.pid, signal.SIGKILL)
            node.keeper.wait(timeout=30)
        node.keeper = None

    def stop_all(self) -> None:
        for node in [*self.nodes, self.monitor]:
            try:
                self.stop(node)
            except (OSError, subprocess.SubprocessError):
                pass

    # -- state ----------------------------------------------------------------------------------
    def state(self) -> list[dict[str, object]]:
        """The monitor's view: one dict per node (nodename, current/assigned group state, health)."""
        out = self.run("show", "state", "--monitor", self.monitor_uri(), "--json", timeout=30)
        rows = json.loads(out)
        return rows if isinstance(rows, list) else []

    def primary(self) -> Node | None:
        for row in self._safe_state():
            if row.get("current_group_state") == "primary" and row.get("assigned_group_state") == "primary":
                return next((n for n in self.nodes if n.name == row.get("nodename")), None)
        return None

    def taken_over(self, old: Node) -> bool:
        """True once another node than `old` is primary or wait_primary (promoted, standby-less)."""
        return any(row.get("nodename") != old.name and row.get("current_group_state") in ("primary", "wait_primary")
                   for row in self._safe_state())

    def _safe_state(self) -> list[dict[str, object]]:
        try:
            return self.state()
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            return []

    def wait_stable(self, timeout: float = 180) -> Node:
        """Until one node is primary and every other secondary, as reported and as assigned."""
        deadline = time.monotonic() + timeout
        rows: list[dict[str, object]] = []
        while time.monotonic() < deadline:
            rows = self._safe_state()
            states = sorted((str(r.get("current_group_state")), str(r.get("assigned_group_state"))) for r in rows)
            if len(rows) == len(self.nodes) and states == sorted(
                    [("primary", "primary")] + [("secondary", "secondary")] * (len(self.nodes) - 1)):
                found = self.primary()
                if found is not None:
                    return found
            time.sleep(0.5)
        raise RuntimeError(f"the formation did not settle within {timeout:.0f} s: {rows}")

    def switchover(self) -> None:
        self.run("perform", "switchover", "--monitor", self.monitor_uri(), "--wait", "120", timeout=180)

    def connect_primary(self, user: str, timeout: float = 90) -> psycopg.Connection:
        """An autocommit connection to the node that takes writes, once its keeper has started it."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return psycopg.connect(self.multi_host_dsn(user), autocommit=True)
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def multi_host_dsn(self, user: str, password: str = "") -> str:
        """Every data node in one DSN; libpq picks the one that takes writes."""
        hosts = ",".join("127.0.0.1" for _ in self.nodes)
        ports = ",".join(str(n.port) for n in self.nodes)
        secret = f" password={password}" if password else ""
        return (f"host={hosts} port={ports} dbname={DATABASE} user={user}{secret} "
                "target_session_attrs=read-write connect_timeout=3")
