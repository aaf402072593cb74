"""Hypothesis strategies built from each message class's field specs.

A new message class gets a strategy automatically; a new kind of field spec makes
`field_strategy` fail loudly until a strategy is added here.
"""

from __future__ import annotations

from hypothesis import strategies as st

from firmware_protocol import CODECS, MESSAGE_TYPES, AudioFormat, Message
from firmware_protocol.field_spec import FieldSpec
from firmware_protocol.format_field import Format
from firmware_protocol.int_fields import Bool, Enum8, Flags, SInt, UInt
from firmware_protocol.message import wire_fields
from firmware_protocol.records import Records
from firmware_protocol.text_fields import BytesRest, Str
from firmware_protocol.values_field import Values

# Surrogates cannot be encoded as UTF-8, so they are excluded.
TEXT = st.text(st.characters(codec="utf-8"), max_size=40)
AUDIO_FORMATS = st.builds(
    AudioFormat,
    codec=st.sampled_from(CODECS),
    sample_rate=st.integers(8000, 48000),
    channels=st.integers(1, 2),
)


def field_strategy(spec: FieldSpec) -> st.SearchStrategy:
    if isinstance(spec, Enum8):
        return st.sampled_from(list(spec.enum_type))
    if isinstance(spec, Flags):
        return st.integers(0, (1 << spec.bits) - 1)
    if isinstance(spec, UInt):
        return st.integers(0, (1 << spec.bits) - 1)
    if isinstance(spec, Bool):
        return st.booleans()
    if isinstance(spec, Str):
        if spec.pattern is not None:
            return st.from_regex(spec.pattern, fullmatch=True)
        return TEXT
    if isinstance(spec, BytesRest):
        return st.binary(max_size=600)  # longer than one 254-byte COBS block
    if isinstance(spec, Format):
        return AUDIO_FORMATS
    if isinstance(spec, Values):
        return st.lists(
            st.tuples(st.from_regex(Values.NAME, fullmatch=True), TEXT,
                      st.floats(width=32, allow_nan=False, allow_infinity=False)),
            max_size=Values.MAX_COUNT, unique_by=lambda item: item[0],
        ).map(tuple)
    if isinstance(spec, SInt):
        return st.integers(-(1 << (spec.bits - 1)), (1 << (spec.bits - 1)) - 1)
    if isinstance(spec, Records):
        record = st.tuples(*(field_strategy(f) for _, f in spec.fields))
        return st.lists(record, max_size=40).map(tuple)
    raise LookupError(f"no strategy for field spec {type(spec).__name__}: add one")


def message_strategy(cls: type[Message]) -> st.SearchStrategy[Message]:
    fields = {name: field_strategy(spec) for name, spec in wire_fields(cls)}
    return st.builds(cls, **fields)


ANY_MESSAGE: st.SearchStrategy[Message] = st.one_of(
    [message_strategy(cls) for cls in MESSAGE_TYPES.values()]
)
