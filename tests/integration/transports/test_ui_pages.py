"""What the review pages say about real sessions in the test database, served by a real uvicorn and
read signed in through one-person mode: a title for every hop of a relay, the agent on search
results, the writer's host instead of the database user, why an undrained export queue does not
drain, and agent scaffolding and memory-tool echoes kept out of the way."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import psycopg
import pytest
from http_support import Uvicorn
from mcp import Client
from mcp.types import Implementation
from test_ui_owner import get, session_cookie

from mcp_memory.agents.base import NeutralSession
from mcp_memory.config import Settings
from mcp_memory.core.imports import record_export, store_sessions
from mcp_memory.core.service import Service
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.mcp.server import build_server
from mcp_memory.schema import MessageIn
from mcp_memory.ui import owner
from mcp_memory.ui.owner import OwnerSignIn
from mcp_memory.wiring import build

MACHINE = "review-box-7"


@dataclass
class Pages:
    server: Uvicorn
    cookie: str

    def text(self, path: str) -> str:
        reply = get(f"{self.server.url}{path}", self.cookie)
        assert reply.status == 200, (path, reply.status, reply.text[:500])
        return html.unescape(reply.text)


@pytest.fixture
def pages(settings: Settings, service: Service) -> Iterator[Pages]:
    owners = OwnerSignIn()
    registry = TokenRegistry(settings, settings.dsn or "", lambda s: build(s, application_name="mcp-memory ui-test"),
                             recheck_seconds=0)
    with Uvicorn(create_app(registry, HttpOptions(rate_limit=0, machine=MACHINE), owners)) as server:
        cookie = session_cookie(get(owner.link_url(server.url, owners.new_link())))
        yield Pages(server, cookie)


def _relay(service: Service, source: str, agent: str, native: str, new: list[str]) -> str:
    """`source` exported to `agent` and continued there; the continuation keeps the source's title
    (as an agent's own title of a resumed session does)."""
    carried = [MessageIn.model_validate({**m.model_dump(exclude={"session_id", "seq", "created_at", "inherited_from"},
                                                        exclude_none=True), "append_id": f"{native}-{m.seq}"})
               for m in service.read_session(source, view="full").messages]
    title = service.get_session(source).title
    assert record_export(service, source, [NeutralSession(agent=agent, native_id=native, messages=carried,
                                                          meta={"title": title})], native) is not None
    added = [MessageIn(append_id=f"{native}-new-{i}", role="user" if i % 2 == 0 else "assistant", content=text)
             for i, text in enumerate(new)]
    (result,) = store_sessions(service, [NeutralSession(agent=agent, native_id=native, messages=carried + added,
                                                        meta={"title": title})], project_id=None)
    assert result.relayed_from is not None, result
    return result.session_id


def _hops(service: Service) -> tuple[str, str, str]:
    root = service.create_session("pay", {"title": "Fix payments", "agent_source": "claude-code"}).session_id
    service.append_messages(root, [{"role": "user", "content": "The payments retry loop double charges"},
                                   {"role": "assistant", "content": "Found it in retry.py"}])
    service.create_snapshot(root, "hand over")
    second = _relay(service, root, "codex", "0199a5c2-3f10-7b21-9c4e-5d2f8a7b6c02",
                    ["Continue the payments fix", "Patched retry.py"])
    service.create_snapshot(second, "hand back")
    third = _relay(service, second, "opencode", "ses_hop3opencode", ["Add the payments regression test", "Added"])
    return root, second, third


def test_every_hop_of_a_relay_has_its_own_title(pages: Pages, service: Service) -> None:
    root, second, third = _hops(service)
    listing = pages.text("/ui/?project=pay")
    assert "Fix payments — codex (hop 2)" in listing and "Fix payments — opencode (hop 3)" in listing
    assert f'<a href="/ui/sessions/{root}">Fix payments</a>' in listing  # the root keeps its own title
    assert "relayed from codex Fix payments — codex (hop 2) @" in " ".join(listing.split())
    page = pages.text(f"/ui/sessions/{third}")
    assert "<h1>Fix payments — opencode (hop 3)</h1>" in page and ">Fix payments — codex (hop 2)</a>" in page
    lineage = pages.text(f"/ui/sessions/{second}/lineage")
    boxes = re.findall(r'<text class="title"[^>]*>([^<]*)</text>', lineage)
    assert boxes == ["Fix payments", "Fix payments — codex (hop 2)", "Fix payments — opencode (hop 3)"], boxes
    service.update_session_meta(third, {"title": "Regression test for double charges"})
    assert "Regression test for double charges" in pages.text("/ui/?project=pay")  # a title of its own wins
    service.reindex_search()
    found = pages.text("/ui/?q=payments&project=pay")
    assert "Fix payments — codex (hop 2) · #" in found


def test_search_results_and_decisions_name_their_agent(pages: Pages, service: Service) -> None:
    _hops(service)
    made = service.create_session("pay", {"title": "Design review", "agent_source": "gemini"}).session_id
    service.append_messages(made, [{"role": "user", "content": "Shall payments use idempotency keys?"}])
    service.record_decision(made, "architecture", "Idempotency keys on every charge", message_seq=1)
    service.reindex_search()
    found = pages.text("/ui/?q=payments&project=pay")
    results = found.split('<section class="results">')[1].split("</section>")[0]
    agents = re.findall(r'<span class="agent-tag">([^<]*)</span> <span class="role', results)
    assert {"claude-code", "codex", "opencode", "gemini"} <= set(agents), agents
    board = pages.text("/ui/decisions?project=pay")
    card = board.split("Idempotency keys on every charge")[1].split("</article>")[0]
    assert '<span class="agent-tag">gemini</span>' in card


def test_the_host_is_the_writer_not_the_database_user(pages: Pages, service: Service, settings: Settings) -> None:
    here = service.create_session("hosts", {"title": "Written here"}).session_id
    there = service.create_session("hosts", {"title": "Written on a laptop", "host": "laptop-3"}).session_id
    with psycopg.connect(settings.dsn or "") as conn:
        owner_role = conn.execute("SELECT current_user").fetchone()[0]
    listing = pages.text("/ui/?project=hosts")
    rows = {sid: listing.split(f'/ui/sessions/{sid}"')[1].split("</tr>")[0] for sid in (here, there)}
    assert f"<td>{MACHINE}</td>" in rows[here] and "<td>laptop-3</td>" in rows[there]
    assert f"<td>{owner_role}</td>" not in listing
    assert {MACHINE, "laptop-3"} <= set(re.findall(r"<option\s*>([^<]*)</option>", listing.split('name="host"')[1]))
    only = pages.text("/ui/?project=hosts&host=laptop-3")
    assert there in only and here not in only


def test_health_says_why_the_queue_does_not_drain(pages: Pages, service: Service, settings: Settings) -> None:
    sid = service.create_session("arch", {"title": "Queued"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "snapshot me"}])
    service.create_snapshot(sid, "first")
    nobody = pages.text("/ui/health")
    assert "The archive queue does not drain." in nobody and "No archiver has been seen" in nobody
    assert "mcp-memory archive --daemon" in nobody and "install/README.md" in nobody
    with psycopg.connect(settings.dsn or "", autocommit=True) as archiver:  # an archiver holding the lease
        assert archiver.execute("SELECT mm_archive_acquire('ui-test-worker', 60)").fetchone()[0]
        assert "does not drain" not in pages.text("/ui/health")
    gone = pages.text("/ui/health")
    assert "The last archiver (ui-test-worker" in gone and "is gone" in gone and "archive --daemon" in gone


