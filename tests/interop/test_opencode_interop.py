"""Our OpenCode files against the real `opencode` binary (npm `opencode-ai@1.18.33`), offline.

Each test gets throwaway HOME / XDG_* dirs (mcp_memory/agents/opencode/README.md, §Checked against). Skipped without the binary.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions
from mcp_memory.agents.opencode.adapter import OpenCodeAdapter, default_db_path
from mcp_memory.schema import MessageIn

REAL = FIXTURES / "real" / "opencode"
pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("opencode") is None, reason="opencode is not on PATH"),
]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    root = tmp_path / "oc"
    names = {
        "HOME": "home",
        "XDG_DATA_HOME": "data",
        "XDG_CONFIG_HOME": "config",
        "XDG_CACHE_HOME": "cache",
        "XDG_STATE_HOME": "state",
    }
    values = {key: str(root / name) for key, name in names.items()}
    for value in values.values():
        Path(value).mkdir(parents=True)
    return {
        **values,
        "PATH": os.environ.get("PATH", ""),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "npm_config_registry": "http://127.0.0.1:9/",  # closed port: no plugin download attempts leave
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


def opencode(env: dict[str, str], cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["opencode", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def foreign_session() -> NeutralSession:
    start = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    meta = {"agent_source": "claude-code", "model": "claude-sonnet-4-5"}
    messages = [
        MessageIn(role="user", content="Read README.md and summarise it", created_at=start),
        MessageIn(
            role="assistant",
            content="Reading it.",
            created_at=start + timedelta(seconds=1),
            metadata=meta,
            thinking={"content": "Read the file first."},
            tool_calls=[
                {
                    "id": "toolu_1",
                    "function": {"name": "Read", "arguments": json.dumps({"file_path": "README.md"})},
                }
            ],
        ),
        MessageIn(
            role="tool",
            tool_call_id="toolu_1",
            content="# Demo\nA demo.",
            created_at=start + timedelta(seconds=2),
        ),
        MessageIn(
            role="assistant", content="It is a demo.", created_at=start + timedelta(seconds=3), metadata=meta
        ),
    ]
    return NeutralSession(
        agent="claude-code", native_id="abc", messages=messages, meta={"title": "Interop demo"}
    )


def test_foreign_session_imports_lists_and_exports_back(env: dict[str, str], project: Path) -> None:
    adapter = OpenCodeAdapter()
    written = adapter.install(foreign_session(), cwd=project, env=env, options=WriteOptions())
    assert shlex.split(written.resume_command) == ["cd", str(project), "&&", "opencode", "--session", written.native_id]
    assert written.native_id in opencode(env, project, "session", "list")
    exported = json.loads(opencode(env, project, "export", written.native_id))
    ours = json.loads(written.files[0].read_text())
    assert exported["messages"] == ours["messages"]
    assert exported["info"]["directory"] == str(project)

    (from_db,) = [s for s in adapter.read([default_db_path(env)]) if s.native_id == written.native_id]
    (from_file,) = adapter.read(written.files)
    assert [m.payload() for m in from_db.messages] == [m.payload() for m in from_file.messages]


def test_real_export_round_trips_through_the_binary(env: dict[str, str], project: Path) -> None:
    adapter = OpenCodeAdapter()
    (session,) = adapter.read([REAL / "en" / "export-ses_dd6207bd2ffe78J5O1EUC09xWA.json"])
    written = adapter.install(session, cwd=project, env=env, options=WriteOptions())
    assert written.native_id == session.native_id
    exported = json.loads(opencode(env, project, "export", session.native_id))
    original = json.loads((REAL / "en" / "export-ses_dd6207bd2ffe78J5O1EUC09xWA.json").read_text())
    assert exported["messages"] == original["messages"]
    (back,) = [s for s in adapter.read([default_db_path(env)]) if s.native_id == session.native_id]
    assert [m.payload() for m in back.messages] == [m.payload() for m in session.messages]
