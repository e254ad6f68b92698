"""`mcp-memory embed`: compute the vectors of semantic search, once or as a daemon (polling)."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from ..config import Settings
from .output import print_json, service

log = logging.getLogger(__name__)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    embed = sub.add_parser(
        "embed", help="compute embeddings for semantic/hybrid search ([embeddings] in the config file)",
        description="Embed messages past the watermark with the configured provider. Examples:\n"
        "  mcp-memory embed --once --project shop\n"
        "  mcp-memory embed --daemon --interval 30\n"
        "  mcp-memory embed --status --json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    run = embed.add_mutually_exclusive_group(required=True)
    run.add_argument("--once", action="store_true", help="embed what is pending, then exit")
    run.add_argument("--daemon", action="store_true", help="poll for new messages until SIGTERM/SIGINT")
    run.add_argument("--status", action="store_true", help="vectors stored and messages pending")
    embed.add_argument("--model", help="override [embeddings] model")
    embed.add_argument("--project", help="only this project")
    embed.add_argument("--interval", type=float, default=10.0, help="daemon: seconds between polls (default 10)")
    embed.add_argument("--json", action="store_true")


def handlers() -> dict[str, Callable[..., int]]:
    return {"embed": run}


def run(settings: Settings, args: argparse.Namespace) -> int:
    if args.model:
        settings = replace(settings, embeddings={**settings.embeddings, "model": args.model})
    with service(settings) as svc:
        if args.status:
            return _status(svc, args)
        stop = threading.Event()
        with _stop_on_signals(stop):
            total = svc.embed_pending(project_id=args.project, stop=stop)
            print(f"embedded {total} message(s)", flush=True)
            while args.daemon and not stop.wait(args.interval):
                count = svc.embed_pending(project_id=args.project, stop=stop)
                if count:
                    log.info("embedded %d message(s)", count)
                    total += count
    if args.daemon:
        print(f"stopped; embedded {total} message(s) in all")
    return 0


def _status(svc, args: argparse.Namespace) -> int:
    state = svc.embedding_status(args.project)
    reason = svc.semantic_unavailable(args.project)
    if args.json:
        print_json({**state.__dict__, "semantic_search": reason is None, "reason": reason})
        return 0
    print(f"model {state.model or '(none configured)'} dim {state.dim or '-'}: {state.vectors} vector(s), "
          f"{state.pending} message(s) pending")
    print("semantic search: " + ("on" if reason is None else f"off — {reason}"))
    return 0


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT end the loop after the current session's batch (nothing half-stored)."""
    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
