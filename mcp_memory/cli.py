"""Command-line interface: argument parsing only; each command is a small function in commands/.

Exit codes (README, Command line): 0 success, 1 user error (one line on stderr), 2 usage; 141 when
the reader of the output went away (`mcp-memory sessions | head -1`), quietly, as a shell tool that
SIGPIPE ends.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import typing
from collections.abc import Sequence

from . import __version__
from .errors import McpMemoryError, internal

EPILOG = "Docs: README.md. Every command takes --dsn (else MCP_MEMORY_DSN, the config file, or the embedded default)."


class _Parser(argparse.ArgumentParser):
    """argparse, except that an unknown option is named. Without this, argparse sets an unknown option
    aside and hands its value to the next positional: `archive --daemon --metrics-port 1` would say
    "invalid choice: '1' (choose from status, retry, verify)"."""

    argv: typing.ClassVar[list[str]] = []  # of the parse in progress (one per process: the CLI parses once)

    def error(self, message: str) -> typing.NoReturn:
        choice = re.search(r"invalid choice: '(.*)' \(choose", message)
        unknown = self._unknown_option(before=choice[1] if choice else None)
        if unknown is not None:
            message = f"unrecognized option {unknown} (see {self.prog} --help)"
        super().error(message)

    def _unknown_option(self, *, before: str | None) -> str | None:
        """The first option no parser on the way knows, among the words before the one argparse took
        for a sub-command (the value of that unknown option)."""
        if before is None:
            return None
        known = set(self._option_string_actions) | set(_ROOT_OPTIONS)
        for token in _Parser.argv:
            if token in ("--", before):
                return None
            if token.startswith("-") and len(token) > 1 and not token[1:2].isdigit() \
                    and token.split("=", 1)[0] not in known:
                return token.split("=", 1)[0]
        return None


_ROOT_OPTIONS = ("--dsn", "-v", "--verbose", "--version", "-h", "--help")


def _parser() -> argparse.ArgumentParser:
    from .commands.cliargs import add_arguments  # the arguments of commands that mirror a tool

    parser = _Parser(
        prog="mcp-memory", description="Shared, durable session memory for AI coding agents.", epilog=EPILOG
    )
    parser.add_argument("--version", action="version", version=f"mcp-memory {__version__}")
    parser.add_argument("--dsn", help="PostgreSQL DSN (overrides MCP_MEMORY_DSN and the config file)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    sub.add_parser("serve", help="MCP server over stdio (what agents launch)",
                   description="Run the MCP server over stdio. Example: claude mcp add -s user mcp-memory -- mcp-memory serve")

    db = sub.add_parser("db", help="schema migrations and the embedded server")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    db_sub.add_parser("migrate", help="apply pending migrations (safe from two hosts at once)")
    status = db_sub.add_parser("status", help="list migrations and whether each is applied")
    status.add_argument("--json", action="store_true", help="print one JSON document")
    parts = db_sub.add_parser("partitions", help="create the month partitions ahead, list them, or retire a month",
                              description="Example: mcp-memory db partitions --ahead 3; mcp-memory db partitions "
                                          "--retire 2025-01 --archive ~/mm-archive --drop; mcp-memory db partitions "
                                          "--partman")
    parts.add_argument("--ahead", type=int, default=3, help="months to create after the current one (default 3)")
    parts.add_argument("--retire", metavar="YYYY-MM", help="detach this past month from the hot tables")
    parts.add_argument("--drop", action="store_true",
                       help="with --retire and --archive: drop the detached tables too (the archive holds them)")
    parts.add_argument("--archive", metavar="PATH",
                       help="with --retire: retire only if this git archive (clone, bare repository or URL) holds "
                            "every message of the month; with --restore: bring a dropped month back from it")
    parts.add_argument("--restore", metavar="YYYY-MM", help="bring a retired month back into the hot tables")
    parts.add_argument("--partman", action="store_true",
                       help="hand the months to pg_partman (where the server has it); later runs do its maintenance")
    parts.add_argument("--json", action="store_true", help="print one JSON document")
    db_sub.add_parser("stop", help="stop the embedded server of this profile (it restarts on demand)")

    doctor = sub.add_parser("doctor", help="check configuration, database, schema, pgvector, keyring, archive")
    doctor.add_argument("--json", action="store_true", help="print one JSON document")

    sub.add_parser("schema", help="print the JSON Schema of the neutral message (v1)")

    snapshot = sub.add_parser("snapshot", help="snapshot a session (as the create_snapshot tool)",
                              description="Example: mcp-memory snapshot ses_… -m 'before refactor'")
    add_arguments(snapshot, "create_snapshot", {"session_id": (), "commit_msg": ("-m", "--message")})
    snapshot.add_argument("--json", action="store_true")

    fork = sub.add_parser("fork", help="new session from a snapshot (as the load_snapshot tool)",
                          description="Example: mcp-memory fork 12 --agent opencode")
    add_arguments(fork, "load_snapshot", {"snapshot_id": ()})
    fork.add_argument("--agent", help="agent_source of the new session")
    fork.add_argument("--title", help="title of the new session")
    fork.add_argument("--json", action="store_true")

    sessions = sub.add_parser("sessions", help="list sessions, newest first")
    add_arguments(sessions, "list_sessions", {"project_id": ("--project",), "agent_source": ("--agent",),
                                              "limit": ("--limit",)}, defaults={"limit": 20})
    sessions.add_argument("--json", action="store_true")

    show = sub.add_parser("show", help="print a session's messages (as read_session)")
    add_arguments(show, "read_session", {"session_id": (), "after_seq": ("--after-seq",), "limit": ("--limit",),
                                         "include_native": ("--native",), "wait_seconds": ("--wait",),
                                         "view": ("--view",)},
                  defaults={"limit": 1000})
    show.add_argument("--json", action="store_true")

    sub.add_parser("demo", help="an end-to-end walk-through on the embedded default; run this first")

    for module in _command_modules():
        module.add_parsers(sub)
    return parser


def _command_modules() -> list:
    """Command groups that register their own sub-commands (add_parsers) and handlers (handlers)."""
    from .commands import agents, archive, embed, memory, projects, security, ui, watch

    return [agents, archive, embed, memory, projects, security, ui, watch]


def main(argv: Sequence[str] | None = None) -> int:
    _Parser.argv = list(sys.argv[1:] if argv is None else argv)
    args = _serve_line(_Parser.argv) or _parser().parse_args(_Parser.argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        return _reader_gone()
    except McpMemoryError as exc:
        print(f"mcp-memory: {exc.render()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - a bug: logged with its traceback and incident id, answered with both
        print(f"mcp-memory: {internal(exc, logging.getLogger('mcp_memory.cli')).render()}", file=sys.stderr)
        return 1


def _serve_line(argv: list[str]) -> argparse.Namespace | None:
    """`[--dsn DSN] [-v] serve`, the line agents launch, read without building the parser of every
    command (which imports each command's module: a tenth of `serve`'s start). Anything else,
    help and mistakes included, goes to the full parser."""
    if not argv or argv[-1] != "serve":
        return None
    args = argparse.Namespace(command="serve", dsn=None, verbose=False)
    options = iter(argv[:-1])
    for token in options:
        if token in ("-v", "--verbose"):
            args.verbose = True
        elif token == "--dsn" and args.dsn is None:
            args.dsn = next(options, None)
            if args.dsn is None or args.dsn.startswith("-"):
                return None
        elif token.startswith("--dsn=") and args.dsn is None:
            args.dsn = token.split("=", 1)[1]
        else:
            return None
    return args


EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool ended by a closed pipe


def _reader_gone() -> int:
    """The output's reader closed the pipe: nothing more can be said there, and nothing is wrong
    to report. Stdout is pointed at the null device so the interpreter's exit flush stays quiet."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stdout.fileno())
    os.close(null)
    return EXIT_CLOSED_PIPE


def _dispatch(args: argparse.Namespace) -> int:
    from .config import load_settings

    settings = load_settings(dsn=args.dsn, environ=os.environ)
    if args.command == "serve":
        logging.getLogger().setLevel(logging.DEBUG if args.verbose else logging.INFO)
        from .mcp.stdio import serve

        serve(settings)
        return 0
    from .commands import basic, db, demo, doctor

    handlers = {
        "db": db.run,
        "doctor": doctor.run,
        "schema": basic.schema,
        "snapshot": basic.snapshot,
        "fork": basic.fork,
        "sessions": basic.sessions,
        "show": basic.show,
        "demo": demo.run,
    }
    for module in _command_modules():
        handlers.update(module.handlers())
    return handlers[args.command](settings, args)


if __name__ == "__main__":
    sys.exit(main())
