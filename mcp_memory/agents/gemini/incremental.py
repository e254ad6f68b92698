"""What is new in a Gemini CLI chat file since the last capture (`mcp-memory sync gemini`).

A chat file only grows, but its lines are not all new messages: Gemini re-writes a record under the
same id (a `gemini` message first without, then with its tool calls), reloads the whole list with
`{"$set": {"messages": […]}}` when a session is resumed, and `{"$rewindTo": id}` drops messages. So the
cursor keeps, besides the byte offset of the first unread line, the header, the live record ids in
order with a digest of each, and the records already turned into messages. The new lines are
replayed over that skeleton exactly as a full read replays the file; records already captured with
the same digest are skipped, new ones become messages with the append_ids a full read gives them.

Decisions (README.md, §Capture):
- Stored messages are a log. A `$rewindTo` after capture drops the rewound records from the cursor's
  live list (what follows is read normally), but what was captured stays stored: it was said.
- A record that changes after it was captured keeps its stored version (noted in the report). To
  avoid that, a capture run during a turn (a hook on a mid-turn event) holds back the last `gemini`
  record, which Gemini may still re-write, until a run at a turn boundary (AfterAgent, SessionEnd,
  a manual sync).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..base import MappingReport, NeutralSession
from .read import AGENT, ChatState, RecordMapper, replay_lines

CURSOR_VERSION = 1
KNOWN = "__captured_digest__"  # marks a skeleton record: captured earlier, content not re-read


def digest(record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fresh_cursor(head: str) -> dict[str, Any]:
    return {"v": CURSOR_VERSION, "offset": 0, "head": head, "header": {}, "live": [], "emitted": {},
            "held": {}, "answered": [], "done": [], "facts": {}}  # fmt: skip


def head_of(path: Path) -> str:
    """A digest of the header line: another file at the same path starts the cursor over."""
    with path.open("rb") as handle:
        return hashlib.sha256(handle.readline()).hexdigest()[:16]


def usable(cursor: dict[str, Any] | None, head: str, size: int) -> bool:
    """A cursor this version wrote for this very file, whole: anything else starts over (a full read,
    whose messages the store already has, is always safe)."""
    if not (isinstance(cursor, dict) and cursor.get("v") == CURSOR_VERSION and cursor.get("head") == head):
        return False
    offset = cursor.get("offset")
    shapes = {"header": dict, "live": list, "emitted": dict, "held": dict, "answered": list, "done": list,
              "facts": dict}  # fmt: skip
    return (isinstance(offset, int) and 0 <= offset <= size
            and all(isinstance(cursor.get(key), kind) for key, kind in shapes.items())
            and all(isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
                    for pair in cursor["live"])
            and all(isinstance(x, str) for x in [*cursor["answered"], *cursor["done"], *cursor["emitted"].values()]))  # fmt: skip


def new_lines(path: Path, offset: int, report: MappingReport) -> tuple[list[Any], int]:
    """The complete lines after `offset` (a line still being written waits for the next run)."""
    with path.open("rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    lines = []
    for raw in data[:end].splitlines():
        if raw.strip():
            try:
                lines.append(json.loads(raw))
            except ValueError:
                report.drop("undecodable JSON line")
    return lines, offset + end


def skeleton(cursor: dict[str, Any], report: MappingReport) -> ChatState:
    """The state the cursor describes: held records in full, captured ones as digests."""
    state = ChatState(report=report, metadata=dict(cursor["header"]))
    for record_id, known in cursor["live"]:
        held = cursor["held"].get(record_id)
        state.records[record_id] = held if isinstance(held, dict) else {"id": record_id, KNOWN: known}
    return state


def read_since(
    path: Path, cursor: dict[str, Any] | None, *, settled: bool = True
) -> tuple[list[NeutralSession], dict[str, Any]]:
    """The session in `path` with only the messages new since `cursor`, and the next cursor.
    `settled`: False when the run happens during a turn (then the last `gemini` record waits)."""
    from .adapter import session_meta

    path = Path(path)
    report = MappingReport(agent=AGENT, direction="read")
    head = head_of(path)
    if not usable(cursor, head, path.stat().st_size):
        cursor = fresh_cursor(head)
    assert cursor is not None
    lines, offset = new_lines(path, cursor["offset"], report)
    state = replay_lines(lines, report, skeleton(cursor, report))
    fresh = _fresh_records(state, cursor, report, settled)
    session_id = str(state.metadata.get("sessionId") or path.stem)
    mapper = RecordMapper(session_id, report, answered=set(cursor["answered"]), done=set(cursor["done"]),
                          continuing=bool(cursor["emitted"]))
    messages = mapper.map(fresh)
    facts = _facts(cursor["facts"], session_meta(state, path, fresh))
    next_cursor = _next(cursor, state, fresh, mapper, offset, facts)
    if not messages:
        return [], next_cursor
    meta = {**facts, "native": {"header": state.metadata}}
    session = NeutralSession(agent=AGENT, native_id=session_id, messages=messages, meta=meta, report=report,
                             source_path=path)  # fmt: skip
    return [session], next_cursor


def _fresh_records(
    state: ChatState, cursor: dict[str, Any], report: MappingReport, settled: bool
) -> list[dict[str, Any]]:
    """Live records not captured yet; the last `gemini` record waits when the turn is still running."""
    fresh = []
    for record in state.records.values():
        if KNOWN in record:
            continue
        captured = cursor["emitted"].get(record["id"])
        if captured is None:
            fresh.append(record)
        elif captured != digest(record):
            report.transform("record re-written after it was captured (0.61 resume reload) → captured version kept")
    records = list(state.records.values())
    if not settled and fresh and records and fresh[-1] is records[-1] and fresh[-1].get("type") == "gemini":
        fresh.pop()  # the turn is running: Gemini may still add its tool calls
    return fresh


def _facts(known: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """Session facts: the first title found is kept; later values of the others win."""
    facts = {k: v for k, v in meta.items() if k != "native"}
    if known.get("title"):
        facts["title"] = known["title"]
    return {**known, **facts}


def _next(
    cursor: dict[str, Any], state: ChatState, fresh: list[dict[str, Any]], mapper: RecordMapper, offset: int,
    facts: dict[str, Any],
) -> dict[str, Any]:
    emitted = dict(cursor["emitted"])
    emitted.update({record["id"]: digest(record) for record in fresh})
    live = []
    held = {}
    for record_id, record in state.records.items():
        if KNOWN in record:
            live.append([record_id, record[KNOWN]])
        elif record_id in emitted:
            live.append([record_id, emitted[record_id]])
        else:
            live.append([record_id, digest(record)])
            held[record_id] = record
    return {"v": CURSOR_VERSION, "offset": offset, "head": cursor["head"], "header": state.metadata,
            "live": live, "emitted": emitted, "held": held, "answered": sorted(mapper.answered),
            "done": sorted(mapper.done), "facts": facts}  # fmt: skip
