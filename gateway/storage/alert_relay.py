"""Alerts to every gateway sharing the database: PostgreSQL LISTEN/NOTIFY.

The alert rules and the deadline reminders run on one member (gateway/storage/cluster_job.py),
but the person's voice box may be connected to another. So with `storage.backend: postgres` the
rule engine's alerts go out as `NOTIFY gateway_alerts` (JSON), and every member listens and
publishes each one on its own bus: its `speak_alerts` (a member with the memory) says it on the
devices connected to it, its screens show it (so the cluster's screen events on the broker leave
alerts out, gateway/cluster/events.py). The member that raised it hears it back the same way, so
every member, the raising one included, gets each alert once. When the NOTIFY fails (the
database gone for a moment) the alert is published on the raising member's bus only, logged; it
is in the person's memory either way. A listener whose connection drops reconnects every
`retry_s`; alerts sent meanwhile are not heard by that member (logged when it is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from dataclasses import asdict

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from gateway.memory.events import Alert

log = logging.getLogger(__name__)

CHANNEL = "gateway_alerts"
MAX_TEXT = 4000  # a NOTIFY payload holds < 8000 bytes


def encode_alert(alert: Alert) -> str:
    fields = asdict(alert)
    fields["text"] = alert.text[:MAX_TEXT]
    return json.dumps(fields, ensure_ascii=False)


def decode_alert(payload: str) -> Alert:
    fields = json.loads(payload)
    return Alert(fields["user_id"], tuple(fields["devices"]), fields["text"], int(fields["rule_id"]),
                 fields["severity"], float(fields["at"]))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class AlertRelay:
    def __init__(self, dsn: str, pool: AsyncConnectionPool, connect_timeout_s: float, retry_s: float = 5.0) -> None:
        self._dsn, self._pool = dsn, pool
        self._timeout, self.retry_s = max(1, round(connect_timeout_s)), retry_s
        self._outbox: asyncio.Queue[Alert] = asyncio.Queue()
        self._listening = asyncio.Event()  # this member hears the channel (so also its own alerts)
        self.sent = self.heard = 0

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    def publish(self, alert: Alert) -> None:
        """The rule engine's publish: queued, sent by `run`."""
        self._outbox.put_nowait(alert)

    async def run(self, deliver: Callable[[Alert], None]) -> None:
        """Forever: send the queued alerts, and `deliver` every alert any member sent."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._send(deliver), name="alert-relay-send")
            tg.create_task(self._listen(deliver), name="alert-relay-listen")

    async def _send(self, deliver: Callable[[Alert], None]) -> None:
        while True:
            alert = await self._outbox.get()
            with contextlib.suppress(TimeoutError):  # at start: send once this member listens too
                await asyncio.wait_for(self._listening.wait(), self.retry_s)
            try:
                async with self._pool.connection() as conn:
                    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, encode_alert(alert)))
                self.sent += 1
            except (psycopg.Error, PoolTimeout) as exc:
                log.warning("alert for %s not sent to the other gateways (%s): said only by this one's devices",
                            alert.user_id, _one_line(exc))
                deliver(alert)

    async def _listen(self, deliver: Callable[[Alert], None]) -> None:
        lost = False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self._dsn, autocommit=True,
                                                                 connect_timeout=self._timeout) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    if lost:
                        log.info("alerts: listening to the other gateways again (alerts sent meanwhile were not heard)")
                    self._listening.set()
                    lost = False
                    async for note in conn.notifies():
                        try:
                            alert = decode_alert(note.payload)
                        except (ValueError, KeyError, TypeError) as exc:
                            log.warning("alerts: a malformed alert from PostgreSQL backend %d ignored (%s)",
                                        note.pid, exc)
                            continue
                        self.heard += 1
                        deliver(alert)
            except (psycopg.Error, OSError) as exc:
                if not lost:
                    log.warning("alerts: not listening to the other gateways (%s); trying again every %.0f s",
                                _one_line(exc), self.retry_s)
                self._listening.clear()
                lost = True
            await asyncio.sleep(self.retry_s)
