"""`/metrics` in the Prometheus text format (version 0.0.4) for serve-http and the archiver daemon
(README, Monitoring). No client library: a few counters and histograms kept in memory, and gauges
read when scraped (the export queue through mm_archive_metrics, the connection pool's own counts).
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg

from .errors import McpMemoryError
from .store.archive_store import ArchiveStore
from .store.db import Database

log = logging.getLogger(__name__)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HOST_REPORT_WINDOW = 86400  # seconds: a host that has not reported for a day no longer counts
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    name: str
    kind: str  # gauge | counter
    help: str
    value: float
    labels: Labels = ()


def _labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = [*labels, *extra]
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}" if pairs else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Registry:
    """The process's counters and latency histograms (thread-safe), rendered with the gauges of
    each collector (a callable returning samples, run at scrape time)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._help: dict[str, tuple[str, str]] = {}
        self._counters: dict[tuple[str, Labels], float] = {}
        self._histograms: dict[tuple[str, Labels], list[float]] = {}  # bucket counts (…, +Inf), sum, count
        self._collectors: list[Callable[[], Iterable[Sample]]] = []

    def counter(self, name: str, help: str, labels: Labels = (), value: float = 1.0) -> None:
        with self._lock:
            self._help.setdefault(name, ("counter", help))
            self._counters[(name, labels)] = self._counters.get((name, labels), 0.0) + value

    def observe(self, name: str, help: str, seconds: float, labels: Labels = ()) -> None:
        with self._lock:
            self._help.setdefault(name, ("histogram", help))
            h = self._histograms.setdefault((name, labels), [0.0] * (len(LATENCY_BUCKETS) + 3))
            h[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1  # the first bucket ≥ seconds
            h[-2] += seconds
            h[-1] += 1

    def collect(self, collector: Callable[[], Iterable[Sample]]) -> None:
        self._collectors.append(collector)

    def render(self) -> str:
        samples: list[Sample] = []
        for collector in self._collectors:
            try:
                samples.extend(collector())
            except McpMemoryError as exc:  # the database away: say so, keep the process's own numbers
                log.warning("metrics: %s", exc)
                samples.append(Sample("mcp_memory_database_up", "gauge", "1 when the database answered the "
                                      "scrape's queries", 0))
        lines: list[str] = []
        shown: set[str] = set()

        def head(name: str, kind: str, help: str) -> None:
            if name not in shown:
                shown.add(name)
                lines.extend([f"# HELP {name} {help}", f"# TYPE {name} {kind}"])

        for s in sorted(samples, key=lambda s: s.name):
            head(s.name, s.kind, s.help)
            lines.append(f"{s.name}{_labels(s.labels)} {_number(s.value)}")
        with self._lock:
            counters = sorted(self._counters.items())
            histograms = sorted((k, list(v)) for k, v in self._histograms.items())
            helps = dict(self._help)
        for (name, labels), value in counters:
            head(name, *helps[name])
            lines.append(f"{name}{_labels(labels)} {_number(value)}")
        for (name, labels), h in histograms:
            head(name, *helps[name])
            running = 0.0
            for bound, count in zip((*LATENCY_BUCKETS, math.inf), h[:-2], strict=True):
                running += count
                lines.append(f"{name}_bucket{_labels(labels, (('le', _number(bound)),))} {_number(running)}")
            lines.append(f"{name}_sum{_labels(labels)} {_number(h[-2])}")
            lines.append(f"{name}_count{_labels(labels)} {_number(h[-1])}")
        return "\n".join(lines) + "\n"


def archive_samples(db: Database) -> list[Sample]:
    """The export queue, what is not archived yet and the hosts' capture spools (numbers only), as
    the caller's role sees them, in one transaction."""
    with db.transaction() as conn:
        row = ArchiveStore(conn).metrics()
        hosts = host_samples(conn)
    pending, running, done, failed = (int(row.get(k) or 0) for k in ("pending", "running", "done", "failed"))
    oldest, lag = float(row.get("oldest_pending_seconds") or 0), float(row.get("unarchived_oldest_seconds") or 0)
    sessions, messages = int(row.get("unarchived_sessions") or 0), int(row.get("unarchived_messages") or 0)
    jobs = "export jobs by status"
    return [Sample("mcp_memory_database_up", "gauge", "1 when the database answered the scrape's queries", 1),
            *(Sample("mcp_memory_export_jobs", "gauge", jobs, float(n), (("status", status),))
              for status, n in (("pending", pending), ("running", running), ("done", done), ("failed", failed))),
            Sample("mcp_memory_export_queue_depth", "gauge", "export jobs waiting (pending + running)",
                   float(pending + running)),
            Sample("mcp_memory_export_failed_jobs", "gauge", "export jobs that failed for good (archive retry)",
                   float(failed)),
            Sample("mcp_memory_export_oldest_pending_seconds", "gauge", "age of the oldest waiting export job",
                   float(oldest)),
            Sample("mcp_memory_archive_unarchived_sessions", "gauge", "sessions with work not yet in the archive",
                   float(sessions)),
            Sample("mcp_memory_archive_unarchived_messages", "gauge", "messages not yet in the archive",
                   float(messages)),
            Sample("mcp_memory_archive_lag_seconds", "gauge", "export lag: age of the oldest last change of a "
                   "session not yet archived", float(lag)),
            *hosts]


def host_samples(conn: psycopg.Connection) -> list[Sample]:
    """What hosts reported of their capture spools in the last HOST_REPORT_WINDOW seconds
    (mm_host_metrics, migration 0018; nothing on an older schema): numbers, never host names."""
    found = conn.execute("SELECT to_regprocedure('mm_host_metrics(double precision)') IS NOT NULL").fetchone()
    if not (found and found[0]):
        return []
    row = conn.execute("SELECT * FROM mm_host_metrics(%s)", (HOST_REPORT_WINDOW,)).fetchone()
    hosts, with_spool, files, oldest, stale = row if row else (0, 0, 0, 0.0, 0.0)
    window = f"hosts that reported in the last {HOST_REPORT_WINDOW // 3600} h"
    return [Sample("mcp_memory_host_reports", "gauge", window, float(hosts or 0)),
            Sample("mcp_memory_host_spool_files", "gauge", "capture spool files held by hosts (sessions not yet "
                   "delivered to the database), as the hosts last reported", float(files or 0)),
            Sample("mcp_memory_hosts_with_spool", "gauge", "hosts whose last report had spool files",
                   float(with_spool or 0)),
            Sample("mcp_memory_host_spool_oldest_seconds", "gauge", "age of the oldest spool file a host reported",
                   float(oldest or 0)),
            Sample("mcp_memory_host_report_oldest_seconds", "gauge", "age of the oldest of those hosts' last "
                   "reports", float(stale or 0))]


def cached(collector: Callable[[], list[Sample]], seconds: float = 5.0) -> Callable[[], list[Sample]]:
    """The collector's samples, asked at most every `seconds`: /metrics needs no token, so however
    often it is scraped, the database answers the queue query at most that often."""
    lock = threading.Lock()
    last: list[Any] = [-math.inf, []]

    def collect() -> list[Sample]:
        with lock:
            if time.monotonic() - last[0] >= seconds:
                last[1] = collector()
                last[0] = time.monotonic()
            return list(last[1])

    return collect


def pool_samples(db: Database, name: str) -> list[Sample]:
    """Connections of the process's pool: in use, idle, the maximum, callers waiting for one."""
    stats: dict[str, Any] = db.pool_stats()
    labels = (("pool", name),)
    size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
    return [Sample("mcp_memory_pool_connections", "gauge", "pooled database connections by state",
                   float(size - idle), (*labels, ("state", "in_use"))),
            Sample("mcp_memory_pool_connections", "gauge", "pooled database connections by state",
                   float(idle), (*labels, ("state", "idle"))),
            Sample("mcp_memory_pool_max", "gauge", "the pool's maximum size",
                   float(stats.get("pool_max", db.settings.pool_max)), labels),
            Sample("mcp_memory_pool_waiting", "gauge", "callers waiting for a pooled connection",
                   float(stats.get("requests_waiting", 0)), labels)]


class MetricsServer:
    """GET /metrics on its own small HTTP server (`archive --daemon --metrics-port N`), in a thread."""

    def __init__(self, registry: Registry, host: str, port: int) -> None:
        render = registry.render

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics here")
                    return
                body = render().encode()
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("metrics: " + format, *args)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="mcp-memory metrics", daemon=True)

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
