"""OpenCode scaffolding: the parts OpenCode injected into user messages (synthetic text: an attached
file's Read call and content, the continue prompt after a compaction, reminders) are marked; what the
person typed stays unmarked, and writing back to OpenCode keeps every part."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import FIXTURES

from mcp_memory.agents import WriteOptions
from mcp_memory.agents.opencode.adapter import OpenCodeAdapter

REAL = FIXTURES / "real" / "opencode"
SYNTHETIC = FIXTURES / "opencode" / "export-v1" / "ses_export.json"


@pytest.fixture(scope="module")
def adapter() -> OpenCodeAdapter:
    return OpenCodeAdapter()


def marks(content: Any) -> list[tuple[str, str | None]]:
    return [(p.type, getattr(p, "scaffold", None)) for p in content]


def test_real_attached_file_is_marked_and_the_prompt_stays(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    (session,) = adapter.read([REAL / "file" / "opencode.db"])
    user = session.messages[0]
    assert user.role == "user" and "scaffold" not in user.metadata
    assert marks(user.content) == [("text", "other"), ("text", "other"), ("file", None), ("text", None)]
    assert user.content[0].text.startswith("Called the Read tool with the following input")
    assert "<content>" in user.content[1].text
    typed = [p.text for p in user.content if p.type == "text" and not getattr(p, "scaffold", None)]
    assert typed == ["What is the peak load in these notes?"]
    assert session.messages[1].content == "The notes say the peak is 200 QPS."
    # back into OpenCode: every native part, the synthetic ones included
    written = adapter.write(session, tmp_path, WriteOptions())
    document = json.loads(written.files[0].read_text())
    parts = document["messages"][0]["parts"]
    assert [p.get("synthetic", False) for p in parts] == [True, True, False, False]
    assert [m.payload() for m in adapter.read(written.files)[0].messages] == [m.payload() for m in session.messages]


@pytest.mark.parametrize("name", ["en", "sub"])
def test_real_typed_prompts_are_not_scaffolding(adapter: OpenCodeAdapter, name: str) -> None:
    for session in adapter.read([REAL / name / "opencode.db"]):
        for message in session.messages:
            assert "scaffold" not in message.metadata
            if isinstance(message.content, list):
                assert not any(getattr(p, "scaffold", None) for p in message.content)


def test_synthetic_fixture_marks_its_synthetic_part(adapter: OpenCodeAdapter) -> None:
    (session,) = adapter.read([SYNTHETIC])
    assert marks(session.messages[0].content) == [("text", None), ("file", None), ("text", "other")]


def compaction_continue(tmp_path: Path) -> Path:
    """The user message OpenCode adds after an automatic compaction: one synthetic text part with
    `metadata.compaction_continue` (opencode 1.18.33, SessionCompaction)."""
    document = json.loads(SYNTHETIC.read_text())
    info = dict(document["messages"][0]["info"], id="msg_b76daabe80015bR215DEWc1ZCz")
    part = {"id": "prt_b76daabe8001AAAAAAAAAAAAAA", "sessionID": info["sessionID"], "messageID": info["id"],
            "type": "text", "synthetic": True, "metadata": {"compaction_continue": True},
            "text": "Continue if you have next steps, or stop and ask for clarification if you are unsure "
                    "how to proceed."}
    reminder = {**part, "id": "prt_b76daabe8002AAAAAAAAAAAAAA", "metadata": {},
                "text": "<system-reminder>\nPlan mode is active.\n</system-reminder>"}
    document["messages"].append({"info": info, "parts": [part, reminder]})
    path = tmp_path / "ses_export.json"
    path.write_text(json.dumps(document))
    return path


def test_an_all_synthetic_message_is_scaffolding(adapter: OpenCodeAdapter, tmp_path: Path) -> None:
    (session,) = adapter.read([compaction_continue(tmp_path)])
    last = session.messages[-1]
    assert last.metadata["scaffold"] == "instructions"
    assert marks(last.content) == [("text", "instructions"), ("text", "reminder")]
