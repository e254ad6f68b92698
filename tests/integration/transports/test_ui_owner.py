"""One-person mode of the review pages (mcp_memory/ui/owner.py): a one-time link signs the local owner
in without a token, once; everything else still needs a sign-in; it is never offered off loopback
or on a central database. The pages run on a real uvicorn over a real test database; the last test
runs `mcp-memory ui` itself on an embedded default of its own."""

from __future__ import annotations

import argparse
import html
import os
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import embedded_home
from http_support import Uvicorn
from test_ui import Reply, _NoRedirect
from test_ui_cli import _free_port
from ui_support import Browser, needs_chromium

from mcp_memory.commands.ui import one_person
from mcp_memory.config import Settings, load_settings
from mcp_memory.core.service import Service
from mcp_memory.errors import Invalid
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.http.server import prepare
from mcp_memory.store import embedded
from mcp_memory.ui import owner
from mcp_memory.ui.owner import OwnerSignIn
from mcp_memory.wiring import build


def get(url: str, cookie: str | None = None, headers: dict[str, str] | None = None) -> Reply:
    request = urllib.request.Request(url, headers=headers or {})
    if cookie:
        request.add_header("Cookie", cookie)
    try:
        with urllib.request.build_opener(_NoRedirect).open(request, timeout=30) as reply:
            return Reply(reply.status, reply.read().decode(), {k.lower(): v for k, v in reply.headers.items()})
    except urllib.error.HTTPError as error:
        with error:  # an error answer holds its connection until closed
            return Reply(error.code, error.read().decode(), {k.lower(): v for k, v in error.headers.items()})


def session_cookie(reply: Reply) -> str:
    """`mm_ui_owner=<value>` from a Set-Cookie header, checked for its flags."""
    header = reply.headers["set-cookie"]
    flags = header.lower()
    assert "httponly" in flags and "samesite=strict" in flags and "path=/ui" in flags, header
    match = re.match(rf"{owner.COOKIE}=([^;]+);", header)
    assert match, header
    return f"{owner.COOKIE}={match.group(1)}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def one_person_server(settings: Settings, service: Service) -> Iterator[tuple[Uvicorn, OwnerSignIn, Clock, str]]:
    sid = service.create_session("home", {"title": "Alone at home", "agent_source": "claude-code"}).session_id
    service.append_messages(sid, [{"role": "user", "content": "only me here"}])
    clock = Clock()
    owners = OwnerSignIn(clock=clock)
    registry = TokenRegistry(settings, settings.dsn or "", lambda s: build(s, application_name="mcp-memory ui-test"),
                             recheck_seconds=0)
    with Uvicorn(create_app(registry, HttpOptions(rate_limit=0), owners)) as server:
        yield server, owners, clock, sid


def test_the_link_signs_in_once(one_person_server) -> None:
    server, owners, _, sid = one_person_server
    link = owner.link_url(server.url, owners.new_link())
    first = get(link)
    assert first.status == 303 and first.headers["location"] == "/ui/"
    cookie = session_cookie(first)
    listing = get(f"{server.url}/ui/", cookie)
    assert listing.status == 200 and "Alone at home" in listing.text
    assert get(f"{server.url}/ui/sessions/{sid}", cookie).status == 200
    again = get(link)  # the same link, a second time
    assert again.status == 403 and "already used or has expired" in again.text and "set-cookie" not in again.headers
    assert get(f"{server.url}/ui/health", cookie).status == 200  # the first browser stays signed in


@needs_chromium
def test_a_browser_opening_the_link_lands_signed_in(one_person_server, tmp_path: Path) -> None:
    """The cookie is set on the link's redirect and sent on the very next page (SameSite=Strict)."""
    server, owners, _, _ = one_person_server
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.open(owner.link_url(server.url, owners.new_link()))
        assert browser.evaluate("location.pathname") == "/ui/"
        assert "Alone at home" in browser.dom() and browser.evaluate("document.cookie") == ""
        browser.open(f"{server.url}/ui/health")
        assert browser.evaluate("location.pathname") == "/ui/health"
    finally:
        browser.close()


