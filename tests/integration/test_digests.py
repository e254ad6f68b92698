"""Digests: per-day and per-session, each line linked to stored sources, computed from the stored
rows (a new message changes the digest), without scaffolding or echoes of mcp-memory's tools."""

from __future__ import annotations

import io
import json
import time
from datetime import UTC, datetime

import pytest
from mcp import Client
from rest_support import Server

from mcp_memory.cli import main
from mcp_memory.errors import Invalid, NotFound
from mcp_memory.mcp.server import build_server

pytest_plugins = ["security_support"]
DAY1, DAY2 = "2026-03-01", "2026-03-02"


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _at(day: str, minute: int) -> str:
    return f"{day}T09:{minute:02d}:00Z"


@pytest.fixture
def shop(service):
    """Three sessions over two days in project `shop`, one in project `other`."""
    first = service.create_session("shop", {"title": "queue", "agent_source": "claude-code"}).session_id
    service.append_messages(first, [
        {"role": "system", "content": "SCAFFOLDSECRET do you follow the rules?", "metadata": {"scaffold": "instructions"},
         "created_at": _at(DAY1, 0)},
        {"role": "user", "content": [{"type": "text", "text": "Should orders use a message queue?"},
                                     {"type": "text", "text": "REMINDERWORD anything else?", "scaffold": "reminder"}],
         "created_at": _at(DAY1, 1)},
        {"role": "assistant", "content": "No queue yet: QPS is low.", "created_at": _at(DAY1, 2)},
        {"role": "assistant", "tool_calls": [_call("c1", "Edit", {"file_path": "src/orders.py", "old_string": "a",
                                                                  "new_string": "b"})],
         "created_at": _at(DAY1, 3)},
        {"role": "tool", "tool_call_id": "c1", "content": "TOOLRESULTWORD edited?", "created_at": _at(DAY1, 4)},
        {"role": "assistant", "tool_calls": [_call("c2", "Bash", {"command": "pytest -q tests/test_orders.py"})],
         "created_at": _at(DAY1, 5)},
        {"role": "tool", "tool_call_id": "c2", "content": "3 passed", "created_at": _at(DAY1, 6)},
        {"role": "assistant", "tool_calls": [_call("c3", "mcp__mcp-memory__recall", {"query": "ECHOWORD queue?"})],
         "created_at": _at(DAY1, 7)},
        {"role": "tool", "tool_call_id": "c3", "content": "ECHOWORD old history: which queue?",
         "created_at": _at(DAY1, 8)},
        {"role": "assistant", "content": "Shall I also add retries?", "created_at": _at(DAY1, 9)},
    ])
    service.record_decision(first, "architecture", "Orders do not use a message queue yet", status="rejected",
                            rationale="low QPS", message_seq=3)
    second = service.create_session("shop", {"title": "codex", "agent_source": "codex"}).session_id
    service.append_messages(second, [
        {"role": "user", "content": "Fix the payment timeout", "created_at": _at(DAY2, 0)},
        {"role": "assistant", "tool_calls": [_call("k1", "shell", {"command": ["bash", "-lc", "rg timeout src"]})],
         "created_at": _at(DAY2, 1)},
        {"role": "tool", "tool_call_id": "k1", "content": "src/pay.py:3", "created_at": _at(DAY2, 2)},
        {"role": "assistant", "tool_calls": [_call("k2", "apply_patch", {"input": "*** Begin Patch\n"
                                                                                  "*** Update File: src/pay.py\n"})],
         "created_at": _at(DAY2, 3)},
        {"role": "user", "content": "Which timeout value do we want?", "created_at": _at(DAY2, 4)},
    ])
    third = service.create_session("shop", {"title": "review", "agent_source": "gemini"}).session_id
    service.append_messages(third, [
        {"role": "user", "content": "Is the review done?", "created_at": _at(DAY2, 10)},
        {"role": "assistant", "content": "Yes, all good.", "created_at": _at(DAY2, 11)},
    ])
    service.record_decision(third, "process", "Reviews need two approvals", message_seq=2)
    other = service.create_session("other", {"title": "x"}).session_id
    service.append_messages(other, [{"role": "user", "content": "Other project question?",
                                     "created_at": _at(DAY2, 5)}])
    return {"first": first, "second": second, "third": third, "other": other}


def _assert_sources_exist(service, digest) -> None:
    """Every line names at least one source, and every source is a stored message or decision."""
    for line in digest.lines:
        assert line.sources, line
        for source in line.sources:
            if source.decision_id:
                assert service.get_decision(source.decision_id).session_id == source.session_id
            if source.seq is not None:
                page = service.read_session(source.session_id, after_seq=source.seq - 1, limit=1, view="full")
                assert page.messages and page.messages[0].seq == source.seq


