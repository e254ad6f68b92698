"""`/metrics` (Prometheus text format) scraped from serve-http — as the owner and as a gateway login,
which reads no table — and from `archive --daemon --metrics-port N`."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from agent_fixtures import claude_transcript
from archive_support import messages
from psycopg import sql
from rest_support import Server
from test_archive_daemon import archiver_env, spawn, wait_until  # noqa: F401

from mcp_memory.core.service import Service
from mcp_memory.errors import Forbidden, Invalid
from mcp_memory.host_report import host_name, report_spool
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.metrics import archive_samples
from mcp_memory.security import tokens
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*",?)*\})? '
                  r'(-?[0-9.e+-]+|\+Inf|-Inf|NaN)$')


def scrape(url: str) -> dict[str, float]:
    """GET /metrics: every line valid exposition format; the samples by their full name."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$", line), line
            continue
        assert LINE.match(line), line
        name, value = line.rsplit(" ", 1)
        samples[name] = float(value)
    return samples


def queue_state(service: Service) -> None:
    """Two snapshots waiting for the archiver, one session with work never snapshotted."""
    s = service.create_session("A")
    service.append_messages(s.session_id, messages(3))
    service.create_snapshot(s.session_id, "one")
    service.create_snapshot(s.session_id, "two")
    quiet = service.create_session("A")
    service.append_messages(quiet.session_id, messages(4))


