"""The review pages at /ui in a real headless Chromium: each page renders sessions imported from the
recorded fixtures (a DeepSeek harness log, an OpenAI chat, and a relay of it continued in Codex);
hostile message content runs no script; a token for one project sees nothing of another."""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from http_support import Uvicorn
from security_support import token_service
from ui_support import Browser, distinct_colours, needs_chromium

from mcp_memory.agents import adapter_for
from mcp_memory.agents.base import NeutralSession
from mcp_memory.archive.daemon import Archiver
from mcp_memory.archive.options import ArchiverOptions
from mcp_memory.config import Settings
from mcp_memory.core.imports import record_export, store_sessions
from mcp_memory.core.service import Service
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.schema import MessageIn
from mcp_memory.store import migrate
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
DEEPSEEK = FIXTURES / "deepseek" / "e128dda9-ed11-4868-8266-0ef90d03c3d6" / "session.jsonl.zstd"
OPENAI = FIXTURES / "openai" / "chat-parts-parallel-tools.json"
CLAUDE = next((FIXTURES / "real" / "claude-code").rglob("7f067304-*.jsonl"))  # recorded with Claude Code 2.1.328
CODEX = next((FIXTURES / "real" / "codex").rglob("rollout-*.jsonl"))  # recorded with Codex CLI 0.169.0
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
HOSTILE = [
    "<script>document.title='PWNED'</script> plain words after the script",
    "<img src=x onerror=\"document.body.insertAdjacentHTML('beforeend','<b id=pwned>PWNED</b>')\">",
    ("[click me](javascript:document.title='PWNED') and [again](JaVaScRiPt:alert(1)) "
     "and ![pic](javascript:alert(1)) <a href=\"javascript:alert(1)\">raw</a>"),
    "**bold** and a [safe link](https://example.org/docs)",
]


Server = Uvicorn


@dataclass
class Reply:
    status: int
    text: str
    headers: dict[str, str]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None


def fetch(url: str, *, cookie: str | None = None, data: dict[str, str] | None = None,
          origin: str | None = None) -> Reply:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, method="POST" if data is not None else "GET")
    if cookie:
        request.add_header("Cookie", cookie)
    if origin:
        request.add_header("Origin", origin)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(request, timeout=30) as reply:
            return Reply(reply.status, reply.read().decode(), {k.lower(): v for k, v in reply.headers.items()})
    except urllib.error.HTTPError as error:
        with error:  # an error answer holds its connection until closed
            return Reply(error.code, error.read().decode(), {k.lower(): v for k, v in error.headers.items()})


@dataclass
class Seeded:
    deepseek: str
    relay: str
    chat: str
    hostile: str
    other: str
    forged: str



def session_for(url: str, token: str) -> str:
    """The Cookie header of a browser signed in with `token` (the cookie holds a session id, never the token)."""
    reply = fetch(f"{url}/ui/sign-in", data={"token": token}, origin=url)
    assert reply.status == 303, reply
    name, _, rest = reply.headers["set-cookie"].partition("=")
    assert name.startswith("mm_ui_session_") and token not in reply.headers["set-cookie"]
    return f"{name}={rest.split(';')[0]}"

def _import(service: Service, agent: str, path: Path, project: str) -> str:
    (result,) = store_sessions(service, adapter_for(agent).read([path]), project_id=project)
    assert result.error is None, result.error
    return result.session_id


def _relay_to_codex(service: Service, source: str) -> str:
    """The DeepSeek session exported to Codex (its own ids) and continued there for two turns."""
    carried = [MessageIn.model_validate({**m.model_dump(exclude={"session_id", "seq", "created_at", "inherited_from"},
                                                        exclude_none=True), "append_id": f"cx-{m.seq}"})
               for m in service.read_session(source, view="full").messages]
    native = "0199a5c2-3f10-7b21-9c4e-5d2f8a7b6c01"
    written = NeutralSession(agent="codex", native_id=native, messages=carried, meta={"title": "Continue in Codex"})
    assert record_export(service, source, [written], native) is not None
    new = [MessageIn(append_id="cx-new-1", role="user", content="Now list the files **in Codex**."),
           MessageIn(append_id="cx-new-2", role="assistant", content="Listed: `a.txt`, `b.txt`.")]
    (result,) = store_sessions(service, [NeutralSession(agent="codex", native_id=native, messages=carried + new,
                                                        meta={"title": "Continue in Codex"})], project_id=None)
    assert result.relayed_from is not None, result
    return result.session_id


