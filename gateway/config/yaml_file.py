"""Parsing the text of `gateway.yaml`: YAML errors name the file, and a key given twice in one
mapping (two `vad:` blocks) is an error instead of the last one silently winning."""

from __future__ import annotations

from typing import Any

import yaml
from yaml.nodes import MappingNode

from gateway.errors import ConfigError

_MERGE = "tag:yaml.org,2002:merge"  # `<<: *defaults`: overriding merged keys is what it is for


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"{key!r} is given twice (lines {first} and {second})")
        self.key, self.first, self.second = key, first, second


class _UniqueKeyLoader(yaml.SafeLoader):
    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # a list as a key: SafeLoader refuses it itself
                continue
            if first != key_node.start_mark.line + 1:
                raise _DuplicateKey(key, first, key_node.start_mark.line + 1)
        return super().construct_mapping(node, deep)


def _hint(exc: yaml.YAMLError, text: str) -> str:
    """What is likely wrong, for the common mistake: an unquoted ${NAME} inside a { ... } mapping."""
    mark = exc.problem_mark if isinstance(exc, yaml.MarkedYAMLError) else None
    lines = text.splitlines()
    line = lines[mark.line] if mark is not None and mark.line < len(lines) else ""
    return '\n(a ${NAME} inside { ... } must be quoted: {token: "${NAME}"})' if "${" in line else ""


def parse_yaml(text: str, name: str) -> Any:
    """The YAML document in `text`; `name` (the file) is named in every error. Raises ConfigError."""
    loader = _UniqueKeyLoader(text)
    loader.name = name  # the marks of errors say `in "<name>", line N` instead of "<unicode string>"
    try:
        return loader.get_single_data()
    except _DuplicateKey as exc:
        raise ConfigError(f"config error in {name}: the key {exc.key!r} is given twice (lines {exc.first} and "
                          f"{exc.second}): the second would replace the first; keep one") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config error: {name} is not valid YAML: {exc}{_hint(exc, text)}") from None
    finally:
        loader.dispose()
