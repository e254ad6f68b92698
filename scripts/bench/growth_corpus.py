"""The synthetic corpus of scripts/bench/growth.py, and its bulk load through COPY.

Messages mix Chinese, English, identifiers and tool output (Zipf vocabulary of search_bench.py),
sized like agent transcripts: short prompts, longer answers, a tail of multi-kilobyte tool
results. Tokenizing 10M messages in Python would take the better part of an hour on this machine,
so message bodies come from a pool of distinct bodies whose index form (index_message, the real
indexer's function) is computed once; a few percent of the messages carry a rare invented word and
are indexed one by one. Sessions are many and mostly short, spread over twelve months and many
projects; each loaded million adds a few very long sessions.

The load runs as the database owner and writes the tables that the definer functions write
(mm_create_session / mm_append / mm_index_messages), bypassing mm_append for speed, with the
derived columns computed as those functions do: sessions.last_seq, messages.payload_hash (sha256
of core/messages.py's canonical JSON), the message_search rows (role, created_at,
doc_len, tsv, echo), the BM25 statistics (search_term_stats, search_doc_stats, per shard) and the
watermarks (search_progress). `verify_sample` checks a sample against what the real append path
and indexer write.
"""

from __future__ import annotations

import random
import sys
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from search_bench import EN, IDS, sentence  # same folder

from mcp_memory.core.messages import prepare
from mcp_memory.core.sanitize import Cleaner
from mcp_memory.search.index import index_message
from mcp_memory.security.redact import from_config
from mcp_memory.store.search_store import SHARDS

POOL = int(__import__("os").environ.get("GROWTH_POOL", "150000"))  # distinct message bodies
RARE_SHARE = 0.03  # messages that carry one rare invented word
SYLLABLES = ["ka", "lo", "mir", "zen", "tob", "qua", "ris", "vel", "dun", "pex", "gor", "hal", "nim", "sul",
             "wex", "yar", "bri", "col", "fep", "jut", "kov", "lum", "mox", "nur", "oth", "pry", "quo", "rux"]
RARE_WORDS = [a + b + c for a in SYLLABLES for b in SYLLABLES for c in SYLLABLES]  # 21,952 invented words
PROJECTS = 40
LONG_PER_MILLION = 2  # very long sessions added per loaded million
LONG_LENGTH = 40_000
YEAR = 365 * 86400.0
MAX_BYTES = 1 << 24
CLEANER = Cleaner(from_config(None))  # the default redaction of a new install


def progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Body:
    role: str
    payload_json: str  # canonical JSON text of the payload (COPY text form escaped)
    payload_hash: str  # \x… hex of sha256(payload_json)
    tsv: str  # COPY-escaped tsvector literal
    doc_len: int
    terms: tuple[str, ...]


