"""Every search match says why it is there: it holds a query term (highlighted in its snippet), or it
is labelled as context of the hit it neighbours; `hits_only` leaves the context out, on every door
(library, MCP tool, REST, CLI), and recall and the review page show the label."""

from __future__ import annotations

import json
import re

import pytest
from mcp import Client

from mcp_memory.cli import main
from mcp_memory.mcp.server import build_server
from mcp_memory.ui import pages
from mcp_memory.ui.app import html

TURNS = ["Can we run the agent's shell commands safely?", "Which tools does the agent call most?",
         "Mostly git and the test runner.", "We should add sandboxing before enabling network access.",
         "Agreed, and log every call.", "What about the file limits?", "Raise them to 64 MB."]
HIT = 4  # the one turn that holds the word


@pytest.fixture
def session_id(service) -> str:
    s = service.create_session("agents", {"title": "shell safety"})
    service.append_messages(s.session_id, [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
                                           for i, text in enumerate(TURNS)])
    return s.session_id


def explained(matches: list[dict]) -> None:
    for m in matches:
        if m["why"] == "terms":
            assert re.search(r"\*\*sandbox\w*\*\*", m["snippet"], re.I), m
        else:
            assert m["why"] == "context" and m["context_of"] == HIT and "**" not in m["snippet"], m


def test_each_match_holds_the_term_or_names_the_hit_it_neighbours(service, session_id) -> None:
    found = [m.model_dump() for m in service.search_messages("sandboxing").matches]
    assert [m["seq"] for m in found if m["why"] == "terms"] == [HIT]
    assert sorted(m["seq"] for m in found if m["why"] == "context") == [HIT - 1, HIT + 1]  # the neighbours
    explained(found)
    only = service.search_messages("sandboxing", hits_only=True).matches
    assert [(m.seq, m.why, m.context_of) for m in only] == [(HIT, "terms", None)]


@pytest.mark.anyio
async def test_the_mcp_tool_labels_and_takes_hits_only(service, session_id) -> None:
    async with Client(build_server(lambda: service)) as client:
        every = (await client.call_tool("search_messages", {"query": "sandboxing"})).structured_content["matches"]
        only = (await client.call_tool("search_messages", {"query": "sandboxing", "hits_only": True}))
    explained(every)
    assert len(every) == 3 and [m["seq"] for m in only.structured_content["matches"]] == [HIT]


def test_the_cli_labels_and_takes_hits_only(service, session_id, settings, capsys) -> None:
    assert main(["--dsn", settings.dsn, "search", "sandboxing"]) == 0
    out = capsys.readouterr().out
    assert out.count(f"[context of #{HIT}]") == 2
    assert main(["--dsn", settings.dsn, "search", "sandboxing", "--hits-only", "--json"]) == 0
    assert [m["seq"] for m in json.loads(capsys.readouterr().out)["matches"]] == [HIT]


def test_recall_and_the_review_page_show_the_label(service, session_id) -> None:
    items = service.recall("sandboxing", project_id="agents").items
    context = [i for i in items if i.why == "context"]
    assert context and all(i.context_of == HIT and f"(context of #{HIT})" in i.text for i in context)
    assert service.recall("sandboxing", project_id="agents").text.count(f"(context of #{HIT})") == len(context)
    page = html("sessions.html", nav="sessions", **pages.sessions_page(service, {"q": "sandboxing"})).body.decode()
    assert page.count("context of <a href=") == 2 and f"#seq-{HIT}\">#{HIT}</a>" in page
    hits_only = pages.sessions_page(service, {"q": "sandboxing", "hits_only": "1"})
    assert [m["seq"] for m in hits_only["search"]["matches"]] == [HIT]
