"""The bulk load of growth_corpus.py against the real write path: a sample of loaded messages is
appended again through the core Service (mm_append) into a scratch session and indexed by the real
indexer (mm_index_messages); each message's hash and search row must equal the loaded ones."""

from __future__ import annotations

from typing import Any


def verify_sample(service: Any, conn: Any, count: int) -> str:
    rows = conn.execute(
        "SELECT m.session_id, m.seq, m.payload, m.payload_hash, s.doc_len, s.tsv::text, s.role, s.echo "
        "FROM messages m TABLESAMPLE SYSTEM (0.5) JOIN message_search s USING (session_id, seq) "
        "JOIN sessions x ON x.session_id = m.session_id WHERE x.title LIKE 'growth session %%' LIMIT %s",
        (count,)).fetchall()
    conn.commit()
    sid = service.create_session("growth-verify", {"title": "growth load check"}).session_id
    service.append_messages(sid, [row[2] for row in rows])
    service.indexer.index_session(sid)
    real = conn.execute("SELECT m.seq, m.payload_hash, s.doc_len, s.tsv::text, s.role, s.echo FROM messages m "
                        "JOIN message_search s USING (session_id, seq) WHERE m.session_id = %s ORDER BY m.seq",
                        (sid,)).fetchall()
    conn.commit()
    if len(real) != len(rows):
        raise SystemExit(f"verify: {len(rows)} appended, {len(real)} indexed by the real indexer")
    for loaded, got in zip(rows, real, strict=True):
        if tuple(loaded[3:]) != tuple(got[1:]):
            raise SystemExit(f"verify: loaded row {loaded[0]}#{loaded[1]} differs from the real path: "
                             f"{loaded[3:]!r} vs {got[1:]!r}")
    return f"{len(rows)} loaded messages identical to the real append + indexer (hash, doc_len, tsv, role, echo)"
