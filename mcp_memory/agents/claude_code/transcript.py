"""Claude Code transcript files as lines (the file layer of the Claude Code adapter): JSONL split into
parsed lines with their byte offsets, where a read stopped, and the `parentUuid` chain that says which
lines are the conversation (a DAG, not file order). read.py turns the lines into messages."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..base import MappingReport

MESSAGE_TYPES = ("user", "assistant")


@dataclass
class Line:
    """One parsed JSONL line and where it sits in the file."""

    record: dict[str, Any]
    start: int
    end: int

    @property
    def type(self) -> str:
        return str(self.record.get("type"))

    @property
    def uuid(self) -> str | None:
        return self.record.get("uuid")


def parse_lines(data: bytes, base: int, report: MappingReport, *, complete_only: bool) -> list[Line]:
    """Split raw bytes into parsed lines; with complete_only a trailing line without newline is left."""
    lines: list[Line] = []
    pos = 0
    while pos < len(data):
        newline = data.find(b"\n", pos)
        if newline < 0:
            if complete_only:
                break
            newline = len(data)
        raw = data[pos:newline].strip()
        if raw:
            try:
                record = json.loads(raw)
            except ValueError:
                record = None
            if isinstance(record, dict):
                lines.append(Line(record, base + pos, base + min(newline + 1, len(data))))
            else:
                report.drop("unparseable line (not a JSON object)")
        pos = newline + 1
    return lines


def consumed_offset(data: bytes, base: int) -> int:
    """Offset just past the last complete line in data."""
    return base + data.rfind(b"\n") + 1


def chain_uuids(lines: list[Line], report: MappingReport, anchor: str | None) -> set[str]:
    """uuids on the conversation: walk parentUuid back from the newest message line (not file order)."""
    by_uuid = {line.uuid: line for line in lines if line.uuid}
    leaf = next((line for line in reversed(lines) if line.type in MESSAGE_TYPES and line.uuid), None)
    chain: set[str] = set()
    current = leaf
    while current is not None and current.uuid and current.uuid not in chain:
        chain.add(current.uuid)
        parent = current.record.get("parentUuid")
        if parent is None and current.record.get("logicalParentUuid"):
            parent = current.record["logicalParentUuid"]  # compaction root: keep the history before it
        current = by_uuid.get(parent) if isinstance(parent, str) else None
        if current is None and parent is not None and parent != anchor:
            report.note(
                f"chain starts at parentUuid {parent}, which is not in the file (truncated transcript)"
            )
    return chain
