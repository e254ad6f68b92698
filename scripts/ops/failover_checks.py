"""What the failover drill reads back and checks: the host processes' logs (failover_hosts.py:
one JSON line per acknowledged append, retry, tail receipt) against the rows the database holds.

An acknowledged append is one whose call returned: it must be stored exactly once, at the seq its
answer named, and the seqs of a session must run 1..n without a gap. Per failover the numbers come
from the logs within its window (from its start to the next one's): the longest pause between two
acknowledged appends (any host) that overlaps the window, retries, duplicates, lost appends.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import psycopg


class DrillFailed(Exception):
    """A check of the drill did not hold."""


def check(ok: bool, what: str) -> None:
    if not ok:
        raise DrillFailed(what)


def _lines(path: Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a log (the last one may be half written while the process runs)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


@dataclass
class HostLogs:
    acks: list[dict[str, Any]] = field(default_factory=list)  # each with "host": its index
    retries: list[dict[str, Any]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    fatal: list[str] = field(default_factory=list)
    hosts: int = 0

    @classmethod
    def read(cls, work: Path, hosts: int) -> HostLogs:
        logs = cls(hosts=hosts)
        for n in range(hosts):
            for row in _lines(work / f"host{n}.jsonl"):
                logs._add(row, n)
        for row in _lines(work / "tail.jsonl"):
            logs._add(row, -1)
        return logs

    def _add(self, row: dict[str, Any], host: int) -> None:
        if "ack" in row:
            self.acks.append({**row, "host": host})
        elif "retry" in row:
            self.retries.append({**row, "host": host})
        elif "seen" in row:
            self.seen.append(row)
        elif "fatal" in row:
            self.fatal.append(f"{'tail' if host < 0 else f'host{host}'}: {row['fatal']}")

    def every_host_acked_after(self, t: float) -> bool:
        return {a["host"] for a in self.acks if a["t"] > t} == set(range(self.hosts))

    def tail_saw_after(self, t: float) -> bool:
        """The tail received an append of the tailed session acknowledged after `t`."""
        later = {a["seq"] for a in self.acks if a["host"] == self.hosts - 1 and a["t"] > t}
        return any(s["seen"] in later for s in self.seen)

    def last_seq(self, host: int) -> int:
        return max((a["seq"] for a in self.acks if a["host"] == host), default=0)

    def tail_max(self) -> int:
        return max((s["seen"] for s in self.seen), default=0)


def _stored(conn: psycopg.Connection, sessions: dict[str, str]) -> dict[str, list[tuple[int, str]]]:
    rows = conn.execute("SELECT session_id, seq, append_id FROM messages WHERE session_id = ANY(%s) ORDER BY 1, 2",
                        (list(sessions.values()),)).fetchall()
    stored: dict[str, list[tuple[int, str]]] = {sid: [] for sid in sessions.values()}
    for sid, seq, append_id in rows:
        stored[sid].append((seq, append_id))
    return stored


def _longest_pause(times: list[float], start: float, end: float) -> float:
    """The longest pause between two consecutive acknowledgements that overlaps [start, end]."""
    before = [t for t in times if t <= start]
    inside = [t for t in times if start < t <= end]
    points = ([before[-1]] if before else []) + inside
    return max((b - a for a, b in pairwise(points)), default=end - start)


def summarize(conn: psycopg.Connection, logs: HostLogs, events: list[dict[str, Any]], *, sessions: dict[str, str],
              pids: dict[str, int], snapshots: list[int], archived: set[int]) -> dict[str, Any]:
    check(not logs.fatal, f"a host or the tail failed: {logs.fatal}")
    stored = _stored(conn, sessions)
    where: dict[str, int] = {}
    for sid, rows in stored.items():
        seqs = [seq for seq, _ in rows]
        check(seqs == list(range(1, len(seqs) + 1)), f"session {sid}: seqs are not 1..{len(seqs)} without a gap")
        twice = [aid for aid, count in Counter(aid for _, aid in rows).items() if count > 1]
        check(not twice, f"session {sid}: append_ids stored more than once: {twice[:5]}")
        where.update({aid: seq for seq, aid in rows})
    lost = [a for a in logs.acks if a["ack"] not in where]
    moved = [a for a in logs.acks if a["ack"] in where and where[a["ack"]] != a["seq"]]
    times = sorted(a["t"] for a in logs.acks)
    ends = [e["started"] for e in events[1:]] + [max(times, default=0.0)]
    failovers = []
    for event, end in zip(events, ends, strict=True):
        def inside(row: dict[str, Any], start: float = event["started"], stop: float = end) -> bool:
            return start <= row["t"] <= stop
        failovers.append({
            "n": event["n"], "kind": event["kind"], "primary": f"{event['primary_before']} -> {event['primary_after']}",
            "unavailable_s": round(_longest_pause(times, event["started"], end), 2),
            "retries": sum(1 for r in logs.retries if inside(r) and r["host"] >= 0),
            "tail_retries": sum(1 for r in logs.retries if inside(r) and r["host"] < 0),
            "duplicates": sum(1 for a in logs.acks if inside(a) and a["duplicate"]),
            "lost_acknowledged": sum(1 for a in lost if inside(a)),
            "hosts_back_s": event["hosts_back_s"], "archiver_back_s": event["archiver_back_s"],
            "tail_back_s": event["tail_back_s"]})
    tailed = sessions["tailed"]
    unseen = {seq for seq, _ in stored[tailed]} - {s["seen"] for s in logs.seen}
    summary = {
        "failovers": failovers,
        "acknowledged_appends": len(logs.acks), "stored_messages": sum(len(rows) for rows in stored.values()),
        "lost_acknowledged": len(lost), "stored_at_another_seq": len(moved),
        "duplicates_answered": sum(1 for a in logs.acks if a["duplicate"]),
        "retries": sum(1 for r in logs.retries if r["host"] >= 0),
        "tail_received": len({s["seen"] for s in logs.seen}), "tail_missed": len(unseen),
        "snapshots_exported": f"{len(set(snapshots) & archived)}/{len(snapshots)}",
        "process_ids": pids,  # started once; each check of the run found every one of them alive
    }
    check(not lost, f"{len(lost)} acknowledged append(s) lost: {[a['ack'] for a in lost[:10]]}")
    check(not moved, f"{len(moved)} acknowledged append(s) stored at another seq than answered")
    check(not unseen, f"the tail never received seqs {sorted(unseen)[:10]} of the tailed session")
    check(set(snapshots) <= archived, f"snapshots not exported: {sorted(set(snapshots) - archived)}")
    return summary
