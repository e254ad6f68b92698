"""The core service on real PostgreSQL: seq, idempotency, paging, snapshots, forks, sessions."""

from __future__ import annotations

import psycopg
import pytest

from mcp_memory.core.service import Service
from mcp_memory.errors import Conflict, Invalid, NotFound


def msg(append_id: str, content: str = "hi", role: str = "user", **extra) -> dict:
    return {"append_id": append_id, "role": role, "content": content, **extra}


@pytest.fixture
def sid(service: Service) -> str:
    return service.create_session("proj", {"title": "T", "agent_source": "claude-code", "cwd": "/w"}).session_id


def test_session_ids_and_meta(service: Service, sid: str) -> None:
    assert sid.startswith("ses_") and len(sid) == 40
    session = service.get_session(sid)
    assert session.project_id == "proj" and session.agent_source == "claude-code" and session.title == "T"
    assert session.meta == {"title": "T", "agent_source": "claude-code", "cwd": "/w"}
    assert session.last_seq == 0


def test_seq_is_per_session_and_gap_free(service: Service, sid: str) -> None:
    other = service.create_session("proj").session_id
    assert service.append_message(sid, msg("a")).seq == 1
    assert service.append_message(other, msg("a")).seq == 1
    assert service.append_messages(sid, [msg("b"), msg("c")]).seqs == [2, 3]
    assert service.get_session(sid).last_seq == 3


def test_idempotent_retry_and_conflict(service: Service, sid: str) -> None:
    first = service.append_message(sid, msg("same", "payload"))
    again = service.append_message(sid, msg("same", "payload"))
    assert (again.seq, again.duplicate) == (first.seq, True) and first.duplicate is False
    with pytest.raises(Conflict, match=r"append_id same was already used with a different payload"):
        service.append_message(sid, msg("same", "other payload"))
    assert service.read_session(sid, view="full").messages[0].content == "payload"


def test_batch_is_atomic(service: Service, sid: str) -> None:
    service.append_message(sid, msg("x", "original"))
    with pytest.raises(Conflict):
        service.append_messages(sid, [msg("new1"), msg("x", "changed"), msg("new2")])
    with pytest.raises(Invalid, match=r"messages\[1\]\.role"):
        service.append_messages(sid, [msg("new1"), {"append_id": "bad", "role": "robot"}])
    page = service.read_session(sid, view="full")
    assert [m.append_id for m in page.messages] == ["x"]
    assert service.get_session(sid).last_seq == 1


def test_batch_with_duplicates_inside(service: Service, sid: str) -> None:
    result = service.append_messages(sid, [msg("d1"), msg("d1"), msg("d2")])
    assert result.seqs == [1, 1, 2] and result.duplicates == [False, True, False]
    with pytest.raises(Conflict):
        service.append_messages(sid, [msg("e1", "a"), msg("e1", "b")])


def test_missing_append_id_is_generated(service: Service, sid: str) -> None:
    result = service.append_message(sid, {"role": "user", "content": "no key"})
    assert result.append_id.startswith("gen_") and result.seq == 1


def test_payload_round_trip_keeps_every_field(service: Service, sid: str) -> None:
    message = {
        "append_id": "full",
        "role": "assistant",
        "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}],
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"p\": 1}"}}],
        "thinking": {"content": "secret plan", "encrypted": False, "signature": "sig=="},
        "created_at": "2025-01-02T03:04:05.123456Z",
        "metadata": {"model": "m", "native": {"x": [1, 2]}},
    }
    service.append_message(sid, message)
    service.append_message(sid, {"append_id": "t", "role": "tool", "tool_call_id": "call_1", "content": "out"})
    read = service.read_session(sid, include_native=True, view="full").messages
    got = read[0].model_dump(mode="json", exclude_none=True)
    for key in ("role", "content", "tool_calls", "thinking", "metadata", "append_id"):
        assert got[key] == message[key], key
    assert got["created_at"] == "2025-01-02T03:04:05.123456Z"  # client time kept
    assert got["session_id"] == sid and got["seq"] == 1 and got["schema_version"] == 1
    assert read[1].tool_call_id == "call_1"