def _copy_text(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def make_body(role: str, text: str) -> Body:
    """The message as the append path stores it (core/messages.py prepare: normalised payload,
    canonical JSON, its sha256) and its index form as the indexer computes it."""
    message = {"role": role, "content": text} | ({"tool_call_id": "call_read_file"} if role == "tool" else {})
    prepared = prepare(message, max_bytes=MAX_BYTES, cleaner=CLEANER, field="message")[0]
    doc = index_message(prepared.payload)
    return Body(role, _copy_text(prepared.payload_json), "\\\\x" + prepared.digest.hex(), _copy_text(doc.tsv),
                doc.length, tuple(doc.terms))


def tool_output(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(30, 160)):
        ident = rng.choice(IDS)
        lines.append(f"  {ident} = {rng.choice(['None', 'True', str(rng.randint(0, 9999)), repr(rng.choice(EN))])}"
                     f"  # {rng.choice(EN)} {rng.choice(EN)}")
    return "\n".join(lines)


def body_text(rng: random.Random) -> tuple[str, str]:
    kind = rng.random()
    if kind < 0.40:
        return "user", " ".join(sentence(rng) for _ in range(rng.randint(1, 2)))
    if kind < 0.85:
        return "assistant", " ".join(sentence(rng) for _ in range(rng.randint(2, 10)))
    if kind < 0.97:
        return "assistant", "\n\n".join(sentence(rng) for _ in range(rng.randint(10, 40)))
    return "tool", tool_output(rng)


def build_pool(seed: int = 7) -> list[Body]:
    rng = random.Random(seed)
    start = time.perf_counter()
    pool = []
    for n in range(POOL):
        pool.append(make_body(*body_text(rng)))
        if n % 50_000 == 49_999:
            progress(f"body pool {n + 1:,}/{POOL:,} ({time.perf_counter() - start:.0f} s)")
    return pool


def session_id(rng: random.Random) -> str:
    return "ses_" + str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass
class Plan:
    """Sessions of one load step: (session_id, project, agent, messages, start time)."""

    sessions: list[tuple[str, str, str, int, float]]


def plan_step(rng: random.Random, messages: int, now: float) -> Plan:
    longs = max(1, round(LONG_PER_MILLION * messages / 1_000_000))
    length = min(LONG_LENGTH, messages // 4)
    sessions = []
    left = messages - longs * length
    for _ in range(longs):
        sessions.append((session_id(rng), "p00", "claude-code", length, now - rng.uniform(30, 60) * 86400))
    while left > 0:
        n = min(left, max(2, int(rng.expovariate(1 / 60))))
        project = f"p{min(int(rng.paretovariate(0.9)) - 1, PROJECTS - 1):02d}"
        sessions.append((session_id(rng), project, rng.choice(["claude-code", "opencode", "codex", "gemini"]), n,
                         now - rng.uniform(0, YEAR)))
        left -= n
    return Plan(sessions)


def _rows(plan: Plan, pool: list[Body], rng: random.Random) -> Iterator[tuple[str, str, int, Body, float, str]]:
    """(session, project, seq, body, time, the session's month): every row of a session carries the
    month the session started in (its partition, migration 0021)."""
    for sid, project, _agent, count, start in plan.sessions:
        gap = rng.uniform(5, 90)
        month = _month(start)
        for seq in range(1, count + 1):
            if rng.random() < RARE_SHARE:
                text = sentence(rng) + " " + rng.choice(RARE_WORDS) + " " + sentence(rng)
                body = make_body("user" if seq % 2 else "assistant", text)
            else:
                body = pool[rng.randrange(POOL)]
            yield sid, project, seq, body, start + seq * gap, month


def _month(seconds: float) -> str:
    return time.strftime("%Y-%m-01", time.gmtime(seconds))


def _ensure_months(cur, plan: Plan) -> None:
    """A partition for every month the step's sessions start in, before the COPY (rows of a month
    without one would land in the default partition, and moving millions of them out is slow)."""
    for month in sorted({_month(s[4]) for s in plan.sessions}):
        cur.execute("SELECT mm_add_month_partition(t, %(m)s::date) FROM unnest(mm_partitioned_tables()) AS t "
                    "WHERE mm_month_partition(t, %(m)s::date) IS NULL", {"m": month})


def _ts(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1e6) % 1_000_000:06d}+00"


def load_step(conn, plan: Plan, pool: list[Body], seed: int, *, commit: bool = True) -> None:
    """COPY one step's sessions, messages, search rows, statistics and watermarks, in one transaction
    (left open with commit=False: the caller rebuilds an index first)."""
    df: Counter = Counter()
    docs: Counter = Counter()
    lengths: Counter = Counter()
    total = sum(s[3] for s in plan.sessions)
    start = time.perf_counter()
    with conn.cursor() as cur:
        _ensure_months(cur, plan)
        with cur.copy("COPY sessions (session_id, project_id, agent_source, title, last_seq, created_at, updated_at)"
                      " FROM STDIN") as copy:
            for n, (sid, project, agent, count, began) in enumerate(plan.sessions):
                copy.write(f"{sid}\t{project}\t{agent}\tgrowth session {seed}-{n}\t{count}\t{_ts(began)}\t"
                           f"{_ts(began)}\n")
        with cur.copy("COPY messages (session_id, seq, project_id, append_id, role, payload, payload_hash, created_at,"
                      " received_at, part_month) FROM STDIN") as copy:
            for n, (sid, project, seq, body, at, month) in enumerate(_rows(plan, pool, random.Random(seed))):
                ts = _ts(at)
                copy.write(f"{sid}\t{seq}\t{project}\tg{seed}-{n}\t{body.role}\t{body.payload_json}\t"
                           f"{body.payload_hash}\t{ts}\t{ts}\t{month}\n")
                if n % 1_000_000 == 999_999:
                    progress(f"messages {n + 1:,}/{total:,} ({time.perf_counter() - start:.0f} s)")
        progress(f"messages copied ({time.perf_counter() - start:.0f} s); search rows next")
        # the same rows again (same seed), not kept in memory: 10M index forms would need gigabytes
        with cur.copy("COPY message_search (session_id, seq, project_id, role, created_at, doc_len, tsv, part_month)"
                      " FROM STDIN") as copy:
            for n, (sid, project, seq, body, at, month) in enumerate(_rows(plan, pool, random.Random(seed))):
                shard = zlib.crc32(sid.encode()) % SHARDS
                df.update(_keyed(project, shard, body.terms))
                docs[(project, shard)] += 1
                lengths[(project, shard)] += body.doc_len
                copy.write(f"{sid}\t{seq}\t{project}\t{body.role}\t{_ts(at)}\t{body.doc_len}\t{body.tsv}\t{month}\n")
                if n % 1_000_000 == 999_999:
                    progress(f"search rows {n + 1:,}/{total:,} ({time.perf_counter() - start:.0f} s)")
        progress(f"search rows copied ({time.perf_counter() - start:.0f} s); statistics next")
        _add_stats(cur, df, docs, lengths)
        with cur.copy("COPY search_progress (session_id, project_id, indexed_seq, stored_seq) FROM STDIN") as copy:
            for sid, project, _agent, count, _began in plan.sessions:
                copy.write(f"{sid}\t{project}\t{count}\t{count}\n")
    if commit:
        conn.commit()
    progress(f"step of {total:,} messages copied ({time.perf_counter() - start:.0f} s)")


def _keyed(project: str, shard: int, terms: tuple[str, ...]) -> Iterator[tuple[str, int, str]]:
    return ((project, shard, t) for t in terms)


def _add_stats(cur, df: Counter, docs: Counter, lengths: Counter) -> None:
    """Add to the statistics already there (an earlier step), as mm_index_messages does."""
    cur.execute("CREATE TEMP TABLE growth_df (project_id text, shard smallint, term text, df bigint) ON COMMIT DROP")
    with cur.copy("COPY growth_df FROM STDIN") as copy:
        for (project, shard, term), count in df.items():
            copy.write(f"{project}\t{shard}\t{_copy_text(term)}\t{count}\n")
    cur.execute("INSERT INTO search_term_stats AS t (project_id, term, shard, df) "
                "SELECT project_id, term, shard, df FROM growth_df "
                "ON CONFLICT (term, project_id, shard) DO UPDATE SET df = t.df + excluded.df")
    for (project, shard), count in docs.items():
        cur.execute("INSERT INTO search_doc_stats AS d (project_id, shard, docs, total_len) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (project_id, shard) DO UPDATE SET docs = d.docs + excluded.docs, "
                    "total_len = d.total_len + excluded.total_len",
                    (project, shard, count, lengths[(project, shard)]))
