"""GitHub Copilot CLI hooks: the events file a hook payload names, and our entries in `settings.json`.

As observed with Copilot CLI 1.0.102 (README.md, §Hooks): `{"hooks": {event: [{"type": "command",
"bash": LINE, "timeoutSec": N}, …]}}`, a flat list of handlers per event (no matcher groups); the
line runs through bash with the payload JSON on stdin. Every payload has `sessionId`, `timestamp`
(epoch ms) and `cwd`; agentStop adds `transcriptPath` (the events.jsonl) and `stopReason`,
sessionEnd `reason`, sessionStart `source` ("new" or "resume") and `initialPrompt`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import FormatError
from . import NAME

CAPTURE_EVENTS = ("agentStop", "sessionEnd")  # a turn is over / the session closes: `sync copilot --hook`
RECALL_EVENT = "sessionStart"  # its `additionalContext` reaches the model before the first prompt
TIMEOUT_SEC = 30
WHAT = {
    "agentStop": "captures the new messages of each finished turn into mcp-memory",
    "sessionEnd": "captures what is left when the session closes",
    "sessionStart": "gives the model the project's recall from mcp-memory when a session starts",
}
MARK = "mcp-memory"  # our handlers carry it in their command line; `comment` names what they do
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def copilot_home(environ: Mapping[str, str]) -> Path:
    """`COPILOT_HOME`, else `$HOME/.copilot` (as `copilot help environment` says)."""
    if environ.get("COPILOT_HOME"):
        return Path(environ["COPILOT_HOME"])
    return Path(environ.get("HOME") or str(Path.home())) / ".copilot"


def events_file(hook: Mapping[str, Any], session: str | None, environ: Mapping[str, str]) -> Path | None:
    """The payload's `transcriptPath`, else the events file of its `sessionId` (or `session`)."""
    event = hook.get("hook_event_name") or "the hook"
    value = hook.get("transcriptPath")
    if value is not None:
        if not isinstance(value, str) or not value.strip() or "\0" in value:
            raise FormatError(f"payload of {event}: transcriptPath must name the events file (got {value!r:.80})")
        path = Path(value).expanduser()
        if path.name != "events.jsonl":
            raise FormatError(f"payload of {event}: transcriptPath must be a Copilot events.jsonl, got {value[:200]!r}")
        return path
    ident = session or hook.get("sessionId")
    if ident is None:
        return None
    if not isinstance(ident, str) or not _UUID.match(ident):
        raise FormatError(f"sessionId must be a session uuid (got {ident!r:.80})")
    return copilot_home(environ) / "session-state" / ident / "events.jsonl"


def hook_line(command: list[str], env: Mapping[str, str], *words: str) -> str:
    """The shell line of a hook: the profile's variables (never a secret), then the command."""
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return " ".join([*assignments, shlex.join([*command, *words])])


def wanted_hooks(command: list[str], env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Event → our handler."""
    capture = hook_line(command, env, "sync", NAME, "--hook")
    recall = hook_line(command, env, "recall", "--hook", "--agent", NAME)
    entries = {event: _handler(capture, event) for event in CAPTURE_EVENTS}
    entries[RECALL_EVENT] = _handler(recall, RECALL_EVENT)
    return entries


def _handler(line: str, event: str) -> dict[str, Any]:
    return {"type": "command", "bash": line, "timeoutSec": TIMEOUT_SEC, "comment": f"{MARK}: {WHAT[event]}"}


def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict):
        return False
    if isinstance(handler.get("comment"), str) and handler["comment"].startswith(f"{MARK}:"):
        return True
    line = handler.get("bash")
    if not isinstance(line, str):
        return False
    try:
        words = shlex.split(line)
    except ValueError:
        return False
    ours = words[-3:] == ["sync", NAME, "--hook"] or words[-4:] == ["recall", "--hook", "--agent", NAME]
    return ours and any("mcp-memory" in w or "mcp_memory" in w for w in words)


def merge_hooks(data: dict[str, Any], wanted: dict[str, dict[str, Any]], uninstall: bool, where: Path) -> list[str]:
    """Our handlers into `data["hooks"]` (or out of it); every other event and handler is kept."""
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{where}: hooks is not an object of events; fix it before registering")
    changes = []
    stale = [e for e, handlers in hooks.items() if e not in wanted and isinstance(handlers, list)
             and any(is_ours(h) for h in handlers)]
    for event in [*wanted, *stale]:
        handlers = hooks.get(event, [])
        if not isinstance(handlers, list):
            raise ValueError(f"{where}: hooks.{event} is not a list of hooks; fix it before registering")
        kept = [h for h in handlers if not is_ours(h)]
        entry = None if uninstall else wanted.get(event)
        if entry is not None:
            kept.append(entry)
        if kept == handlers:
            continue
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
        changes.append(f"set {event} hook ({WHAT[event]}): {entry['bash']}" if entry else f"removed {event} hook")
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return changes
