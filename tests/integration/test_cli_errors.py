"""CLI errors a user meets first: a malformed DSN, from any of its places, is one `[invalid]` line
naming the setting and the rule (exit 1, no traceback, the value never echoed); output into a
pipe whose reader went away (`| head -1`) ends quietly with exit 141."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

RULE = "is not a PostgreSQL connection string: a URI (postgresql://user@host:5432/dbname) or key=value pairs"
SECRET = "hunter2"


def run(env: dict[str, str], *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, capture_output=True, text=True,
                          timeout=120, **kwargs)


def _one_invalid_line(result: subprocess.CompletedProcess, setting: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith(f"mcp-memory: [invalid] {setting} {RULE}"), lines[0]
    assert SECRET not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("dsn", ["localhost:5433", f"host=localhost password={SECRET} port", f"{SECRET}@db:5432"])
def test_a_malformed_dsn_in_the_environment(profile, dsn) -> None:
    _one_invalid_line(run({**profile, "MCP_MEMORY_DSN": dsn}, "sessions"), "MCP_MEMORY_DSN")


def test_a_malformed_dsn_on_the_command_line(profile) -> None:
    _one_invalid_line(run(profile, "--dsn", f"{SECRET}:5433", "doctor"), "--dsn")


def test_a_malformed_dsn_in_the_config_file(profile, tmp_path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[database]\ndsn = "localhost:5433 {SECRET}"\n')
    _one_invalid_line(run({**profile, "MCP_MEMORY_CONFIG": str(config)}, "sessions"), f"[database] dsn of {config}")
    config.write_text('[database]\ndsn = "postgresql://u@127.0.0.1:1/db"\ndirect_dsn = "127.0.0.1:5432"\n')
    _one_invalid_line(run({**profile, "MCP_MEMORY_CONFIG": str(config)}, "sessions"), "[database] direct_dsn")
    config.write_text("[database]\ndsn = 5433\n")
    wrong_type = run({**profile, "MCP_MEMORY_CONFIG": str(config)}, "sessions")
    assert wrong_type.returncode == 1 and wrong_type.stderr.strip().splitlines() == [
        f"mcp-memory: [invalid] [database] dsn of {config} must be a PostgreSQL connection string: a URI "
        "(postgresql://user@host:5432/dbname) or key=value pairs (host=localhost port=5432 dbname=mcp_memory), "
        "not a value of type int"]


def test_a_well_formed_dsn_passes_the_check(profile) -> None:
    """The check is about the form only: a well-formed DSN to no server is `[unavailable]`, not `[invalid]`."""
    result = run({**profile, "MCP_MEMORY_DSN": "postgresql://u@127.0.0.1:1/db?connect_timeout=2"}, "sessions")
    assert result.returncode == 1 and "[unavailable]" in result.stderr and "[invalid]" not in result.stderr


def _closed_pipe_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """Run with stdout on a real pipe whose reader is already gone: every write meets EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "mcp_memory", *args], env=env, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)


def test_a_closed_pipe_ends_quietly(profile, fresh_db, service) -> None:
    for n in range(30):
        service.create_session("pipe", {"title": f"session {n}"})
    for args in (["schema"], ["--dsn", fresh_db, "sessions", "--limit", "30"]):
        result = _closed_pipe_run(profile, *args)
        assert result.returncode == 141 and result.stderr == "", (args, result.stderr)


def test_head_reads_the_first_line_and_the_rest_ends_quietly(profile, fresh_db, service) -> None:
    for n in range(200):
        service.create_session("pipe", {"title": f"a title long enough to fill the pipe {n} " + "x" * 300})
    command = (f"{shlex.quote(sys.executable)} -m mcp_memory --dsn {shlex.quote(fresh_db)} sessions --limit 200 "
               f"--json | head -1; echo \"status ${{PIPESTATUS[0]}}\"")
    result = subprocess.run(["bash", "-c", command], env=profile, capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines() == ["{", "status 141"], result.stdout
    assert result.stderr == ""
