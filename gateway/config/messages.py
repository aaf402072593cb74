"""pydantic's validation errors of `gateway.yaml` in plain words: one line per problem, naming the key,
the value and what to write instead; an unknown key names the nearest known one."""

from __future__ import annotations

import difflib
import typing
from typing import Any

from pydantic import BaseModel

# keys an earlier release had, and what replaced them
RENAMED = {
    "asr.float_decoder": "asr.moonshine_decoder (int8 | float | packaged; float_decoder: true was float)",
}


def _kind(value: Any) -> str:
    """What a YAML value is, in the words of the file."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a section of keys"
    return "empty" if value is None else type(value).__name__


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models inside a field's type (`X`, `X | None`, `tuple[X, ...]`, `dict[str, X]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _model_at(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose key `loc` ends in (a list index or a mapping's own key is skipped)."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if model is None:
            return None
        field = model.model_fields.get(part) if isinstance(part, str) else None
        if field is None:
            continue  # a list index or a mapping's own key: the items' model stays
        found = _models_in(field.annotation)
        model = found[0] if found else None
    return model


def known_keys(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed beside the last element of `loc`."""
    model = _model_at(root, loc)
    return [] if model is None else [k for k, f in model.model_fields.items() if not f.exclude]


def _values_wanted(root: type[BaseModel], loc: tuple[Any, ...]) -> int | None:
    """How many values the fixed-length list (tuple[a, b, c]) at `loc` takes, if it is one."""
    model = _model_at(root, loc)
    field = model.model_fields.get(loc[-1]) if model is not None and isinstance(loc[-1], str) else None
    args = typing.get_args(field.annotation) if field is not None else ()
    return len(args) if args and Ellipsis not in args else None


def _unknown(key: str, loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    if key in RENAMED:
        return f"{key}: renamed to {RENAMED[key]}"
    close = difflib.get_close_matches(str(loc[-1]), known_keys(root, loc), n=1, cutoff=0.7)
    spelling = f"did you mean {close[0]}? See" if close else "check the spelling; see"
    return f"{key}: unknown key ({spelling} the comments in gateway.yaml)"


def _wrong_text(key: str, value: Any, is_key: bool) -> str:
    what = f"{key}: the key {value!r}" if is_key else f"{key} = {value!r}"
    if isinstance(value, bool):  # yes, no, on, off, true, false
        return f"{what}: should be text, and YAML reads yes / no / on / off / true / false as true/false: quote it"
    if isinstance(value, (int, float)):  # a device id 1234
        return f"{what}: should be text, and YAML reads {value} as a number: quote it ('{value}')"
    return f"{what}: should be text, not {_kind(value)}"


def describe(err: dict[str, Any], root: type[BaseModel]) -> str:
    """One line for one pydantic error of `root`.model_validate."""
    loc = tuple(err["loc"])
    kind, value, msg = err["type"], err.get("input"), err["msg"]
    is_key = bool(loc) and loc[-1] == "[key]"  # a mapping's key (memory.users: {1234: anna})
    loc = loc[:-2] if is_key else loc
    key = ".".join(str(p) for p in loc) or "(top level)"
    if kind == "extra_forbidden":
        return _unknown(key, loc, root)
    if kind == "value_error":  # a cross-field check; its message names the keys and values
        msg = msg.removeprefix("Value error, ")
        return f"{key}: {msg}" if loc else msg  # across sections: the message names the keys
    if kind == "missing":
        if loc and isinstance(loc[-1], int):  # a fixed number of values: [a, b, c]
            parent = ".".join(str(p) for p in loc[:-1])
            wanted = _values_wanted(root, loc[:-1])
            return f"{parent} = {value!r}: " + (f"give {wanted} values" if wanted else "too few values")
        return f"{key}: missing (this key is required here)"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{key} = {value!r}: should be a section of keys (key: value lines, indented below it), not {_kind(value)}"
    if kind in ("tuple_type", "list_type", "set_type", "frozen_set_type"):
        one = f"; one value: [{value}]" if isinstance(value, (str, int, float)) else ""
        return f"{key} = {value!r}: should be a list ([a, b]{one}), not {_kind(value)}"
    if kind == "too_long" and isinstance(value, (list, tuple)) and (wanted := _values_wanted(root, loc)):
        return f"{key} = {value!r}: give {wanted} values"
    if kind in ("path_type", "path_parsing"):
        return f"{key} = {value!r}: should be a file path (text), not {_kind(value)}"
    if kind == "string_type":
        return _wrong_text(key, value, is_key)
    if kind in ("int_type", "int_parsing", "int_from_float"):
        not_ = "" if isinstance(value, (int, float)) else f", not {_kind(value)}"
        return f"{key} = {value!r}: should be a whole number{not_}"
    if kind in ("float_type", "float_parsing"):
        return f"{key} = {value!r}: should be a number, not {_kind(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"{key} = {value!r}: should be true or false"
    return f"{key} = {value!r}: {msg}"