def test_nul_characters_are_stored_safely(service: Service, sid: str) -> None:
    service.append_message(sid, msg("nul", "a\x00b"))
    assert service.read_session(sid, view="full").messages[0].content == "a\ufffdb"


def test_read_paging_and_limits(service: Service, sid: str) -> None:
    service.append_messages(sid, [msg(f"m{i}", f"c{i}") for i in range(25)])
    seen, after = [], 0
    while True:
        page = service.read_session(sid, after_seq=after, limit=10, view="full")
        seen += [m.seq for m in page.messages]
        after = page.next_after_seq
        if not page.has_more:
            break
    assert seen == list(range(1, 26))
    empty = service.read_session(sid, after_seq=25, view="full")
    assert empty.messages == [] and empty.next_after_seq == 25 and not empty.has_more
    for bad in ({"limit": 0}, {"limit": 1001}, {"after_seq": -1}):
        with pytest.raises(Invalid):
            service.read_session(sid, **bad)
    with pytest.raises(NotFound, match="does not exist"):
        service.read_session("ses_00000000-0000-0000-0000-000000000000", view="full")


def test_snapshot_creates_export_job_and_notifies(service: Service, sid: str, settings) -> None:
    service.append_messages(sid, [msg("a"), msg("b")])
    with psycopg.connect(settings.dsn, autocommit=True) as listener:
        listener.execute("LISTEN mcp_memory_export")
        snap = service.create_snapshot(sid, "two messages")
        notes = list(listener.notifies(timeout=5, stop_after=1))
    assert snap.up_to_seq == 2 and snap.commit_msg == "two messages"
    assert notes[0].payload == ""  # a wake-up only: nothing another project's listener could use
    with psycopg.connect(settings.dsn) as conn:
        status = conn.execute("SELECT status FROM export_jobs WHERE snapshot_id = %s", (snap.snapshot_id,)).fetchone()
    assert status == ("pending",)
    assert [s.snapshot_id for s in service.list_snapshots(sid)] == [snap.snapshot_id]
    with pytest.raises(NotFound):
        service.create_snapshot("ses_00000000-0000-0000-0000-000000000000", "x")


def test_fork_is_zero_copy_new_session_with_lineage(service: Service, sid: str, settings) -> None:
    service.append_messages(sid, [msg(f"p{i}", f"parent {i}") for i in range(1, 4)])
    snap = service.create_snapshot(sid, "at 3")
    service.append_message(sid, msg("p4", "parent after snapshot"))
    fork = service.load_snapshot(snap.snapshot_id, {"agent_source": "opencode"})
    assert fork.session_id != sid and fork.parent_snapshot_id == snap.snapshot_id
    child = service.get_session(fork.session_id)
    assert (child.parent_session_id, child.fork_seq, child.agent_source) == (sid, 3, "opencode")
    assert service.append_message(fork.session_id, msg("c4", "child 4")).seq == 4

    history = service.read_session(fork.session_id, view="full").messages
    assert [(m.seq, m.content) for m in history] == [(1, "parent 1"), (2, "parent 2"), (3, "parent 3"), (4, "child 4")]
    assert history[0].inherited_from == sid and history[3].inherited_from is None
    assert [m.content for m in service.read_session(sid, view="full").messages][-1] == "parent after snapshot"
    with psycopg.connect(settings.dsn) as conn:  # zero copy: the child holds only its own row
        count = conn.execute("SELECT count(*) FROM messages WHERE session_id = %s", (fork.session_id,)).fetchone()
    assert count == (1,)

    # a fork of a fork pages across both ancestors
    snap2 = service.create_snapshot(fork.session_id, "child at 4")
    grandchild = service.load_snapshot(snap2.snapshot_id).session_id
    service.append_message(grandchild, msg("g5", "grandchild 5"))
    page1 = service.read_session(grandchild, after_seq=2, limit=2, view="full")
    page2 = service.read_session(grandchild, after_seq=page1.next_after_seq, limit=2, view="full")
    assert [m.content for m in page1.messages + page2.messages] == ["parent 3", "child 4", "grandchild 5"]
    assert page1.has_more and not page2.has_more
    with pytest.raises(NotFound):
        service.load_snapshot(999999)


