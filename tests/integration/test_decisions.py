"""Decisions, session context and agents: rules in the core, and the MCP tools."""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from mcp import Client

from mcp_memory.errors import Conflict, Invalid, NotFound
from mcp_memory.mcp.server import build_server
from mcp_memory.retrieval.tuning import DEFAULT


@pytest.fixture
def sid(service):
    session = service.create_session("shop", {"title": "订单模块架构评估", "agent_source": "planning-agent"})
    service.append_messages(session.session_id, [
        {"role": "user", "content": "订单模块要不要引入消息队列？"},
        {"role": "assistant", "content": "暂不引入。"},
    ])
    return session.session_id


def test_record_and_search_with_filters(service, sid) -> None:
    rejected = service.record_decision(sid, "architecture", "订单模块引入 Redis 缓存", status="rejected",
                                       rationale="运维成本高", message_seq=2,
                                       alternatives=[{"option": "本地缓存", "why_not": "多实例不一致"}, "CDN"])
    accepted = service.record_decision(sid, "api", "Payment API timeout is 30 seconds")
    assert rejected.version == 1 and rejected.decision_id.startswith("dec_")
    found = service.search_decisions("缓存").decisions
    assert [d.decision_id for d in found] == [rejected.decision_id]
    assert found[0].status == "rejected" and found[0].message_seq == 2 and found[0].agent_source == "planning-agent"
    assert found[0].alternatives[0].why_not == "多实例不一致" and found[0].alternatives[1].option == "CDN"
    assert [d.decision_id for d in service.search_decisions("本地缓存").decisions] == [rejected.decision_id]
    assert [d.decision_id for d in service.search_decisions(status="accepted").decisions] == [accepted.decision_id]
    assert [d.decision_id for d in service.search_decisions(decision_type="api").decisions] == [accepted.decision_id]
    assert len(service.search_decisions(project_id="shop", agent_source="planning-agent").decisions) == 2
    assert service.search_decisions(project_id="blog").decisions == []
    assert service.search_decisions(since="2000-01-01", until="2000-01-02").decisions == []
    assert [d.decision_id for d in service.search_decisions("timeouts").decisions] == [accepted.decision_id]
    assert service.search_decisions("100%").decisions == []  # a LIKE wildcard is a character here


def test_decisions_are_found_across_languages(service, sid) -> None:
    """search_decisions translates the query's words as search_messages does (only translations that
    the project's messages hold): 消息队列 finds the English decision about the message queue, and
    "cache" the Chinese one."""
    from mcp_memory.core import decisions

    service.append_message(sid, {"role": "user", "content": "Which message queue for order events?"})
    queue = service.record_decision(sid, "architecture", "RabbitMQ is the message queue for order events")
    cache = service.record_decision(sid, "architecture", "订单模块引入本地缓存", status="rejected")
    assert [d.decision_id for d in service.search_decisions("消息队列", project_id="shop").decisions] == [queue.decision_id]
    assert service.search_decisions("消息队列 -RabbitMQ", project_id="shop").decisions == []
    service.append_message(sid, {"role": "assistant", "content": "缓存先不上。"})
    assert [d.decision_id for d in service.search_decisions("cache", project_id="shop").decisions] == [cache.decision_id]
    assert decisions.search(service.db, "消息队列", project_id="shop", tuning=replace(DEFAULT, cross_weight=0.0)) == []


def test_record_rules(service, sid) -> None:
    with pytest.raises(NotFound):
        service.record_decision("ses_00000000-0000-0000-0000-000000000000", "x", "y")
    with pytest.raises(Invalid, match="status"):
        service.record_decision(sid, "x", "y", status="maybe")
    with pytest.raises(Invalid, match="message_seq"):
        service.record_decision(sid, "x", "y", message_seq=3)
    with pytest.raises(Invalid, match="summary"):
        service.record_decision(sid, "x", " ")
    assert service.record_decision(sid, "x", "y", status="proposed", visibility="private").version == 1


def test_superseding_marks_the_old_decision_in_the_same_transaction(service, sid) -> None:
    old = service.record_decision(sid, "architecture", "Use RabbitMQ for orders")
    new = service.record_decision(sid, "architecture", "Use Kafka for orders", supersedes=old.decision_id)
    before = service.get_decision(old.decision_id)
    assert before.status == "superseded" and before.superseded_by == new.decision_id and before.version == 2
    assert service.get_decision(new.decision_id).supersedes == old.decision_id
    with pytest.raises(Conflict, match="already superseded"):
        service.record_decision(sid, "architecture", "Use SQS", supersedes=old.decision_id)
    with pytest.raises(NotFound):
        service.record_decision(sid, "architecture", "Use SQS", supersedes="dec_" + "0" * 32)
    assert len(service.search_decisions("orders").decisions) == 2  # the failed ones left nothing behind


