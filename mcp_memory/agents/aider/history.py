"""Aider's `.aider.chat.history.md` cut into blocks, the way Aider itself reads it back.

Aider appends to the file as it goes (aider/io.py `append_chat_history`, each piece one write):
`\\n# aider chat started at <local time>` when a process starts, `> text  ` for every line it shows
the user (tool output: the command line, "Tokens: …", "Added … to the chat"), `\\n#### prompt  ` per
line of a prompt, and `\\n<reply>\\n\\n` for a reply. `--restore-chat-history` rebuilds the
conversation with `utils.split_chat_history_markdown`: `#### ` lines are the user's, `> ` lines
Aider's own output (not sent), `# ` lines skipped, every other line the assistant's; a message of
blank lines only is dropped. The cut below follows those rules, keeps every byte (each block holds
the blank lines before it, its `lead`), and knows where a block may still grow: an incremental read
stops before a line without its newline and before trailing blank lines (README.md, §Capture).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..base import FormatError, stable_id

HEADER = "# aider chat started at "
ID_LINE = "# mcp-memory session: "  # our own line at the top of a written file: Aider skips `# ` lines
USER = "#### "
TOOL = "> "
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass
class Block:
    kind: str  # "header", "id", "tool", "user", "assistant"
    start: int  # byte offset of the block in the file, its lead included
    lead: list[str] = field(default_factory=list)  # blank lines before the body
    body: list[str] = field(default_factory=list)

    @property
    def raw(self) -> str:
        return "".join(self.lead) + "".join(self.body)


def kind_of(line: str) -> str:
    if not line.strip():
        return "blank"
    if line.startswith(HEADER):
        return "header"
    if line.startswith(ID_LINE):
        return "id"
    if line.startswith(USER):
        return "user"
    if line.startswith(TOOL):
        return "tool"
    return "text"


def cut(data: bytes, start: int = 0, *, final: bool) -> tuple[list[Block], int]:
    """The blocks of `data[start:]` and the offset where reading stopped: after the last block, or
    (`final` False, a file Aider may still append to) before a partial line and trailing blanks."""
    blocks: list[Block] = []
    lead: list[str] = []
    lead_start = start
    current: Block | None = None
    trail: list[str] = []  # blank lines after an assistant line: inside the reply if text follows
    offset = start
    for raw in data[start:].splitlines(keepends=True):
        if not raw.endswith(b"\n") and not final:
            break
        line = _decode(raw, offset)
        kind = kind_of(line)
        if kind == "blank":
            if current is not None and current.kind == "assistant":
                if not trail:
                    lead_start = offset
                trail.append(line)
            else:
                if current is not None:
                    blocks.append(current)
                    current = None
                if not lead:
                    lead_start = offset
                lead.append(line)
        elif kind == "text" and current is not None and current.kind == "assistant":
            current.body += [*trail, line]
            trail = []
        elif kind == "user" and current is not None and current.kind == "user":
            current.body.append(line)
        else:
            if current is not None:
                blocks.append(current)
            if trail:  # the assistant's trailing blank lines lead the next block
                lead, trail = trail, []
            block = Block("assistant" if kind == "text" else kind, lead_start if lead else offset, lead, [line])
            lead = []
            current = block if kind in ("text", "user") else None
            if current is None:
                blocks.append(block)
        offset += len(raw)
    if current is not None:
        blocks.append(current)
    pending = lead + trail
    if final:
        return blocks, offset
    stopped = offset - sum(len(line.encode("utf-8")) for line in pending)
    return blocks, stopped if pending else offset


def _decode(raw: bytes, offset: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(f"byte {offset + exc.start} is not UTF-8 (Aider writes its history in UTF-8)") from None


def tail(data: bytes, blocks: list[Block]) -> str:
    """The blank lines after the last block of a whole file (kept so that a rewrite is exact)."""
    end = blocks[-1].start + len(blocks[-1].raw.encode("utf-8")) if blocks else 0
    return data[end:].decode("utf-8", errors="replace")


def native_id(path: Path, data: bytes) -> str | None:
    """Our id line when the file starts with one (a session we wrote), else an id made from the
    project folder and the first start line (Aider keeps no session id); None while the file has no
    complete first line."""
    for raw in data.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            return None
        line = raw.decode("utf-8", errors="replace")
        if not line.strip():
            continue
        if line.startswith(ID_LINE):
            value = line[len(ID_LINE):].strip()
            if not _ID.fullmatch(value):
                raise FormatError(f"{path}: the {ID_LINE.strip()!r} line holds no plain id ({value[:60]!r})")
            return value
        return "aider-" + stable_id("aider", path.resolve().parent, line.rstrip("\n"))[:24]
    return None


def started_at(line: str) -> datetime | None:
    """The time of a `# aider chat started at` line: Aider writes the local time without a zone;
    it is read as UTC, as the other adapters read zone-less times."""
    try:
        return datetime.strptime(line[len(HEADER):].strip(), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def user_text(body: list[str]) -> str:
    """A prompt from its `#### ` lines (Aider ends each with two spaces, a Markdown line break)."""
    lines = [line[len(USER):].rstrip("\n") for line in body]
    return "\n".join(line[:-2] if line.endswith("  ") else line for line in lines)


def tool_text(body: list[str]) -> str:
    line = body[0][len(TOOL):].rstrip("\n")
    return line[:-2] if line.endswith("  ") else line


# --- writing: the pieces exactly as Aider's io.py writes them ---------------------------------------


def user_piece(text: str) -> str:
    lines = text.splitlines() or ["<blank>"]
    return f"\n{USER}" + f"  \n{USER}".join(lines) + "  \n"


def reply_piece(text: str) -> str:
    """A reply as `ai_output` writes it. A reply line that Aider would read as something else (a
    Markdown quote `> `, a heading `#### `, one of the `# ` lines it skips) gets one leading space."""
    lines = [(" " + line) if kind_of(line + "\n") in ("user", "tool", "header", "id") or line.startswith("# ")
             else line for line in text.strip().splitlines()]
    return "\n" + "\n".join(lines) + "\n\n"


def escaped_lines(text: str) -> int:
    return sum(1 for line in text.strip().splitlines()
               if kind_of(line + "\n") in ("user", "tool", "header", "id") or line.startswith("# "))
