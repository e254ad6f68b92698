"""Registering mcp-memory with OpenCode: config edits that keep the user's settings, and the plugin."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_memory.agents.opencode.install import PLUGIN_NAME, plugin_source, register

USER_JSONC = """// my OpenCode settings
{
  "$schema": "https://opencode.ai/config.json",
  "theme": "tokyonight", // keep me
  /* servers */
  "mcp": {
    "other": { "type": "remote", "url": "https://example.test/mcp" },
  },
}
"""


def strip_jsonc(text: str) -> object:
    text = re.sub(
        r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', lambda m: m.group(1) or "", text, flags=re.DOTALL
    )
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", text))


def environ(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config")}


def test_user_scope_keeps_comments_and_other_settings(tmp_path: Path) -> None:
    config = tmp_path / "config" / "opencode" / "opencode.jsonc"
    config.parent.mkdir(parents=True)
    config.write_text(USER_JSONC)
    args = {
        "scope": "user",
        "command": ["mcp-memory"],
        "env": {"MCP_MEMORY_DSN": "postgresql://x"},
        "cwd": tmp_path,
        "environ": environ(tmp_path),
    }
    lines = register(**args)
    assert any("registered MCP server" in line for line in lines)
    text = config.read_text()
    assert "// keep me" in text and "/* servers */" in text and "// my OpenCode settings" in text
    data = strip_jsonc(text)
    assert data["theme"] == "tokyonight" and data["mcp"]["other"]["url"] == "https://example.test/mcp"
    assert data["mcp"]["mcp-memory"] == {
        "type": "local",
        "command": ["mcp-memory", "serve"],
        "environment": {"MCP_MEMORY_DSN": "postgresql://x"},
        "enabled": True,
    }
    plugin = tmp_path / "config" / "opencode" / "plugins" / PLUGIN_NAME
    assert '["mcp-memory"]' in plugin.read_text()  # the plugin adds `sync opencode --session ID`

    assert all("already" in line for line in register(**args))  # idempotent
    assert config.read_text() == text

    register(**args, uninstall=True)
    assert config.read_text() == USER_JSONC and not plugin.exists()


def test_project_scope_creates_config_and_project_plugin(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    register(
        scope="project", command=["/opt/mm/bin/mcp-memory"], env={}, cwd=project, environ=environ(tmp_path)
    )
    data = json.loads((project / "opencode.json").read_text())
    assert data["mcp"]["mcp-memory"]["command"] == ["/opt/mm/bin/mcp-memory", "serve"]
    assert (project / ".opencode" / "plugins" / PLUGIN_NAME).is_file()
    assert not (tmp_path / "config").exists()


def test_uninstall_leaves_a_foreign_plugin_alone(tmp_path: Path) -> None:
    plugin = tmp_path / "config" / "opencode" / "plugins" / PLUGIN_NAME
    plugin.parent.mkdir(parents=True)
    plugin.write_text("export const Mine = async () => ({})\n")
    lines = register(
        scope="user", command=["x"], env={}, cwd=tmp_path, environ=environ(tmp_path), uninstall=True
    )
    assert plugin.exists() and any("left in place" in line for line in lines)


NODE_DRIVER = """
import { pathToFileURL } from "node:url"
const mod = await import(pathToFileURL(process.argv[2]).href)
const logs = []
const client = { app: { log: async (entry) => { logs.push(entry.body.message) } } }
const hooks = await mod.McpMemoryCapture({ client, directory: "/tmp" })
await hooks.event({ event: { type: "message.updated", properties: { sessionID: "ses_other" } } })
await hooks.event({ event: { type: "session.idle", properties: { sessionID: process.argv[3] } } })
await hooks.event({ event: null })
await new Promise((resolve) => setTimeout(resolve, 800))
console.log(JSON.stringify(logs))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("works", [True, False])
def test_plugin_runs_sync_on_idle_and_never_throws(tmp_path: Path, works: bool) -> None:
    marker = tmp_path / "synced.txt"
    script = f"import sys; open({str(marker)!r}, 'w').write(' '.join(sys.argv[1:]))"
    command = [sys.executable, "-c", script] if works else [str(tmp_path / "missing-binary")]
    plugin = tmp_path / "plugin.mjs"
    plugin.write_text(plugin_source(command, {"MM_TEST": "1"}))
    driver = tmp_path / "driver.mjs"
    driver.write_text(NODE_DRIVER)
    result = subprocess.run(
        ["node", str(driver), str(plugin), "ses_abc"], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    logs = json.loads(result.stdout.strip().splitlines()[-1])
    if works:
        assert marker.read_text() == "sync opencode --session ses_abc" and logs == []
    else:
        assert not marker.exists() and "sync of ses_abc failed" in logs[0]


RECALL_DRIVER = """
import { pathToFileURL } from "node:url"
const mod = await import(pathToFileURL(process.argv[2]).href)
const logs = []
const client = { app: { log: async (entry) => { logs.push(entry.body.message) } } }
const hooks = await mod.McpMemoryCapture({ client, directory: process.argv[3] })
const transform = hooks["experimental.chat.system.transform"]
const first = { system: ["base"] }, again = { system: ["base"] }, none = { system: ["base"] }
await transform({ sessionID: "ses_a", model: {} }, first)
await transform({ sessionID: "ses_a", model: {} }, again)
await transform({ model: {} }, none)
await transform(null, null)
console.log(JSON.stringify({ first: first.system, again: again.system, none: none.system, logs }))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("works", [True, False])
def test_plugin_adds_the_recall_once_per_session_and_never_throws(tmp_path: Path, works: bool) -> None:
    """The recall command runs once per session with `{"cwd": directory}` on stdin; its `system` text is
    appended to the system prompt; a failing command adds nothing and throws nothing."""
    calls = tmp_path / "calls.txt"
    script = (f"import json, sys; open({str(calls)!r}, 'a').write(' '.join(sys.argv[1:]) + '|' + sys.stdin.read()"
              " + '\\n'); print(json.dumps({'system': 'memory of the project'}))")
    command = [sys.executable, "-c", script] if works else [str(tmp_path / "missing-binary")]
    plugin = tmp_path / "plugin.mjs"
    plugin.write_text(plugin_source(command, {}))
    driver = tmp_path / "driver.mjs"
    driver.write_text(RECALL_DRIVER)
    result = subprocess.run(["node", str(driver), str(plugin), "/work/shop"], capture_output=True, text=True,
                            timeout=30, check=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["none"] == ["base"]
    if works:
        assert out["first"] == out["again"] == ["base", "memory of the project"]
        assert calls.read_text().splitlines() == ['recall --hook --agent opencode|{"cwd":"/work/shop"}']
    else:
        assert out["first"] == out["again"] == ["base"] and "recall failed" in out["logs"][0]