def _decisions(service: Service, session_id: str) -> None:
    old = service.record_decision(session_id, "architecture", "Add a message queue for orders", status="accepted",
                                  rationale="expected growth", message_seq=1)
    service.record_decision(session_id, "architecture", "No message queue for the order module",
                            rationale="peak QPS is only 200", supersedes=old.decision_id, message_seq=5,
                            alternatives=[{"option": "Kafka", "why_not": "too heavy for 200 QPS"}])
    service.record_decision(session_id, "tooling", "Use Redis as a cache", status="rejected",
                            rationale="no read hot spot", alternatives=[{"option": "Redis", "why_not": "not needed"}])


def _archive_once(settings: Settings, repo: Path) -> None:
    db = Database(settings, application_name="mcp-memory archiver ui-test")
    try:
        summary = Archiver(db, ArchiverOptions.resolve(settings, repo=str(repo))).run(once=True)
    finally:
        db.close()
    assert summary.done == 1 and summary.failed == 1, summary


def _forged(service: Service, settings: Settings) -> str:
    """A session whose stored row no longer hashes to its payload: its export job fails."""
    sid = service.create_session("shop", {"title": "Forged turn", "agent_source": "gemini"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
    with psycopg.connect(settings.dsn) as conn:  # the owner changes a payload behind the write functions
        conn.execute("UPDATE messages SET payload = jsonb_set(payload, '{content}', '\"forged\"') "
                     "WHERE session_id = %s AND seq = 2", (sid,))
    service.create_snapshot(sid, "after the forgery")
    return sid


def seed(service: Service, settings: Settings, repo: Path) -> Seeded:
    deepseek = _import(service, "deepseek-harness", DEEPSEEK, "shop")
    service.create_snapshot(deepseek, "after the bash turn")
    forged = _forged(service, settings)
    _archive_once(settings, repo)  # snapshot 1 is archived (tagged), 2 failed; the later ones stay pending
    relay = _relay_to_codex(service, deepseek)
    back = service.create_snapshot(relay, "hand back")
    service.load_snapshot(back.snapshot_id, {"title": "Back in Claude Code", "agent_source": "claude-code"})
    chat = _import(service, "openai", OPENAI, "shop")
    hostile = service.create_session("shop", {"title": "Hostile content", "agent_source": "claude-code"}).session_id
    service.append_messages(hostile, [{"role": "user" if i % 2 == 0 else "assistant", "content": text}
                                      for i, text in enumerate([*HOSTILE, f"my key is {SECRET}"])])
    _decisions(service, deepseek)
    other = service.create_session("bank", {"title": "Project B ledger secrets", "agent_source": "codex"}).session_id
    service.append_messages(other, [{"role": "user", "content": "zanzibarword ledger for bank"}])
    service.record_decision(other, "security", "Bank keeps ledgers encrypted", rationale="zanzibarword")
    _import(service, "claude-code", CLAUDE, "shop")
    _import(service, "codex", CODEX, "shop")
    service.reindex_search()
    return Seeded(deepseek, relay, chat, hostile, other, forged)


@pytest.fixture
def ui(settings: Settings, owner_db: Database, service: Service, make_token,
       tmp_path: Path) -> Iterator[tuple[Server, str, Seeded]]:
    seeded = seed(service, settings, tmp_path / "archive")
    token = make_token("ui", ["shop"], read_only=True).token
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory ui-test"),
                             recheck_seconds=0)
    with Server(create_app(registry, HttpOptions(rate_limit=0))) as server:
        yield server, token, seeded


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    chrome = Browser(tmp_path / "chromium-profile")
    try:
        yield chrome
    finally:
        chrome.close()


def sign_in(browser: Browser, base: str, token: str) -> None:
    browser.open(f"{base}/ui/")
    assert "/ui/sign-in" in browser.evaluate("location.href")
    browser.evaluate(f"document.getElementById('token').value = {token!r}; "
                     "document.querySelector('.sign-in form').submit(); true")
    deadline = time.monotonic() + 20
    while "/sign-in" in browser.evaluate("location.href") or browser.evaluate("document.readyState") != "complete":
        assert time.monotonic() < deadline, browser.dom()
        time.sleep(0.05)


def shot(browser: Browser, tmp_path: Path, name: str, minimum: int = 40) -> Path:
    path = browser.screenshot(tmp_path / f"{name}.png")
    assert distinct_colours(path) > minimum, f"{path} looks blank"
    return path


@needs_chromium
def test_every_page_renders_imported_sessions(ui, browser: Browser, tmp_path: Path) -> None:
    server, token, s = ui
    sign_in(browser, server.url, token)
    assert browser.evaluate("document.cookie") == ""  # HttpOnly: no script can read the token
    dom = browser.dom()
    for text in ("Use the bash tool to", "Continue in Codex", "Hostile content", "relayed from", "deepseek-harness"):
        assert text in dom, text
    for agent in ("claude-code", "codex"):  # sessions the real Claude Code and Codex CLIs wrote
        browser.open(f"{server.url}/ui/?agent={agent}")
        assert "Our order module peaks at 200 QPS" in browser.dom(), agent
    browser.open(f"{server.url}/ui/")
    dom = browser.dom()
    assert "Project B" not in dom
    shot(browser, tmp_path, "sessions")

    browser.open(f"{server.url}/ui/?q=TERMINAL_OK")
    dom = browser.dom()
    assert "mode: fts" in dom and f"/ui/sessions/{s.deepseek}?after_seq=0#seq-" in dom
    shot(browser, tmp_path, "search")

    browser.open(f"{server.url}/ui/sessions/{s.deepseek}#seq-3")
    dom = browser.dom()
    assert "echo TERMINAL_OK" in dom and "tool call" in dom and "thinking" in dom
    assert "snapshot 1" in dom and "archived: tag snapshot-1, commit " in dom and 'id="seq-3"' in dom
    assert browser.evaluate("document.querySelectorAll('details:not([open])').length") >= 3  # collapsed
    assert "No message queue for the order module" in dom  # the decision at its turn
    shot(browser, tmp_path, "session")

    browser.open(f"{server.url}/ui/sessions/{s.forged}")
    assert "archive failed:" in browser.dom() and "payload_hash" in browser.dom()

    browser.open(f"{server.url}/ui/sessions/{s.chat}")
    text = browser.evaluate("document.querySelector('ol.timeline').innerText")
    assert "What is in a.txt and b.txt?" in text and "[image_url]" in text and "Read both files" not in text
    assert browser.evaluate("document.querySelectorAll('details.tool-call').length") == 2

    browser.open(f"{server.url}/ui/sessions/{s.relay}")
    assert browser.evaluate("document.querySelectorAll('li.msg.inherited').length") == 5
    assert browser.evaluate("document.querySelectorAll('li.msg:not(.inherited)').length") == 2
    assert f"inherited from {s.deepseek}" in browser.dom()
    shot(browser, tmp_path, "relay")

    browser.open(f"{server.url}/ui/sessions/{s.relay}/lineage")
    svg = browser.evaluate("document.querySelector('svg.lineage').outerHTML")
    assert "codex" in svg and "deepseek-harness" in svg and "relay at seq 5" in svg
    assert "Back in Claude Code" in svg and "fork at seq 7" in svg, svg
    shot(browser, tmp_path, "lineage")

    browser.open(f"{server.url}/ui/decisions")
    columns = browser.evaluate("[...document.querySelectorAll('.column h2')].map(h => h.textContent.trim())")
    assert columns == ["proposed 0", "accepted 1", "rejected 1", "superseded 1"]
    dom = browser.dom()
    assert "no read hot spot" in dom and "too heavy for 200 QPS" in dom and "superseded by" in dom
    assert "Bank keeps" not in dom
    shot(browser, tmp_path, "decisions")
    browser.open(f"{server.url}/ui/decisions?status=rejected&q=Redis")
    assert browser.evaluate("document.querySelectorAll('.card').length") == 1

    browser.open(f"{server.url}/ui/health")
    tiles = browser.evaluate("[...document.querySelectorAll('.tile')].map(t => t.textContent)")
    assert "Archive queue" in tiles[0] and "pending: 1" in tiles[0] and "done: 1" in tiles[0]
    assert "failed: 1" in tiles[0]
    failed = browser.evaluate("[...document.querySelectorAll('table.sessions tbody tr')].map(r => r.innerText)")
    assert len(failed) == 1 and s.forged in failed[0] and "payload_hash" in failed[0]
    assert str(migrate.latest_version()) in tiles[3] and "up to date" in tiles[3]
    shot(browser, tmp_path, "health")


@needs_chromium
def test_hostile_content_runs_no_script(ui, browser: Browser, tmp_path: Path) -> None:
    server, token, s = ui
    sign_in(browser, server.url, token)
    browser.open(f"{server.url}/ui/sessions/{s.hostile}")
    time.sleep(0.3)  # an injected handler (img onerror) would have fired by now
    assert browser.evaluate("document.title") == "Hostile content · mcp-memory"
    assert browser.evaluate("document.getElementById('pwned')") is None
    assert browser.evaluate("document.scripts.length") == 0
    assert browser.evaluate("document.querySelectorAll('main img, main [onerror]').length") == 0
    hrefs = browser.evaluate("[...document.querySelectorAll('main a')].map(a => a.getAttribute('href'))")
    assert "https://example.org/docs" in hrefs and not any(h.lower().startswith("javascript") for h in hrefs)
    text = browser.evaluate("document.querySelector('ol.timeline').innerText")
    assert "<script>document.title='PWNED'</script>" in text  # shown as text, not run
    assert browser.evaluate("document.querySelector('mark.redacted').textContent").startswith("[REDACTED:")
    assert SECRET not in browser.dom()
    shot(browser, tmp_path, "hostile")


def test_a_token_for_one_project_sees_nothing_of_another(ui) -> None:
    server, token, s = ui
    session = session_for(server.url, token)
    base = server.url
    assert fetch(f"{base}/ui/").status == 303  # no cookie: to the sign-in page
    listing = fetch(f"{base}/ui/", cookie=session)
    assert listing.status == 200 and "Use the bash tool to" in listing.text and "Project B" not in listing.text
    assert "bank" not in listing.text
    for path in (f"/ui/sessions/{s.other}", f"/ui/sessions/{s.other}/lineage"):
        reply = fetch(base + path, cookie=session)
        assert reply.status == 404 and "ledger" not in reply.text, path
    found = fetch(f"{base}/ui/?q=zanzibarword", cookie=session)
    assert "0 matches" in found.text and "ledger" not in found.text
    board = fetch(f"{base}/ui/decisions?q=zanzibarword", cookie=session)
    assert "Bank keeps" not in board.text and "0 decisions" in board.text
    assert "Bank keeps" not in fetch(f"{base}/ui/decisions?project=bank", cookie=session).text


def test_session_filters(ui) -> None:
    server, token, s = ui
    session = session_for(server.url, token)
    base = f"{server.url}/ui/"
    only_codex = fetch(f"{base}?agent=codex", cookie=session).text
    assert s.relay in only_codex and s.deepseek not in only_codex.replace(f"/ui/sessions/{s.relay}", "")
    # the DeepSeek log's last turn is dated 2026-07-06 (its own time, kept by the import)
    day = fetch(f"{base}?since=2026-07-06&until=2026-07-07", cookie=session).text
    assert f"/ui/sessions/{s.deepseek}" in day and f"/ui/sessions/{s.hostile}" not in day
    later = fetch(f"{base}?since=2026-07-07", cookie=session).text
    assert f"/ui/sessions/{s.deepseek}\"" not in later and f"/ui/sessions/{s.hostile}" in later
    assert fetch(f"{base}?since=yesterday-ish", cookie=session).status == 400
    assert fetch(f"{server.url}/ui", cookie=session).status in (301, 302, 303, 307, 308)


def test_sign_in_checks_origin_token_and_sets_a_strict_cookie(ui) -> None:
    server, token, _ = ui
    session = session_for(server.url, token)
    url = f"{server.url}/ui/sign-in"
    assert fetch(url, data={"token": token}).status == 403  # no Origin
    assert fetch(url, data={"token": token}, origin="http://evil.example").status == 403
    bad = fetch(url, data={"token": "mmt.nobody." + "x" * 43}, origin=server.url)
    assert bad.status == 401 and "set-cookie" not in bad.headers
    good = fetch(url, data={"token": token, "next": "//evil.example/"}, origin=server.url)
    assert good.status == 303 and good.headers["location"] == "/ui/"
    cookie = good.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie
    page = fetch(f"{server.url}/ui/health", cookie=session)
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "'unsafe-inline'" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert fetch(f"{server.url}/ui/sign-out", data={}, origin="http://evil.example").status == 403
    assert fetch(f"{server.url}/ui/health", cookie=f"{session.split('=')[0]}={'A' * 43}").status == 303
    assert fetch(f"{server.url}/ui/health", cookie=f"{session.split('=')[0]}={token}").status == 303  # no token
    assert session.split("=")[0] == f"mm_ui_session_{server.port}"
    other_host = urllib.request.Request(f"{server.url}/ui/health", headers={"Cookie": session, "Host": "localhost"})
    try:
        with urllib.request.build_opener(_NoRedirect).open(other_host, timeout=30) as reply:
            status = reply.status
    except urllib.error.HTTPError as error:
        status = error.code
        error.close()
    assert status == 303  # issued for 127.0.0.1:<port>, not another Host
    assert fetch(f"{server.url}/ui/sign-out", data={}, origin=server.url, cookie=session).status == 303
    assert fetch(f"{server.url}/ui/health", cookie=session).status == 303  # signed out: the session is gone


def test_a_long_session_is_paged_and_deep_links_land_on_their_page(ui, service: Service) -> None:
    server, token, _ = ui
    session = session_for(server.url, token)
    sid = service.create_session("shop", {"title": "Long"}).session_id
    service.append_messages(sid, [{"role": "user", "content": f"line {i} marker{i}x"} for i in range(1, 251)])
    first = fetch(f"{server.url}/ui/sessions/{sid}", cookie=session).text
    assert 'id="seq-1"' in first and 'id="seq-100"' in first and 'id="seq-101"' not in first
    assert "?after_seq=100" in first and "?after_seq=200" in first  # newer, last
    service.reindex_search()
    found = fetch(f"{server.url}/ui/?q=marker150x", cookie=session).text
    link = f"/ui/sessions/{sid}?after_seq=100#seq-150"
    assert link in found
    page = fetch(server.url + link.split("#")[0], cookie=session).text
    assert 'id="seq-150"' in page and 'id="seq-101"' in page and 'id="seq-201"' not in page
    assert fetch(f"{server.url}/ui/sessions/{sid}?after_seq=-1", cookie=session).status == 400
    assert fetch(f"{server.url}/ui/decisions?status=maybe", cookie=session).status == 400


def test_a_token_writer_shows_as_its_token_not_a_claimed_host(ui, settings: Settings, make_token) -> None:
    """A host writing with a token is named by that token (one per host); a meta.host it claims is
    not believed. The database owner's own writes are named by their recorded machine (test_ui_pages)."""
    server, token, _ = ui
    session = session_for(server.url, token)
    writer = make_token("laptop", ["shop"])
    host = token_service(settings, writer)
    try:
        sid = host.create_session("shop", {"title": "From the laptop", "host": "forged-name"}).session_id
    finally:
        host.db.close()
    listing = fetch(f"{server.url}/ui/?project=shop", cookie=session).text
    row = listing.split(f'/ui/sessions/{sid}"')[1].split("</tr>")[0]
    assert f"<td>{writer.role}</td>" in row and "forged-name" not in listing
    assert sid in fetch(f"{server.url}/ui/?host={writer.role}", cookie=session).text
