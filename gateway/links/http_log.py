"""The log of a websockets server that also answers plain HTTP (the screens' pages and the console,
the xiaozhi OTA bootstrap): websockets logs every HTTP answer that is not an upgrade as
"connection rejected (200 OK)" at INFO, so a console open on a phone (its API every 3 s) filled the
gateway's log, and the console's own Health page, with these lines. Answers under 400 are what the
page asked for and are not logged; refusals (4xx, 5xx) still are."""

from __future__ import annotations

import logging

REJECTED = "connection rejected (%d %s)"  # websockets' message (websockets/server.py, send_response)


class HttpAnswerFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        return not (record.msg == REJECTED and isinstance(args, tuple) and args and isinstance(args[0], int)
                    and args[0] < 400)


def server_logger() -> logging.Logger:
    """The logger to give websockets' serve(): its own (websockets.server), HTTP answers filtered."""
    logger = logging.getLogger("websockets.server")
    if not any(isinstance(f, HttpAnswerFilter) for f in logger.filters):
        logger.addFilter(HttpAnswerFilter())
    return logger
