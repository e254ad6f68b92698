"""A real PgBouncer for tests (Debian's, started per test on a free port, stopped by its PID); used
by the archive tests behind a pooler and the connection tier's security tests."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "ops"))
from pgbouncer_process import pgbouncer_process

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_pgbouncer(target: dict, databases: str, settings_lines: str,
                      files: dict[str, str] | None = None) -> Iterator[tuple[int, Path]]:
    """PgBouncer with this configuration (`{folder}` in it: its folder), on a free port of 127.0.0.1
    (yields its port and folder). Its folder is made in TMPDIR (pytest's own folders are private to root, and PgBouncer runs as an
    unprivileged user); stopped by its PID."""
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="mm-pgbouncer-"))
    folder.chmod(0o755)
    args = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:  # PgBouncer does not run as root: as the owner of the server's socket folder
        owner = pwd.getpwuid(os.stat(target["host"]).st_uid).pw_name if target.get("host", "").startswith("/") \
            else "postgres"
        if owner == "root":
            pytest.skip("the test server runs as root; PgBouncer cannot reach it as another user")
        args[1:1] = ["-u", owner]
    for name, text in {**(files or {}), "pgbouncer.ini": (
            f"[databases]\n{databases}\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\n"
            f"unix_socket_dir =\npool_mode = transaction\nmax_client_conn = 100\ndefault_pool_size = 5\n"
            f"{settings_lines}".replace("{folder}", str(folder)))}.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)
    with pgbouncer_process(args, folder, port):
        yield port, folder
