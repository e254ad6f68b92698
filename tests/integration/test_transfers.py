"""import_session and export_session (operations.py, core/transfers.py) through the real MCP client
(in memory and over a stdio subprocess), REST on a real uvicorn server, and the library: one
declaration, the same results; what names the server's own files is refused to remote callers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from rest_support import Server

from mcp_memory.cli import _parser
from mcp_memory.config import Settings
from mcp_memory.http.app import HttpOptions, create_app
from mcp_memory.http.auth import TokenRegistry
from mcp_memory.library import Memory
from mcp_memory.mcp.server import build_server
from mcp_memory.operations import BY_NAME
from mcp_memory.store.db import Database
from mcp_memory.wiring import build

pytest_plugins = ["security_support"]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "claude-code" / "entireio-cli_c9-883595c929-0.jsonl"


@pytest.fixture
def agent_home(tmp_path: Path, profile: dict[str, str]) -> dict[str, str]:
    """The server's environment with HOME in tmp: installs land there, never in the real home."""
    env = {k: v for k, v in profile.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME")}
    env["HOME"] = str(tmp_path / "agent-home")
    return env


def _error(result) -> str:
    assert result.is_error, result
    return result.content[0].text


@pytest.mark.anyio
async def test_import_then_export_over_stdio(settings: Settings, agent_home: dict[str, str], tmp_path: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_memory", "serve"],
                                   env={**agent_home, "MCP_MEMORY_DSN": settings.dsn}, cwd=str(tmp_path))
    content = FIXTURE.read_text()
    async with Client(params, mode="legacy", read_timeout_seconds=60) as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["export_session"].input_schema["properties"]["to"]["enum"][0] == "claude-code"
        first = (await c.call_tool("import_session", {"agent": "claude-code", "content": content,
                                                      "name": FIXTURE.name, "project_id": "relay"}))
        imported = first.structured_content
        assert len(imported["sessions"]) == 1 and imported["report"]["direction"] == "read"
        stored = imported["sessions"][0]
        assert stored["new"] == stored["messages"] > 0 and stored["created"] is True
        again = (await c.call_tool("import_session", {"agent": "claude-code", "content": content,
                                                      "name": FIXTURE.name, "project_id": "relay"})).structured_content
        assert again["sessions"][0]["session_id"] == stored["session_id"]
        assert (again["sessions"][0]["new"], again["sessions"][0]["duplicates"]) == (0, stored["messages"])
        by_path = (await c.call_tool("import_session", {"agent": "claude-code", "path": str(FIXTURE),
                                                        "project_id": "relay"})).structured_content
        assert by_path["sessions"][0]["session_id"] == stored["session_id"]  # same native id, same session

        exported = (await c.call_tool("export_session", {"session_id": stored["session_id"], "to": "codex",
                                                         "options": {"thinking": "text"}})).structured_content
        assert exported["installed"] is None and exported["resume"] is None
        (rollout,) = exported["files"]
        assert rollout["encoding"] == "utf-8" and rollout["name"].endswith(".jsonl")
        assert all(json.loads(line) for line in rollout["content"].splitlines())
        assert exported["report"]["direction"] == "write" and exported["relay"]["carried"] > 0

        project = tmp_path / "shop"
        installed = (await c.call_tool("export_session", {"session_id": stored["session_id"], "to": "claude-code",
                                                          "install": True, "cwd": str(project)})).structured_content
        (transcript,) = installed["installed"]
        assert Path(transcript).is_relative_to(Path(agent_home["HOME"]) / ".claude" / "projects")
        assert Path(transcript).is_file() and "claude --resume" in installed["resume"]
        assert installed["files"] is None


@pytest.fixture
async def client(service):
    async with Client(build_server(lambda: service), mode="auto") as c:
        yield c


@pytest.mark.anyio
@pytest.mark.parametrize(("args", "expected"), [
    ({"agent": "claude-code"}, "[invalid] import_session takes exactly one of path and content"),
    ({"agent": "claude-code", "content": "{}", "path": "/etc/passwd"}, "[invalid] import_session takes exactly one"),
    ({"agent": "robot", "content": "{}"}, "[invalid] agent must be"),
    ({"agent": "claude-code", "content": "x", "name": "../escape.jsonl"}, "[invalid] name must be one plain file"),
    ({"agent": "claude-code", "content": "x", "name": ".."}, "[invalid] name must be one plain file"),
    ({"agent": "claude-code", "content": "not json at all\n"}, "[invalid] no Claude Code sessions with messages found in session.jsonl"),
    ({"agent": "claude-code", "path": "/no/such/file.jsonl"}, "[invalid] path: no such file or folder"),
])
async def test_import_session_refusals(client, args, expected) -> None:
    assert _error(await client.call_tool("import_session", args)).startswith(expected)


@pytest.mark.anyio
async def test_a_json_document_as_content_stays_text(client) -> None:
    """A client's JSON text is not turned into an object on the way (the field is a plain string)."""
    chat = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    result = (await client.call_tool("import_session", {"agent": "openai", "content": chat, "project_id": "j"}))
    assert not result.is_error, result
    assert result.structured_content["sessions"][0]["new"] == 2


@pytest.mark.anyio
async def test_export_session_refusals(client, service) -> None:
    sid = service.create_session("p", {"title": "t"}).session_id
    service.append_message(sid, {"role": "user", "content": "hello", "append_id": "u1"})
    cases = [
        ({"session_id": sid, "to": "robot"}, "[invalid] to must be"),
        ({"session_id": sid, "to": "codex", "options": {"colour": "red"}}, "[invalid] options.colour is not a switch "
                                                                            "of codex (its switches: thinking, "),
        ({"session_id": sid, "to": "codex", "options": {"thinking": "keep"}},
         "[invalid] options.thinking must be one of drop, text"),
        ({"session_id": "ses_00000000-0000-0000-0000-000000000000", "to": "codex"}, "[not_found] session"),
        ({"session_id": sid, "to": "openai", "install": True}, "[invalid] cannot export"),  # no place to install
    ]
    for args, expected in cases:
        assert _error(await client.call_tool("export_session", args)).startswith(expected), args


@pytest.fixture
def rest(settings: Settings, owner_db: Database):
    registry = TokenRegistry(settings, owner_db.dsn(), lambda s: build(s, application_name="mcp-memory transfers"),
                             recheck_seconds=0)
    with Server(create_app(registry, HttpOptions(max_body_bytes=1024 * 1024, rate_limit=0))) as server:
        yield server


def test_rest_imports_content_and_returns_files_but_never_touches_server_paths(rest: Server, make_token,
                                                                               tmp_path: Path) -> None:
    token = make_token("transfers", ["A"]).token
    body = {"agent": "claude-code", "content": FIXTURE.read_text(), "name": FIXTURE.name, "project_id": "A"}
    imported = rest.call("POST", "/v1/imports", token=token, body=body)
    assert imported.status == 201, imported.body
    sid = imported.body["sessions"][0]["session_id"]
    assert imported.body["sessions"][0]["new"] > 0

    secret = tmp_path / "server-only.jsonl"
    secret.write_text(FIXTURE.read_text())
    for path in (str(secret), "/etc/passwd", "~/.ssh/id_rsa"):
        refused = rest.call("POST", "/v1/imports", token=token, body={"agent": "claude-code", "path": path,
                                                                       "project_id": "A"})
        assert refused.status == 403 and refused.body["error"]["code"] == "forbidden", path
        assert "server's own files" in refused.body["error"]["message"]

    exported = rest.call("POST", f"/v1/sessions/{sid}/export", token=token, body={"to": "gemini"})
    assert exported.status == 200, exported.body
    assert exported.body["files"] and exported.body["installed"] is None
    install = rest.call("POST", f"/v1/sessions/{sid}/export", token=token,
                        body={"to": "claude-code", "install": True, "cwd": str(tmp_path)})
    assert install.status == 403 and install.body["error"]["code"] == "forbidden"
    relative = rest.call("POST", f"/v1/sessions/{sid}/export", token=token, body={"to": "claude-code",
                                                                                  "cwd": "../../etc"})
    assert relative.status == 400 and relative.body["error"]["message"] == "cwd must be an absolute path"
    other = make_token("transfers_b", ["B"]).token  # another project's token: the session is not there
    assert rest.call("POST", f"/v1/sessions/{sid}/export", token=other, body={"to": "gemini"}).status == 404
    assert rest.call("POST", "/v1/imports", token=other, body=body).body["sessions"][0]["error"].startswith(
        "[forbidden]")
    # MCP over HTTP (/mcp) runs on the same token services: the server's files are refused there too
    headers = {"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-06-18"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    assert rest.call("POST", "/mcp", token=token, body=init, headers=headers).status == 200
    for name, arguments in (("import_session", {"agent": "claude-code", "path": str(secret), "project_id": "A"}),
                            ("export_session", {"session_id": sid, "to": "claude-code", "install": True})):
        reply = rest.call("POST", "/mcp", token=token, headers=headers, body={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        result = reply.body["result"]
        assert result["isError"] and result["content"][0]["text"].startswith("[forbidden]"), (name, result)
    operations = {op["operationId"] for item in rest.call("GET", "/openapi.json").body["paths"].values()
                  for op in item.values()}
    assert {"export_session", "import_session"} <= operations


def test_library_and_cli_follow_the_declaration(settings: Settings, tmp_path: Path) -> None:
    with Memory(settings=settings) as mem:
        result = mem.import_session("claude-code", content=FIXTURE.read_text(), name=FIXTURE.name, project_id="lib")
        sid = result.sessions[0].session_id
        exported = mem.export_session(sid, "openai", options={"reasoning": "none"})
        assert exported.files and json.loads(exported.files[0].content)
    declared = BY_NAME["export_session"].input.model_json_schema()["properties"]["to"]["enum"]
    export = _parser().parse_args(["export", "ses_x", "--to", "gemini"])
    choices = next(a.choices for a in _parser()._subparsers._group_actions[0].choices["export"]._actions
                   if a.dest == "agent")
    assert export.agent == "gemini" and list(choices) == declared