def test_other_paths_still_need_a_sign_in(one_person_server) -> None:
    server, owners, clock, _ = one_person_server
    code = owners.new_link()
    assert get(f"{server.url}/ui/").status == 303  # no cookie
    forged = f"{owner.COOKIE}={'A' * owner.CODE_CHARS}"
    assert get(f"{server.url}/ui/decisions", forged).status == 303
    assert get(f"{server.url}/ui/{owner.ROUTE.lstrip('/')}?code={code}"[:-1] + "x").status == 403  # a wrong code
    assert get(f"{server.url}/ui{owner.ROUTE}").status == 403  # no code at all
    assert get(f"{server.url}/v1/sessions?project_id=home").status == 401  # REST keeps its bearer tokens
    clock.now += owner.LINK_SECONDS + 1
    late = get(owner.link_url(server.url, code))  # the real code, after its time
    assert late.status == 403 and "set-cookie" not in late.headers
    fresh = owner.link_url(server.url, owners.new_link())
    cookie = session_cookie(get(fresh))
    assert get(f"{server.url}/ui/", cookie).status == 200
    signed_out = urllib.request.Request(f"{server.url}/ui/sign-out", data=b"", method="POST",
                                        headers={"Cookie": cookie, "Origin": server.url})
    with pytest.raises(urllib.error.HTTPError) as redirect:  # 303 to the sign-in page, not followed
        urllib.request.build_opener(_NoRedirect).open(signed_out, timeout=30)
    with redirect.value:
        assert redirect.value.code == 303
    assert get(f"{server.url}/ui/", cookie).status == 303  # the cookie no longer signs in


def test_a_newer_link_replaces_an_unused_one() -> None:
    owners = OwnerSignIn()
    old, new = owners.new_link(), owners.new_link()
    assert owners.redeem(old) is None and owners.redeem(new) is not None and owners.redeem(new) is None


def _args(host: str, token_only: bool = False) -> argparse.Namespace:
    return argparse.Namespace(host=host, token_only=token_only)


def test_not_offered_off_loopback_or_on_a_central_database(settings: Settings, profile: dict[str, str]) -> None:
    local = load_settings(environ=profile)  # no DSN anywhere: the embedded default
    assert local.embedded and one_person(local, _args("127.0.0.1")) and one_person(local, _args("::1"))
    assert not one_person(local, _args("0.0.0.0")) and not one_person(local, _args("192.168.1.20"))
    assert not one_person(local, _args("127.0.0.1", token_only=True))
    assert not settings.embedded and not one_person(settings, _args("127.0.0.1"))  # a DSN: tokens only
    with pytest.raises(Invalid, match="loopback only"):
        prepare(settings, "0.0.0.0", owners=OwnerSignIn())


def test_a_token_server_has_no_link_route(settings: Settings, service: Service) -> None:
    registry = TokenRegistry(settings, settings.dsn or "", lambda s: build(s, application_name="mcp-memory ui-test"),
                             recheck_seconds=0)
    with Uvicorn(create_app(registry, HttpOptions(rate_limit=0))) as server:
        code = OwnerSignIn().new_link()
        assert get(owner.link_url(server.url, code)).status == 404
        assert "one-time link" not in get(f"{server.url}/ui/sign-in").text


def _lines(stream, found: queue.Queue[str]) -> None:
    for line in stream:
        found.put(line)


def test_ui_command_on_the_embedded_default_prints_a_one_time_link(profile: dict[str, str]) -> None:
    port = _free_port()
    with embedded_home() as home:
        # a "browser" that writes down the command line it was started with
        record = Path(home) / "browser-argv"
        browser = Path(home) / "browser.sh"
        browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {record}.tmp && mv {record}.tmp {record}\n')
        browser.chmod(0o700)
        env = {**profile, "MCP_MEMORY_HOME": str(home), "BROWSER": str(browser)}
        argv = [sys.executable, "-m", "mcp_memory", "ui", "--port", str(port)]
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
        reader.start()
        try:
            link = None
            deadline = time.monotonic() + 120
            while link is None:
                assert time.monotonic() < deadline and proc.poll() is None, "mcp-memory ui printed no link"
                try:
                    line = lines.get(timeout=1)
                except queue.Empty:
                    continue
                match = re.search(r"works once.*: (http://\S+)", line)
                link = match.group(1) if match else None
            assert link.startswith(f"http://127.0.0.1:{port}/ui{owner.ROUTE}?code=")
            # the browser's command line (readable by every local account) names a private file, never the link
            deadline = time.monotonic() + 30
            while not record.exists():
                assert time.monotonic() < deadline, "the browser was not started"
                time.sleep(0.1)
            opened = record.read_text().strip()
            assert "code=" not in opened and opened.startswith("file:///")
            link_file = Path(urllib.parse.unquote(urllib.parse.urlsplit(opened).path))
            assert stat.S_IMODE(link_file.stat().st_mode) == 0o600
            assert stat.S_IMODE(link_file.parent.stat().st_mode) == 0o700
            assert html.escape(link, quote=True) in link_file.read_text()
            first = get(link)
            assert first.status == 303
            page = get(f"http://127.0.0.1:{port}/ui/", session_cookie(first))
            assert page.status == 200 and "Sessions" in page.text
            assert get(link).status == 403
            assert get(f"http://127.0.0.1:{port}/ui/").status == 303
        finally:
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            reader.join(timeout=10)  # it reads to the end of the pipe, then the pipe is closed here
            if proc.stderr is not None:
                proc.stderr.close()
            embedded.stop(Path(home) / "mcp-memory" / "pg")
        assert not link_file.parent.exists()  # removed when mcp-memory ui ended
