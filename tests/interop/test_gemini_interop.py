"""Our Gemini chat files against the real `gemini` binary (npm `@google/gemini-cli@0.61.0`), offline.

`gemini --list-sessions` needs no model, but 0.61 asks one for a summary of chats that have none; a
closed port makes it retry for about a minute, so a stub on loopback answers every request at once.
Each test uses a throwaway HOME. Skipped without the binary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import NeutralSession, WriteOptions, adapter_for
from mcp_memory.schema import MessageIn

REAL = (
    FIXTURES / "real" / "gemini" / "en" / ".gemini"
)
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
}
pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(shutil.which("gemini") is None, reason="gemini is not on PATH"),
]


class StubModel(BaseHTTPRequestHandler):
    """Any Gemini API call → one short text candidate."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "Imported session"}]},
                    "finishReason": "STOP",
                }
            ]
        }
        body = json.dumps(reply).encode()
        sse = "alt=sse" in self.path
        payload = b"data: " + body + b"\n\n" if sse else body
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def stub_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def env(tmp_path: Path, stub_url: str) -> dict[str, str]:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS))
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "GEMINI_API_KEY": "dummy",
        "GOOGLE_GEMINI_BASE_URL": stub_url,
        "GEMINI_CLI_NO_RELAUNCH": "true",
    }


def list_sessions(env: dict[str, str], cwd: Path) -> str:
    result = subprocess.run(
        ["gemini", "--list-sessions"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def sample(native_id: str, prompt: str) -> NeutralSession:
    when = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
    messages = [
        MessageIn(role="user", content=prompt, created_at=when),
        MessageIn(
            role="assistant",
            content="Let me check.",
            thinking={"content": "Need numbers."},
            tool_calls=[
                {"id": "toolu_1", "function": {"name": "Read", "arguments": '{"file_path": "n.md"}'}}
            ],
            created_at=when,
        ),
        MessageIn(role="tool", tool_call_id="toolu_1", content="Peak 200 QPS", created_at=when),
        MessageIn(role="assistant", content="No queue needed.", created_at=when),
    ]
    return NeutralSession(agent="claude-code", native_id=native_id, messages=messages, meta={})


def test_gemini_lists_foreign_sessions_in_new_and_known_projects(env, tmp_path):
    adapter = adapter_for("gemini")
    work = tmp_path / "work"
    work.mkdir()
    first = adapter.install(
        sample("a", "First imported prompt"), cwd=work, env=env, options=WriteOptions(thinking="text")
    )
    assert first.files[0].parent.parent.name != "work"  # unknown project: the legacy hash folder
    listing = list_sessions(env, work)
    assert "First imported prompt" in listing and first.native_id in listing
    # Gemini has now registered the project under a slug; the next install must land there.
    second = adapter.install(sample("b", "Second imported prompt"), cwd=work, env=env, options=WriteOptions())
    assert second.files[0].parent.parent.name == "work"
    listing = list_sessions(env, work)
    assert (
        "Second imported prompt" in listing
        and "First imported prompt" in listing
        and second.native_id in listing
    )


def test_gemini_lists_a_real_chat_after_our_round_trip(env, tmp_path):
    adapter = adapter_for("gemini")
    (session,) = adapter.read([REAL])
    work = tmp_path / "work"
    work.mkdir()
    written = adapter.install(session, cwd=work, env=env, options=WriteOptions())
    assert written.native_id == session.native_id
    listing = list_sessions(env, work)
    assert session.native_id in listing
    assert "Our order module peaks at 200 QPS" in listing or "Imported session" in listing  # title or summary
