"""Which project a captured session goes to (core/projects.py), one test per rule, and the capture
hook that keeps a session its token may not write: spooled with a reason, listed, delivered once
the folder is mapped (`mcp-memory projects map`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_memory.core import projects
from mcp_memory.errors import Invalid

pytest_plugins = ["security_support"]


def test_the_flag_wins(tmp_path: Path) -> None:
    (tmp_path / projects.PROJECT_FILE).write_text("from-file\n")
    resolved = projects.resolve(str(tmp_path), explicit="shop", mapping={str(tmp_path): "mapped"})
    assert (resolved.project, resolved.rule) == ("shop", "flag")


def test_the_config_maps_the_longest_folder_holding_the_cwd(tmp_path: Path) -> None:
    inner = tmp_path / "code" / "shop" / "api"
    inner.mkdir(parents=True)
    (inner / projects.PROJECT_FILE).write_text("from-file")
    mapping = {str(tmp_path / "code"): "all-code", str(tmp_path / "code" / "shop"): "shop"}
    resolved = projects.resolve(str(inner), mapping=mapping)
    assert (resolved.project, resolved.rule, resolved.source) == ("shop", "config", str(tmp_path / "code" / "shop"))
    # a folder that merely starts with the same letters is not inside
    assert projects.resolve(str(tmp_path / "code-other"), mapping=mapping).rule != "config"


def test_a_project_file_in_the_folder_or_above(tmp_path: Path) -> None:
    (tmp_path / projects.PROJECT_FILE).write_text("  payments \n\n")
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    resolved = projects.resolve(str(inner), session_project="from-session")
    assert (resolved.project, resolved.rule) == ("payments", "file")
    assert resolved.source == str(tmp_path / projects.PROJECT_FILE)


def test_a_bad_project_file_is_ignored_with_its_reason(tmp_path: Path, caplog) -> None:
    folder = tmp_path / "shop-api"
    folder.mkdir()
    (folder / projects.PROJECT_FILE).write_text("x" * 500)
    resolved = projects.resolve(str(folder))
    assert (resolved.project, resolved.rule) == ("shop-api", "folder")
    assert resolved.ignored and "at most" in resolved.ignored[0] and projects.PROJECT_FILE in resolved.ignored[0]
    assert "ignored" in caplog.text


@pytest.mark.parametrize("plant, reason", [
    ("symlink", "symbolic link"),
    ("fifo", "not a regular file"),
    ("folder", "not a regular file"),
    ("big", "bytes"),
    ("two lines", "one line"),
    ("empty", "one line"),
    ("binary", "UTF-8"),
    ("control", "control"),
])
def test_a_hostile_project_file_is_refused(tmp_path: Path, plant: str, reason: str) -> None:
    """A cloned repository brings its own `.mcp-memory-project`: a link to a private file must not
    turn that file's first line into a project id stored on the server; nothing blocks or is read
    beyond FILE_BYTES; the next rules decide."""
    secret = tmp_path / "id_secret"
    secret.write_text("ghp_THISISASECRETTOKEN1234567890\n")
    repo = tmp_path / "cloned"
    (repo / ".git").mkdir(parents=True)
    path = repo / projects.PROJECT_FILE
    if plant == "symlink":
        path.symlink_to(secret)
    elif plant == "fifo":
        os.mkfifo(path)  # opening it for reading without O_NONBLOCK would wait for a writer
    elif plant == "folder":
        path.mkdir()
    else:
        path.write_bytes({"big": b"p" * 100 + b" " * 5000, "two lines": b"alpha\nbeta\n", "empty": b" \n",
                          "binary": b"\xff\xfeproj", "control": b"proj\x1b[31m"}[plant])
    (repo / "src").mkdir()
    resolved = projects.resolve(str(repo / "src"))
    assert (resolved.project, resolved.rule) == ("cloned", "folder")
    assert len(resolved.ignored) == 1 and reason in resolved.ignored[0], resolved.ignored
    assert "ghp_" not in resolved.project


def test_a_refused_project_file_leaves_the_one_above(tmp_path: Path) -> None:
    (tmp_path / projects.PROJECT_FILE).write_text("team\n")
    repo = tmp_path / "cloned"
    repo.mkdir()
    (repo / projects.PROJECT_FILE).symlink_to(tmp_path / projects.PROJECT_FILE)
    resolved = projects.resolve(str(repo))
    assert (resolved.project, resolved.rule, resolved.source) == ("team", "file", str(tmp_path / projects.PROJECT_FILE))
    assert "symbolic link" in resolved.ignored[0]


def test_projects_show_says_why_a_project_file_was_ignored(tmp_path: Path) -> None:
    repo = tmp_path / "cloned"
    repo.mkdir()
    (repo / projects.PROJECT_FILE).symlink_to("/etc/hostname")
    env = {**os.environ, "MCP_MEMORY_HOME": str(tmp_path / "home")}
    env.pop("MCP_MEMORY_CONFIG", None)
    shown = subprocess.run([sys.executable, "-m", "mcp_memory", "projects", "show", str(repo), "--json"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert (data["project"], data["rule"]) == ("cloned", "folder")
    assert "symbolic link" in data["ignored"][0]
    assert "symbolic link" in shown.stderr and projects.PROJECT_FILE in shown.stderr


def test_the_sessions_own_project_then_the_git_top_folder(tmp_path: Path) -> None:
    repo = tmp_path / "shop-api"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    assert projects.resolve(str(repo / "src"), session_project="named").rule == "session"
    resolved = projects.resolve(str(repo / "src"))
    assert (resolved.project, resolved.rule) == ("shop-api", "folder")


def test_a_folder_of_another_machine_gives_its_name(tmp_path: Path) -> None:
    assert projects.resolve("/home/someone-else/work/billing").project == "billing"
    assert projects.resolve("C:\\Users\\dev\\src\\Inventory").project == "Inventory"
    assert projects.resolve(None) == projects.Resolved("default", "default")
    assert projects.resolve("/").project == "default"


def test_the_config_table_is_checked() -> None:
    with pytest.raises(Invalid, match="absolute folder"):
        projects.resolve("/x", mapping={"relative/dir": "p"})
    with pytest.raises(Invalid, match=r"\[projects\]"):
        projects.resolve("/x", mapping={"/x": ""})


# -- the capture hook, as a token holder -------------------------------------------------------------
def _hook_run(created, profile: dict[str, str], *args: str, stdin: str | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", created.dsn, *args],
                          env={**profile, "MCP_MEMORY_PASSWORD": created.token}, capture_output=True, text=True,
                          timeout=120, input=stdin, cwd=cwd)


@pytest.mark.parametrize("fix", ["map", "retarget"])
def test_a_session_of_an_unwritable_project_waits_in_the_spool_until_it_is_sent_elsewhere(
        make_token, owner_db, profile, tmp_path: Path, fix: str) -> None:
    from agent_fixtures import FIXTURES

    created = make_token("spool", ["alpha"])
    folder = tmp_path / "beta-service"  # its name is not one of the token's projects
    folder.mkdir()
    source = min((FIXTURES / "claude-code").glob("*.jsonl"), key=lambda p: p.stat().st_size)
    transcript = tmp_path / "t.jsonl"
    # the session was recorded in this folder (its records' cwd)
    transcript.write_text(re.sub(r'"cwd": *"[^"]*"', f'"cwd": {json.dumps(str(folder))}', source.read_text()))
    hook = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x",
                       "cwd": str(folder)})

    hooked = _hook_run(created, profile, "sync", "claude-code", "--hook", stdin=hook)
    assert hooked.returncode == 0 and hooked.stdout == ""  # never fails the agent
    assert "kept in the spool" in hooked.stderr and "projects map" in hooked.stderr, hooked.stderr
    kept = hooked.stderr.strip().splitlines()
    assert kept and all("kept in the spool" in line for line in kept)  # a line per session (here with sub-agents)

    listed = json.loads(_hook_run(created, profile, "spool", "list", "--json").stdout)["files"]
    assert len(listed) == len(kept) and all("[forbidden]" in f["reason"] for f in listed)
    assert {s["project"] for f in listed for s in f["sessions"]} == {"beta-service"}
    doctor = json.loads(_hook_run(created, profile, "doctor", "--json").stdout)
    capture = {c["name"]: c for c in doctor["checks"]}["capture"]
    assert "wait in the spool" in capture["detail"] and capture["warning"]

    again = _hook_run(created, profile, "sync", "claude-code", "--hook", stdin=hook)  # nothing new; still waiting
    assert "kept in the spool" in again.stderr
    assert len(json.loads(_hook_run(created, profile, "spool", "list", "--json").stdout)["files"]) == len(kept)

    if fix == "retarget":  # one file at a time, by name
        for entry in listed:
            sent = _hook_run(created, profile, "spool", "retarget", entry["name"], "alpha", "--json")
            assert sent.returncode == 0, sent.stderr
            assert json.loads(sent.stdout)["delivered"][0]["project_rule"] == "flag"
        assert json.loads(_hook_run(created, profile, "spool", "--json").stdout)["files"] == []
        return
    mapped = _hook_run(created, profile, "projects", "map", str(folder), "alpha", "--json")
    assert mapped.returncode == 0, mapped.stderr
    result = json.loads(mapped.stdout)
    assert {r["project_id"] for r in result["delivered"]} == {"alpha"} and result["spool_files"] == 0
    assert len(result["delivered"]) == len(kept) and result["delivered"][0]["project_rule"] == "config"
    with owner_db.connect() as conn:
        stored = conn.execute("SELECT count(*) FROM messages WHERE project_id = 'alpha'").fetchone()[0]
    assert stored > 0
    shown = json.loads(_hook_run(created, profile, "projects", "show", str(folder / "sub"), "--json").stdout)
    assert (shown["project"], shown["rule"]) == ("alpha", "config")
    assert json.loads(_hook_run(created, profile, "spool", "list", "--json").stdout)["files"] == []


def test_an_unreadable_spool_file_is_set_aside(profile, tmp_path: Path) -> None:
    from mcp_memory.spool import Spool

    folder = tmp_path / "spool"
    folder.mkdir()
    (folder / "1-bad.json").write_text("{not json")
    assert Spool(folder).pending() == []
    assert (folder / "1-bad.json.unreadable").exists()
