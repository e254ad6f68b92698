"""What a person said ranks before tool output, thinking and mcp-memory's own earlier searches
(retrieval/order.py `conversation_first`), and session start recalls the discussion when no
decision was recorded (core/recall.py `latest`). The session reads like a real agent session:
thinking turns, `ls`/`cat` tool calls with their output, an earlier recall of memory."""

from __future__ import annotations

import io
import json
from dataclasses import replace

from mcp_memory.cli import main
from mcp_memory.retrieval.tuning import DEFAULT


def cli(monkeypatch, capsys, dsn: str, tmp_path, *args: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setenv("MCP_MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["--dsn", dsn, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _work_session(service) -> tuple[str, str]:
    sid = service.create_session("shop", {"title": "order events", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [
        {"role": "user", "content": "Which message queue should the order events go through?"},
        {"role": "assistant", "content": "", "thinking": {"content": "The user asks about a message queue for "
                                                                      "order events. Let me look at the message "
                                                                      "queue config and the message queue docs."}},
        {"role": "assistant", "content": "", "tool_calls": [_call("c1", "Bash", {"command": "ls config/queue"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "message-queue.yml\nmessage-queue-kafka.yml\n"
                                                          "message-queue-rabbitmq.yml\nqueue-order-events.yml"},
        {"role": "assistant", "content": "", "tool_calls": [_call("c2", "Read", {"file_path": "config/queue/"
                                                                                  "message-queue.yml"})]},
        {"role": "tool", "tool_call_id": "c2", "content": "# message queue for order events\nqueue: order-events\n"
                                                          "message queue broker: tbd"},
        {"role": "assistant", "content": "", "thinking": {"content": "Both message queue files exist; the order "
                                                                      "events queue is not chosen yet."}},
        {"role": "assistant", "content": "For order events I suggest RabbitMQ: per-message acknowledgements, "
                                         "dead-letter queues, and the team already runs it."},
        {"role": "user", "content": "Agreed, RabbitMQ it is."},
        {"role": "assistant", "content": "Decision: use RabbitMQ for the order events."},
    ])
    later = service.create_session("shop", {"title": "follow-up", "agent_source": "claude-code"}).session_id
    service.append_messages(later, [
        {"role": "user", "content": "What did we decide about the message queue for order events?"},
        {"role": "assistant", "content": "", "tool_calls": [_call("m1", "mcp__mcp-memory__search_messages",
                                                                   {"query": "message queue order events"})]},
        {"role": "tool", "tool_call_id": "m1", "name": "mcp__mcp-memory__search_messages",
         "content": "message queue order events: RabbitMQ (session order events)"},
        {"role": "assistant", "content": "We chose RabbitMQ earlier."},
    ])
    return sid, later


def test_the_answers_outrank_tool_output_thinking_and_earlier_searches(service) -> None:
    sid, later = _work_session(service)
    found = service.search_messages("message queue for order events", project_id="shop", mode="fts", limit=5)
    top3 = [(m.session_id, m.seq) for m in found.matches[:3]]
    assert {(sid, 8), (sid, 1)} <= set(top3), found.matches  # the suggestion and the question that asked it
    assert (later, 1) not in top3  # the earlier search question comes after what it found
    roles = [m.role for m in found.matches[:3]]
    assert "tool" not in roles
    # without the rule, tool output and thinking are among the best three (it is the rule that does it)
    service.tuning = replace(DEFAULT, noise_share=1.0, asked_share=1.0)
    plain = service.search_messages("message queue for order events", project_id="shop", mode="fts", limit=5)
    assert {(m.session_id, m.seq) for m in plain.matches[:3]} != set(top3)


def test_a_question_naming_a_file_still_finds_the_tool_output(service) -> None:
    sid, _ = _work_session(service)
    found = service.search_messages("message-queue.yml broker", project_id="shop", mode="fts", limit=3)
    assert (sid, 6) in [(m.session_id, m.seq) for m in found.matches]


def test_session_start_recalls_an_unrecorded_decision(monkeypatch, capsys, fresh_db, tmp_path, service) -> None:
    """A session that ended "Decision: use RabbitMQ" and no record_decision: the next session's start
    gets a recall block with that line, marked unconfirmed."""
    _work_session(service)
    block = service.recall_digest(project_id="shop")
    assert "Decision" not in block.text and "unconfirmed" in block.text and "use RabbitMQ for the order events" in block.text
    repo = tmp_path / "shop"
    (repo / ".git").mkdir(parents=True)
    event = json.dumps({"session_id": "abc", "cwd": str(repo), "hook_event_name": "SessionStart"})
    code, out, _ = cli(monkeypatch, capsys, fresh_db, tmp_path, "recall", "--hook", stdin=event)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert code == 0 and "use RabbitMQ" in context and "unconfirmed" in context


def test_session_start_without_any_decision_line_offers_the_latest_turns(service) -> None:
    sid = service.create_session("notes", {"title": "plans"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "Let us move the nightly export to Sunday."},
                                  {"role": "assistant", "content": "Fine, Sunday 02:00 UTC then."}])
    block = service.recall_digest(project_id="notes", limit=5)
    assert "Sunday 02:00" in block.text and [i.seq for i in block.items] == [2, 1]
    service.record_decision(sid, "schedule", "The nightly export runs on Sunday")
    assert [i.kind for i in service.recall_digest(project_id="notes").items] == ["decision"]
