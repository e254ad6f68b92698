"""`GET /openapi.json`, built from the route table and the pydantic result models."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from .. import __version__
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


def _models() -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    for endpoint in ENDPOINTS:
        result = endpoint.result if isinstance(endpoint.result, tuple) else (endpoint.result,)
        found.extend(m for m in result if m not in found)
    return found


def _param(p: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": p.kind}
    if p.kind == "string":
        schema["maxLength"] = 1000
    if p.minimum is not None:
        schema["minimum"] = p.minimum
    if p.maximum is not None:
        schema["maximum"] = p.maximum
    return {"name": p.name, "in": "query", "required": p.required, "description": p.description,
            "schema": schema}


def _path_params(endpoint: Endpoint) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in endpoint.path.split("/") if part.startswith("{")]
    params = []
    for name in names:
        kind = endpoint.path_params.get(name, "string")
        schema: dict[str, Any] = {"type": kind, **({"minimum": 1} if kind == "integer" else {"minLength": 1})}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    return params


def _operation(endpoint: Endpoint, method: str) -> dict[str, Any]:
    results = endpoint.result if isinstance(endpoint.result, tuple) else (endpoint.result,)
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in results]
    result_schema = refs[0] if len(refs) == 1 else {"oneOf": refs}
    operation: dict[str, Any] = {
        "operationId": endpoint.name if method == endpoint.methods[0] else f"{endpoint.name}_{method.lower()}",
        "summary": endpoint.summary,
        "parameters": _path_params(endpoint) + [_param(p) for p in endpoint.query],
        "responses": {
            str(endpoint.status): {"description": "OK", "content": {"application/json": {"schema": result_schema}}},
            **{code: {"description": text, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/Error"}}}} for code, text in ERROR_STATUSES.items()},
        },
    }
    if endpoint.body is not None and method != "GET":
        operation["requestBody"] = {"required": "required" in endpoint.body,
                                    "content": {"application/json": {"schema": endpoint.body}}}
    return operation


@cache
def document() -> dict[str, Any]:
    _, definitions = models_json_schema([(m, "serialization") for m in _models()],
                                        ref_template="#/components/schemas/{model}")
    schemas = {**definitions.get("$defs", {}), "Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in ENDPOINTS:
        for method in endpoint.methods:
            paths.setdefault(endpoint.path, {})[method.lower()] = _operation(endpoint, method)
    paths["/healthz"] = {"get": {"operationId": "healthz", "summary": "Liveness", "security": [],
                                 "responses": {"200": {"description": "OK"}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "mcp-memory", "version": __version__,
                 "description": "Shared session memory for coding agents (CONTRACT §4). Every route but /healthz "
                                "and /openapi.json needs `Authorization: Bearer <token>` (`mcp-memory token create`)."},
        "components": {"schemas": schemas,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    }
