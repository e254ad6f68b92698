"""Memory commands: search, recall (and its session-start hook), synonyms, decisions,
reindex. Thin: parse, call the service, print."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from .. import agents
from ..config import Settings
from ..operations import BY_NAME
from .cliargs import add_arguments, parse
from .output import print_json, service


def add_parsers(sub: argparse._SubParsersAction) -> None:
    search = sub.add_parser("search", help="search messages (as the search_messages tool)",
                            description='Example: mcp-memory search "订单 超时" --project shop --since 30d')
    add_arguments(search, "search_messages", {
        "query": (), "project_id": ("--project",), "agent_source": ("--agent",), "role": ("--role",),
        "session_id": ("--session",), "since": ("--since",), "until": ("--until",), "limit": ("--limit",),
        "mode": ("--mode",), "hits_only": ("--hits-only",), "include_echoes": ("--include-echoes",)})
    search.add_argument("--json", action="store_true", help="print one JSON document")

    recall = sub.add_parser("recall", help="prompt-ready history block (as the recall tool); --hook for session start",
                            description="Example: mcp-memory recall 'should orders use a queue?' --project shop. "
                                        "As a Claude Code SessionStart hook: mcp-memory recall --hook --agent claude-code")
    recall.add_argument("query", nargs="?", help="the task or question")
    recall.add_argument("--project", help="only this project (hook: default is the git root's folder name)")
    recall.add_argument("--limit", type=int, default=5)
    recall.add_argument("--json", action="store_true")
    recall.add_argument("--include-echoes", action="store_true",
                        help="also agents' earlier calls of mcp-memory's own tools and their results")
    recall.add_argument("--from-digest", action="store_true",
                        help="put the project's latest day digests first (needs --project)")
    recall.add_argument("--hook", action="store_true",
                        help="read the agent's hook JSON on stdin (Claude Code and Codex SessionStart, Gemini CLI "
                             "BeforeAgent, the OpenCode plugin), print what the agent adds; never fails")
    recall.add_argument("--agent", help="with --hook: the agent whose hook runs this "
                                         f"(default: {agents.SESSION_START_DEFAULT}, as installed by earlier versions)")

    digest = sub.add_parser("digest", help="a project's day (or session) digest, each line with its sources "
                                           "(as get_digest)",
                            description="Example: mcp-memory digest --project shop --day 2026-03-01")
    add_arguments(digest, "get_digest", {"project_id": ("--project",), "day": ("--day",),
                                         "session_id": ("--session",)})
    digest.add_argument("--json", action="store_true", help="print one JSON document")

    synonyms = sub.add_parser("synonyms", help="synonym groups applied at query time",
                              description="Example: mcp-memory synonyms add 消息队列 MQ 'message queue'")
    syn_sub = synonyms.add_subparsers(dest="synonyms_command", metavar="ACTION", required=True)
    add = syn_sub.add_parser("add", help="make the terms synonyms (merging their groups)")
    add.add_argument("terms", nargs="+")
    syn_sub.add_parser("list", help="print every group")
    remove = syn_sub.add_parser("remove", help="remove terms from their groups")
    remove.add_argument("terms", nargs="+")
    for parser in (add, remove):
        parser.add_argument("--json", action="store_true")
    syn_sub.choices["list"].add_argument("--json", action="store_true")

    decisions = sub.add_parser("decisions", help="list or search decisions (as search_decisions)",
                               description="Example: mcp-memory decisions 消息队列 --status rejected")
    decisions.add_argument("query", nargs="?", help=BY_NAME["search_decisions"].input.model_fields["query"].description)
    add_arguments(decisions, "search_decisions", {
        "project_id": ("--project",), "agent_source": ("--agent",), "status": ("--status",),
        "decision_type": ("--type",), "since": ("--since",), "until": ("--until",), "limit": ("--limit",)},
        defaults={"limit": 20})
    decisions.add_argument("--json", action="store_true")

    query = sub.add_parser("query", help="one read-only SELECT over the memory views (as the query_memory tool)",
                           description="Example: mcp-memory query \"SELECT agent_source, count(*) FROM sessions "
                                       "WHERE created_at > now() - interval '7 days' GROUP BY 1\"")
    add_arguments(query, "query_memory", {"sql": (), "limit": ("--limit",)})
    query.add_argument("--json", action="store_true", help="print one JSON document")

    reindex = sub.add_parser("reindex", help="index every stored message the search index lacks; --full rebuilds it")
    reindex.add_argument("--project")
    reindex.add_argument("--full", action="store_true", help="rebuild the index of every session from its messages")
    reindex.add_argument("--json", action="store_true")


def handlers() -> dict[str, Callable[..., int]]:
    return {"search": search, "recall": recall, "digest": digest, "synonyms": synonyms, "decisions": decisions,
            "reindex": reindex, "query": query_memory}


def search(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        result = svc.search_messages(**parse("search_messages", args))
    if args.json:
        print_json(result)
        return 0
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    for m in result.matches:
        label = f"  [context of #{m.context_of}]" if m.why == "context" else ("" if m.why == "terms" else f"  [{m.why}]")
        print(f"{m.created_at[:16]}  {m.session_id}#{m.seq}  {m.role:<9} {m.score:7.3f}  {m.session_title or ''}{label}")
        print(f"    {m.snippet}")
    if not result.matches:
        print("no matches")
    return 0


def query_memory(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        result = svc.query_memory(**parse("query_memory", args))
    if args.json:
        print_json(result)
        return 0
    print("\t".join(c.name for c in result.columns))
    for row in result.rows:
        print("\t".join(_cell(v) for v in row))
    more = f", truncated at {result.row_count}: raise --limit or narrow the query" if result.truncated else ""
    print(f"({result.row_count} row{'s' if result.row_count != 1 else ''}{more}; {result.elapsed_ms:g} ms)",
          file=sys.stderr)
    return 0


def _cell(value: Any) -> str:
    """A value on one line: text as it is (tabs and new lines escaped), the rest as JSON."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def recall(settings: Settings, args: argparse.Namespace) -> int:
    if args.hook:
        return hook(settings, args, sys.stdin.read())
    if not args.query:
        print("mcp-memory: [invalid] recall needs a QUERY (or --hook)", file=sys.stderr)
        return 2
    with service(settings) as svc:
        result = svc.recall(args.query, project_id=args.project, limit=args.limit,
                            include_echoes=args.include_echoes, from_digest=args.from_digest)
    if args.json:
        print_json(result)
    else:
        print(result.text or "nothing relevant in the history")
    return 0


