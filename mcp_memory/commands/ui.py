"""`mcp-memory ui`: open the review pages (/ui) in the browser, serving them on loopback first
unless a `serve-http` of this profile already answers on that port.

On the embedded default and a loopback address, the pages need no token (one-person mode,
mcp_memory/ui/owner.py): the server signs its own user in through a one-time link, printed on stderr
and opened in the browser through a file only this user can read (a browser's command line is public:
any local account reads /proc/*/cmdline, and would sign in first). A central database (a DSN) or
another address keeps the token sign-in."""

from __future__ import annotations

import argparse
import atexit
import html
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Settings

WAIT_SECONDS = 30.0
LINK_MINUTES = 5  # mcp_memory/ui/owner.py LINK_SECONDS (not imported here: the CLI starts without starlette)


def add_parsers(sub: Any) -> None:
    ui = sub.add_parser(
        "ui", help="open the read-only review pages in the browser (serves them on loopback if needed)",
        description="Example: mcp-memory ui --port 8765  (on the embedded default and loopback, a one-time "
                    "link signs you in; otherwise sign in with a token from `mcp-memory token create`)")
    ui.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1; another one "
                    "needs at least one token)")
    ui.add_argument("--port", type=int, default=8765)
    ui.add_argument("--no-browser", action="store_true", help="only serve and print the address (and the "
                    "one-time sign-in link)")
    ui.add_argument("--token-only", action="store_true", help="no one-time link: sign in with a token even on "
                    "the embedded default")


def handlers() -> dict[str, Callable[..., int]]:
    return {"ui": run}


def answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=1) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _open_when_up(base: str, open_browser: bool, link: str | None = None) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if answers(base):
            print(f"review pages: {base}/ui/", file=sys.stderr)
            if link is not None:
                print(f"sign in (this link works once, within {LINK_MINUTES} minutes): {link}",
                      file=sys.stderr)
            if open_browser:
                webbrowser.open(link_page(link).as_uri() if link is not None else f"{base}/ui/")
            return
        time.sleep(0.2)


def link_page(link: str) -> Path:
    """A page that sends the browser on to `link`, in a new directory of mode 0700 and a file of mode
    0600 (removed when this process ends): the browser's command line names the file, never the link."""
    folder = Path(tempfile.mkdtemp(prefix="mcp-memory-ui-"))  # mode 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    page = folder / "sign-in.html"
    fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    quoted = html.escape(link, quote=True)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={quoted}">'
                  f'<title>mcp-memory sign-in</title><p><a href="{quoted}">Sign in to the review pages</a></p>\n')
    return page


def one_person(settings: Settings, args: argparse.Namespace) -> bool:
    """The token-free sign-in: only for the embedded default, only on loopback, unless --token-only."""
    from ..http.server import is_loopback

    return settings.embedded and is_loopback(args.host) and not args.token_only


def run(settings: Settings, args: argparse.Namespace) -> int:
    from ..http.server import is_loopback, serve
    from ..ui.owner import OwnerSignIn, link_url

    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    base = f"http://{shown}:{args.port}" if ":" not in shown else f"http://[{shown}]:{args.port}"
    if answers(base):
        print("these review pages are already served here: use the sign-in link the `mcp-memory ui` serving them "
              "printed (or stop it and run this again), or a token", file=sys.stderr)
        _open_when_up(base, not args.no_browser)
        return 0
    owners, link = None, None
    if one_person(settings, args):
        owners = OwnerSignIn()
        link = link_url(base, owners.new_link())
    else:
        print("sign in with a token: mcp-memory token create --name ui --project P --read-only", file=sys.stderr)
    threading.Thread(target=_open_when_up, args=(base, not args.no_browser, link), daemon=True).start()
    # the review pages on this machine may run as the local owner; on a network, as a gateway login
    serve(settings, host=args.host, port=args.port, as_owner=is_loopback(args.host), owners=owners)
    return 0