def test_update_is_optimistic(service, sid) -> None:
    created = service.record_decision(sid, "api", "Timeout 30 s", status="proposed")
    moved = service.update_decision(created.decision_id, 1, status="accepted", rationale="agreed in review")
    assert moved.version == 2
    with pytest.raises(Conflict, match="version 2, not 1"):
        service.update_decision(created.decision_id, 1, status="rejected")
    assert service.update_decision(created.decision_id, 2, summary="Timeout 45 s").version == 3
    current = service.get_decision(created.decision_id)
    assert (current.status, current.summary, current.rationale) == ("accepted", "Timeout 45 s", "agreed in review")
    assert [d.decision_id for d in service.search_decisions("45").decisions] == [created.decision_id]
    with pytest.raises(NotFound):
        service.update_decision("dec_" + "1" * 32, 1, status="accepted")


def test_concurrent_updates_one_wins(service, sid) -> None:
    created = service.record_decision(sid, "api", "Retry 3 times")
    outcomes: list[str] = []

    def update(status: str) -> None:
        try:
            service.update_decision(created.decision_id, 1, status=status)
            outcomes.append("ok")
        except Conflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=update, args=(s,)) for s in ("rejected", "superseded")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "ok"]


def test_context_keeps_history_and_agents_are_registered(service, sid) -> None:
    assert service.set_context(sid, "selected_stack", "Python 3.12 FastAPI PostgreSQL").revision == 1
    assert service.set_context(sid, "constraint", {"p95_ms": 500}).revision == 1
    assert service.set_context(sid, "constraint", {"p95_ms": 300}).revision == 2
    everything = service.get_context(sid)
    assert everything.context == {"selected_stack": "Python 3.12 FastAPI PostgreSQL", "constraint": {"p95_ms": 300}}
    assert everything.history is None
    one = service.get_context(sid, "constraint")
    assert one.context == {"constraint": {"p95_ms": 300}} and [h.value for h in one.history] == [
        {"p95_ms": 500}, {"p95_ms": 300}]
    with pytest.raises(NotFound):
        service.set_context("ses_00000000-0000-0000-0000-000000000000", "k", 1)
    with pytest.raises(Invalid):
        service.set_context(sid, "", 1)
    service.update_session_meta(sid, {"agent_source": "codex"})
    assert [a.name for a in service.list_agents()] == ["codex", "planning-agent"]
    assert service.describe_agent("codex", "OpenAI Codex CLI").description == "OpenAI Codex CLI"


@pytest.mark.anyio
async def test_decision_and_context_tools(service, sid) -> None:
    async with Client(build_server(lambda: service), mode="auto") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"record_decision", "update_decision", "search_decisions", "set_context", "get_context",
                "recall"} <= set(tools)
        assert tools["search_decisions"].annotations.read_only_hint is True
        assert tools["get_context"].annotations.read_only_hint is True
        assert tools["record_decision"].annotations.read_only_hint is False
        made = (await client.call_tool("record_decision", {
            "session_id": sid, "decision_type": "architecture", "summary": "订单模块暂不引入消息队列",
            "status": "rejected", "rationale": "峰值 QPS 较低", "message_seq": 2,
            "alternatives": [{"option": "Kafka", "why_not": "运维复杂"}]})).structured_content
        assert made["version"] == 1
        moved = await client.call_tool("update_decision", {"decision_id": made["decision_id"], "expected_version": 1,
                                                           "rationale": "QPS 200"})
        assert moved.structured_content == {"version": 2}
        stale = await client.call_tool("update_decision", {"decision_id": made["decision_id"], "expected_version": 1,
                                                           "status": "accepted"})
        assert stale.is_error and stale.content[0].text.startswith("[conflict]")
        found = (await client.call_tool("search_decisions", {"query": "消息队列", "status": "rejected"})).structured_content
        assert found["decisions"][0]["decision_id"] == made["decision_id"]
        bad = await client.call_tool("record_decision", {"session_id": sid, "decision_type": "x", "summary": "y",
                                                         "status": "maybe"})
        assert bad.is_error and bad.content[0].text.startswith("[invalid]")
        assert (await client.call_tool("set_context", {"session_id": sid, "key": "goal", "value": "评估"})
                ).structured_content == {"ok": True, "revision": 1}
        got = (await client.call_tool("get_context", {"session_id": sid})).structured_content
        assert got["context"] == {"goal": "评估"}
