"""Relay lineage: a session exported to another agent, continued there and captured again, is a fork
of the source at the exported seq that stores only the new turns; relays of relays chain."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg

from mcp_memory.agents.base import NeutralSession
from mcp_memory.core.imports import carries, continuation, imported_session_id, record_export, store_sessions
from mcp_memory.core.service import Service
from mcp_memory.schema import MessageIn


def turns(prefix: str, n: int) -> list[MessageIn]:
    return [MessageIn(append_id=f"{prefix}-{i}", role="user" if i % 2 == 0 else "assistant",
                      content=f"{prefix} turn {i} zebra{prefix}{'abcdefghij'[i]}") for i in range(n)]


def native(agent: str, native_id: str, messages: list[MessageIn]) -> NeutralSession:
    return NeutralSession(agent=agent, native_id=native_id, messages=messages, meta={"cwd": "/work/other-project"})


def own_rows(settings, session_id: str) -> int:
    with psycopg.connect(settings.dsn) as conn:
        return conn.execute("SELECT count(*) FROM messages WHERE session_id = %s", (session_id,)).fetchone()[0]


def test_a_relayed_and_continued_session_is_a_fork_storing_only_new_turns(service: Service, settings) -> None:
    source = service.create_session("relay-proj")
    service.append_messages(source.session_id, [m.model_dump(exclude_none=True) for m in turns("src", 4)])
    carried = turns("oc", 4)  # the source's four messages as OpenCode writes them (its own ids)
    relay = record_export(service, source.session_id, [native("opencode", "ses_oc1", carried)], "ses_oc1")
    assert relay is not None and relay.carried == [m.append_id for m in carried]

    (first,) = store_sessions(service, [native("opencode", "ses_oc1", carried + turns("new", 2))], project_id=None)
    assert first.error is None and first.new == 2 and first.duplicates == 4
    assert first.session_id == imported_session_id("relay-proj", "opencode", "ses_oc1")
    fork = service.get_session(first.session_id)
    assert (fork.parent_session_id, fork.fork_seq, fork.project_id) == (source.session_id, 4, "relay-proj")
    assert own_rows(settings, fork.session_id) == 2
    history = service.read_session(fork.session_id).messages
    assert [m.content for m in history] == [m.content for m in turns("src", 4) + turns("new", 2)]

    # an incremental capture later holds only the tail: it goes on appending to the fork
    (later,) = store_sessions(service, [native("opencode", "ses_oc1", turns("tail", 1))], project_id=None)
    assert later.session_id == fork.session_id and later.new == 1
    # importing the whole file again adds nothing
    (again,) = store_sessions(service, [native("opencode", "ses_oc1", carried + turns("new", 2) + turns("tail", 1))],
                              project_id=None)
    assert again.new == 0 and own_rows(settings, fork.session_id) == 3

    # each turn is found once
    for word in ("zebrasrcb", "zebranewb"):
        found = [m for m in service.search_messages(word).matches if word in m.snippet.replace("**", "")]
        assert len(found) == 1, found

    # relay of the relay: the fork goes on to Codex and is continued there
    to_codex = turns("cx", 7)
    record_export(service, fork.session_id, [native("codex", "0199-cx", to_codex)], "0199-cx")
    (hop,) = store_sessions(service, [native("codex", "0199-cx", to_codex + turns("hop", 2))], project_id=None)
    second = service.get_session(hop.session_id)
    assert (second.parent_session_id, second.fork_seq) == (fork.session_id, 7)
    assert own_rows(settings, second.session_id) == 2
    assert len(service.read_session(second.session_id).messages) == 9
    listed = {s.session_id: s for s in service.list_sessions(project_id="relay-proj").sessions}
    assert listed[second.session_id].parent_session_id == fork.session_id


def test_a_continuation_with_messages_the_agent_put_among_the_carried_ones_is_still_a_relay(
        service: Service, settings) -> None:
    """Gemini CLI 0.61, resuming, rewrites the chat with a `<session_context>` user message first."""
    source = service.create_session("relay-proj")
    service.append_messages(source.session_id, [m.model_dump(exclude_none=True) for m in turns("src", 3)])
    carried = turns("gm", 3)
    record_export(service, source.session_id, [native("gemini", "g-1", carried)], "g-1")
    rewritten = turns("ctx", 1) + [carried[0], *turns("split", 1), carried[2]]  # carried[1] re-split
    (hop,) = store_sessions(service, [native("gemini", "g-1", rewritten + turns("new", 2))], project_id=None)
    fork = service.get_session(hop.session_id)
    assert (fork.parent_session_id, fork.fork_seq) == (source.session_id, 3)
    assert own_rows(settings, fork.session_id) == 2  # only the two new turns


def test_what_counts_as_holding_the_carried_history() -> None:
    carried = ["a", "b", "c", "d", "e"]
    assert carries(["ctx", "a", "b", "x", "d", "e", "new"], carried)  # one re-split, one injected
    assert not carries(["a", "b", "c", "d"], carried)  # not where the export left off
    assert not carries(["a", "c", "b", "d", "e"], carried)  # out of order
    assert not carries(["x", "y", "d", "e"], carried)  # too little of it
    assert [m.append_id for m in continuation(turns("t", 4), ["t-0", "t-1"])] == ["t-2", "t-3"]


def test_a_native_session_that_does_not_start_with_the_carried_history_is_imported_as_its_own(
        service: Service, settings) -> None:
    source = service.create_session("relay-proj")
    service.append_messages(source.session_id, [m.model_dump(exclude_none=True) for m in turns("src", 2)])
    record_export(service, source.session_id, [native("claude-code", "c-1", turns("cc", 2))], "c-1")
    # a file that merely claims the same native id, with other content, is no relay
    (imported,) = store_sessions(service, [native("claude-code", "c-1", turns("other", 3))], project_id="elsewhere")
    session = service.get_session(imported.session_id)
    assert session.parent_session_id is None and session.project_id == "elsewhere"
    assert own_rows(settings, session.session_id) == 3


def test_export_through_the_cli_records_the_relay_and_the_continued_file_imports_as_a_fork(
        service: Service, settings, profile, tmp_path: Path) -> None:
    source = service.create_session("cli-relay")
    service.append_messages(source.session_id, [
        {"role": "user", "content": "plan the migration", "append_id": "u1"},
        {"role": "assistant", "content": "first copy the table", "append_id": "a1"}])
    env = {**profile}
    out = tmp_path / "out"

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn, *args], env=env,
                              capture_output=True, text=True, timeout=120)

    done = cli("export", source.session_id, "--to", "claude-code", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    assert exported["relay"]["carried"] == 2
    (path,) = [Path(f) for f in exported["files"] if f.endswith(".jsonl")]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    last = next(x for x in reversed(lines) if x.get("uuid"))
    # Claude Code continues the file: a user turn and an answer, chained by parentUuid
    user_uuid, answer_uuid = str(uuid.uuid4()), str(uuid.uuid4())
    user = {**last, "type": "user", "uuid": user_uuid, "parentUuid": last["uuid"],
            "message": {"role": "user", "content": "and then?"}}
    answer = {**last, "type": "assistant", "uuid": answer_uuid, "parentUuid": user_uuid,
              "message": {"id": "msg_x", "type": "message", "role": "assistant", "model": "m",
                          "content": [{"type": "text", "text": "then swap the names"}],
                          "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}}
    for key in ("requestId", "toolUseResult"):
        user.pop(key, None)
    with path.open("a") as f:
        f.write(json.dumps(user) + "\n" + json.dumps(answer) + "\n")
    done = cli("import", "claude-code", str(path), "--json")
    assert done.returncode == 0, done.stderr
    (imported,) = json.loads(done.stdout)["sessions"]
    assert imported["relayed_from"]["session_id"] == source.session_id
    fork = service.get_session(imported["session_id"])
    assert (fork.parent_session_id, fork.fork_seq) == (source.session_id, 2)
    assert own_rows(settings, fork.session_id) == 2
    assert [m.content for m in service.read_session(fork.session_id).messages][-1] == "then swap the names"
