"""recall: the prompt-ready block (service, MCP, CLI) and the Claude Code SessionStart hook."""

from __future__ import annotations

import io
import json

import pytest
from mcp import Client

from mcp_memory.cli import main
from mcp_memory.core.recall import is_identifier
from mcp_memory.errors import Invalid
from mcp_memory.mcp.server import build_server


@pytest.fixture
def history(service):
    sid = service.create_session("shop", {"title": "订单模块架构评估", "agent_source": "planning-agent"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "订单模块峰值 QPS 只有 200，要不要引入消息队列？" + "细节。" * 100,
         "created_at": "2025-02-10T08:00:00Z"},
        {"role": "assistant", "content": "建议暂时不引入消息队列，优先优化数据库索引。", "created_at": "2025-02-10T08:01:00Z"},
        {"role": "user", "content": "Should the order service use a message queue?", "created_at": "2025-02-11T08:00:00Z"},
    ])
    service.record_decision(sid, "architecture", "订单模块暂不引入消息队列", status="rejected",
                            rationale="峰值 QPS 较低，消息队列会增加运维复杂度", message_seq=2)
    service.record_decision(sid, "architecture", "Orders keep synchronous calls for now", rationale="low QPS")
    return sid


def test_recall_block_decisions_first_labelled_in_the_query_language(service, history) -> None:
    result = service.recall("订单模块要不要上消息队列", project_id="shop")
    # both decisions: the English one through the translated words (订单 → order), and it still
    # holds, so it comes before the rejected one
    assert [(i.kind, i.status) for i in result.items[:2]] == [("decision", "accepted"), ("decision", "rejected")]
    assert "[已否决]" in result.text and "历史决策" in result.text and "可能已过时" in result.text
    assert result.text.index("历史决策") < result.text.index("历史讨论")
    assert all((len(item.text) <= 200 and item.text.startswith("[2025-")) or item.kind == "decision"
               for item in result.items)
    assert all(len(item.text) <= 200 for item in result.items) and len(result.items) <= 5
    assert not any(i.kind == "message" and i.seq == 2 for i in result.items)  # the decision's own message
    english = service.recall("should orders use a message queue?", project_id="shop", limit=3)
    assert "[accepted]" in english.text and "may be outdated" in english.text and len(english.items) <= 3
    assert service.recall("kubernetes", project_id="shop").text == ""


@pytest.mark.anyio
async def test_recall_tool(service, history) -> None:
    async with Client(build_server(lambda: service), mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["recall"].annotations.read_only_hint is True
        result = (await client.call_tool("recall", {"query": "消息队列", "project_id": "shop"})).structured_content
        assert "[已否决]" in result["text"] and result["items"][0]["kind"] == "decision"


def cli(monkeypatch, capsys, dsn: str, tmp_path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setenv("MCP_MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["--dsn", dsn, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_search_recall_synonyms_decisions(monkeypatch, capsys, fresh_db, tmp_path, service, history) -> None:
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "search", "超时 订单", "--project", "shop", "--json")
    assert code == 0 and json.loads(out)["matches"][0]["session_id"] == history
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "search", "订单", "--role", "assistant")
    assert code == 0 and f"{history}#2" in out and "**订单**" not in out.split("\n", 1)[0]
    assert cli(monkeypatch, capsys, fresh_db, tmp_path, "synonyms", "add", "消息队列", "MQ")[0] == 0
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "synonyms", "list")
    assert out.strip() == "mq = 消息队列"
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "MQ?", "--project", "shop")
    assert "[rejected]" in out
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "decisions", "--status", "rejected", "--json")
    assert [d["summary"] for d in json.loads(out)["decisions"]] == ["订单模块暂不引入消息队列"]
    code, _, err = cli(monkeypatch, capsys, fresh_db, tmp_path, "search", "x", "--since", "later")
    assert code == 1 and err.startswith("mcp-memory: [invalid] since")


def test_session_start_hook(monkeypatch, capsys, fresh_db, tmp_path, service, history) -> None:
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    event = json.dumps({"session_id": "abc", "cwd": str(repo / "src"), "hook_event_name": "SessionStart"})
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", stdin=event)
    payload = json.loads(out)["hookSpecificOutput"]
    assert code == 0 and payload["hookEventName"] == "SessionStart"
    assert "订单模块暂不引入消息队列" in payload["additionalContext"]
    named = cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", "--agent", "claude-code", stdin=event)
    assert named[:2] == (0, out)
    # an agent whose hooks cannot add context, or none at all: nothing printed, and no failure
    codex = cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", "--agent", "codex", stdin=event)
    assert "订单模块暂不引入消息队列" in json.loads(codex[1])["hookSpecificOutput"]["additionalContext"]
    for agent in ("openai", "no-such-agent"):
        assert cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", "--agent", agent,
                   stdin=event)[:2] == (0, "")
    other = json.dumps({"cwd": str(tmp_path)})
    assert cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", stdin=other)[:2] == (0, "")
    assert cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", stdin="not json")[:2] == (0, "")
    down = "postgresql://nobody@127.0.0.1:1/x?connect_timeout=1"
    assert cli(monkeypatch, capsys, down, tmp_path, "recall", "--hook", stdin=event)[:2] == (0, "")


