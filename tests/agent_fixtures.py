"""Where the recorded agent sessions live (tests/fixtures/, provenance in tests/fixtures/README.md),
and which of them each agent's adapter reads: one glob list per agent, used by the relay tests and
by scripts/relay_matrix.py so that both see the same files."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Per agent: globs under tests/fixtures; each match is one argument to `adapter.read([path])`.
FIXTURE_GLOBS: dict[str, tuple[str, ...]] = {
    "claude-code": ("claude-code/*.jsonl", "real/claude-code/*/.claude/projects/*/*.jsonl"),
    "opencode": ("opencode/export-v1/*.json", "real/opencode/*/export-*.json"),
    "codex": ("codex/*.jsonl", "real/codex/*/sessions/*/*/*/*.jsonl"),
    "gemini": ("gemini/*.json", "gemini/*.jsonl", "real/gemini/*/.gemini/tmp/*/chats/*.jsonl"),
    "hermes": ("hermes/*.jsonl",),
    "deepseek-harness": ("dsh/*.session.jsonl", "deepseek/*/session.jsonl.zstd"),
    "openai": ("dsh/*.json", "openai/*.json"),
    "copilot": ("real/copilot/*/.copilot/session-state/*/events.jsonl",),
    "qwen-code": ("real/qwen-code/*/.qwen/projects/*/chats/*.jsonl",),
    "kilo": ("real/kilo/*/export-*.json", "real/kilo/*/kilo.db"),
    "aider": ("real/aider/*/.aider.chat.history.md",),
}


def fixtures(agent: str) -> list[Path]:
    """The recorded native sessions of `agent`."""
    found: list[Path] = []
    for pattern in FIXTURE_GLOBS.get(agent, ()):
        found.extend(sorted(FIXTURES.glob(pattern)))
    return found


def claude_transcript(turns: int = 6) -> str:
    """A small Claude Code transcript (the JSONL shape the adapter reads: uuid/parentUuid chain)."""
    session, parent, lines = str(uuid.uuid4()), None, []
    for i in range(turns):
        record_id = str(uuid.uuid4())
        message = ({"role": "user", "content": f"question {i}"} if i % 2 == 0 else
                   {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "m",
                    "content": [{"type": "text", "text": f"answer {i}"}]})
        lines.append(json.dumps({"type": message["role"], "uuid": record_id, "parentUuid": parent,
                                 "sessionId": session, "timestamp": f"2026-01-01T00:00:{i:02d}.000Z", "cwd": "/tmp",
                                 "version": "2.1.0", "message": message}) + "\n")
        parent = record_id
    return "".join(lines)
