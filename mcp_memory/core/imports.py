"""Storing sessions read by an adapter: deterministic session ids, batched idempotent appends.

Importing the same native session again adds nothing: the session id derives from (project, agent,
native id) and every message's append_id from its native id, so each append is a duplicate.

An import stores each session whole: the session row and all its messages in one transaction, so
an import interrupted (Ctrl-C, a lost connection) leaves no empty or partial session, and running it
again stores what was not stored. Capture (`whole=False`, core/capture.py) appends batch by batch,
each within the call deadline: a hook must never wait long, and what it misses is stored by the next
run anyway.

Relays (README.md, "Relays"): a native session that `export` wrote from a stored session, and that
was continued in the target agent, becomes a fork of the source at the exported seq, in the source's
project, storing only the messages the export did not carry. The first capture must show the whole
carried history at its start (a recorded relay is not trusted on its native id alone); later,
incremental captures of the same native session go on appending to the fork.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

from .. import scaffolding
from ..errors import Conflict, Invalid, McpMemoryError, Unauthorized, Unavailable
from ..results import AppendManyResult, Imported
from ..schema import MessageIn, NeutralSession
from ..store.core_store import Store
from ..store.db import translate_errors
from ..store.imports_store import Relay, ensure_session, find_relays, fork_for_relay, record_relay
from . import messages as messages_core
from . import projects

if TYPE_CHECKING:
    from .service import Service

NAMESPACE = uuid.UUID("6f1c2b9e-4d0a-5b8e-9c3f-2a7d1e0b4c55")
BATCH = 1000


def imported_session_id(project_id: str, agent: str, native_id: str) -> str:
    name = "\x1f".join((project_id, agent, native_id))
    return f"ses_{uuid.uuid5(NAMESPACE, name)}"


def store_sessions(
    service: Service, sessions: list[NeutralSession], *, project_id: str | None,
    on_progress: Callable[[int, int], None] | None = None, whole: bool = True,
) -> list[Imported]:
    """Store each session (parents before their sub-agent sessions); one failure does not stop the rest.
    Results come back in the order of `sessions`. `whole`: each session in one transaction (see the
    module docstring)."""
    ids: dict[str, str] = {}
    results: dict[int, Imported] = {}
    order = sorted(range(len(sessions)), key=lambda i: sessions[i].parent_native_id is not None)
    for done, index in enumerate(order, 1):
        neutral = sessions[index]
        result = Imported(session_id="", native_id=neutral.native_id, agent=neutral.agent,
                          messages=len(neutral.messages), report=neutral.report.to_dict() if neutral.report else {})
        try:
            resolved = project_for(service, neutral, project_id)
            project = resolved.project
            result.project_id, result.project_rule = project, resolved.rule
            result.session_id = sid = imported_session_id(project, neutral.agent, neutral.native_id)
            relay = None if neutral.parent_native_id else relay_of(service, neutral)
            if relay is not None:
                result.session_id = imported_session_id(relay.project_id, neutral.agent, neutral.native_id)
                result.project_id, result.project_rule = relay.project_id, "relay"
                ids[neutral.native_id] = result.session_id
                _store_relayed(service, neutral, relay, result, whole=whole)
            else:
                ids[neutral.native_id] = sid
                _store(service, neutral, sid, project, ids.get(neutral.parent_native_id or ""), result, whole=whole)
        except (Unavailable, Unauthorized):
            raise  # the caller decides: fail, or spool for later (sync); a refused credential fails them all
        except McpMemoryError as exc:
            result.error, result.code = exc.render(), exc.code
        results[index] = result
        if on_progress:
            on_progress(done, len(sessions))
    return [results[i] for i in range(len(sessions))]


def project_for(service: Service, neutral: NeutralSession, explicit: str | None) -> projects.Resolved:
    """The session's project by the rules of core/projects.py (the config's [projects] table, a
    project file, the session's own project, its folder)."""
    named = neutral.meta.get("project") or neutral.meta.get("project_id")
    return projects.resolve(neutral.meta.get("cwd"), explicit=explicit, mapping=service.settings.raw.get("projects"),
                            session_project=named)


Append = Callable[[list[MessageIn]], AppendManyResult]


def _write(service: Service, session_id: str, messages: list[MessageIn], result: Imported, *, whole: bool,
           create: Callable[[psycopg.Connection], bool]) -> None:
    """Create the session (`create`: True when it is new) and append its messages: in that same
    transaction (`whole`, without the call deadline: an import is bulk work its user started), or
    each batch in a transaction of its own after the session's has committed."""
    if not whole:
        with service.db.transaction() as conn:
            result.created = create(conn)
        _append_all(lambda batch: service.append_messages(session_id, batch), messages, result)
        return
    before = result.new
    with service.db.transaction(bounded=False) as conn:
        result.created = create(conn)

        def append(batch: list[MessageIn]) -> AppendManyResult:
            prepared = messages_core.prepare(batch, max_bytes=service.settings.max_message_bytes,
                                             cleaner=service.cleaner)
            with translate_errors(), conn.transaction():  # a savepoint: a conflict undoes this batch only
                return messages_core.append_in(conn, session_id, prepared)

        _append_all(append, messages, result)
    if result.new > before:
        service.indexer.submit(session_id)  # after the commit, as service.append_messages does