@pytest.fixture
def timeline(service):
    """Decisions of every status about one question, and two turns of different ages about it."""
    sid = service.create_session("queue", {"title": "order events"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "Retry budget of the payment worker: the payment worker retry budget is 5 "
                                    "attempts, retry budget checked daily.", "created_at": "2024-03-01T08:00:00Z"},
        {"role": "user", "content": "Filler about the dashboard.", "created_at": "2024-03-01T08:01:00Z"},
        {"role": "user", "content": "The payment worker retry budget went up to 8.",
         "created_at": "2025-02-10T08:00:00Z"},
        {"role": "user", "content": "Filler about the release notes.", "created_at": "2025-02-10T08:01:00Z"},
    ])
    old = service.record_decision(sid, "architecture", "Use a message queue for order events, message queue first",
                                  status="accepted")
    service.record_decision(sid, "architecture", "Keep synchronous calls for order events instead of a message queue",
                            supersedes=old.decision_id)
    service.record_decision(sid, "architecture", "Message queue for order events on Kafka", status="rejected",
                            rationale="message queue operations cost")
    service.record_decision(sid, "architecture", "Order events via an outbox table, no message queue", status="proposed")
    return sid


NOW = "2025-02-13T08:00:00Z"


def test_recall_items_carry_their_age(service, timeline) -> None:
    result = service.recall("payment worker retry budget", project_id="queue", now=NOW)
    messages = {item.seq: item for item in result.items if item.kind == "message"}
    assert messages[3].age_days == 3 and "[2025-02-10 · 3 days ago]" in messages[3].text
    assert messages[1].age_days == 349 and "11 months ago" in messages[1].text
    chinese = service.recall("支付 payment worker retry budget", project_id="queue", now=NOW)
    assert any("3天前" in item.text for item in chinese.items)
    assert all(item.age_days is not None for item in service.recall("message queue", project_id="queue").items)


def test_superseded_and_rejected_decisions_come_after_current_ones(service, timeline) -> None:
    result = service.recall("message queue for order events", project_id="queue", limit=8, now=NOW)
    statuses = [item.status for item in result.items if item.kind == "decision"]
    assert sorted(statuses) == ["accepted", "proposed", "rejected", "superseded"]
    assert set(statuses[:2]) == {"accepted", "proposed"}, statuses  # the current ones first, whatever their score
    assert "[superseded]" in result.text and "[rejected]" in result.text and "(replaced by" in result.text
    ranked = service.search_decisions("message queue for order events", project_id="queue").decisions
    assert ranked[0].status in ("superseded", "rejected")  # the search itself ranks an old one first


def test_half_life_weighs_recency(service, timeline) -> None:
    def order(**kw):
        found = service.recall("payment worker retry budget", project_id="queue", limit=4, now=NOW, **kw)
        return [item.seq for item in found.items if item.kind == "message" and item.why == "terms"]

    assert order()[0] == 1  # the old turn holds the words more often
    assert order(half_life_days=30)[0] == 3  # 349 days old is 2**-11 of its relevance
    assert order(half_life_days=36500)[0] == 1  # a century of half-life changes nothing here
    for bad in (0, -1, float("nan"), True, "7", 40000):
        with pytest.raises(Invalid, match="half_life_days"):
            service.recall("payment worker", project_id="queue", half_life_days=bad)


def test_identifier_queries_ignore_the_half_life(service) -> None:
    sid = service.create_session("ident", {"title": "t"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "fetch_matches fails: fetch_matches raises KeyError in fetch_matches",
         "created_at": "2023-01-01T08:00:00Z"},
        {"role": "user", "content": "renamed something near fetch_matches", "created_at": "2025-02-12T08:00:00Z"},
    ])
    for query in ("fetch_matches", "`fetch_matches`"):
        plain = service.recall(query, project_id="ident", now=NOW)
        weighed = service.recall(query, project_id="ident", now=NOW, half_life_days=1)
        assert [i.seq for i in plain.items] == [i.seq for i in weighed.items] and plain.items[0].seq == 1
    worded = service.recall("fetch matches fails", project_id="ident", now=NOW, half_life_days=1)
    assert worded.items[0].seq == 2  # words, not an identifier: recency counts


@pytest.mark.parametrize(("query", "expected"), [
    ("src/core/search.py", True), ("app.py", True), ("os.path.join", True), ("parse()", True),
    ("fetch_matches", True), ("ERR_CONN_RESET", True), ("getUserName", True), ("HybridSearch", True),
    ("E0425", True), ("ORA-00942", True), ("0x80070005", True), ('"fetch_matches"', True),
    ("why does fetch_matches fail", False), ("消息队列", False), ("migration", False), ("Redis", False),
    ("HTTP", False), ("v2", False),
])
def test_what_counts_as_an_exact_identifier(query: str, expected: bool) -> None:
    assert is_identifier(query) is expected


@pytest.mark.anyio
async def test_recall_tool_takes_a_half_life(service, timeline) -> None:
    async with Client(build_server(lambda: service), mode="legacy") as client:
        result = (await client.call_tool("recall", {"query": "payment worker retry budget", "project_id": "queue",
                                                    "half_life_days": 30})).structured_content
        assert result["items"][0]["age_days"] is not None and "ago]" in result["items"][0]["text"]
