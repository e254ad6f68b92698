"""What survives a hop: source agent → neutral → target agent → neutral, compared without a database.

A hop keeps a session when every user and assistant text, every tool call with its result, and
the thinking come back; whatever does not come back must be named in the target's write report.
Texts are compared after whitespace folding and by containment, because targets may split or merge
messages; tool calls are paired with their results by (name, arguments, result text), because
targets may rename call ids. Going to another agent, the source agent's own scaffolding
(scaffolding.py) is left out first, as `export` does.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import scaffolding
from ..schema import MessageIn
from . import adapter_for, names
from .base import MappingReport, NeutralSession, WriteOptions

CATEGORY_WORDS = {
    "user text": ("user", "text", "content", "message"),
    "assistant text": ("assistant", "text", "content", "message"),
    "system text": ("system",),
    "tool pair": ("tool",),
    "tool name/arguments": ("tool",),
    "thinking": ("thinking", "reasoning"),
}


def available_agents() -> dict[str, str | None]:
    """Agent name → None when its adapter loads, else why not."""
    status: dict[str, str | None] = {}
    for name in names():
        try:
            adapter_for(name)
            status[name] = None
        except ImportError as exc:
            status[name] = f"{type(exc).__name__}: {exc}"
    return status


@dataclass
class Facts:
    """What a neutral session says, in comparable form."""

    texts: dict[str, list[str]] = field(default_factory=dict)  # role → folded texts
    tool_pairs: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    thinking: list[str] = field(default_factory=list)


@dataclass
class Hop:
    source: str
    target: str
    fixture: str
    kept: Counter[str] = field(default_factory=Counter)
    lost: Counter[str] = field(default_factory=Counter)
    unexplained: list[str] = field(default_factory=list)
    report: MappingReport | None = None
    error: str | None = None

    @property
    def reported(self) -> int:
        return sum(self.report.dropped.values()) if self.report else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "target": self.target,
            "fixture": self.fixture,
            "kept": dict(self.kept),
            "lost": dict(self.lost),
            "unexplained": self.unexplained,
            "report": self.report.to_dict() if self.report else None,
            "error": self.error,
        }


def facts(session: NeutralSession) -> Facts:
    result = Facts()
    calls: dict[str, tuple[str, str]] = {}
    results: dict[str, str] = {}
    for message in session.messages:
        text = _fold(message_text(message))
        if message.role in ("user", "assistant", "system"):
            parts = [_fold(part) for part in text_parts(message)]
            result.texts.setdefault(message.role, []).extend(part for part in parts if part)
        for call in message.tool_calls or []:
            calls[call.id] = (call.function.name, _canonical_json(call.function.arguments))
        if message.role == "tool" and message.tool_call_id:
            results[message.tool_call_id] = results.get(message.tool_call_id, "") + text
        if message.thinking is not None and message.thinking.content and not message.thinking.encrypted:
            result.thinking.append(_fold(message.thinking.content))
    for call_id, (name, arguments) in calls.items():
        if call_id in results:
            result.tool_pairs[(name, arguments, results[call_id])] += 1
    return result


def text_parts(message: MessageIn) -> list[str]:
    if isinstance(message.content, str):
        return [message.content]
    return [part.text for part in message.content or [] if part.type == "text"]  # type: ignore[attr-defined]


def message_text(message: MessageIn) -> str:
    return "\n".join(text_parts(message))


def compare(before: NeutralSession, after: NeutralSession, *, report: MappingReport, hop: Hop) -> Hop:
    """Fill `hop` with what came back, what did not, and which losses the report does not name."""
    old, new = facts(before), facts(after)
    for role in ("user", "assistant", "system"):
        haystack = " ".join(new.texts.get(role, []))
        for text in old.texts.get(role, []):
            hop.kept[f"{role} text"] += text in haystack
            hop.lost[f"{role} text"] += text not in haystack
    _compare_tools(old.tool_pairs, Counter(new.tool_pairs), hop)
    thought = " ".join(new.thinking)
    for text in old.thinking:
        hop.kept["thinking"] += text in thought
        hop.lost["thinking"] += text not in thought
    hop.lost = +hop.lost
    hop.unexplained = [category for category in hop.lost if not _named(report, category)]
    return hop


def relay(source: str, target: str, fixture: Path, *, out_dir: Path | None = None) -> list[Hop]:
    """Run every session of `fixture` from `source` through `target`; one Hop per session."""
    hops = []
    for session in adapter_for(source).read([fixture]):
        if source != target:  # as export does: the source agent's own scaffolding is not another agent's turn
            session.messages, _ = scaffolding.without_scaffolding(session.messages)
        hop = Hop(source=source, target=target, fixture=fixture.name)
        with tempfile.TemporaryDirectory(prefix="relay-") as scratch:
            written = adapter_for(target).write(session, Path(out_dir or scratch), WriteOptions())
            hop.report = written.report
            back = adapter_for(target).read(written.files)
        merged = NeutralSession(agent=target, native_id=written.native_id, messages=[])
        for part in back:
            merged.messages.extend(part.messages)
        hops.append(compare(session, merged, report=written.report, hop=hop))
    return hops


def _compare_tools(
    old: Counter[tuple[str, str, str]], remaining: Counter[tuple[str, str, str]], hop: Hop
) -> None:
    """A call whose result came back is kept; a renamed tool or rewritten arguments must be reported."""
    for pair, count in old.items():
        for _ in range(count):
            exact = [p for p in remaining if remaining[p] and p[:2] == pair[:2] and pair[2] in p[2]]
            loose = [p for p in remaining if remaining[p] and pair[2] in p[2]]
            candidates = exact or loose
            match = candidates[0] if candidates else None
            hop.kept["tool pair"] += match is not None
            hop.lost["tool pair"] += match is None
            if match is not None:
                remaining[match] -= 1
                hop.lost["tool name/arguments"] += not exact


def _named(report: MappingReport, category: str) -> bool:
    items = " ".join(list(report.dropped) + list(report.transformed)).lower()
    return any(word in items for word in CATEGORY_WORDS[category])


def _fold(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _canonical_json(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments
