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
from ..config import Settings
from ..errors import Invalid
from ..schema import MappingReport
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
    from ..core.transfers import import_paths

    stored = [0, 0]  # sessions stored whole, of how many

    def advance(done: int, total: int) -> None:
        stored[:] = [done, total]
        progress(done, total, "importing")

    try:
        with service(settings) as svc:
            result = import_paths(svc, args.agent, [p.expanduser() for p in args.paths], project_id=args.project,
                                  on_progress=advance)
    except KeyboardInterrupt:  # each session is stored whole (core/imports.py): say what that leaves
        print(f"\nmcp-memory import: interrupted; {stored[0]} session(s) done"
              + (f" of {stored[1]}" if stored[1] else "") + ", nothing of the one in progress was written; "
              "run the same import again to store the rest (what is stored is not stored twice)", file=sys.stderr)
        return 130
    if result.skipped:  # files of another agent, or sessions with nothing in them: stored nothing
        names = result.skipped
        print(f"skipped {len(names)} session(s) with no {agents.get(args.agent).display_name} messages: "
              + ", ".join(names[:5]) + (" …" if len(names) > 5 else ""), file=sys.stderr)
    if args.json:
        print_json({"sessions": [r.to_dict() for r in result.sessions]})
    else:
        for r in result.sessions:
            state = f"error: {r.error}" if r.error else f"{r.new} new, {r.duplicates} already stored"
            print(f"{r.native_id} → {r.session_id}: {r.messages} messages ({state})")
            if r.report:
                print("\n".join(MappingReport.from_dict(r.report).render()))
    return 1 if any(r.error for r in result.sessions) else 0


_CWD_RULES = {"given": "--cwd", "recorded": "where the session was recorded",
              "here": "the current folder: the recorded one is not on this host"}


def export(settings: Settings, args: argparse.Namespace) -> int:
    from ..core.transfers import export as export_session

    display = agents.get(args.agent).display_name
    options = {"thinking": args.thinking, **_options(args.agent, args.option)}
    with service(settings) as svc:
        result = export_session(svc, args.session_id, args.agent, install=args.install,
                                cwd=None if args.cwd is None else str(args.cwd.expanduser()), options=options,
                                out=None if args.install else (args.out or Path.cwd()).expanduser())
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    files = result.installed if args.install else result.written
    if args.json:
        print_json({"session_id": result.session_id, "agent": args.agent, "native_id": result.native_id,
                    "relay": result.relay, "files": files, "resume_command": result.resume,
                    "cwd": result.cwd, "cwd_rule": result.cwd_rule, "report": result.report})
        return 0
    print(f"{result.session_id} → {display} session {result.native_id}")
    for file in files or []:
        print(f"  wrote {file}")
    print("\n".join(MappingReport.from_dict(result.report).render()))
    if result.resume:
        if result.cwd:
            print(f"project folder: {result.cwd} ({_CWD_RULES.get(result.cwd_rule or '', result.cwd_rule)})")
        print(f"resume with: {result.resume}")
    elif not args.install:
        print(f"to continue it in {display}: mcp-memory export {result.session_id} --to {args.agent} --install")
    return 0


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
    if "MCP_MEMORY_EMBEDDED_AS_ROOT" in env and not args.uninstall:
        print("running as root: the entry sets MCP_MEMORY_EMBEDDED_AS_ROOT=1 (PostgreSQL runs as the user pgserver)")
    return 0


def profile_env(settings: Settings, environ: Mapping[str, str]) -> tuple[dict[str, str], str | None]:
    """The variables that select this profile, for the agent's server entry and hooks — never a
    secret. A DSN is written without its password; that password (or MCP_MEMORY_PASSWORD) goes to
    the keyring or the 0600 credentials file, where `serve` and `sync` find it, as after `login`.
    Returns the variables and, when a secret was stored, the account it was stored for."""
    from ..agents.install_support import root_opt_in
    from ..credentials import keyring_account, store_password, without_password

    env = {k: environ[k] for k in ("MCP_MEMORY_HOME", "MCP_MEMORY_CONFIG") if environ.get(k)}
    env.update(root_opt_in(settings))
    if not settings.dsn or settings.dsn_source == "config":
        return env, None  # the embedded server, or a DSN the config file already selects
    clean, secret = without_password(settings.dsn)
    secret = secret or settings.password
    env["MCP_MEMORY_DSN"] = clean
    if not secret:
        return env, None
    store_password(clean, secret, fallback=settings.credentials_file)
    return env, keyring_account(clean)
