"""A config file that is re-read when it changes (modification time, size or inode: a file replaced
atomically, as the console saves), without a restart.

Each `get()` costs one `stat`; when the file changed it is parsed again. When the file cannot be
read or parsed, the problem is logged with the file name and the last good value is kept.
`yaml_document` is the parse's first step for the YAML ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml

from gateway.errors import ConfigError

log = logging.getLogger(__name__)

T = TypeVar("T")


class WatchedFile(Generic[T]):
    def __init__(self, path: Path, parse: Callable[[str], T], empty: T) -> None:
        self.path = Path(path)
        self._parse = parse
        self._value = empty
        self._stamp: tuple[int, int, int] | None = None
        self.reloads = 0
        self.get()

    def get(self) -> T:
        try:
            st = self.path.stat()
        except OSError as exc:
            if self._stamp != (-1, -1, -1):
                log.warning("%s: cannot read (%s); keeping the last good version", self.path, exc.strerror)
                self._stamp = (-1, -1, -1)
            return self._value
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._value = self._parse(self.path.read_text(encoding="utf-8"))
                self.reloads += 1
            except (OSError, UnicodeDecodeError, ConfigError) as exc:
                log.warning("%s: %s; keeping the last good version", self.path, exc)
        return self._value


def yaml_document(text: str) -> Any:
    """The YAML document in `text`; ConfigError (what WatchedFile logs) when it is not valid YAML."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"not valid YAML: {exc}") from None
