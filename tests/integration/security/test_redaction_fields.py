"""Every stored text goes through the one redaction pass, through the real service into PostgreSQL:
session meta and title (create, update, fork), snapshot commit messages and meta, decisions
(summary, rationale, alternatives, metadata; create and update), context values, agent descriptions,
imported session meta. The git archive of a snapshot holds none of the secrets either."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest
from archive_support import cli  # noqa: F401  (the in-process `mcp-memory` fixture)

from mcp_memory.agents.base import NeutralSession
from mcp_memory.core.imports import store_sessions
from mcp_memory.core.service import Service
from mcp_memory.schema import MessageIn

# fake secrets, assembled so that the source itself holds none whole
GHP = "ghp_" + "Zq8Lw2Nv5Rt7Yb1Kc4Xd6Fg9Hj3Mp0Sa2Ue5Wq"
AWS = "AKIA" + "QW3ERT7YUI9OPAS2"
URL_PW = "Pg-" + "s3cr3t@2024"
DB_PW = "hunter2-" + "Quartz!"
TELEGRAM = "5938274610:" + "AAH" + "k3Jd9Lq2Wm8Zx5Vb7Nc1Tr4Yp6Gs0Fe2"  # 35 after the colon
AZURE = "Ab" + "Cd3Ef5Gh7Ij9Kl1Mn3Op5Qr7St9Uv1Wx3Yz5Ab7Cd9Ef1Gh3Ij5Kl7Mn9Op1Qr3St5Uv7Wx9Yz1Ab3Cd5Ef7Gh9Ij1Kl3Mn5Op7=="
CAMEL = "Xk9" + "-vT4mQ8rW2zL"
SECRETS = (GHP, AWS, URL_PW, DB_PW, TELEGRAM, AZURE, CAMEL)
TABLES = ("sessions", "snapshots", "export_jobs", "decisions", "session_context", "agents", "messages")


def stored_text(dsn: str) -> str:
    """Every row of every table that holds text, as text."""
    with psycopg.connect(dsn) as conn:
        return "\n".join(row[0] for table in TABLES
                         for row in conn.execute(f"SELECT t::text FROM {table} t").fetchall())


def assert_clean(text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, leaked


def test_every_stored_field_is_redacted(service: Service, settings) -> None:
    session = service.create_session("proj", {
        "title": f"deploy with {GHP}", "agent_source": "claude-code", "db_password": DB_PW,
        "env": {"DATABASE_URL": f"postgresql://app:{URL_PW}@db/prod", "bot": TELEGRAM}, "cwd": "/srv/app",
    })
    sid = session.session_id
    assert GHP not in (session.title or "") and "[REDACTED:github_token]" in (session.title or "")
    assert session.meta["db_password"] == "[REDACTED:password]" and session.meta["cwd"] == "/srv/app"
    assert service.append_message(sid, {"role": "user", "content": f"key {AWS}", "append_id": "a1"}).redacted == 1

    updated = service.update_session_meta(sid, {"title": f"now {AWS}", "githubToken": CAMEL,
                                                "notes": f"AccountKey={AZURE};EndpointSuffix=core.windows.net"})
    assert updated.title == "now [REDACTED:aws_access_key]" and updated.meta["githubToken"] == "[REDACTED:password]"

    snap = service.create_snapshot(sid, f"handover: token {GHP}, curl -u ci:{DB_PW} https://ci")
    listed = service.list_snapshots(sid)[0]
    assert listed.snapshot_id == snap.snapshot_id and "[REDACTED:github_token]" in listed.commit_msg
    forked = service.load_snapshot(snap.snapshot_id, {"title": f"fork {TELEGRAM}", "dbPassword": CAMEL})

    created = service.record_decision(
        sid, "security", f"rotate {GHP}", rationale=f"leaked in postgresql://app:{URL_PW}@db/prod",
        alternatives=[{"option": f"keep {AWS}", "why_not": f"password={DB_PW} is public"}],
        metadata={"apiKey": CAMEL, "ticket": "SEC-12", "nested": [{"bot": TELEGRAM}]})
    decision = service.get_decision(created.decision_id)
    assert decision.summary == "rotate [REDACTED:github_token]" and decision.metadata["ticket"] == "SEC-12"
    assert decision.metadata["apiKey"] == "[REDACTED:password]"
    service.update_decision(created.decision_id, created.version, summary=f"rotated {AWS}",
                            rationale=f"mysql -u root -p{DB_PW} was in the log", metadata={"secret": CAMEL})
    assert service.search_decisions(GHP.split("_", 1)[1]).decisions == []  # not findable either

    assert service.set_context(sid, "db_password", DB_PW).revision == 1
    service.set_context(sid, "deploy", {"steps": [f"export GITHUB_TOKEN={GHP}"], "SessionToken": CAMEL})
    context = service.get_context(sid).context
    assert context["db_password"] == "[REDACTED:password]"
    assert context["deploy"] == {"steps": ["export GITHUB_TOKEN=[REDACTED:github_token]"],
                                 "SessionToken": "[REDACTED:password]"}
    service.describe_agent("claude-code", f"uses {GHP}")

    text = stored_text(settings.dsn)
    assert_clean(text)
    assert forked.session_id in text and "SEC-12" in text and "[REDACTED:telegram_bot_token]" in text


def test_imported_session_meta_is_redacted(service: Service, settings) -> None:
    neutral = NeutralSession(agent="claude-code", native_id="7f067304-aaaa-4bbb-8ccc-000000000001",
                             meta={"title": f"fix {GHP}", "cwd": "/srv/app", "token": CAMEL},
                             messages=[MessageIn.model_validate({"role": "user", "content": f"my key {AWS}",
                                                                 "append_id": "n1"})])
    [imported] = store_sessions(service, [neutral], project_id="proj")
    assert imported.error is None and imported.redacted == 3  # the message, the title and the token
    session = service.get_session(imported.session_id)
    assert session.meta["native_id"] == neutral.native_id and session.meta["token"] == "[REDACTED:password]"
    assert_clean(stored_text(settings.dsn))


def test_archive_of_a_snapshot_holds_no_secret(service: Service, cli, tmp_path: Path) -> None:  # noqa: F811
    session = service.create_session("proj", {"title": f"release {GHP}", "deploy_token": CAMEL,
                                              "hooks": {"telegram": f"https://api.telegram.org/bot{TELEGRAM}/send"}})
    service.append_messages(session.session_id, [{"role": "user", "content": f"db postgresql://a:{URL_PW}@h/d"}])
    service.update_session_meta(session.session_id, {"title": f"release {AWS}"})
    service.create_snapshot(session.session_id, f"ship it\n\nAzure AccountKey={AZURE}; password: \"{DB_PW}\"")
    repo = tmp_path / "archive"
    assert cli("archive", "--once", "--repo", str(repo)) == 0

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    files = "\n".join(p.read_text(encoding="utf-8") for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    history = git("log", "--all", "--format=%B") + git("for-each-ref", "--format=%(contents)", "refs/tags")
    objects = git("log", "--all", "-p", "--format=%B")
    for text in (files, history, objects):
        assert_clean(text)
    assert "ship it" in history and "[REDACTED:password]" in history
    meta = json.loads(next(repo.rglob("*.meta.json")).read_text())
    assert meta["meta"]["deploy_token"] == "[REDACTED:password]" and "[REDACTED:" in json.dumps(meta["meta"]["hooks"])


@pytest.mark.parametrize("value", [{"max_tokens": 4096, "pass": 6379}, "token = token2", ["max_token=4096"]])
def test_ordinary_values_are_stored_as_given(service: Service, value: object) -> None:
    session = service.create_session("proj", {"title": "max_token=4096", "limits": value})
    assert session.title == "max_token=4096" and session.meta["limits"] == value
    assert service.set_context(session.session_id, "limits", value).revision == 1
    assert service.get_context(session.session_id, "limits").context["limits"] == value


def test_ids_names_and_keys_are_redacted_and_retries_still_dedupe(service: Service, settings) -> None:
    """Secrets in places that are not values: an append_id, tool call ids and names, a tool result's
    tool_call_id, object keys of meta, metadata and context, a context key, an agent_source."""
    session = service.create_session("proj", {"agent_source": f"bot {GHP}", "env": {GHP: "github"}})
    sid = session.session_id
    assert session.meta["env"] == {"[REDACTED:github_token]": "github"}
    call = {"role": "assistant", "content": None, "append_id": f"turn {GHP}",
            "tool_calls": [{"id": f"call {AWS}", "type": "function",
                            "function": {"name": f"fn {AWS}", "arguments": "{}"}}],
            "metadata": {TELEGRAM: "bot", "x": 1}}
    first = service.append_message(sid, call)
    again = service.append_message(sid, call)
    assert again.duplicate and again.seq == first.seq  # the redacted append_id is the same on a retry
    other = service.append_message(sid, {**call, "append_id": f"turn {GHP[:-1]}X"})
    assert not other.duplicate and other.seq == first.seq + 1  # another secret: another id, not a clash
    service.append_message(sid, {"role": "tool", "content": "ok", "tool_call_id": f"call {AWS}"})
    service.set_context(sid, f"key {GHP}", "v")
    assert list(service.get_context(sid).context) == ["key [REDACTED:github_token]"]
    service.record_decision(sid, "ops", "rotate", metadata={f"was {AWS}": True})
    text = stored_text(settings.dsn)
    assert_clean(text)
    with psycopg.connect(settings.dsn) as conn:
        ids = [row[0] for row in conn.execute("SELECT append_id FROM messages ORDER BY seq").fetchall()]
    assert ids[0].startswith("turn [REDACTED:github_token]~") and len(ids[0]) <= 200
