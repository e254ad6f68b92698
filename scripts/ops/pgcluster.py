"""A throwaway PostgreSQL cluster for the operations drills: its own data folder, port and socket
folder, run with the server's own binaries (initdb, pg_ctl, pg_basebackup) as the `postgres` user
when the drill runs as root (PostgreSQL refuses to run as root), as the caller otherwise. Never the
distribution's clusters: nothing here reads or changes /etc/postgresql or /var/lib/postgresql.

Every command is an argument list (no shell); paths placed into postgresql.conf are quoted as the
configuration syntax wants (a quote doubled), and the archive and restore commands quote them for
the shell PostgreSQL runs them with.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import time
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

RUN_AS = "postgres"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def conf_string(value: str) -> str:
    """A postgresql.conf string literal."""
    return "'" + value.replace("'", "''") + "'"


class Tools:
    """The server binaries of one major version, run as the user that may run them."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        for tool in ("initdb", "pg_ctl", "pg_basebackup", "postgres"):
            if not (bindir / tool).is_file():
                raise FileNotFoundError(f"{bindir / tool} is missing (PostgreSQL server binaries)")
        self.as_root = os.geteuid() == 0
        self.owner = pwd.getpwnam(RUN_AS) if self.as_root else pwd.getpwuid(os.geteuid())

    def argv(self, tool: str, *args: str) -> list[str]:
        prefix = [_runuser(), "-u", RUN_AS, "--"] if self.as_root else []
        return [*prefix, str(self.bindir / tool), *args]

    def run(self, tool: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
        done = subprocess.run(self.argv(tool, *args), capture_output=True, text=True, env=env, timeout=timeout,
                              check=False, cwd="/")
        if done.returncode != 0:
            raise RuntimeError(f"{tool} {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-800:]}")
        return done.stdout

    def folder(self, path: Path, mode: int = 0o700) -> Path:
        """A folder the server user owns (the data folder must be 0700)."""
        path.mkdir(mode=mode, parents=True, exist_ok=True)
        os.chown(path, self.owner.pw_uid, self.owner.pw_gid)
        path.chmod(mode)
        return path


class Cluster:
    """One data folder and the server running on it (started and stopped through pg_ctl)."""

    def __init__(self, tools: Tools, data: Path, *, port: int, sockets: Path, log: Path) -> None:
        self.tools, self.data, self.port, self.sockets, self.log = tools, data, port, sockets, log
        self.running = False

    def dsn(self, user: str, password: str, dbname: str = "postgres") -> str:
        return make_conninfo("", host="127.0.0.1", port=self.port, user=user, password=password, dbname=dbname,
                             connect_timeout=10)

    def initdb(self, superuser: str, password: str, pwfile: Path) -> None:
        self.tools.folder(self.data)
        pwfile.write_text(password + "\n")
        os.chown(pwfile, self.tools.owner.pw_uid, self.tools.owner.pw_gid)
        pwfile.chmod(0o600)
        self.tools.run("initdb", "-D", str(self.data), "-U", superuser, f"--pwfile={pwfile}",
                       "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8",
                       "--locale=C.UTF-8", timeout=180)
        pwfile.unlink()

    def configure(self, settings: dict[str, str]) -> None:
        """Append settings to postgresql.conf (the last one wins); values are already literals."""
        lines = "".join(f"{key} = {value}\n" for key, value in settings.items())
        with (self.data / "postgresql.conf").open("a", encoding="utf-8") as fh:
            fh.write("\n# operations drill\n" + lines)

    def base_settings(self, archive: Path) -> dict[str, str]:
        """Its own port and socket folder, loopback only, WAL archived by copying into `archive`."""
        target = shlex.quote(str(archive))
        return {"port": str(self.port), "listen_addresses": "'127.0.0.1'",
                "unix_socket_directories": conf_string(str(self.sockets)),
                "wal_level": "replica", "archive_mode": "on", "max_wal_senders": "4",
                "archive_command": conf_string(f"test ! -f {target}/%f && cp %p {target}/%f"),
                "fsync": "off", "shared_buffers": "'32MB'", "max_connections": "60"}

    def start(self, timeout: float = 90) -> None:
        self.tools.run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(int(timeout)), "start",
                       timeout=timeout + 30)
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        if not self.running:
            return
        try:
            self.tools.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", timeout=90)
        except (RuntimeError, subprocess.TimeoutExpired):
            self.tools.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
        self.running = False

    def wait_promoted(self, dsn: str, timeout: float = 120) -> None:
        """Until recovery has ended (recovery_target_action = promote) and the server takes writes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(dsn) as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    if row is not None and not row[0]:
                        return
            except psycopg.OperationalError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the restored server did not leave recovery within {timeout:.0f} s (log: {self.log})")


def basebackup(tools: Tools, dsn_host: str, port: int, user: str, password: str, into: Path) -> None:
    """A plain-format base backup with the WAL it needs streamed alongside."""
    env = {**os.environ, "PGPASSWORD": password}
    tools.folder(into)
    tools.run("pg_basebackup", "-h", dsn_host, "-p", str(port), "-U", user, "-D", str(into), "-Fp", "-X", "stream",
              "-c", "fast", "--no-password", env=env, timeout=300)


def restore_copy(tools: Tools, backup: Path, into: Path) -> None:
    """The base backup copied to a new data folder, owned by the server user."""
    shutil.copytree(backup, into, symlinks=True)
    for root, dirs, files in os.walk(into):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), tools.owner.pw_uid, tools.owner.pw_gid)
    os.chown(into, tools.owner.pw_uid, tools.owner.pw_gid)
    into.chmod(0o700)


def recovery_settings(archive: Path, target_time: str) -> dict[str, str]:
    """Replay the archived WAL up to `target_time` (exclusive of later commits), then promote."""
    source = shlex.quote(str(archive))
    return {"restore_command": conf_string(f"cp {source}/%f %p"),
            "recovery_target_time": conf_string(target_time),
            "recovery_target_inclusive": "on", "recovery_target_action": "'promote'"}


def _runuser() -> str:
    """util-linux's runuser, also when PATH leaves out the sbin folders (a service, `env -i`)."""
    found = shutil.which("runuser") or next((p for p in ("/usr/sbin/runuser", "/sbin/runuser")
                                             if os.access(p, os.X_OK)), None)
    if found is None:
        raise FileNotFoundError("runuser (util-linux) is missing: it runs the server binaries as " + RUN_AS)
    return found
