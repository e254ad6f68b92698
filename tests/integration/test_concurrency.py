"""Many writers on many "hosts": no lost, doubled or out-of-order message, no gap, and a reader
paging with after_seq misses nothing while others append."""

from __future__ import annotations

import multiprocessing as mp
import random

from mcp_memory.config import load_settings
from mcp_memory.wiring import build

WRITERS = 6
PER_WRITER = 60


def _writer(dsn: str, home: str, sessions: list[str], writer: int, seed: int) -> None:
    rng = random.Random(seed)
    svc = build(load_settings(dsn=dsn, environ={"MCP_MEMORY_HOME": home}))
    sent: list[tuple[str, dict]] = []
    try:
        for i in range(PER_WRITER):
            sid = sessions[i % len(sessions)]
            message = {"append_id": f"w{writer}-{i}", "role": "user", "content": f"writer {writer} message {i}"}
            svc.append_message(sid, message)
            sent.append((sid, message))
            if rng.random() < 0.3:  # a client retrying an earlier append (lost reply, restart …)
                old_sid, old = rng.choice(sent)
                assert svc.append_message(old_sid, old).duplicate
            if rng.random() < 0.1:
                batch = [{"append_id": f"w{writer}-{i}-b{k}", "role": "assistant", "content": "b"} for k in range(3)]
                svc.append_messages(sid, batch)
                sent.extend((sid, m) for m in batch)
    finally:
        svc.db.close()


def _reader(dsn: str, home: str, sid: str, stop: mp.Event, out: mp.Queue) -> None:
    svc = build(load_settings(dsn=dsn, environ={"MCP_MEMORY_HOME": home}))
    seen: list[int] = []
    after = 0
    try:
        while True:
            finished = stop.is_set()
            page = svc.read_session(sid, after_seq=after, limit=7)
            seen += [m.seq for m in page.messages]
            after = page.next_after_seq
            if finished and not page.has_more and not page.messages:
                break
    finally:
        svc.db.close()
        out.put(seen)


def test_concurrent_appends_and_paging(service, settings, tmp_path) -> None:
    sessions = [service.create_session("conc").session_id for _ in range(3)]
    ctx = mp.get_context("spawn")
    stop, out = ctx.Event(), ctx.Queue()
    home = str(tmp_path / "h")
    reader = ctx.Process(target=_reader, args=(settings.dsn, home, sessions[0], stop, out))
    reader.start()
    writers = [ctx.Process(target=_writer, args=(settings.dsn, home, sessions, w, w * 7919)) for w in range(WRITERS)]
    for p in writers:
        p.start()
    for p in writers:
        p.join(timeout=120)
        assert p.exitcode == 0
    stop.set()
    seen = out.get(timeout=60)
    reader.join(timeout=30)

    for sid in sessions:
        messages, after = [], 0
        while True:
            page = service.read_session(sid, after_seq=after, limit=1000, view="full")
            messages += page.messages
            after = page.next_after_seq
            if not page.has_more:
                break
        seqs = [m.seq for m in messages]
        assert seqs == list(range(1, len(seqs) + 1))  # gap-free, ordered
        ids = [m.append_id for m in messages]
        assert len(ids) == len(set(ids))  # nothing doubled
        assert service.get_session(sid).last_seq == len(seqs)
        singles = {i for i in ids if "-b" not in i}
        expected = {f"w{w}-{i}" for w in range(WRITERS) for i in range(PER_WRITER) if sessions[i % 3] == sid}
        assert singles == expected  # nothing lost
        if sid == sessions[0]:
            assert seen == seqs  # the concurrent reader missed nothing and saw commit order
