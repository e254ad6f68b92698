"""mcp/tools.json is the tool list the SDK builds from the operations: `serve` answers tools/list
from it without generating 40 JSON schemas at start."""

from __future__ import annotations

import difflib

from mcp_memory.mcp import tool_list
from mcp_memory.operations import OPERATIONS


def test_the_committed_tool_list_is_what_the_operations_give(tmp_path) -> None:
    fresh = tool_list.render(tool_list.generate())
    committed = tool_list.TOOLS_FILE.read_text(encoding="utf-8")
    if fresh != committed:
        (tmp_path / "tools.json").write_text(fresh, encoding="utf-8")
    diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True), "mcp/tools.json",
                                        "generated", n=1))
    assert not diff, (f"mcp/tools.json is stale: copy {tmp_path / 'tools.json'} over mcp_memory/mcp/tools.json\n"
                      + diff[:4000])


def test_every_operation_is_listed_once_in_order() -> None:
    assert [tool.name for tool in tool_list.tools()] == [op.name for op in OPERATIONS]
    schemas = tool_list.input_schemas()
    for op in OPERATIONS:  # every input field is published, the required ones as required
        assert set(schemas[op.name]["properties"]) == set(op.input.model_fields)
        required = {name for name, info in op.input.model_fields.items() if info.is_required()}
        assert set(schemas[op.name].get("required", [])) == required
