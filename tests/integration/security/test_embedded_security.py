"""The embedded server keeps to its own data folder: no permission changes outside it, a private
socket folder (0700) with peer authentication (no trust rule), no start as root without the explicit
opt-in, and a clear refusal when the server's user cannot reach an existing data folder."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT_OPT_IN, embedded_home

from mcp_memory.errors import Unavailable
from mcp_memory.store import embedded

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _modes(paths) -> dict[Path, int]:
    return {p: p.stat().st_mode for p in paths}


def test_private_socket_peer_auth_and_nothing_chmodded_outside(tmp_path) -> None:
    with embedded_home() as home:
        pgdir = home / "pg"
        binaries = embedded.binaries()
        watched = [*pgdir.parents, binaries, *binaries.parents, binaries / "postgres"]
        before = _modes(watched)
        embedded.ensure_running(pgdir, allow_root=bool(ROOT_OPT_IN))
        try:
            assert _modes(watched) == before  # nothing outside the data folder changed mode
            info = embedded._running_info(pgdir)
            socket_dir = info.socket_dir
            assert stat.S_IMODE(socket_dir.stat().st_mode) == 0o700
            assert (socket_dir / f".s.PGSQL.{info.port}").exists()
            rules = [line.split() for line in (pgdir / "pg_hba.conf").read_text().splitlines()
                     if line.strip() and not line.startswith("#")]
            assert rules and all(r[-1] != "trust" for r in rules)
            assert ["local", "all", "all", "peer", f"map={embedded.IDENT_MAP}"] in rules
            system_python = Path("/usr/bin/python3")
            if AS_ROOT and system_python.exists():  # another local user cannot even reach the socket
                probe = (f"import socket; s = socket.socket(socket.AF_UNIX); "
                         f"s.connect({str(socket_dir / f'.s.PGSQL.{info.port}')!r})")
                denied = subprocess.run([str(system_python), "-c", probe], user="nobody", check=False, capture_output=True, text=True,
                                        timeout=30)
                assert denied.returncode != 0 and "PermissionError" in denied.stderr
        finally:
            embedded.stop(pgdir)


@pytest.mark.skipif(not AS_ROOT, reason="only root can be refused")
def test_root_needs_the_explicit_opt_in(tmp_path) -> None:
    with embedded_home() as home:
        with pytest.raises(embedded.RootRefused, match="MCP_MEMORY_EMBEDDED_AS_ROOT=1"):
            embedded.ensure_running(home / "pg", allow_root=False)
        assert not (home / "pg" / "PG_VERSION").exists()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
        env["MCP_MEMORY_HOME"] = str(home)
        refused = subprocess.run([sys.executable, "-m", "mcp_memory", "sessions"], env=env, check=False, capture_output=True,
                                 text=True, timeout=60)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr
        assert "refusing to start the embedded PostgreSQL as root" in refused.stderr


@pytest.mark.skipif(not AS_ROOT, reason="the server runs as another user only under root")
def test_an_existing_cluster_out_of_reach_is_refused_without_chmod() -> None:
    """A new profile out of the server user's reach is served from mcp-memory's system folder
    (test_embedded_root.py); an existing cluster there is never moved or widened: refused."""
    with embedded_home() as home:
        closed = home / "closed"
        (closed / "data" / "pg").mkdir(parents=True)
        (closed / "data" / "pg" / "PG_VERSION").write_text("18\n")
        closed.chmod(0o700)
        with pytest.raises(Unavailable, match=f"cannot enter {closed}"):
            embedded.ensure_running(closed / "data" / "pg", allow_root=True)
        assert stat.S_IMODE(closed.stat().st_mode) == 0o700


def test_a_long_path_gets_a_private_socket_folder() -> None:
    with embedded_home() as home:
        pgdir = home / ("d" * 60) / ("e" * 60) / "pg"
        pgdir.parent.mkdir(parents=True)
        for parent in (pgdir.parent, pgdir.parent.parent):
            parent.chmod(0o755)
        pgdir.mkdir(mode=0o700)
        user = embedded._server_user(bool(ROOT_OPT_IN))
        folder = embedded._socket_dir(pgdir, user)
        try:
            assert folder != pgdir and folder.parent == Path(tempfile.gettempdir())
            st = folder.lstat()
            assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == (user.pw_uid if user else os.geteuid())
            folder.chmod(0o777)  # someone widened it: refused, not used
            with pytest.raises(Unavailable, match="not a private folder"):
                embedded._socket_dir(pgdir, user)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def test_socket_name_limit_is_respected() -> None:
    assert len(str(Path("/tmp") / ".s.PGSQL.5432")) < embedded.SOCKET_PATH_MAX
    with socket.socket(socket.AF_UNIX) as probe, embedded_home() as home:
        probe.bind(str(home / ("x" * (embedded.SOCKET_PATH_MAX - len(str(home)) - 2))))


def _long_pgdir(home: Path) -> Path:
    pgdir = home / ("d" * 60) / ("e" * 60) / "pg"
    pgdir.parent.mkdir(parents=True)
    for parent in (pgdir.parent, pgdir.parent.parent):
        parent.chmod(0o755)
    pgdir.mkdir(mode=0o700)
    return pgdir


def _predicted_socket_folder(pgdir: Path, uid: int) -> Path:
    """The socket folder's name, as anyone on the host can compute it (path and inode are visible)."""
    import hashlib

    digest = hashlib.sha256(f"{pgdir}-{pgdir.stat().st_ino}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"mcp-memory-{uid}-{digest}"


def test_a_planted_link_at_the_socket_folder_is_refused_and_changes_nothing() -> None:
    """Someone plants a link where the socket folder will be, pointing at a folder they want
    root to hand to the server's user: it is refused, and the target keeps its owner and mode."""
    with embedded_home() as home:
        pgdir = _long_pgdir(home)
        user = embedded._server_user(bool(ROOT_OPT_IN))
        uid = user.pw_uid if user else os.geteuid()
        victim = home / "victim"
        victim.mkdir(mode=0o755)
        before = victim.stat()
        planted = _predicted_socket_folder(pgdir, uid)
        planted.symlink_to(victim)
        try:
            with pytest.raises(Unavailable, match="is a link or not a folder"):
                embedded._socket_dir(pgdir, user)
            after = victim.stat()
            assert (after.st_uid, after.st_gid, after.st_mode) == (before.st_uid, before.st_gid, before.st_mode)
            assert planted.is_symlink()  # refused, not removed or followed
        finally:
            planted.unlink()


@pytest.mark.skipif(not AS_ROOT, reason="another user's folder can only be planted (chowned) as root")
def test_a_planted_folder_of_another_user_is_refused() -> None:
    with embedded_home() as home:
        pgdir = _long_pgdir(home)
        user = embedded._server_user(True)
        planted = _predicted_socket_folder(pgdir, user.pw_uid)
        planted.mkdir(mode=0o700)
        os.chown(planted, 65534, 65534)  # nobody's
        try:
            with pytest.raises(Unavailable, match="belongs to uid 65534"):
                embedded._socket_dir(pgdir, user)
            assert planted.stat().st_uid == 65534
        finally:
            planted.rmdir()


def test_config_files_of_the_data_folder_are_not_written_through_links() -> None:
    with embedded_home() as home:
        pgdir = home / "pg"
        pgdir.mkdir(mode=0o700)
        target = home / "elsewhere"
        target.write_text("untouched\n")
        (pgdir / "pg_hba.conf").write_text("local all all peer\n")
        (pgdir / "pg_ident.conf").symlink_to(target)
        with pytest.raises(OSError):
            embedded._secure_auth(pgdir, None)
        assert target.read_text() == "untouched\n"