def digest(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        result = svc.get_digest(**parse("get_digest", args))
    if args.json:
        print_json(result)
    else:
        print(result.text or f"nothing stored for this {'session' if result.session_id else 'day'}")
    return 0


def hook(settings: Settings, args: argparse.Namespace, stdin: str) -> int:
    """A session-start hook: the project's recall block, shaped by the agent as context for the new
    session. A hook must never break the agent, so any failure — bad input, no database, a bug —
    prints nothing, exit 0."""
    try:
        event = json.loads(stdin) if stdin.strip() else {}
        agent = agents.get(args.agent or agents.SESSION_START_DEFAULT)
        if not agent.recall_wanted(event):
            return 0
        from ..core import projects  # imported here: `serve` parses its arguments without the core

        given = event.get("cwd")
        cwd = given if isinstance(given, str) else os.getcwd()
        project = projects.resolve(os.path.abspath(cwd), explicit=args.project,
                                   mapping=settings.raw.get("projects")).project
        with service(settings) as svc:
            if args.query:
                result = svc.recall(args.query, project_id=project, limit=args.limit)
            else:
                result = svc.recall_digest(project_id=project, limit=args.limit)
        output = agent.session_start_output(result.text) if result.text else None
        if output is not None:
            print(json.dumps(output, ensure_ascii=False))
    except Exception:  # noqa: BLE001 — the hook contract: silence rather than a failed session start
        return 0
    return 0


def synonyms(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        if args.synonyms_command == "add":
            groups: Any = svc.add_synonyms(args.terms)
        elif args.synonyms_command == "remove":
            removed = svc.remove_synonyms(args.terms)
            if args.json:
                print_json({"removed": removed})
            else:
                print(f"removed {len(removed)}: {', '.join(removed)}" if removed else "nothing to remove")
            return 0
        else:
            groups = svc.list_synonyms()
    if args.json:
        print_json({"groups": groups})
    else:
        for group in groups:
            print(" = ".join(group))
    return 0


def decisions(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        result = svc.search_decisions(**parse("search_decisions", args))
    if args.json:
        print_json(result)
        return 0
    for d in result.decisions:
        print(f"{d.created_at[:10]}  [{d.status}] {d.decision_type}: {d.summary}  ({d.decision_id} v{d.version})")
        if d.rationale:
            print(f"    why: {d.rationale}")
    if not result.decisions:
        print("no decisions")
    return 0


def reindex(settings: Settings, args: argparse.Namespace) -> int:
    with service(settings) as svc:
        count = svc.reindex_search(args.project, full=args.full)
    if args.json:
        print_json({"indexed": count})
        return 0
    print(f"indexed {count} message(s)")
    return 0