def _store(service: Service, neutral: NeutralSession, sid: str, project: str, parent_sid: str | None,
           result: Imported, *, whole: bool) -> None:
    meta = {**_native_meta(service, neutral, result), "native_id": neutral.native_id, "imported_from": neutral.agent}
    meta.setdefault("agent_source", neutral.agent)
    if neutral.parent_native_id:
        meta["parent"] = {"native_id": neutral.parent_native_id, "tool_call_id": neutral.parent_tool_call_id,
                          "session_id": parent_sid}
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    def create(conn: psycopg.Connection) -> bool:
        return ensure_session(conn, session_id=sid, project_id=project, agent_source=str(meta["agent_source"]),
                              title=title, meta=meta)[1]

    _write(service, sid, neutral.messages, result, whole=whole, create=create)


def _append_all(append: Append, messages: list[MessageIn], result: Imported) -> None:
    for start in range(0, len(messages), BATCH):
        appended = append_marked(append, messages[start:start + BATCH])
        result.new += appended.duplicates.count(False)
        result.duplicates += appended.duplicates.count(True)
        result.redacted += appended.redacted


def append_marked(append: Append, messages: list[MessageIn]) -> AppendManyResult:
    """Append, idempotently, messages whose adapter may mark scaffolding (scaffolding.py) that an
    earlier version stored unmarked: importing such a file again must still add nothing. When the
    batch conflicts, each message goes alone, and one that conflicts with its marks goes as it was
    stored then (without them)."""
    try:
        return append(messages)
    except Conflict:
        if not any(scaffolding.is_marked(m) for m in messages):
            raise
    results = []
    for message in messages:
        try:
            results.append(append([message]))
        except Conflict:
            if not scaffolding.is_marked(message):
                raise
            results.append(append([scaffolding.unmarked(message)]))
    return AppendManyResult(seqs=[s for r in results for s in r.seqs],
                            duplicates=[d for r in results for d in r.duplicates],
                            append_ids=[a for r in results for a in r.append_ids],
                            redacted=sum(r.redacted for r in results))


def relay_of(service: Service, neutral: NeutralSession) -> Relay | None:
    """The relay this native session continues: the newest recorded one whose fork already exists, or
    whose carried history this session starts with."""
    with service.db.transaction() as conn:
        relays = find_relays(conn, agent=neutral.agent, native_id=neutral.native_id)
        if not relays:
            return None
        store = Store(conn)
        for relay in relays:
            if store.get_session(imported_session_id(relay.project_id, neutral.agent, neutral.native_id)):
                return relay
    ids = [m.append_id for m in neutral.messages]
    for relay in relays:
        if relay.carried and carries(ids, relay.carried):
            return relay
    return None


CARRIED_SHARE = 0.6  # of the carried messages a continuation must still hold


def carries(ids: list[str | None], carried: list[str]) -> bool:
    """Whether a native session continues the carried history: it holds the last carried message,
    most of the others, and those in their order. An agent may rewrite what it resumes: Gemini CLI
    0.61 puts a `<session_context>` message first, leaves its notices out and splits a tool call
    from its result, so a few carried ids are gone and a few new ones stand among them."""
    if not carried or carried[-1] not in ids:
        return False
    position = {append_id: index for index, append_id in enumerate(ids) if append_id is not None}
    held = [position[c] for c in carried if c in position]
    return held == sorted(held) and len(held) >= CARRIED_SHARE * len(carried)


def continuation(messages: list[MessageIn], carried: list[str]) -> list[MessageIn]:
    """What a relayed session adds to its source: the messages after the last carried one (what the
    agent put among the carried ones is its rewrite of them, not a new turn); a capture that holds
    only a later tail adds what it holds."""
    ids = [m.append_id for m in messages]
    if carried and carried[-1] in ids:
        messages = messages[ids.index(carried[-1]) + 1:]
    known = set(carried)
    return [m for m in messages if m.append_id not in known]


def record_export(service: Service, session_id: str, written: list[NeutralSession], native_id: str) -> Relay | None:
    """After `export`: the native session as the target agent will show it (`written`, read back from
    the files just written) is recorded as a relay of `session_id` at its current seq. None when the
    written files hold no such session."""
    main = next((w for w in written if w.native_id == native_id and w.messages), None)
    if main is None:
        return None
    carried = [m.append_id for m in main.messages if m.append_id]
    with service.db.transaction() as conn:
        return record_relay(conn, session_id=session_id, agent=main.agent, native_id=native_id, carried=carried)


def _store_relayed(service: Service, neutral: NeutralSession, relay: Relay, result: Imported, *,
                   whole: bool) -> None:
    meta = {**_native_meta(service, neutral, result), "native_id": neutral.native_id, "imported_from": neutral.agent,
            "relayed_from": {"session_id": relay.session_id, "snapshot_id": relay.snapshot_id,
                             "seq": relay.up_to_seq}}
    meta.setdefault("agent_source", neutral.agent)
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    new = continuation(neutral.messages, relay.carried)
    result.duplicates += len(neutral.messages) - len(new)
    result.relayed_from = meta["relayed_from"]
    def create(conn: psycopg.Connection) -> bool:
        return fork_for_relay(conn, relay, session_id=result.session_id, agent_source=str(meta["agent_source"]),
                              title=title, meta=meta)[1]

    _write(service, result.session_id, new, result, whole=whole, create=create)


def _native_meta(service: Service, neutral: NeutralSession, result: Imported) -> dict[str, Any]:
    """The meta read from the native file, as stored: JSON, secrets redacted (a title or cwd can hold
    one as well as a message can; the report counts them). The ids the import adds are not redacted."""
    meta, redacted = service.cleaner.clean_value(_json_safe(neutral.meta))
    result.redacted += redacted
    return meta


def _json_safe(meta: dict[str, Any]) -> dict[str, Any]:
    try:
        return json.loads(json.dumps(meta, default=str))
    except (TypeError, ValueError) as exc:
        raise Invalid(f"session meta is not JSON: {exc}") from None
