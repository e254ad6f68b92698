"""Small commands: schema, snapshot, fork, sessions, show."""

from __future__ import annotations

import argparse
import json

from ..config import Settings
from ..core.conversation import text_of
from ..results import Turn
from ..schema import Message, json_schema
from .cliargs import parse
from .output import print_json, service


def schema(settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
    return 0


def snapshot(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        snap = svc.create_snapshot(**parse("create_snapshot", args))
    if args.json:
        print_json(snap)
    else:
        print(f"snapshot {snap.snapshot_id}: {snap.session_id} up to seq {snap.up_to_seq}")
    return 0


def fork(settings: Settings, args: argparse.Namespace) -> int:
    meta = {k: v for k, v in (("agent_source", args.agent), ("title", args.title)) if v}
    with service(settings) as svc:
        forked = svc.load_snapshot(**parse("load_snapshot", args, meta=meta))
    if args.json:
        print_json(forked)
    else:
        print(f"forked snapshot {forked.parent_snapshot_id} into new session {forked.session_id}")
    return 0


def sessions(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        page = svc.list_sessions(**parse("list_sessions", args))
    if args.json:
        print_json(page)
        return 0
    for s in page.sessions:
        lineage = f" (fork of {s.parent_session_id} @ {s.fork_seq})" if s.parent_session_id else ""
        print(f"{s.session_id}  {s.project_id:<20} {s.agent_source or '-':<12} {s.last_seq:>6} msgs  "
              f"{s.created_at}  {s.title or ''}{lineage}")
    if not page.sessions:
        print("no sessions")
    return 0


def show(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        page = svc.read_session(**parse("read_session", args))
    if args.json:
        print_json(page)
        return 0
    fork_seq = page.session.fork_seq if page.session else None
    for m in page.messages:
        print(render_message(m, fork_seq))
    if page.has_more:
        print(f"… more: mcp-memory show {args.session_id} --after-seq {page.next_after_seq}")
    return 0


def render_message(m: Message | Turn, fork_seq: int | None = None) -> str:
    """One message as `show` prints it, from either view of read_session (in the conversation view,
    the messages of a fork up to `fork_seq` are inherited)."""
    if isinstance(m, Turn):
        text, thinking = m.content or "", m.thinking
        inherited = " (inherited)" if fork_seq is not None and m.seq <= fork_seq else ""
        inherited += f" ({m.agent})" if m.agent else ""
        calls = [(c.name, c.arguments, c.id) for c in m.tool_calls or []]
    else:
        text = text_of([p.model_dump() for p in m.content] if isinstance(m.content, list) else m.content) or ""
        thinking = m.thinking.content if m.thinking and not m.thinking.encrypted else None
        inherited = " (inherited)" if m.inherited_from else ""
        calls = [(c.function.name, c.function.arguments, c.id) for c in m.tool_calls or []]
    lines = [f"#{m.seq} {m.role}{inherited}: {text}".rstrip()]
    if thinking:
        lines.append(f"    thinking: {thinking[:200]}")
    for name, arguments, call_id in calls:
        lines.append(f"    → {name}({arguments[:200]}) [{call_id}]")
    if m.tool_call_id:
        lines[0] = f"#{m.seq} tool result for {m.tool_call_id}{inherited}: {text[:300]}"
    return "\n".join(lines)
