"""Register mcp-memory with OpenCode 1.x: the MCP server entry and the capture plugin.

Facts (README.md in this package, §Install; plugin globs checked in the 1.18.33 binary:
`{plugin,plugins}/*.{ts,js}`):
- config `opencode.json` or `opencode.jsonc` — user scope in `$XDG_CONFIG_HOME/opencode/`
  (default `~/.config/opencode/`), project scope in the project root;
- MCP entry `"mcp": {"<name>": {"type": "local", "command": [argv…], "environment": {…}, "enabled": true}}`;
- plugins: JS files in `<config>/plugins/` (user) or `<project>/.opencode/plugins/` (project).

The config is edited textually so that comments, formatting and every other setting survive;
files are replaced atomically. Installing twice changes nothing; uninstall removes only our entry
and our plugin file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...files import atomic_write
from ..install_support import SERVER_NAME, check_request

PLUGIN_NAME = "mcp-memory-capture.js"
PLUGIN_MARKER = "mcp-memory capture plugin for OpenCode"
PLUGIN_SOURCE = Path(__file__).with_name("plugin.js")


def register(
    *,
    scope: str,
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    environ: Mapping[str, str],
    uninstall: bool = False,
) -> list[str]:
    """Add (or remove) the MCP server entry and the capture plugin; returns what changed."""
    check_request(scope, command)
    config_dir = config_home(environ) if scope == "user" else cwd
    plugin_dir = config_home(environ) / "plugins" if scope == "user" else cwd / ".opencode" / "plugins"
    config = config_file(config_dir)
    if uninstall:
        return [*remove_server(config), *remove_plugin(plugin_dir / PLUGIN_NAME)]
    entry = {"type": "local", "command": [*command, "serve"], "environment": dict(env), "enabled": True}
    return [*add_server(config, entry), *add_plugin(plugin_dir / PLUGIN_NAME, command, env)]


def config_home(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CONFIG_HOME")
    if base:
        return Path(base) / "opencode"
    home = environ.get("HOME")
    if not home:
        raise ValueError("neither XDG_CONFIG_HOME nor HOME is set")
    return Path(home) / ".config" / "opencode"


def config_file(folder: Path) -> Path:
    """The existing `opencode.jsonc` or `opencode.json` (jsonc first), else a new `opencode.json`."""
    for name in ("opencode.jsonc", "opencode.json"):
        if (folder / name).is_file():
            return folder / name
    return folder / "opencode.json"


# --- the MCP entry -----------------------------------------------------------------------------------


def add_server(config: Path, entry: dict[str, Any], *, schema: str = "https://opencode.ai/config.json") -> list[str]:
    """Our `mcp` entry into the config (OpenCode's shape, also Kilo Code's), comments kept."""
    text = config.read_text(encoding="utf-8") if config.exists() else ""
    if not text.strip():
        text = '{\n  "$schema": "' + schema + '"\n}\n'
    updated = set_member(text, ["mcp", SERVER_NAME], entry)
    if updated == text and config.exists():
        return [f"{config}: MCP server {SERVER_NAME} already registered"]
    atomic_write(config, updated, new_mode=0o600)
    return [f"{config}: registered MCP server {SERVER_NAME} ({' '.join(entry['command'])})"]


def remove_server(config: Path) -> list[str]:
    if not config.exists():
        return [f"{config}: no config, nothing to remove"]
    text = config.read_text(encoding="utf-8")
    updated = remove_member(text, ["mcp", SERVER_NAME])
    if updated == text:
        return [f"{config}: MCP server {SERVER_NAME} was not registered"]
    atomic_write(config, updated, new_mode=0o600)
    return [f"{config}: removed MCP server {SERVER_NAME}"]


# --- the capture plugin ------------------------------------------------------------------------------


def plugin_source(command: list[str], env: dict[str, str], agent: str = "opencode") -> str:
    source = PLUGIN_SOURCE.read_text(encoding="utf-8")
    source = _fill(source, "command", json.dumps(list(command)))
    source = _fill(source, "agent", json.dumps(agent))
    return _fill(source, "env", json.dumps(dict(env), sort_keys=True))


def _fill(source: str, slot: str, value: str) -> str:
    start_marker = f"/* mcp-memory:{slot} */ "
    start = source.index(start_marker) + len(start_marker)
    end = source.index(" /* end */", start)
    return source[:start] + value + source[end:]


def add_plugin(target: Path, command: list[str], env: dict[str, str], agent: str = "opencode") -> list[str]:
    source = plugin_source(command, env, agent)
    if target.exists() and target.read_text(encoding="utf-8") == source:
        return [f"{target}: capture plugin already installed"]
    if target.exists() and PLUGIN_MARKER not in target.read_text(encoding="utf-8"):
        raise ValueError(f"{target} exists and is not the mcp-memory plugin; not overwriting it")
    atomic_write(target, source, new_mode=0o600)
    return [f"{target}: installed capture plugin (sync on session.idle, recall in the system prompt)"]


def remove_plugin(target: Path) -> list[str]:
    if not target.exists():
        return [f"{target}: capture plugin was not installed"]
    if PLUGIN_MARKER not in target.read_text(encoding="utf-8"):
        return [f"{target}: not the mcp-memory plugin, left in place"]
    target.unlink()
    return [f"{target}: removed capture plugin"]



# --- comment-preserving JSONC edits ------------------------------------------------------------------


@dataclass
class Member:
    key: str
    start: int  # first character of the key string
    value_start: int
    value_end: int  # one past the value


@dataclass
class Obj:
    open: int  # index of "{"
    close: int  # index of "}"
    members: list[Member]


class _Scanner:
    """Finds object members with their character spans, skipping comments, strings and trailing commas."""

    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, pos: int) -> int:
        text = self.text
        while pos < len(text):
            if text[pos].isspace():
                pos += 1
            elif text.startswith("//", pos):
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", pos):
                end = text.find("*/", pos + 2)
                if end < 0:
                    raise ValueError("unterminated /* comment in the OpenCode config")
                pos = end + 2
            else:
                break
        return pos

    def string_end(self, pos: int) -> int:
        pos += 1
        while pos < len(self.text):
            if self.text[pos] == "\\":
                pos += 2
            elif self.text[pos] == '"':
                return pos + 1
            else:
                pos += 1
        raise ValueError("unterminated string in the OpenCode config")

    def value_end(self, pos: int) -> int:
        char = self.text[pos]
        if char == '"':
            return self.string_end(pos)
        if char in "{[":
            return self.container_end(pos)
        end = pos
        while end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "+-."):
            end += 1
        if end == pos:
            raise ValueError(f"unexpected {char!r} at offset {pos} in the OpenCode config")
        return end

    def container_end(self, pos: int) -> int:
        closer = "}" if self.text[pos] == "{" else "]"
        pos = self.skip(pos + 1)
        while self.text[pos] != closer:
            pos = self.value_end(pos)
            pos = self.skip(pos)
            if self.text[pos] == ":":
                pos = self.skip(pos + 1)
                continue
            if self.text[pos] == ",":
                pos = self.skip(pos + 1)
        return pos + 1

    def object_at(self, pos: int) -> Obj:
        if self.text[pos] != "{":
            raise ValueError(f"expected an object at offset {pos} in the OpenCode config")
        members = []
        cursor = self.skip(pos + 1)
        while self.text[cursor] != "}":
            key_end = self.string_end(cursor)
            key = json.loads(self.text[cursor:key_end])
            colon = self.skip(key_end)
            value_start = self.skip(colon + 1)
            value_end = self.value_end(value_start)
            members.append(Member(key, cursor, value_start, value_end))
            cursor = self.skip(value_end)
            if self.text[cursor] == ",":
                cursor = self.skip(cursor + 1)
        return Obj(pos, cursor, members)


def _root(scanner: _Scanner) -> Obj:
    return scanner.object_at(scanner.skip(0))


def _find(scanner: _Scanner, path: list[str]) -> tuple[Obj, Member | None, int]:
    """The object holding the deepest existing member of `path`, that member, and its depth."""
    holder = _root(scanner)
    for depth, key in enumerate(path):
        member = next((m for m in holder.members if m.key == key), None)
        if member is None or depth == len(path) - 1:
            return holder, member, depth
        holder = scanner.object_at(member.value_start)
    raise AssertionError("unreachable")


def _indent_of(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    prefix = text[line_start:pos]
    return prefix if not prefix.strip() else ""


def get_member(text: str, path: list[str]) -> Any:
    """The JSON value at `path` (object keys), or None when it is absent."""
    if not text.strip():
        return None
    scanner = _Scanner(text)
    _, member, depth = _find(scanner, path)
    if member is None or depth != len(path) - 1:
        return None
    raw = text[member.value_start : member.value_end]
    try:
        return json.loads(raw)
    except ValueError:  # a nested object may hold comments or trailing commas: not needed here
        return None


def configured_model(cwd: Path, environ: Mapping[str, str]) -> str | None:
    """The `provider/model` OpenCode runs when none is given: the project's config wins over the
    user's (OpenCode merges them in that order)."""
    for folder in (cwd, config_home(environ)):
        path = config_file(folder)
        if path.is_file():
            model = get_member(path.read_text(encoding="utf-8"), ["model"])
            if isinstance(model, str) and "/" in model:
                return model
    return None


