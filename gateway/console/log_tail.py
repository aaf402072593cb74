"""The last log lines, for the console's health page: a bounded logging handler the composition
root attaches to the root logger while the gateway serves (and removes after)."""

from __future__ import annotations

import logging
from collections import deque

LINES = 200


class LogTail(logging.Handler):
    def __init__(self, lines: int = LINES) -> None:
        super().__init__(logging.INFO)
        self._lines: deque[str] = deque(maxlen=lines)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._lines.append(self.format(record))
        except Exception:  # a record that cannot be formatted must not break the logging
            self.handleError(record)

    def lines(self, n: int = LINES) -> list[str]:
        return list(self._lines)[-n:]
