"""Which agent is on the other end of an MCP connection, from the client name it sends in
`initialize` (clientInfo.name), so that a session it starts with create_session is labelled with its
agent even when the model leaves `meta.agent_source` out (then its decisions, search results and
review pages would name no agent).

The names were read from the real CLIs: Claude Code 2.1.328 "claude-code", Codex 0.169.0
"codex-mcp-client", Gemini CLI 0.61.0 "gemini-cli-mcp-client", OpenCode 1.18.33 "opencode".
A client name is the client's own claim: it only fills a label the caller could have set itself,
and an unknown name fills nothing.
"""

from __future__ import annotations

from typing import Any

CLIENT_AGENTS = {"claude-code": "claude-code", "codex-mcp-client": "codex", "gemini-cli-mcp-client": "gemini",
                 "opencode": "opencode"}
LABELLED_TOOLS = frozenset({"create_session"})


def client_agent(context: Any) -> str | None:
    """The agent name (§2 AGENT names) of the MCP client of this request, if it is a known one."""
    try:
        params = context.session.client_params
        name = params.client_info.name if params is not None and params.client_info is not None else None
    except (AttributeError, ValueError):  # no request context (a call from inside the server)
        return None
    return CLIENT_AGENTS.get(name) if isinstance(name, str) else None


def with_client_agent(tool: str, arguments: dict[str, Any], context: Any) -> dict[str, Any]:
    """create_session's arguments with `meta.agent_source` filled from the client when it is absent;
    anything else (another tool, a meta that is not an object, an agent given) is left as sent."""
    if tool not in LABELLED_TOOLS:
        return arguments
    meta = arguments.get("meta")
    if meta is not None and not isinstance(meta, dict):
        return arguments  # refused by validation, naming the field
    if isinstance(meta, dict) and meta.get("agent_source") is not None:
        return arguments
    agent = client_agent(context)
    if agent is None:
        return arguments
    return {**arguments, "meta": {**(meta or {}), "agent_source": agent}}
