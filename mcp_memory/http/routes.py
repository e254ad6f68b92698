"""The REST routes, one per operation of mcp_memory/operations.py (its method and path there; the
OpenAPI document is built from the same table, http/openapi.py). Path parameters and, for GET, the
query parameters or, otherwise, the JSON body's fields are the operation's arguments; REST spells
`query` as `q`. Input is validated by the operation's input model; every rejection names the field.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from ..core.service import Service
from ..errors import Invalid
from ..operations import BY_NAME, OPERATIONS, REST_NAMES, Input, Operation, call
from ..schema import describe_validation_error


@dataclass(frozen=True)
class Param:
    name: str
    kind: str = "string"  # string | integer | number | boolean
    required: bool = False
    description: str = ""
    minimum: float | None = None
    maximum: float | None = None
    schema: dict[str, Any] = field(default_factory=dict)  # the field's JSON Schema (OpenAPI)


@dataclass(frozen=True)
class Call:
    """What a request carries once parsed: path parameters, typed query parameters, JSON body."""

    path: dict[str, str]
    query: dict[str, Any]
    body: Any


@dataclass(frozen=True)
class Endpoint:
    op: Operation
    methods: tuple[str, ...]
    run: Callable[[Service, Call], BaseModel]
    query: tuple[Param, ...] = ()
    path_params: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def path(self) -> str:
        return self.op.rest.path

    @property
    def status(self) -> int:
        return self.op.rest.status

    @property
    def has_body(self) -> bool:
        return self.op.rest.method != "GET"


def path_names(path: str) -> tuple[str, ...]:
    return tuple(part[1:-1] for part in path.split("/") if part.startswith("{"))


def field_schema(model: type[Input], name: str) -> dict[str, Any]:
    """A field's JSON Schema without the `null` branch of an optional field."""
    schema = dict(model.model_json_schema()["properties"][name])
    options = [s for s in schema.get("anyOf", []) if s.get("type") != "null"]
    if "anyOf" in schema and len(options) == 1:
        schema.pop("anyOf")
        schema.update(options[0])
    schema.pop("title", None)
    return schema


def query_params(op: Operation) -> tuple[Param, ...]:
    if op.rest.method != "GET":
        return ()
    params = []
    for name, info in op.input.model_fields.items():
        if name in path_names(op.rest.path):
            continue
        schema = field_schema(op.input, name)
        params.append(Param(REST_NAMES.get(name, name), schema.get("type", "string"), required=info.is_required(),
                            description=info.description or "", minimum=schema.get("minimum"),
                            maximum=schema.get("maximum"), schema=schema))
    return tuple(params)


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise Invalid("body must be a JSON object")
    return body


def _no_nul(value: Any, path: str) -> None:
    """PostgreSQL text cannot hold U+0000: say which field has one (message payloads are cleaned
    by the core instead, so they are not checked here)."""
    if isinstance(value, str) and "\x00" in value:
        raise Invalid(f"{path} must not contain U+0000")
    if isinstance(value, dict):
        for key, item in value.items():
            _no_nul(key, f"{path} key")
            _no_nul(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _no_nul(item, f"{path}[{index}]")


def _arguments(op: Operation, call_: Call) -> dict[str, Any]:
    path = dict(call_.path)
    if op.rest.method == "GET":
        rest_to_field = {REST_NAMES.get(n, n): n for n in op.input.model_fields}
        return {**{rest_to_field[k]: v for k, v in call_.query.items()}, **path}
    body = _object(call_.body)
    allowed = set(op.input.model_fields) - set(path)
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise Invalid(f"body.{unknown[0]} is not a known field (allowed: {', '.join(sorted(allowed))})")
    if op.name not in ("append_message", "append_messages"):
        _no_nul(body, "body")
    return {**body, **path}


def validate(op: Operation, data: dict[str, Any]) -> Input:
    for name in path_names(op.rest.path):
        if name in op.input.model_fields and op.input.model_fields[name].annotation is int:
            raw = data.get(name)
            if isinstance(raw, str):
                if not raw.isdigit() or int(raw) < 1:
                    raise Invalid(f"{name} must be a positive integer")
                data[name] = int(raw)
    try:
        return op.input.model_validate(data)
    except ValidationError as exc:
        text = describe_validation_error(exc, prefix="")
        if op.rest.method == "GET" and text.startswith("query "):
            text = "query parameter q" + text[len("query"):]  # the REST name of the search words
        raise Invalid(text) from None


def _runner(op: Operation) -> Callable[[Service, Call], BaseModel]:
    def run(svc: Service, call_: Call) -> BaseModel:
        if op.name == "append_messages" and isinstance(call_.body, dict) and "messages" not in call_.body:
            # one message as the body (README, REST): the append_message operation
            single = BY_NAME["append_message"]
            return call(svc, single, validate(single, {"message": call_.body, **call_.path}))
        args = validate(op, _arguments(op, call_))
        try:
            return call(svc, op, args)
        except Invalid as exc:  # the core names the search words `query`; here they are `q`
            if "query" in REST_NAMES and op.rest.method == "GET" and str(exc).startswith("query"):
                raise Invalid(f"query parameter q: {exc}") from exc
            raise

    return run


ENDPOINTS: tuple[Endpoint, ...] = tuple(
    Endpoint(op, (op.rest.method,), _runner(op), query_params(op), path_names(op.rest.path))
    for op in OPERATIONS
)


def parse_path(raw: dict[str, str]) -> dict[str, str]:
    for name, value in raw.items():
        if "\x00" in value:
            raise Invalid(f"{name} must not contain U+0000")
    return raw


def parse_query(params: tuple[Param, ...], raw: dict[str, str]) -> dict[str, Any]:
    """Typed query parameters; every rejection names the parameter."""
    known = {p.name for p in params}
    for name in raw:
        if name not in known:
            raise Invalid(f"query parameter {name} is not known here (allowed: {', '.join(sorted(known)) or 'none'})")
    values: dict[str, Any] = {}
    for p in params:
        value = raw.get(p.name)
        if value is not None and "\x00" in value:
            raise Invalid(f"query parameter {p.name} must not contain U+0000")
        if value is None:
            if p.required:
                raise Invalid(f"query parameter {p.name} is required")
            continue
        values[p.name] = _typed(p, value)
    return values


BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def _typed(p: Param, value: str) -> Any:
    if p.kind == "boolean":
        if value.lower() not in BOOLEANS:
            raise Invalid(f"query parameter {p.name} must be true or false")
        return BOOLEANS[value.lower()]
    if p.kind not in ("integer", "number"):
        return value
    try:
        number: float = int(value) if p.kind == "integer" else float(value)
    except ValueError:
        raise Invalid(f"query parameter {p.name} must be {'an integer' if p.kind == 'integer' else 'a number'}") \
            from None
    if (p.minimum is not None and number < p.minimum) or (p.maximum is not None and number > p.maximum):
        raise Invalid(f"query parameter {p.name} must be from {p.minimum} to {p.maximum}")
    return number
