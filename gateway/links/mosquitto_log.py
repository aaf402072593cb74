"""Reading the embedded mosquitto's log lines (gateway/links/mosquitto.py) for the gateway's log.

mosquitto's refusal lines carry no address ("Client <unknown> disconnected, not authorised."),
so `BrokerLog` follows the connection lines to name the peer behind them, picks the level of each
line (refusals, oversized packets and session takeovers at WARNING), and checks each logged
subscription (`log_type subscribe`: "<client> <qos> <topic>") against the ACL the gateway wrote:
one the ACL does not let that client read is logged at WARNING (mosquitto accepts it and
delivers nothing). Denied publishes are not in mosquitto's log below debug level, which would log
every publish, so they stay silent.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

WARN_WORDS = ("not authorised", "oversize packet", "closing old connection", "protocol error", "denied")


class BrokerLog:
    def __init__(self, prefix: str, open_enrolment: bool) -> None:
        self.prefix = prefix
        self.open_enrolment = open_enrolment
        self.gateway_user = ""
        self._registered: frozenset[str] = frozenset()
        self._pending: list[str] = []  # addresses of connections not logged in yet, oldest first
        self._by_id: dict[str, tuple[str, str | None]] = {}  # client id -> (address, username)

    def logins(self, gateway_user: str, registered: Iterable[str]) -> None:
        self.gateway_user = gateway_user
        self._registered = frozenset(registered)

    def line(self, line: str) -> tuple[int, str]:
        """(level, text for the gateway's log) for one of mosquitto's lines."""
        peer = self._see(line)
        verdict = self._subscription(line)
        if verdict is not None:
            return logging.WARNING, verdict
        level = logging.INFO
        if any(word in line.lower() for word in WARN_WORDS):
            level = logging.WARNING
        elif line.startswith(("Error", "error")):
            level = logging.ERROR
        elif line.startswith(("New connection from", "Client ", "New client connected")) or self._is_subscribe(line):
            level = logging.DEBUG
        return level, line + (f" (peer {peer})" if peer and level >= logging.WARNING else "")

    def _see(self, line: str) -> str | None:
        words = line.split()
        if line.startswith("New connection from") and len(words) >= 4:
            self._pending = (self._pending + [words[3]])[-64:]
        elif line.startswith("New client connected from") and len(words) >= 7:
            address, client = words[4], words[6]
            user = line.rsplit(" u'", 1)[1].removesuffix("').") if " u'" in line else None
            with contextlib.suppress(ValueError):
                self._pending.remove(address)
            self._by_id[client] = (address, user)
            if len(self._by_id) > 4096:
                self._by_id.pop(next(iter(self._by_id)))
        elif line.startswith("Client ") and "already connected" in line:  # the new connection's CONNECT
            return self._pending[0] if self._pending else None
        elif line.startswith("Client ") and len(words) >= 2:
            client = words[1]
            if client in self._by_id:
                known = self._by_id.pop(client) if " disconnected" in line else self._by_id[client]
                return known[0]
            if " disconnected" in line and self._pending:
                return self._pending.pop(0)
        return None

    @staticmethod
    def _is_subscribe(line: str) -> bool:
        words = line.split()
        return len(words) == 3 and words[1] in ("0", "1", "2")

    def _subscription(self, line: str) -> str | None:
        if not self._is_subscribe(line):
            return None
        client, _, topic = line.split()
        address, user = self._by_id.get(client, ("?", None))
        if user == self.gateway_user and user:
            return None
        if user is not None:
            own = user
        elif self.open_enrolment and client not in self._registered:
            own = client
        else:
            own = None
        if own is not None and topic == f"{self.prefix}/{own}/down":
            return None
        who = f"client {client} (user {user})" if user else f"anonymous client {client}"
        return (f"{who} subscribed to {topic}, which its ACL does not let it read: it gets nothing from it "
                f"(peer {address})")
