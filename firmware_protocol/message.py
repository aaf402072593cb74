"""The base of every message, and its fields in wire order.

Each message class (a frozen dataclass, one per type, in the *_messages.py modules) declares its
fields with `wire(SPEC)`; the field order is the byte order on the wire. Constructing a message
validates it, so an invalid message object cannot exist.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar

from .field_spec import FieldSpec


class Message:
    """Base of every message. Subclasses are frozen dataclasses with TYPE and NAME."""

    TYPE: ClassVar[int]
    NAME: ClassVar[str]

    def __post_init__(self) -> None:
        for name, spec, label in checked_fields(type(self)):
            value = getattr(self, name)
            checked = spec.check(label, value)
            if checked is not value:  # normalised (an enum member, a tuple, an f32): stored as checked
                object.__setattr__(self, name, checked)


@functools.cache
def wire_fields(cls: type[Message]) -> tuple[tuple[str, FieldSpec], ...]:
    """The (name, spec) pairs of a message class, in wire order."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    return tuple((f.name, f.metadata["wire"]) for f in fields)


@functools.cache
def checked_fields(cls: type[Message]) -> tuple[tuple[str, FieldSpec, str], ...]:
    """(name, spec, label for errors) per field in wire order: the labels are made once per class."""
    return tuple((name, spec, f"{cls.__name__}.{name}") for name, spec in wire_fields(cls))
