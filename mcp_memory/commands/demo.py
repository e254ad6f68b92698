"""`mcp-memory demo`: a newcomer's end-to-end walk-through on the embedded default.

One agent (Claude Code) works in a session — a user turn, an assistant turn with thinking and a tool
call, the tool result, an answer — and snapshots it; another agent (OpenCode) forks the snapshot and
continues. Both histories are read back, then the output says how to register the server.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from .. import launcher
from ..config import Settings
from .basic import render_message
from .output import service

PROJECT = "mcp-memory-demo"


def run(settings: Settings, args: argparse.Namespace) -> int:
    where = "the embedded PostgreSQL" if settings.embedded else settings.describe_dsn()
    print(f"mcp-memory demo — database: {where}")
    if settings.embedded:
        from ..store.embedded import data_folder

        print(f"  (data in {data_folder(settings.embedded_dir)}; the first start takes a few seconds)")
    started = time.monotonic()
    run_id = uuid.uuid4().hex[:8]
    with service(settings) as svc:
        svc.db.pool()
        print(f"  database ready in {time.monotonic() - started:.1f}s ({svc.db.masked_dsn()})\n")

        session = svc.create_session(PROJECT, {"title": "Fix the flaky order test", "agent_source": "claude-code",
                                               "cwd": "/work/shop"})
        print(f"1. Claude Code created session {session.session_id} in project {PROJECT!r}")
        call_id = f"call_{run_id}"
        turns: list[dict[str, Any]] = [
            {"append_id": f"demo-{run_id}-1", "role": "user", "content": "The order test fails randomly. Why?"},
            {"append_id": f"demo-{run_id}-2", "role": "assistant", "content": "Let me look at the test first.",
             "thinking": {"content": "Random failures smell like shared state or timing.", "encrypted": False},
             "tool_calls": [{"id": call_id, "type": "function", "function": {
                 "name": "read_file", "arguments": json.dumps({"path": "tests/test_orders.py"})}}],
             "metadata": {"model": "claude-sonnet"}},
            {"append_id": f"demo-{run_id}-3", "role": "tool", "tool_call_id": call_id,
             "content": "def test_order():\n    assert queue.pop() == order  # no timeout"},
            {"append_id": f"demo-{run_id}-4", "role": "assistant",
             "content": "The test pops the queue without waiting; a timeout would make it deterministic."},
        ]
        result = svc.append_messages(session.session_id, turns)
        print(f"2. appended {len(result.seqs)} messages (seq {result.seqs[0]}–{result.seqs[-1]}): "
              "user turn, assistant turn with thinking + tool call, tool result, answer")
        retry = svc.append_message(session.session_id, turns[0])
        print(f"3. a retry of the first message is recognised: seq {retry.seq}, duplicate={retry.duplicate}")
        snap = svc.create_snapshot(session.session_id, "diagnosis done, hand over")
        print(f"4. snapshot {snap.snapshot_id} marks seq {snap.up_to_seq} (archived to git by `mcp-memory archive`)")
        fork = svc.load_snapshot(snap.snapshot_id, {"agent_source": "opencode", "title": "Add the timeout"})
        print(f"5. OpenCode forked snapshot {snap.snapshot_id} into {fork.session_id} (the original is untouched)")
        svc.append_message(fork.session_id, {"append_id": f"demo-{run_id}-5", "role": "user",
                                             "content": "Add the timeout and rerun the test."})
        svc.append_message(session.session_id, {"append_id": f"demo-{run_id}-6", "role": "user",
                                                "content": "(Claude Code keeps working in the original.)"})
        for label, sid in (("original (Claude Code)", session.session_id), ("fork (OpenCode)", fork.session_id)):
            page = svc.read_session(sid, limit=100)
            print(f"\n   {label} {sid}: {len(page.messages)} messages")
            fork_seq = page.session.fork_seq if page.session else None
            for message in page.messages:
                print("     " + render_message(message, fork_seq).replace("\n", "\n     "))
    print(f"\nDone in {time.monotonic() - started:.1f}s. Next steps:")
    print(f"  • Claude Code:  claude mcp add -s user mcp-memory -- {launcher.shell_command()} serve")
    print("    (or: mcp-memory install claude-code   — also adds the capture hooks)")
    entry = {"mcp-memory": {"type": "local", "command": [*launcher.command(), "serve"]}}
    print(f"  • OpenCode:     in opencode.json, \"mcp\": {json.dumps(entry)}")
    print("  • Look around:  mcp-memory sessions --project mcp-memory-demo ; mcp-memory show <session_id>")
    print("  • Health:       mcp-memory doctor")
    if settings.embedded:
        print("  • The embedded server keeps running for your agents; stop it with: mcp-memory db stop")
    return 0
