"""CLI arguments of the commands that mirror a tool, built from the operation's input model
(operations.py): each option's type, choices, default and help come from the model's field, and
the parsed arguments are validated by the same model as the MCP and REST arguments."""

from __future__ import annotations

import argparse
import types
import typing
from typing import Any

from pydantic import ValidationError

from ..errors import Invalid
from ..operations import BY_NAME, Input, arguments
from ..schema import describe_validation_error


def _scalar(annotation: Any) -> tuple[type | None, list[str] | None]:
    """(int | float | str | None, literal choices) of a field's type, `X | None` unwrapped."""
    options = [a for a in typing.get_args(annotation) if a is not type(None)] \
        if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union else [annotation]
    kind = options[0] if len(options) == 1 else None
    if typing.get_origin(kind) is typing.Literal:
        return str, [str(v) for v in typing.get_args(kind)]
    return (kind if kind in (bool, int, float, str) else None), None


def add_arguments(parser: argparse.ArgumentParser, operation: str, flags: dict[str, tuple[str, ...]], *,
                  defaults: dict[str, Any] | None = None) -> None:
    """One argument per named field: positional when its flags are (), else an option with them."""
    model = BY_NAME[operation].input
    for name, names in flags.items():
        info = model.model_fields[name]
        kind, choices = _scalar(info.annotation)
        options: dict[str, Any] = {"help": info.description}
        if choices:
            options["choices"] = choices
        elif kind in (int, float):
            options["type"] = kind
        if not names:
            parser.add_argument(name, **options)
            continue
        if kind is bool:  # a switch: off unless given
            parser.add_argument(*names, dest=name, action="store_true", help=info.description)
            continue
        if not info.is_required():
            options["default"] = (defaults or {}).get(name, info.get_default(call_default_factory=True))
        parser.add_argument(*names, dest=name, required=info.is_required(), **options)


def parse(operation: str, args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """The Service arguments of `operation` from the parsed command line (plus `extra`), validated
    by its input model: a bad value is a one-line `[invalid]` naming the field."""
    model: type[Input] = BY_NAME[operation].input
    data = {name: getattr(args, name) for name in model.model_fields if getattr(args, name, None) is not None}
    data.update({k: v for k, v in extra.items() if v is not None})
    try:
        return arguments(model.model_validate(data))
    except ValidationError as exc:
        raise Invalid(describe_validation_error(exc, prefix="")) from None
