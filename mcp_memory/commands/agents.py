"""Agent commands: import native sessions, export neutral ones, capture (sync), install.

Examples:
  mcp-memory import claude-code ~/.claude/projects/-work-shop/ --project shop
  mcp-memory export ses_… --to opencode --install --cwd ~/work/shop
  mcp-memory sync claude-code --hook            (from Claude Code's Stop/SessionEnd hooks)
  mcp-memory install claude-code --scope user
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from .. import agents, launcher
from ..agents.base import FormatError, NeutralSession, WriteOptions
from ..config import Settings
from ..errors import Invalid, McpMemoryError
from ..schema import MessageIn
from .output import print_json, progress, service


def add_parsers(sub: argparse._SubParsersAction) -> None:
    names = ", ".join(agents.names())
    imp = sub.add_parser("import", help="native session files → neutral sessions in the database",
                         description=f"Agents: {names}. Example: mcp-memory import claude-code ~/.claude/projects/x/")
    imp.add_argument("agent", choices=agents.names())
    imp.add_argument("paths", nargs="+", type=Path, help="session files or folders")
    imp.add_argument("--project", help="project id for the imported sessions (default: from the session's cwd)")
    imp.add_argument("--json", action="store_true")

    exp = sub.add_parser("export", help="neutral session → the agent's native files",
                         description="Example: mcp-memory export ses_… --to claude-code --install",
                         epilog=_options_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    exp.add_argument("session_id")
    exp.add_argument("--to", dest="agent", required=True, choices=agents.names())
    where = exp.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, metavar="DIR",
                       help="folder to write the native files into, one file per native session (default: .)")
    where.add_argument("--install", action="store_true", help="put them where the agent looks and print the resume command")
    exp.add_argument("--cwd", type=Path, help="project directory (default: the session's cwd, else the current dir)")
    exp.add_argument("--thinking", choices=["drop", "text"], default="drop",
                     help="reasoning the target cannot carry natively: drop it, or keep it as text")
    exp.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                     help="agent-specific switch (listed below)")
    exp.add_argument("--json", action="store_true")

    syn = sub.add_parser("sync", help="capture the agent's current session incrementally (for hooks)")
    syn.add_argument("agent", choices=agents.names())
    syn.add_argument("--hook", action="store_true", help="read the hook JSON on stdin; never fail the agent")
    syn.add_argument("--session", help="OpenCode: the session id to sync")
    syn.add_argument("--path", type=Path, help="the native session file to sync")
    syn.add_argument("--project", help="project id (default: from the session's cwd)")
    syn.add_argument("--json", action="store_true")

    ins = sub.add_parser("install", help="register the MCP server (and capture hooks) in an agent's config")
    ins.add_argument("agent", choices=agents.installable())
    ins.add_argument("--scope", choices=["user", "project"], default="user")
    ins.add_argument("--cwd", type=Path, default=None, help="project directory for --scope project (default: .)")
    ins.add_argument("--uninstall", action="store_true", help="remove only what install added")


def _options_help() -> str:
    lines = ["--option switches of each agent:"]
    for name in agents.names():
        for key, text in agents.get(name).write_options.items():
            lines.append(f"  {name:<17} {key}=…  {text}")
    return "\n".join(lines)


def handlers() -> dict[str, Callable[..., int]]:
    from . import capture

    return {"import": import_, "export": export, "sync": capture.sync, "install": install}


def import_(settings: Settings, args: argparse.Namespace) -> int:
    from ..core.imports import store_sessions

    adapter = agents.adapter_for(args.agent)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        raise Invalid(f"no such file or folder: {', '.join(missing)}")
    try:
        sessions = adapter.read_files([p.expanduser() for p in args.paths])
    except (FormatError, OSError) as exc:  # files that are not this agent's format: nothing stored
        raise Invalid(f"cannot read {adapter.display_name} sessions from "
                      f"{', '.join(map(str, args.paths))} ({exc})") from None
    empty = [s for s in sessions if not s.messages]
    sessions = [s for s in sessions if s.messages]
    if empty:  # files of another agent, or sessions with nothing in them: say so, store nothing
        names = sorted({str(s.source_path or s.native_id) for s in empty})
        print(f"skipped {len(empty)} session(s) with no {adapter.display_name} messages: "
              + ", ".join(names[:5]) + (" …" if len(names) > 5 else ""), file=sys.stderr)
    if not sessions:
        raise Invalid(f"no {adapter.display_name} sessions with messages found in "
                      f"{', '.join(map(str, args.paths))}")
    with service(settings) as svc:
        results = store_sessions(svc, sessions, project_id=args.project,
                                 on_progress=lambda done, total: progress(done, total, "importing"))
    if args.json:
        print_json({"sessions": [r.to_dict() for r in results]})
    else:
        for neutral, r in zip(sessions, results, strict=True):
            state = f"error: {r.error}" if r.error else f"{r.new} new, {r.duplicates} already stored"
            print(f"{r.native_id} → {r.session_id}: {r.messages} messages ({state})")
            if neutral.report is not None:
                print("\n".join(neutral.report.render()))
    return 1 if any(r.error for r in results) else 0


def export(settings: Settings, args: argparse.Namespace) -> int:
    adapter = agents.adapter_for(args.agent)
    with service(settings) as svc:
        session = svc.get_session(args.session_id)
        messages = _all_messages(svc, args.session_id)
    neutral = _neutral(session, messages)
    recorded_cwd = session.meta.get("cwd")
    cwd = (args.cwd or Path(recorded_cwd if isinstance(recorded_cwd, str) and recorded_cwd else os.getcwd()))
    cwd = cwd.expanduser()
    options = WriteOptions(thinking=args.thinking, cwd=cwd, extra=_options(args.agent, args.option))
    try:
        if args.install:
            written = adapter.install(neutral, cwd=cwd, env=os.environ, options=options)
        else:
            out = (args.out or Path.cwd()).expanduser()
            out.mkdir(parents=True, exist_ok=True)
            written = adapter.write(neutral, out, options)
            written.resume_command = None  # nothing is installed where the agent looks yet
    except (ValueError, OSError, RuntimeError) as exc:  # bad meta, an unwritable folder, a failed import
        raise Invalid(f"cannot export {session.session_id} to {adapter.display_name}: {exc}") from None
    relay = _record_relay(settings, session.session_id, adapter, written)
    if args.json:
        print_json({"session_id": session.session_id, "agent": args.agent, "native_id": written.native_id,
                    "relay": relay,
                    "files": [str(f) for f in written.files], "resume_command": written.resume_command,
                    "report": written.report.to_dict()})
        return 0
    print(f"{session.session_id} → {adapter.display_name} session {written.native_id}")
    for file in written.files:
        print(f"  wrote {file}")
    print("\n".join(written.report.render()))
    if written.resume_command:
        print(f"resume with: {written.resume_command}")
    elif not args.install:
        print(f"to continue it in {adapter.display_name}: mcp-memory export {session.session_id} --to {args.agent} "
              "--install")
    return 0


def _neutral(session, messages: list[MessageIn]) -> NeutralSession:
    """The session as adapters take it. Meta is whatever a project writer put there: only strings
    are taken as the source agent and native id, and adapters check those before they name a file."""
    source = session.meta.get("imported_from") or session.agent_source
    native_id = session.meta.get("native_id")
    return NeutralSession(agent=source if isinstance(source, str) and source else "mcp-memory",
                          native_id=native_id if isinstance(native_id, str) and native_id else session.session_id,
                          messages=messages, meta={**session.meta, "session_id": session.session_id})


def _record_relay(settings: Settings, session_id: str, adapter, written) -> dict | None:
    """Relay lineage: read the written files back as the target agent will, and record which native
    session came from which seq, so that its continuation is stored as a fork (core/imports.py).
    Exporting stays possible without write rights: the lineage is then not recorded (a warning)."""
    from ..core.imports import record_export

    try:
        read_back = adapter.read_files(list(written.files))
        with service(settings) as svc:
            relay = record_export(svc, session_id, read_back, written.native_id)
    except McpMemoryError as exc:
        print(f"warning: relay lineage not recorded: {exc.render()}", file=sys.stderr)
        return None
    except (OSError, FormatError) as exc:
        print(f"warning: relay lineage not recorded: the written files could not be read back ({exc})",
              file=sys.stderr)
        return None
    if relay is None:
        return None
    return {"snapshot_id": relay.snapshot_id, "carried": len(relay.carried)}


def _all_messages(svc, session_id: str) -> list[MessageIn]:
    messages, after = [], 0
    while True:
        page = svc.read_session(session_id, after_seq=after, limit=1000, include_native=True)
        for m in page.messages:
            data = m.model_dump(mode="json", exclude_none=True)
            for key in ("session_id", "seq", "inherited_from"):
                data.pop(key, None)
            messages.append(MessageIn.model_validate(data))
        after = page.next_after_seq
        if not page.has_more:
            return messages


def _options(agent: str, pairs: list[str]) -> dict[str, str]:
    known = agents.get(agent).write_options
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise Invalid(f"--option expects KEY=VALUE, got {pair!r}")
        if key not in known:
            choices = ", ".join(known) or "none"
            raise Invalid(f"--option {key} is not a switch of {agent} (its switches: {choices})")
        options[key] = value
    return options


def install(settings: Settings, args: argparse.Namespace) -> int:
    module = agents.get(args.agent).installer()
    if module is None:
        raise Invalid(f"{args.agent} launches no MCP servers: nothing to install")
    env, stored = profile_env(settings, os.environ)
    try:
        changes = module.register(scope=args.scope, command=launcher.command(), env=env,
                                  cwd=(args.cwd or Path.cwd()).resolve(), environ=os.environ,
                                  uninstall=args.uninstall)
    except (ValueError, OSError) as exc:
        raise Invalid(str(exc)) from None
    for line in changes or ["nothing to change: already " + ("removed" if args.uninstall else "installed")]:
        print(line)
    if stored and not args.uninstall:
        print(f"the token stays out of the agent's config: stored for {stored}")
    return 0


def profile_env(settings: Settings, environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """The variables that select this profile, for the agent's server entry and hooks — never a
    secret. A DSN is written without its password; that password (or MCP_MEMORY_PASSWORD) goes to
    the keyring or the 0600 credentials file, where `serve` and `sync` find it, as after `login`.
    Returns the variables and, when a secret was stored, the account it was stored for."""
    from ..credentials import keyring_account, store_password, without_password

    env = {k: environ[k] for k in ("MCP_MEMORY_HOME", "MCP_MEMORY_CONFIG") if environ.get(k)}
    if not settings.dsn or settings.dsn_source == "config":
        return env, None  # the embedded server, or a DSN the config file already selects
    clean, secret = without_password(settings.dsn)
    secret = secret or settings.password
    env["MCP_MEMORY_DSN"] = clean
    if not secret:
        return env, None
    store_password(clean, secret, fallback=settings.credentials_file)
    return env, keyring_account(clean)
