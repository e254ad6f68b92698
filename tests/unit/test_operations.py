"""The operations table (mcp_memory/operations.py) against the CLI built from it: types, choices,
defaults and limits of `search`, `snapshot`, `fork` and `decisions` come from the input models."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mcp_memory.cli import _parser
from mcp_memory.inputs import MAX_MATCHES
from mcp_memory.operations import OPERATIONS


def test_cli_options_follow_the_models() -> None:
    args = _parser().parse_args(["search", "queue", "--project", "shop", "--role", "tool", "--limit", "7"])
    assert (args.query, args.project_id, args.role, args.limit, args.mode) == ("queue", "shop", "tool", 7, None)
    assert _parser().parse_args(["search", "q"]).limit == 10  # the model's default
    assert _parser().parse_args(["fork", "12"]).snapshot_id == 12
    assert _parser().parse_args(["snapshot", "ses_x", "-m", "c"]).commit_msg == "c"
    assert _parser().parse_args(["decisions", "--status", "proposed"]).status == "proposed"
    shown = _parser().parse_args(["show", "ses_x", "--native", "--wait", "2.5"])
    assert (shown.include_native, shown.wait_seconds, shown.limit) == (True, 2.5, 1000)
    assert _parser().parse_args(["show", "ses_x"]).include_native is False
    assert _parser().parse_args(["show", "ses_x"]).view == "conversation"  # the model's default
    assert _parser().parse_args(["show", "ses_x", "--view", "full"]).view == "full"
    with pytest.raises(SystemExit):
        _parser().parse_args(["show", "ses_x", "--view", "summary"])
    assert _parser().parse_args(["sessions", "--project", "p"]).project_id == "p"
    with pytest.raises(SystemExit):
        _parser().parse_args(["search", "q", "--role", "robot"])


def test_cli_limits_are_the_models(profile) -> None:
    env = {**profile, "MCP_MEMORY_DSN": "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"}
    done = subprocess.run([sys.executable, "-m", "mcp_memory", "search", "q", "--limit", str(MAX_MATCHES + 1)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("mcp-memory: [invalid] limit"), done.stderr


def test_every_operation_reads_or_writes_and_has_a_rest_path() -> None:
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names))
    routes = [(op.rest.method, op.rest.path) for op in OPERATIONS]
    assert len(routes) == len(set(routes))
    for op in OPERATIONS:
        assert op.kind in ("read", "write", "idempotent") and op.rest.path.startswith("/v1/")
        # reads are GET, but for query_memory: its SQL (up to 20,000 characters) goes in a POST body
        assert (op.rest.method == "GET") == (op.reads and op.name != "query_memory"), op.name