def set_member(text: str, path: list[str], value: Any) -> str:
    """Set `path` (object keys) to `value`, creating missing objects; text elsewhere is untouched."""
    scanner = _Scanner(text)
    holder, member, depth = _find(scanner, path)
    if member is not None:
        indent = _indent_of(text, member.start)
        rendered = _render(value, indent)
        if text[member.value_start : member.value_end] == rendered:
            return text
        return text[: member.value_start] + rendered + text[member.value_end :]
    nested: Any = value
    for key in reversed(path[depth + 1 :]):
        nested = {key: nested}
    return _insert(text, holder, path[depth], nested)


def _insert(text: str, holder: Obj, key: str, value: Any) -> str:
    close_indent = _indent_of(text, holder.close)
    if holder.members:
        indent = _indent_of(text, holder.members[0].start) or close_indent + "  "
        last = holder.members[-1]
        addition = f",\n{indent}{json.dumps(key)}: {_render(value, indent)}"
        return text[: last.value_end] + addition + text[last.value_end :]
    indent = close_indent + "  "
    body = f"\n{indent}{json.dumps(key)}: {_render(value, indent)}\n{close_indent}"
    inside = text[holder.open + 1 : holder.close]
    return text[: holder.open + 1] + inside.rstrip(" \t") + body + text[holder.close :]


def _render(value: Any, indent: str) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n" + indent)


def remove_member(text: str, path: list[str]) -> str:
    """Remove the member at `path` with its separating comma; other text is untouched."""
    scanner = _Scanner(text)
    holder, member, depth = _find(scanner, path)
    if member is None or depth != len(path) - 1:
        return text
    index = holder.members.index(member)
    if index + 1 < len(holder.members):  # cut up to the next member
        start, end = member.start, holder.members[index + 1].start
    elif index > 0:  # last of several: cut from the previous value's end
        start, end = holder.members[index - 1].value_end, member.value_end
    else:  # the only member
        start = max(holder.open + 1, len(text[: member.start].rstrip()))
        end = _after_comma(scanner, member.value_end)
    return text[:start] + text[end:]


def _after_comma(scanner: _Scanner, pos: int) -> int:
    after = scanner.skip(pos)
    return after + 1 if scanner.text[after] == "," else pos