def test_day_digests_link_every_line_to_a_stored_source(service, shop) -> None:
    day1 = service.get_digest("shop", day=DAY1)
    _assert_sources_exist(service, day1)
    kinds = {line.kind for line in day1.lines}
    assert kinds == {"decision", "question", "file", "command"}
    assert day1.sessions == [shop["first"]] and day1.day == DAY1 and day1.messages == 10
    decision = next(line for line in day1.lines if line.kind == "decision")
    assert decision.status == "rejected" and "[rejected]" in decision.text and f"{shop['first']}#3" in decision.text
    questions = [line for line in day1.lines if line.kind == "question"]
    # the user's question got an answer; the assistant's last one did not
    assert [q.sources[0].seq for q in questions] == [10] and "Shall I also add retries?" in questions[0].text
    assert "`src/orders.py` [Edit]" in day1.text and "`pytest -q tests/test_orders.py` [Bash]" in day1.text
    for word in ("SCAFFOLDSECRET", "REMINDERWORD", "TOOLRESULTWORD", "ECHOWORD", "mcp__mcp-memory"):
        assert word not in day1.text and word not in json.dumps(day1.model_dump()), word

    day2 = service.get_digest("shop", day=DAY2)
    _assert_sources_exist(service, day2)
    assert day2.sessions == sorted([shop["second"], shop["third"]])
    assert "`rg timeout src` [shell]" in day2.text and "`src/pay.py` [apply_patch]" in day2.text
    assert [q.text for q in day2.lines if q.kind == "question"] == [
        f'user: "Which timeout value do we want?" ({shop["second"]}#5)']
    assert "Other project" not in day2.text and "Reviews need two approvals" in day2.text
    assert service.get_digest("shop").day == DAY2  # the latest day by default
    assert service.get_digest("shop", day="2026-02-01").text == ""


def test_a_new_message_or_decision_changes_the_digest(service, shop) -> None:
    before = service.get_digest("shop", day=DAY2)
    service.append_messages(shop["second"], [
        {"role": "assistant", "content": "Thirty seconds.", "created_at": _at(DAY2, 20)},
        {"role": "assistant", "tool_calls": [_call("k9", "Write", {"file_path": "src/config.py", "content": "x"})],
         "created_at": _at(DAY2, 21)},
    ])
    service.record_decision(shop["second"], "config", "Payment timeout is 30 s", message_seq=6)
    after = service.get_digest("shop", day=DAY2)
    _assert_sources_exist(service, after)
    assert "Which timeout value" in before.text and "Which timeout value" not in after.text  # answered now
    assert "`src/config.py` [Write]" in after.text and "Payment timeout is 30 s" in after.text
    assert after.messages == before.messages + 2


def test_session_digest_and_bad_arguments(service, shop) -> None:
    digest = service.get_digest("shop", session_id=shop["second"])
    _assert_sources_exist(service, digest)
    assert digest.sessions == [shop["second"]] and digest.uri == f"memory://sessions/{shop['second']}/digest"
    assert "`src/pay.py`" in digest.text and "Orders do not use" not in digest.text
    with pytest.raises(Invalid, match="another project"):
        service.get_digest("shop", session_id=shop["other"])
    with pytest.raises(NotFound):
        service.get_digest("shop", session_id="ses_nope")
    with pytest.raises(Invalid, match="exclude each other"):
        service.get_digest("shop", day=DAY1, session_id=shop["first"])
    with pytest.raises(Invalid, match="calendar date"):
        service.get_digest("shop", day="2026-02-30")


def test_recall_starts_from_digests(service, shop) -> None:
    result = service.recall("payment timeout", project_id="shop", from_digest=True)
    assert [d.day for d in result.digests] == [DAY2, DAY1]
    assert result.text.startswith(f"Digest of project shop, {DAY2}")
    assert result.text.index(DAY2) < result.text.index(f"{DAY1} (UTC)")
    plain = service.recall("payment timeout", project_id="shop")
    assert plain.digests == [] and not plain.text.startswith("Digest")
    with pytest.raises(Invalid, match="from_digest needs project_id"):
        service.recall("x", from_digest=True)


