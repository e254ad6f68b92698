"""A throwaway primary and its streaming hot standby (pg_basebackup -R), for the read-replica tests
(tests/integration/test_replicas.py) and the lag benchmark (scripts/bench/replica_lag.py).

Both run from one temporary folder with the server's own binaries (pgcluster.py: as `postgres`
when run as root), on free loopback ports; nothing of the distribution's clusters is read or
changed. `close()` stops both servers (pg_ctl, by their data folders' postmaster.pid) and removes
the folder.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import psycopg
from pgcluster import Cluster, Tools, conf_string, free_port
from psycopg.conninfo import make_conninfo

SUPERUSER = "mm_admin"
SERVER_SETTINGS = {"listen_addresses": "'127.0.0.1'", "wal_level": "replica", "max_wal_senders": "4",
                   "hot_standby": "on", "hot_standby_feedback": "on", "wal_keep_size": "'64MB'", "fsync": "off",
                   "shared_buffers": "'32MB'", "max_connections": "60"}


class ReplicaPair:
    def __init__(self, pg_bin: Path) -> None:
        self.tools = Tools(pg_bin)
        self.work = Path(tempfile.mkdtemp(prefix="mm-replicas-"))
        self.work.chmod(0o755)  # the server user enters it
        self.password = secrets.token_urlsafe(18)
        sockets = self.tools.folder(self.work / "sockets", 0o755)
        logs = self.tools.folder(self.work / "logs", 0o755)  # the server user writes them
        self.primary = Cluster(self.tools, self.work / "primary", port=free_port(), sockets=sockets,
                               log=logs / "primary.log")
        self.standby = Cluster(self.tools, self.work / "standby", port=free_port(), sockets=sockets,
                               log=logs / "standby.log")

    def start(self) -> ReplicaPair:
        """initdb and start the primary, copy it with pg_basebackup -R, start the standby, and wait
        until it streams."""
        try:
            self.primary.initdb(SUPERUSER, self.password, self.work / "pwfile")
            self.primary.configure({"port": str(self.primary.port),
                                    "unix_socket_directories": conf_string(str(self.primary.sockets)),
                                    **SERVER_SETTINGS})
            self.primary.start()
            self.tools.folder(self.standby.data)
            env = {**os.environ, "PGPASSWORD": self.password}
            self.tools.run("pg_basebackup", "-h", "127.0.0.1", "-p", str(self.primary.port), "-U", SUPERUSER,
                           "-D", str(self.standby.data), "-Fp", "-X", "stream", "-c", "fast", "-R", "--no-password",
                           env=env, timeout=120)
            self.standby.configure({"port": str(self.standby.port)})
            self.standby.start()
            self.wait_streaming()
        except BaseException:
            self.close()
            raise
        return self

    def dsn(self, cluster: Cluster, dbname: str = "postgres") -> str:
        return make_conninfo("", host="127.0.0.1", port=cluster.port, user=SUPERUSER, password=self.password,
                             dbname=dbname, connect_timeout=5)

    def wait_streaming(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with psycopg.connect(self.dsn(self.primary), autocommit=True) as conn:
                if conn.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").fetchone() \
                        == (1,):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the standby did not stream within {timeout:.0f} s (log: {self.standby.log})")

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(self.dsn(self.primary), autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.dsn(self.standby), autocommit=True) as conn:
            while time.monotonic() < deadline:
                row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s", target).fetchone()
                if row is not None and row[0]:
                    return
                time.sleep(0.02)
        raise RuntimeError(f"the standby did not replay within {timeout:.0f} s")

    def close(self) -> None:
        for cluster in (self.standby, self.primary):
            try:
                cluster.stop()
            except Exception:  # the other one is still stopped; the error is in its log
                pass
        shutil.rmtree(self.work, ignore_errors=True)
