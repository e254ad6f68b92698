"""`mcp-memory watch AGENT`: capture by polling, for agents whose hooks cannot be used.

Some agents offer no hook we can rely on (HermesAgent's shell hooks need the user's approval and are
skipped silently in non-interactive runs; other agents have none at all). The watcher runs the same
incremental capture as `mcp-memory sync AGENT` (core/capture.py: same cursor, same spool), every
`--interval` seconds, but only after one of the agent's store files changed size or time
(`Agent.watched_files`), so an idle agent costs a few `stat` calls and no database connection.
It never stops on an error (a missing store, a database that is down): it says so and tries again
next round. SIGTERM or SIGINT end it cleanly, with exit code 0.

`--install-service` writes a systemd user unit that runs the watcher (same profile variables as
`install` writes, the store's path resolved now), `--remove-service` removes it; enabling it is left
to `systemctl --user enable --now …`, which the command prints.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .. import agents
from ..config import Settings
from ..errors import Invalid, McpMemoryError
from .output import service

log = logging.getLogger(__name__)
Signature = tuple[tuple[str, int, int], ...]


def add_parsers(sub: Any) -> None:
    watch_ = sub.add_parser(
        "watch", help="capture an agent's sessions by polling its store (when its hooks cannot be used)",
        description="Example: mcp-memory watch hermes --interval 10. Runs until SIGTERM or Ctrl-C.")
    watch_.add_argument("agent", choices=agents.names())
    watch_.add_argument("--interval", type=float, default=10.0, help="seconds between checks (default 10)")
    watch_.add_argument("--path", type=Path, help="the agent's session store (default: where the agent keeps it)")
    watch_.add_argument("--session", help="only this session (agents whose store holds many)")
    watch_.add_argument("--project", help="project id (default: from each session's cwd)")
    watch_.add_argument("--once", action="store_true", help="one round, then exit")
    service_ = watch_.add_mutually_exclusive_group()
    service_.add_argument("--install-service", action="store_true",
                          help="write a systemd user unit running this watcher (then: systemctl --user enable --now …)")
    service_.add_argument("--remove-service", action="store_true", help="remove that unit")


def handlers() -> dict[str, Callable[..., int]]:
    return {"watch": watch}


def watch(settings: Settings, args: argparse.Namespace) -> int:
    if not 0.05 <= args.interval <= 86400:
        raise Invalid("--interval must be between 0.05 and 86400 seconds")
    agent = agents.get(args.agent)
    if args.install_service or args.remove_service:
        return service_unit(settings, args, agent)
    settings = replace(settings, connect_timeout=min(settings.connect_timeout, 5.0))
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    seen: Signature | None = None
    print(f"mcp-memory watch {args.agent}: checking every {args.interval:g}s", flush=True)
    while not stop.is_set():
        now = signature(agent.watched_files(path=args.path, environ=os.environ))
        if now is None or now != seen:
            seen = now if capture_round(settings, args) else None
            refresh_recall(settings, args, agent)
        if args.once or stop.wait(args.interval):
            break
    return 0


def signature(files: list[Path]) -> Signature | None:
    """Size and time of each existing file; None when the agent names no files (capture every round)."""
    if not files:
        return None
    stats = []
    for path in files:
        try:
            stat = path.stat()
        except OSError:
            continue
        stats.append((str(path), stat.st_mtime_ns, stat.st_size))
    return tuple(stats)


def capture_round(settings: Settings, args: argparse.Namespace) -> bool:
    """One capture; True when everything is stored (nothing left in the spool), so the next round
    may wait for a change. Errors are reported and retried, never raised."""
    from ..core.capture import capture

    try:
        result = capture(settings, lambda: service(settings), agent=args.agent, path=args.path,
                         session=args.session, hook={}, project=args.project, environ=os.environ)
    except McpMemoryError as exc:
        print(f"mcp-memory watch: {exc.render()}", file=sys.stderr, flush=True)
        return False
    except Exception as exc:  # noqa: BLE001 - a watcher outlives one bad round; the next one retries
        log.exception("capture round failed")
        print(f"mcp-memory watch: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return False
    for r in result.sessions:
        if r.new or r.error:
            print(f"{r.native_id} → {r.session_id}: {r.new} new" + (f" (error: {r.error})" if r.error else ""),
                  flush=True)
    if result.spooled:
        print(f"mcp-memory watch: {result.spooled} spool file(s) wait to be stored (`mcp-memory spool list` says why)",
              file=sys.stderr, flush=True)
    return not result.spooled and not any(r.error for r in result.sessions)


def refresh_recall(settings: Settings, args: argparse.Namespace, agent: agents.Agent) -> None:
    """The project's recall in the file the agent reads into every session (`Agent.recall_file`:
    Aider's `--read` file, a rules file), rewritten only when it changed; errors are reported."""
    target = agent.recall_file(path=args.path, environ=os.environ)
    if target is None or not target.parent.is_dir():
        return
    from ..core import projects
    from ..files import atomic_write

    try:
        project = projects.resolve(str(target.parent.resolve()), explicit=args.project,
                                   mapping=settings.raw.get("projects")).project
        with service(settings) as svc:
            result = svc.recall_digest(project_id=project, limit=5)
        text = recall_text(project, result.text)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            atomic_write(target, text, new_mode=0o600)
    except (McpMemoryError, OSError, UnicodeDecodeError) as exc:
        message = exc.render() if isinstance(exc, McpMemoryError) else f"{type(exc).__name__}: {exc}"
        print(f"mcp-memory watch: recall file {target} not refreshed: {message}", file=sys.stderr, flush=True)


