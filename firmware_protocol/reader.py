"""The cursor over one message's bytes that the field specs read from."""

from __future__ import annotations

from .errors import malformed


class Reader:
    """A cursor over one message's bytes; running short is a `malformed-message`."""

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self._data = data
        self._pos = pos

    @property
    def remaining(self) -> int:
        return len(self._data) - self._pos

    def take(self, size: int, label: str) -> bytes:
        pos = self._pos
        end = pos + size
        if end > len(self._data):
            raise malformed(f"{label}: truncated, needs {size} bytes, {self.remaining} left")
        self._pos = end
        return self._data[pos:end]

    def take_str(self, label: str) -> bytes:
        """The bytes of a str field: u16 big-endian length, then that many bytes."""
        data, pos = self._data, self._pos
        if pos + 2 > len(data):
            raise malformed(f"{label}: truncated, needs 2 bytes, {self.remaining} left")
        size = (data[pos] << 8) | data[pos + 1]
        end = pos + 2 + size
        if end > len(data):
            self._pos = pos + 2
            raise malformed(f"{label}: truncated, needs {size} bytes, {self.remaining} left")
        self._pos = end
        return data[pos + 2:end]

    def rest(self) -> bytes:
        chunk = self._data[self._pos :]
        self._pos = len(self._data)
        return chunk