@pytest.mark.anyio
async def test_get_digest_tool(service, shop) -> None:
    async with Client(build_server(lambda: service), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["get_digest"].annotations.read_only_hint is True
        result = (await client.call_tool("get_digest", {"project_id": "shop", "day": DAY1})).structured_content
        assert result["day"] == DAY1 and {line["kind"] for line in result["lines"]} >= {"decision", "file"}
        bad = await client.call_tool("get_digest", {"project_id": "shop", "day": "yesterday"})
        assert bad.is_error and bad.content[0].text.startswith("[invalid] day")


def test_cli_digest(monkeypatch, capsys, fresh_db, tmp_path, service, shop) -> None:
    monkeypatch.setenv("MCP_MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["--dsn", fresh_db, "digest", "--project", "shop", "--day", DAY1, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["day"] == DAY1 and data["uri"] == f"memory://projects/shop/digest/{DAY1}"
    assert main(["--dsn", fresh_db, "digest", "--project", "shop", "--session", shop["third"]]) == 0
    assert "Reviews need two approvals" in capsys.readouterr().out
    assert main(["--dsn", fresh_db, "recall", "review", "--project", "shop", "--from-digest"]) == 0
    assert capsys.readouterr().out.startswith(f"Digest of project shop, {DAY2}")


def test_a_busy_day_is_computed_fast_enough(service) -> None:
    """5,000 messages in one day (half of them tool results with big outputs): well under a second
    or two on a shared test machine, so digests are computed on every call, not cached."""
    sid = service.create_session("busy", {}).session_id
    batch = []
    for i in range(2500):
        batch.append({"role": "assistant", "tool_calls": [_call(f"b{i}", "Read", {"file_path": f"src/m{i % 300}.py"})],
                      "created_at": f"2026-04-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z"})
        batch.append({"role": "tool", "tool_call_id": f"b{i}", "content": "x" * 4000,
                      "created_at": f"2026-04-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z"})
    service.append_messages(sid, batch)
    started = time.perf_counter()
    digest = service.get_digest("busy", day="2026-04-01")
    elapsed = time.perf_counter() - started
    assert digest.messages == 5000 and len([line for line in digest.lines if line.kind == "file"]) == 300
    print(f"digest of 5000 messages: {elapsed:.3f} s")
    assert elapsed < 3.0, elapsed


def test_library_digest(settings, shop) -> None:
    from mcp_memory import Memory

    with Memory(settings=settings) as mem:
        assert mem.digest("shop", day=DAY2).sessions == sorted([shop["second"], shop["third"]])
        assert mem.recall("review", project_id="shop", from_digest=True).digests[0].day == DAY2


@pytest.fixture
def rest(settings, owner_db):
    """The REST app on a real uvicorn server (as in test_rest.py)."""
    from mcp_memory.http.app import HttpOptions, create_app
    from mcp_memory.http.auth import TokenRegistry
    from mcp_memory.wiring import build

    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory digest-test"),
                             recheck_seconds=0)
    with Server(create_app(registry, HttpOptions(max_body_bytes=64 * 1024, rate_limit=0))) as server:
        yield server


def test_rest_digest_is_scoped_by_the_token(rest, make_token, shop) -> None:
    token = make_token("dig", ["shop"], read_only=True).token
    reply = rest.call("GET", f"/v1/digests?project_id=shop&day={DAY1}", token=token)
    assert reply.status == 200 and reply.body["day"] == DAY1 and "`src/orders.py` [Edit]" in reply.body["text"]
    session = rest.call("GET", f"/v1/digests?project_id=shop&session_id={shop['third']}", token=token)
    assert "Reviews need two approvals" in session.body["text"]
    hidden = rest.call("GET", f"/v1/digests?project_id=other&day={DAY2}", token=token)
    assert hidden.status == 200 and hidden.body["lines"] == [] and hidden.body["sessions"] == []
    bad = rest.call("GET", "/v1/digests?project_id=shop&day=soon", token=token)
    assert bad.status == 400 and bad.body["error"]["code"] == "invalid"


def test_a_question_answered_on_a_later_day_is_not_open_and_a_changed_decision_shows_that_day(service,
                                                                                                shop) -> None:
    assert "Shall I also add retries?" in service.get_digest("shop", day=DAY1).text
    service.append_message(shop["first"], {"role": "user", "content": "Yes, three retries.",
                                           "created_at": _at(DAY2, 30)})
    day1 = service.get_digest("shop", day=DAY1)
    assert not [line for line in day1.lines if line.kind == "question"]
    assert day1.messages == 10  # the answer is read only to close the question, not digested on day 1

    rejected = service.search_decisions(project_id="shop", status="rejected").decisions[0]
    service.update_decision(rejected.decision_id, rejected.version, status="superseded")
    # the change happens now, a day without messages (the decisions were recorded today as well)
    changed = service.get_digest("shop", day=datetime.now(UTC).date().isoformat())
    statuses = {line.sources[0].decision_id: line.status for line in changed.lines}
    assert statuses[rejected.decision_id] == "superseded" and changed.messages == 0
    _assert_sources_exist(service, changed)