def test_append_id_idempotency_is_per_session_in_forks(service: Service, sid: str) -> None:
    service.append_message(sid, msg("shared", "in parent"))
    fork = service.load_snapshot(service.create_snapshot(sid, "s").snapshot_id).session_id
    result = service.append_message(fork, msg("shared", "different in child"))
    assert result.seq == 2 and not result.duplicate


def test_list_sessions_filters_and_cursor(service: Service) -> None:
    ids = [service.create_session("alpha", {"agent_source": "codex" if i % 2 else "claude-code"}).session_id
           for i in range(7)]
    service.create_session("beta")
    collected, cursor = [], None
    while True:
        page = service.list_sessions(project_id="alpha", limit=3, cursor=cursor)
        collected += [s.session_id for s in page.sessions]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(collected) == sorted(ids) and len(collected) == 7
    assert collected == [s.session_id for s in service.list_sessions(project_id="alpha", limit=50).sessions]
    codex = service.list_sessions(agent_source="codex").sessions
    assert len(codex) == 3 and all(s.agent_source == "codex" for s in codex)
    with pytest.raises(Invalid, match="cursor"):
        service.list_sessions(cursor="garbage!")
    with pytest.raises(Invalid, match="limit"):
        service.list_sessions(limit=0)


def test_update_session_meta_merges(service: Service, sid: str) -> None:
    updated = service.update_session_meta(sid, {"title": "New", "status": "blocked", "cwd": None})
    assert updated.title == "New"
    assert updated.meta == {"title": "New", "agent_source": "claude-code", "status": "blocked"}
    with pytest.raises(Invalid):
        service.update_session_meta(sid, ["not", "an", "object"])
    with pytest.raises(NotFound):
        service.update_session_meta("ses_00000000-0000-0000-0000-000000000000", {"a": 1})


@pytest.mark.parametrize(
    ("project", "meta", "error"),
    [("", None, "project_id"), ("x" * 201, None, "project_id"), ("p", [1], "meta"), ("p", {"title": 5}, "meta.title")],
)
def test_create_session_rejects_bad_input(service: Service, project, meta, error) -> None:
    with pytest.raises(Invalid, match=error):
        service.create_session(project, meta)


def test_message_size_limit(service: Service, sid: str) -> None:
    with pytest.raises(Invalid, match=r"message\.content .* over the limit of 1048576 bytes"):
        service.append_message(sid, msg("big", "x" * (1024 * 1024 + 1)))
    assert service.get_session(sid).last_seq == 0


def test_same_append_id_racing_with_an_open_transaction_is_a_duplicate(service: Service, sid: str, settings) -> None:
    """The append that waited for the session lock cannot see the row the lock holder committed in
    its statement snapshot; it must still answer duplicate, not fail or store twice."""
    import threading
    import time

    from psycopg.types.json import Jsonb

    from mcp_memory.core.messages import payload_digest

    message = msg("race", "same payload")
    payload = {k: v for k, v in message.items() if k != "append_id"} | {"schema_version": 1, "metadata": {}}
    with psycopg.connect(settings.dsn) as holder:
        holder.execute("SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE", (sid,))
        holder.execute(
            "INSERT INTO messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,"
            " part_month) SELECT %s, 1, 'proj', 'race', 'user', %s, %s, now(), part_month FROM sessions"
            " WHERE session_id = %s", (sid, Jsonb(payload), payload_digest(payload), sid))
        holder.execute("UPDATE sessions SET last_seq = 1 WHERE session_id = %s", (sid,))
        results: list = []
        waiter = threading.Thread(target=lambda: results.append(service.append_message(sid, message)))
        waiter.start()
        time.sleep(0.5)  # the waiter is now blocked on the session row lock
        assert not results
        holder.commit()
        waiter.join(timeout=30)
    assert results and results[0].duplicate and results[0].seq == 1
    assert [m.append_id for m in service.read_session(sid, view="full").messages] == ["race"]
