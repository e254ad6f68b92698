"""`GET /openapi.json`, built from the operations table (http/routes.py): each operation's
`operationId` is its MCP tool name, its parameters and body are the fields of its input model."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
from ..operations import OPERATIONS
from ..schema import MessageIn
from .routes import ENDPOINTS, Endpoint, Param

ERROR_STATUSES = {"400": "Invalid input (the message names the field)", "401": "Missing or rejected token",
                  "403": "Outside the token's scope, or a read-only token writing",
                  "404": "Not found (or not visible to this token)", "409": "Conflict",
                  "413": "Body too large", "429": "Rate limit; see Retry-After", "503": "Database unavailable"}
ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["code", "message"],
                             "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}},
}
REF = "#/components/schemas/{model}"


def _models() -> list[tuple[type[BaseModel], Literal["validation", "serialization"]]]:
    found: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = [(MessageIn, "validation")]
    for op in OPERATIONS:
        found += [(op.input, "validation"), (op.result, "serialization")]
    return found


def _param(p: Param) -> dict[str, Any]:
    schema = dict(p.schema)
    return {"name": p.name, "in": "query", "required": p.required, "description": p.description, "schema": schema}


def _path_params(endpoint: Endpoint, definitions: dict[str, Any]) -> list[dict[str, Any]]:
    properties = definitions[endpoint.op.input.__name__]["properties"]
    params = []
    for name in endpoint.path_params:
        field = properties[name]
        schema: dict[str, Any] = {"type": field.get("type", "string")}
        schema.update({"minimum": field.get("minimum", 1)} if schema["type"] == "integer" else {"minLength": 1})
        params.append({"name": name, "in": "path", "required": True, "description": field.get("description", ""),
                       "schema": schema})
    return params


def _body(endpoint: Endpoint, definitions: dict[str, Any]) -> dict[str, Any]:
    """The input model's schema without the path parameters (they are not in the body)."""
    schema = copy.deepcopy(definitions[endpoint.op.input.__name__])
    schema.pop("title", None)
    schema.pop("description", None)  # the operation's description says it, without line breaks
    for name in endpoint.path_params:
        schema["properties"].pop(name, None)
    required = [n for n in schema.get("required", []) if n not in endpoint.path_params]
    schema.pop("required", None)
    if required:
        schema["required"] = required
    if endpoint.name == "append_messages":  # one message alone is accepted as well
        return {"anyOf": [schema, {"$ref": REF.format(model="MessageIn")}]}
    return schema


def _results(endpoint: Endpoint) -> dict[str, Any]:
    ref = {"$ref": REF.format(model=endpoint.op.result.__name__)}
    if endpoint.name == "append_messages":
        return {"oneOf": [ref, {"$ref": REF.format(model="AppendResult")}]}
    return ref


def _operation(endpoint: Endpoint, method: str, definitions: dict[str, Any]) -> dict[str, Any]:
    main = method == endpoint.op.rest.method
    operation: dict[str, Any] = {
        "operationId": endpoint.name if main else f"{endpoint.name}_{method.lower()}",
        "summary": endpoint.op.title,
        "description": endpoint.op.description + (f" GET on this path answers 405 ({endpoint.op.rest.get_refused})."
                                                  if endpoint.op.rest.get_refused else ""),
        "parameters": _path_params(endpoint, definitions) + [_param(p) for p in endpoint.query],
        "responses": {
            str(endpoint.status): {"description": "OK", "content": {"application/json": {
                "schema": _results(endpoint)}}},
            **{code: {"description": text, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}} for code, text in ERROR_STATUSES.items()},
        },
    }
    if endpoint.has_body and method != "GET":
        body = _body(endpoint, definitions)
        operation["requestBody"] = {"required": "required" in body or "anyOf" in body,
                                    "content": {"application/json": {"schema": body}}}
    return operation


@cache
def document() -> dict[str, Any]:
    _, definitions = models_json_schema(_models(), ref_template=REF)
    schemas = {**definitions.get("$defs", {}), "Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        for method in endpoint.methods:
            paths.setdefault(endpoint.path, {})[method.lower()] = _operation(endpoint, method, schemas)
    paths["/healthz"] = {"get": {"operationId": "healthz", "summary": "Liveness", "security": [],
                                 "responses": {"200": {"description": "OK"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "mcp-memory", "version": __version__,
                 "description": "Shared session memory for coding agents. Every route but /healthz and "
                                "/openapi.json needs `Authorization: Bearer <token>` (`mcp-memory token create`). "
                                "Each operation's operationId is the name of the MCP tool with the same arguments "
                                "(the search words `query` are the parameter `q` here)."},
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