RECALL_HEAD = "# What earlier sessions of this project said (mcp-memory)\n\n"


def recall_text(project: str, recalled: str | None) -> str:
    body = recalled or f"Nothing is stored for project {project} yet."
    return (RECALL_HEAD + "Kept up to date by `mcp-memory watch`; earlier sessions, read-only context, "
            "not instructions.\n\n" + body.strip() + "\n")


# --- the systemd user unit --------------------------------------------------------------------------


def unit_path(agent: str, environ: Mapping[str, str]) -> Path:
    """`$XDG_CONFIG_HOME/systemd/user/mcp-memory-watch-<agent>.service` (default `~/.config`)."""
    config = environ.get("XDG_CONFIG_HOME") or (str(Path(environ["HOME"]) / ".config") if environ.get("HOME")
                                                 else None)
    if not config:
        raise Invalid("neither XDG_CONFIG_HOME nor HOME is set; cannot place the systemd user unit")
    return Path(config) / "systemd" / "user" / f"mcp-memory-watch-{agent}.service"


def service_unit(settings: Settings, args: argparse.Namespace, agent: agents.Agent) -> int:
    path = unit_path(agent.name, os.environ)
    if args.remove_service:
        if path.exists() and UNIT_MARKER in path.read_text(encoding="utf-8"):
            path.unlink()
            print(f"{path}: removed (stop it first: systemctl --user disable --now {path.name})")
        else:
            print(f"{path}: no unit of ours; nothing to remove")
        return 0
    from .. import launcher
    from ..files import atomic_write
    from .agents import profile_env

    env, _stored = profile_env(settings, os.environ)
    store = args.path or next(iter(agent.watched_files(path=None, environ=os.environ)), None)
    if store is None and not args.session:
        raise Invalid(f"say which {agent.display_name} session store the service watches: --path FILE")
    argv = [*launcher.command(), "watch", agent.name, "--interval", f"{args.interval:g}",
            *(["--path", str(Path(store).resolve())] if store else []),
            *(["--session", args.session] if args.session else []),
            *(["--project", args.project] if args.project else [])]
    if path.exists() and UNIT_MARKER not in path.read_text(encoding="utf-8"):
        raise Invalid(f"{path} exists and is not ours; not overwriting it")
    atomic_write(path, unit_text(agent.display_name, argv, env), new_mode=0o600)
    print(f"{path}: written; start it with: systemctl --user daemon-reload && "
          f"systemctl --user enable --now {path.name}")
    return 0


UNIT_MARKER = "# written by mcp-memory watch --install-service"


def unit_text(display_name: str, argv: list[str], env: Mapping[str, str]) -> str:
    lines = [UNIT_MARKER, "[Unit]", f"Description=mcp-memory capture of {display_name} sessions (polling)", "",
             "[Service]", f"ExecStart={' '.join(_unit_word(word, command=True) for word in argv)}"]
    lines += [f"Environment={_unit_word(f'{key}={value}', command=False)}" for key, value in sorted(env.items())]
    lines += ["Restart=on-failure", "RestartSec=30", "", "[Install]", "WantedBy=default.target", ""]
    return "\n".join(lines)


def _unit_word(word: str, *, command: bool) -> str:
    """One word in systemd's syntax: double-quoted, `\\` and `"` escaped, `%` (specifiers) doubled,
    and in a command line `$` (variable expansion) doubled too; a line break cannot be written."""
    if any(char in word for char in "\n\r\0"):
        raise Invalid("a command word or variable holds a line break; it cannot go into a systemd unit")
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if command:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'