def test_doctor_says_why_the_queue_does_not_drain(service: Service, settings: Settings,
                                                 profile: dict[str, str]) -> None:
    def queue_check() -> dict:
        done = subprocess.run([sys.executable, "-m", "mcp_memory", "--dsn", settings.dsn or "", "doctor", "--json"],
                              env=profile, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr  # a warning, not a failure
        return next(c for c in json.loads(done.stdout)["checks"] if c["name"] == "archive queue")

    assert queue_check() == {"name": "archive queue", "ok": True, "detail": "empty", "warning": False}
    sid = service.create_session("arch", {"title": "Queued"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "snapshot me"}])
    service.create_snapshot(sid, "first")
    check = queue_check()
    assert check["warning"] and "1 export job waits" in check["detail"]
    assert "No archiver has been seen" in check["detail"] and "mcp-memory archive --daemon" in check["detail"]


def test_scaffolding_is_hidden_until_asked_and_memory_tools_are_labelled(pages: Pages, service: Service) -> None:
    sid = service.create_session("scaf", {"title": "Scaffolded", "agent_source": "codex"}).session_id
    recall = {"type": "function", "function": {"name": "mcp__mcp-memory__recall", "arguments": "{\"query\": \"x\"}"}}
    service.append_messages(sid, [
        {"role": "user", "content": "<permissions>sandbox: read-only</permissions>", "metadata": {"scaffold": "permissions"}},
        {"role": "user", "content": [{"type": "text", "text": "Please fix the flaky test"},
                                     {"type": "text", "text": "<system-reminder>todo list empty</system-reminder>",
                                      "scaffold": "reminder"}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_m1", **recall}]},
        {"role": "tool", "tool_call_id": "call_m1", "content": "earlier: the test waits on a real clock"},
        {"role": "assistant", "content": "Fixed by injecting the clock."},
    ])
    plain = pages.text(f"/ui/sessions/{sid}")
    assert "sandbox: read-only" not in plain and "todo list empty" not in plain
    assert "Please fix the flaky test" in plain and "Fixed by injecting the clock." in plain
    assert 'id="seq-1"' not in plain and "show agent scaffolding" in plain
    assert re.search(r'<details class="tool-call memory-tool"><summary>memory tool <strong>mcp__mcp-memory__recall', plain)
    assert re.search(r'<details class="tool-result memory-tool"><summary>memory tool result', plain)
    shown = pages.text(f"/ui/sessions/{sid}?after_seq=0&scaffold=1")
    assert '<details class="scaffold"><summary>agent scaffolding: permissions</summary>' in shown
    assert "<pre><permissions>sandbox: read-only</permissions></pre>" in shown  # as text (unescaped here)
    assert "agent scaffolding: reminder" in shown and "todo list empty" in shown and 'id="seq-1"' in shown
    assert "hide agent scaffolding" in shown


async def _over_mcp(service: Service, client_name: str, meta: dict, mode: str) -> str:
    """A model's create_session and record_decision, sent by an MCP client that names itself."""
    async with Client(build_server(lambda: service), mode=mode,
                      client_info=Implementation(name=client_name, version="1")) as client:
        created = (await client.call_tool("create_session", {"project_id": "mcp", "meta": meta})).structured_content
        sid = created["session_id"]
        await client.call_tool("record_decision", {"session_id": sid, "decision_type": "database",
                                                   "summary": f"ledger in PostgreSQL for {client_name}"})
    return sid


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_decisions_of_a_session_an_agent_started_over_mcp_name_that_agent(pages: Pages, service: Service,
                                                                          mode: str) -> None:
    """The model left agent_source out (as the interop script does): the client's name fills it."""
    codex = anyio.run(_over_mcp, service, "codex-mcp-client", {"title": "ledger talk"}, mode)
    unknown = anyio.run(_over_mcp, service, "some-tool", {"title": "other talk"}, mode)
    chosen = anyio.run(_over_mcp, service, "claude-code", {"agent_source": "hermes"}, mode)
    assert service.get_session(codex).agent_source == "codex"
    assert service.get_session(unknown).agent_source is None
    assert service.get_session(chosen).agent_source == "hermes"  # what the caller said wins
    board = pages.text("/ui/decisions?project=mcp")
    card = board.split("ledger in PostgreSQL for codex-mcp-client")[1].split("</article>")[0]
    assert '<span class="agent-tag">codex</span>' in card


def test_a_memory_result_at_the_top_of_a_page_is_labelled(pages: Pages, service: Service) -> None:
    """The call is the last turn of page 1, its result the first of page 2."""
    sid = service.create_session("scaf", {"title": "Long with recall"}).session_id
    service.append_messages(sid, [{"role": "user", "content": f"turn {i}"} for i in range(1, 100)])
    service.append_messages(sid, [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_edge", "type": "function", "function": {
            "name": "mcp-memory_search_messages", "arguments": "{\"query\": \"ledger\"}"}}]},
        {"role": "tool", "tool_call_id": "call_edge", "content": "no match"},
        {"role": "tool", "tool_call_id": "call_other", "content": "a result of another tool"},
    ])
    second = pages.text(f"/ui/sessions/{sid}?after_seq=100")
    assert 'id="seq-101"' in second and 'id="seq-100"' not in second
    assert re.search(r'<li id="seq-101" class="msg role-tool memory-tool">', second)
    assert re.search(r'<li id="seq-102" class="msg role-tool">', second)
