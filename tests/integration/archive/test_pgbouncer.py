"""Behind a real PgBouncer (Debian's, in transaction mode, started per test and stopped by its PID):
an archiver whose DSN goes through the pooler refuses at once with a clear error and leaves the lease
to the real one; with `pgbouncer = true` and `direct_dsn`, it works (queue reads through the pooler,
lease and LISTEN direct). Skipped where PgBouncer is not installed."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from archive_support import messages
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from mcp_memory.archive.daemon import Archiver, ArchiverOptions, AutoSnapshot
from mcp_memory.core.service import Service
from mcp_memory.errors import Invalid
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def pooled_dsn(settings) -> Iterator[str]:
    """A DSN through PgBouncer (transaction mode) to the test database. Its folder is made in TMPDIR
    (pytest's own folders are private to root, and PgBouncer runs as an unprivileged user)."""
    if PGBOUNCER is None:
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    target = conninfo_to_dict(settings.dsn)
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="mm-pgbouncer-"))
    folder.chmod(0o755)
    ini = folder / "pgbouncer.ini"
    ini.write_text(
        "[databases]\n"
        f"{target['dbname']} = host={target['host']} port={target.get('port', 5432)} user={target['user']}"
        # an external test server checks passwords: PgBouncer logs in to it with the test DSN's own
        + (f" password={target['password']}" if target.get("password") else "") + "\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        "auth_type = any\npool_mode = transaction\nmax_client_conn = 100\ndefault_pool_size = 5\n")
    ini.chmod(0o644)
    args = [PGBOUNCER, str(ini)]
    if os.geteuid() == 0:  # PgBouncer does not run as root: as the owner of the server's socket folder
        owner = pwd.getpwuid(os.stat(target["host"]).st_uid).pw_name if target.get("host", "").startswith("/") \
            else "postgres"
        if owner == "root":
            pytest.skip("the test server runs as root; PgBouncer cannot reach it as another user")
        args[1:1] = ["-u", owner]
    log = (folder / "pgbouncer.out").open("w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    dsn = make_conninfo("", host="127.0.0.1", port=port, dbname=target["dbname"], user=target["user"])
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                psycopg.connect(dsn, connect_timeout=2).close()
                break
            except psycopg.OperationalError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pgbouncer did not start") from None
                time.sleep(0.1)
        yield dsn
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}: {(folder / 'pgbouncer.out').read_text()[-2000:]}") from None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def options(repo: Path) -> ArchiverOptions:
    return ArchiverOptions(repo=repo, auto=AutoSnapshot(enabled=False), lock_wait=2.0)


def test_an_archiver_through_pgbouncer_refuses_and_leaves_the_lease_to_the_real_one(
        service: Service, settings, pooled_dsn: str, tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    service.create_snapshot(sid, "one")
    started = time.monotonic()
    # pointed at the pooler as its database, or with a "direct" DSN that goes through it as well
    for wrong in (replace(settings, dsn=pooled_dsn), replace(settings, dsn=pooled_dsn, pgbouncer=True,
                                                             direct_dsn=pooled_dsn)):
        pooled = Database(replace(wrong, auto_migrate=False, pool_min=0, pool_max=2),
                          application_name="archiver@pgbouncer")
        try:
            with pytest.raises(Invalid, match="direct_dsn") as refused:
                Archiver(pooled, options(tmp_path / "wrong")).run(once=True)
        finally:
            pooled.close()
        assert "connection pooler" in str(refused.value)
    with psycopg.connect(settings.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM archive_leader").fetchone() == (0,)  # nothing held
    real = Archiver(service.db, options(tmp_path / "archive")).run(once=True)
    assert (real.done, real.failed) == (1, 0)
    assert time.monotonic() - started < 30  # the real one was not kept waiting for a lease


def test_with_direct_dsn_the_archiver_works_behind_pgbouncer(service: Service, settings, pooled_dsn: str,
                                                              tmp_path: Path) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(3))
    service.create_snapshot(sid, "one")
    db = Database(replace(settings, dsn=pooled_dsn, pgbouncer=True, direct_dsn=settings.dsn, auto_migrate=False,
                          pool_min=0, pool_max=2), application_name="archiver@pgbouncer")
    try:
        summary = Archiver(db, options(tmp_path / "archive")).run(once=True)
    finally:
        db.close()
    assert (summary.done, summary.failed) == (1, 0), summary.errors


def test_behind_pgbouncer_each_transaction_sets_its_timeouts(settings, pooled_dsn: str) -> None:
    db = Database(replace(settings, dsn=pooled_dsn, pgbouncer=True, statement_timeout=3.0, lock_timeout=2.0,
                          auto_migrate=False, pool_min=0, pool_max=2), application_name="host@pgbouncer")
    try:
        for _ in range(3):  # whatever server connection the pooler hands out
            with db.transaction() as conn:
                assert conn.execute("SHOW statement_timeout").fetchone() == ("3s",)
                assert conn.execute("SHOW lock_timeout").fetchone() == ("2s",)
        with psycopg.connect(pooled_dsn) as raw:  # a server connection the pool used: nothing stayed set
            assert raw.execute("SHOW statement_timeout").fetchone() == ("0",)
    finally:
        db.close()


def test_a_wait_behind_pgbouncer_without_direct_dsn_polls_instead_of_sleeping_out_its_timeout(
        service: Service, settings, pooled_dsn: str) -> None:
    sid = service.create_session("proj").session_id
    service.append_messages(sid, messages(1))
    host = build(replace(settings, dsn=pooled_dsn, pgbouncer=True, auto_migrate=False, pool_min=0, pool_max=2),
                 application_name="host@pgbouncer")
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            started = time.monotonic()
            waiting = pool.submit(host.read_session, sid, after_seq=1, wait_seconds=30)
            time.sleep(1.0)
            service.append_messages(sid, messages(1, "new"))
            page = waiting.result(timeout=40)
            elapsed = time.monotonic() - started
        assert [m.seq for m in page.messages] == [2]
        assert elapsed < 15, f"the wait took {elapsed:.1f}s of its 30"  # it polled (every 0.5 s)
        assert host.appends.listener.poll_seconds == 0.5
    finally:
        host.db.close()
