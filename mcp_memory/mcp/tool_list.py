"""The tools/list answer, computed once from the operations and kept in `tools.json`.

Building it means generating 40 JSON schemas (each operation's arguments and result), which took
more than half of `serve`'s start on top of the SDK's own. The schemas only change when the
operation models do, so they are generated here — with the SDK's own rules, from a signature that
carries each input field's type, constraints and description, exactly what the SDK published
when it built the tools itself — and committed; `tests/unit/test_tool_list.py` fails when the file
no longer matches the models and names the file to copy over it.
"""

from __future__ import annotations

import inspect
import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from mcp.types import CallToolResult, Tool, ToolAnnotations
from pydantic import Field
from pydantic.fields import FieldInfo

from ..operations import OPERATIONS, Operation

TOOLS_FILE = Path(__file__).with_name("tools.json")

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "write": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False),
    "idempotent": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                  open_world_hint=False),
}


@cache
def tools() -> tuple[Tool, ...]:
    """What tools/list answers, in the order of OPERATIONS."""
    return tuple(Tool.model_validate(entry) for entry in json.loads(TOOLS_FILE.read_text(encoding="utf-8")))


@cache
def input_schemas() -> dict[str, dict[str, Any]]:
    return {tool.name: tool.input_schema for tool in tools()}


def generate() -> list[dict[str, Any]]:
    """The tool list as the SDK builds it from each operation (what tools.json must hold)."""
    from mcp.server.mcpserver.tools.base import Tool as SdkTool

    listed = []
    for op in OPERATIONS:
        info = SdkTool.from_function(_signature_of(op), name=op.name, title=op.title, description=op.description,
                                     annotations=ANNOTATIONS[op.kind])
        tool = Tool(name=info.name, title=info.title, description=info.description, input_schema=info.parameters,
                    output_schema=info.output_schema, annotations=info.annotations)
        listed.append(tool.model_dump(mode="json", by_alias=True, exclude_none=True))
    return listed


def render(listed: list[dict[str, Any]]) -> str:
    return json.dumps(listed, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _signature_of(op: Operation) -> Any:
    """A function whose keyword parameters are the operation's input fields (the SDK builds the
    tool's input schema from a signature) and whose return annotation is its result model."""

    def run(**arguments: Any) -> CallToolResult:
        raise AssertionError("only the signature of this function is used")

    run.__name__ = op.name
    run.__doc__ = op.description
    params = [_parameter(name, info) for name, info in op.input.model_fields.items()]
    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        params, return_annotation=Annotated[CallToolResult, op.result])
    return run


def _parameter(name: str, info: FieldInfo) -> inspect.Parameter:
    annotation: Any = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]
    default = inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
