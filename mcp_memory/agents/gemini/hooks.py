"""Gemini CLI hooks: the chat file a hook payload names, and our entries in `settings.json` `hooks`.

Checked against Gemini CLI 0.61.0 (bundle: `HookRunner`, `HookEventHandler.createBaseInput`; bundled
docs/hooks/reference.md): `{"hooks": {Event: [{"matcher", "hooks": [{"type": "command", "command",
"name", "timeout" (milliseconds)}]}]}}`; the command runs through the shell with the payload JSON on
stdin (`session_id`, `transcript_path`, `cwd`, `hook_event_name`, `timestamp`, plus per-event fields).
A lifecycle matcher "" matches every source. Exit 0 with empty stdout is a silent success; text
on stdout (or on stderr when stdout is empty) that is not JSON is shown to the user as a system message.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..base import FormatError
from ..install_support import without_handlers
from . import NAME

CAPTURE_EVENTS = ("AfterAgent", "SessionEnd")  # a turn has ended / the session closes: `sync gemini --hook`
# The project's memory for the model: `recall --hook`, at the first prompt of a session. Not SessionStart:
# headless, 0.61 puts that context *before* the prompt, and a resume then drops the whole user record
# (README.md, §Hooks); BeforeAgent context is a part *after* the prompt, which a resume keeps.
RECALL_EVENT = "BeforeAgent"
TIMEOUT_MS = {"AfterAgent": 30000, "SessionEnd": 30000, "BeforeAgent": 30000}
HOOK_NAMES = {"capture": "mcp-memory-capture", "recall": "mcp-memory-recall"}
WHAT = {
    "AfterAgent": "captures the new messages of each finished turn into mcp-memory",
    "SessionEnd": "captures what is left when the session closes, such as an interrupted turn",
    "BeforeAgent": "gives the model the project's recall from mcp-memory with the first prompt of a session",
}


def transcript_from_hook(payload: Mapping[str, Any]) -> Path:
    """The chat file of the payload's `transcript_path`: a `.jsonl`/`.json` file in a `chats` folder."""
    event = payload.get("hook_event_name") or "an unknown event"
    value = payload.get("transcript_path")
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise FormatError(f"hook payload of {event}: transcript_path must name the chat file (got {value!r:.80})")
    path = Path(value).expanduser()
    if path.suffix not in (".jsonl", ".json") or "chats" not in path.parts[:-1]:
        raise FormatError(f"hook payload of {event}: transcript_path must be a Gemini chat file "
                          f"(…/chats/….jsonl), got {value[:200]!r}")  # fmt: skip
    return path


def first_prompt_pending(payload: Mapping[str, Any]) -> bool:
    """True when the chat file the payload names holds no prompt yet: the BeforeAgent run of a
    session's first prompt (Gemini writes the prompt's record after BeforeAgent). A chat file that
    cannot be read counts as started, so that a missing file never repeats the recall at every prompt."""
    from .marks import is_prompt

    try:
        path = transcript_from_hook(payload)
        with path.open(encoding="utf-8", errors="replace") as lines:
            for raw in lines:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                records = line.get("$set", {}).get("messages") if isinstance(line, dict) else None
                for record in records if isinstance(records, list) else [line]:
                    if is_prompt(record):
                        return False
    except (OSError, FormatError, AttributeError):
        return False
    return True


def hook_command(command: list[str], env: Mapping[str, str], *words: str) -> str:
    """The shell line of a hook: the profile's variables (never a secret), then the command."""
    assignments = [f"{key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    return " ".join([*assignments, shlex.join([*command, *words])])


def wanted_hooks(command: list[str], env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Event → our handler entry."""
    capture = hook_command(command, env, "sync", NAME, "--hook")
    recall = hook_command(command, env, "recall", "--hook", "--agent", NAME)
    entries = {event: _entry("capture", capture, event) for event in CAPTURE_EVENTS}
    entries[RECALL_EVENT] = _entry("recall", recall, RECALL_EVENT)
    return entries


def _entry(role: str, command: str, event: str) -> dict[str, Any]:
    return {"type": "command", "name": HOOK_NAMES[role], "command": command, "timeout": TIMEOUT_MS[event],
            "description": WHAT[event]}  # fmt: skip


def merge_hooks(data: dict[str, Any], wanted: dict[str, dict[str, Any]], uninstall: bool, where: Path) -> list[str]:
    """Our handlers into `data["hooks"]` (or out of it); every other group and handler is kept."""
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{where}: hooks is not an object of events; fix it before registering")
    changes = []
    stale = [event for event, groups in hooks.items() if event not in wanted and isinstance(groups, list)
             and any(_without_ours(g) is not g for g in groups)]  # ours under an event we no longer use
    for event in [*wanted, *stale]:
        entry = wanted.get(event)
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"{where}: hooks.{event} is not a list of hook groups; fix it before registering")
        kept = [group for group in (_without_ours(g) for g in groups) if group is not None]
        if entry is not None and not uninstall:
            kept.append({"matcher": "", "hooks": [entry]})
        if kept == groups:
            continue
        if kept:
            hooks[event] = kept
        else:
            hooks.pop(event, None)
        if entry is not None and not uninstall:
            changes.append(f"set {event} hook ({WHAT[event]}): {entry['command']}")
        else:
            changes.append(f"removed {event} hook")
    if hooks:
        data["hooks"] = hooks
    else:
        data.pop("hooks", None)
    return changes


def _without_ours(group: Any) -> Any:
    return without_handlers(group, is_ours)


def is_ours(handler: Any) -> bool:
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    if handler.get("name") in HOOK_NAMES.values():
        return True
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    ours = words[-3:] == ["sync", NAME, "--hook"] or words[-4:] == ["recall", "--hook", "--agent", NAME]
    return ours and any("mcp-memory" in w or "mcp_memory" in w for w in words)


def disabled_notes(data: Mapping[str, Any], where: Path) -> list[str]:
    """Why Gemini would not run our hooks, from `hooksConfig` (enabled: false, or our names disabled)."""
    config = data.get("hooksConfig")
    if not isinstance(config, Mapping):
        return []
    notes = []
    if config.get("enabled") is False:
        notes.append(f"{where}: note: hooksConfig.enabled is false, so Gemini runs no hooks: nothing is "
                     "captured automatically (use `mcp-memory sync gemini --path FILE`)")  # fmt: skip
    disabled = config.get("disabled")
    for name in HOOK_NAMES.values():
        if isinstance(disabled, list) and name in disabled:
            notes.append(f"{where}: note: hooksConfig.disabled lists {name}, so Gemini skips it")
    return notes