def test_serve_http_metrics_as_owner_and_through_a_gateway(service: Service, settings, owner_db: Database,
                                                           make_token, admin_dsn: str) -> None:
    queue_state(service)
    token = make_token("metrics", ["A"]).token
    gateway = tokens.create_gateway(owner_db, name=f"mmtest_gw_{uuid.uuid4().hex[:8]}")
    try:
        for dsn in (owner_db.dsn(), gateway.dsn):
            registry = TokenRegistry(settings, dsn, lambda s: build(s, application_name="mcp-memory metrics-test"),
                                     recheck_seconds=0)
            with Server(create_app(registry, HttpOptions(rate_limit=0))) as server:
                assert server.call("GET", "/v1/sessions", token=token).status == 200
                assert server.call("GET", "/v1/sessions/ses_missing", token=token).status == 404
                for method in ("BREW", "PROPFIND"):  # crafted methods add no series of their own
                    server.call(method, "/v1/sessions", token=token)
                samples = scrape(server.url)
            assert not any("BREW" in name or "PROPFIND" in name for name in samples)
            assert samples['mcp_memory_http_requests_total{method="other",route="/v1/sessions",status="405"}'] == 2
            assert samples['mcp_memory_export_jobs{status="pending"}'] == 2
            assert samples["mcp_memory_export_queue_depth"] == 2 and samples["mcp_memory_export_failed_jobs"] == 0
            assert samples["mcp_memory_export_oldest_pending_seconds"] >= 0
            assert samples["mcp_memory_archive_unarchived_sessions"] == 2  # nothing exported yet
            assert samples["mcp_memory_archive_unarchived_messages"] == 7
            assert samples["mcp_memory_database_up"] == 1
            assert samples['mcp_memory_http_requests_total{method="GET",route="/v1/sessions",status="200"}'] == 1
            route = '{method="GET",route="/v1/sessions/{session_id}"'
            assert samples['mcp_memory_http_requests_total{method="GET",route="/v1/sessions/{session_id}",'
                           'status="404"}'] == 1
            assert samples[f'mcp_memory_http_request_seconds_count{route}}}'] == 1
            assert samples[f'mcp_memory_http_request_seconds_bucket{route},le="+Inf"}}'] == 1
            assert samples['mcp_memory_pool_connections{pool="http",state="in_use"}'] >= 0
            assert samples['mcp_memory_pool_max{pool="http"}'] == 8
            assert samples["mcp_memory_http_waiting_reads"] == 0
        registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory metrics"),
                                 recheck_seconds=0)
        with Server(create_app(registry, HttpOptions(rate_limit=0, metrics=False))) as server:
            with pytest.raises(urllib.error.HTTPError) as off:
                scrape(server.url)
            assert off.value.code == 404
            off.value.close()  # the error holds the response and its socket
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (gateway.role,))
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(gateway.role)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_archiver_daemon_serves_metrics_on_its_port(service: Service, spawn, tmp_path: Path) -> None:  # noqa: F811
    queue_state(service)
    port = free_port()
    proc = spawn("--daemon", "--repo", str(tmp_path / "archive"), "--metrics-port", str(port))
    url = f"http://127.0.0.1:{port}"

    def exported() -> dict[str, float] | None:
        try:
            samples = scrape(url)
        except OSError:
            return None
        # the queue's numbers are asked at most every 5 s (metrics.cached): wait for both sides
        done = samples.get('mcp_memory_export_jobs{status="done"}') == 2
        return samples if samples.get("mcp_memory_archiver_exported_total") == 2 and done else None

    samples = wait_until(exported, timeout=40)
    assert isinstance(samples, dict)
    assert samples["mcp_memory_archiver_leader"] == 1
    assert samples["mcp_memory_export_queue_depth"] == 0 and samples['mcp_memory_export_jobs{status="done"}'] == 2
    assert samples["mcp_memory_archive_unarchived_sessions"] == 1  # the quiet one: not idle long enough yet
    assert samples['mcp_memory_pool_max{pool="archiver"}'] >= 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def _host_env(profile: dict[str, str], tmp_path: Path, created: tokens.CreatedToken, home: str) -> dict[str, str]:
    return {**profile, "MCP_MEMORY_HOME": str(tmp_path / home), "MCP_MEMORY_DSN": created.dsn,
            "MCP_MEMORY_PASSWORD": created.token, "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def _hook(env: dict[str, str], transcript: Path) -> subprocess.CompletedProcess:
    payload = json.dumps({"hook_event_name": "Stop", "transcript_path": str(transcript), "session_id": "x"})
    return subprocess.run([sys.executable, "-m", "mcp_memory", "sync", "claude-code", "--hook", "--project", "A"],
                          env=env, input=payload, check=False, capture_output=True, text=True, timeout=120)


def test_hosts_report_their_capture_spool_and_metrics_show_it(settings, owner_db: Database, make_token, profile,
                                                              tmp_path: Path) -> None:
    writer = make_token("spoolhost", ["A"])
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(claude_transcript())
    env = _host_env(profile, tmp_path, writer, "host")
    spool = tmp_path / "host" / "mcp-memory" / "spool"
    spool.mkdir(parents=True, mode=0o700)
    stuck = spool / "1700000000000000000-deadbeef.json"  # a spool file the hook cannot read: set aside, kept
    stuck.write_text("{not json")
    assert _hook(env, transcript).returncode == 0  # a hook never fails the agent
    stuck = stuck.with_name(stuck.name + ".unreadable")
    assert stuck.exists()
    with owner_db.transaction() as conn:
        rows = conn.execute("SELECT role_name, host, spool_files, oldest_spooled_at FROM host_reports").fetchall()
    assert [(r[0], r[1], r[2]) for r in rows] == [(writer.role, host_name(), 1)]
    assert rows[0][3].timestamp() == 1700000000.0

    stuck.unlink()  # the admin fixed it; the next run delivers and reports an empty spool
    assert _hook(env, transcript).returncode == 0
    with owner_db.transaction() as conn:
        assert conn.execute("SELECT spool_files, oldest_spooled_at FROM host_reports").fetchall() == [(0, None)]
        conn.execute("SELECT mm_report_host('laptop-2', 3, now() - interval '2 hours')")  # the owner may report
    samples = {s.name: s.value for s in archive_samples(owner_db)}
    assert samples["mcp_memory_host_reports"] == 2 and samples["mcp_memory_host_spool_files"] == 3
    assert samples["mcp_memory_hosts_with_spool"] == 1
    assert 7000 < samples["mcp_memory_host_spool_oldest_seconds"] < 7400
    # a token sees only its own reports; the archiver every host
    archiver = make_token("spoolarch", None, archiver=True)
    own, seen = (_samples_as(settings, created) for created in (writer, archiver))
    assert own["mcp_memory_host_reports"] == 1 and own["mcp_memory_host_spool_files"] == 0
    assert seen["mcp_memory_host_reports"] == 2 and seen["mcp_memory_host_spool_files"] == 3


def _samples_as(settings, created: tokens.CreatedToken) -> dict[str, float]:
    db = Database(replace(settings, dsn=created.dsn, password=created.token, pool_max=1, auto_migrate=False))
    try:
        return {s.name: s.value for s in archive_samples(db)}
    finally:
        db.close()


def test_host_reports_refuse_crafted_values(settings, make_token) -> None:
    writer, reader = make_token("rep", ["A"]), make_token("repro", ["A"], read_only=True)

    def as_role(created: tokens.CreatedToken) -> Database:
        return Database(replace(settings, dsn=created.dsn, password=created.token, pool_max=1, auto_migrate=False))

    host_db, reader_db = as_role(writer), as_role(reader)
    try:
        _crafted_reports(host_db, reader_db)
    finally:
        host_db.close()
        reader_db.close()


def _crafted_reports(host_db: Database, reader_db: Database) -> None:
    for host, files, error in (("", 1, "host:"), ("a b", 1, "host:"), ("-lead", 1, "host:"), ("x" * 201, 1, "host:"),
                               ("ok", -1, "spool_files:"), ("ok", 10**7, "spool_files:")):
        with pytest.raises(Invalid, match=error), host_db.transaction() as conn:
            conn.execute("SELECT mm_report_host(%s, %s, NULL)", (host, files))
    with pytest.raises(Invalid, match="oldest_spooled_at"), host_db.transaction() as conn:
        conn.execute("SELECT mm_report_host('ok', 1, now() + interval '2 days')")
    with pytest.raises(Forbidden), reader_db.transaction() as conn:
        conn.execute("SELECT mm_report_host('ok', 1, NULL)")
    with pytest.raises(Forbidden), host_db.transaction() as conn:  # the table is written only by the function
        conn.execute("INSERT INTO host_reports (role_name, host, spool_files) VALUES ('someone', 'x', 9)")
    for n in range(20):  # many host names from one token: the oldest report gives way, 16 stay
        with host_db.transaction() as conn:
            conn.execute("SELECT mm_report_host(%s, 1, NULL)", (f"h{n}",))
    assert report_spool(host_db, Path("/nonexistent")) is True  # and its own host name takes a 17th's place
    with host_db.transaction() as conn:
        row = conn.execute("SELECT * FROM mm_host_metrics(86400)").fetchone()
    assert row is not None and row[0] == 16 and row[2] == 15  # h4…h19 with one file each, minus h4 for this host's empty report
    assert report_spool(reader_db, Path("/nonexistent")) is False  # refused, said in the log, no raise
