"""Stay connected to an MQTT broker: connect, wait, reconnect with a jittered back-off.

Used by the gateway's MQTT link (its client, and the extensions' client) and the cluster's
downlink observer, each with an AsyncPaho client (gateway/links/mqtt_client.py).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

from gateway.links.limits import LogThrottle
from gateway.links.mqtt_client import AsyncPaho, MqttConnectError

log = logging.getLogger(__name__)

RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 10.0
RECONNECT_JITTER = 0.25  # each back-off sleep is its delay +- this share: clients lost together spread out
STABLE_CONNECTION_S = 30.0  # a connection that stayed up this long resets the back-off when lost
LOSS_LOG_INTERVAL_S = 60.0  # connections lost soon after connecting: one line per back-off step and minute


async def stay_connected(client: AsyncPaho, host: str, port: int, label: str, ready: asyncio.Event | None,
                         connected: asyncio.Event, on_connected: Callable[[], None] | None = None,
                         before_disconnect: Callable[[], Awaitable[None]] | None = None) -> None:
    """Connect, stay connected, reconnect with back-off, until cancelled; `ready` is set after
    the first attempt either way (the gateway runs, the link joins when the broker is back).
    The back-off (RECONNECT_FIRST_S doubling to RECONNECT_MAX_S, jittered) also follows a
    connection lost within STABLE_CONNECTION_S of its CONNACK: two clients with one client id,
    which the broker disconnects in turn, reconnect every few seconds, not a thousand times a
    second, and such losses are logged once per back-off step (and minute).
    `before_disconnect` runs when cancelled while connected, before the clean disconnect (a
    cluster member's leave: its last publishes go out before the DISCONNECT)."""
    delay = RECONNECT_FIRST_S
    losses = LogThrottle(log, LOSS_LOG_INTERVAL_S)
    while True:
        try:
            await client.connect(host, port)
        except MqttConnectError as exc:
            wait = _jittered(delay)
            log.warning("%s: %s; retrying in %.1f s", label, exc, wait)
            if ready is not None:
                ready.set()
            await asyncio.sleep(wait)  # reconnect back-off
            delay = min(delay * 2, RECONNECT_MAX_S)
            continue
        connected.set()
        up_since = time.monotonic()
        if on_connected is not None:
            on_connected()
        if ready is not None:
            ready.set()
        try:
            await client.disconnected.wait()
        except asyncio.CancelledError:
            if before_disconnect is not None:
                await before_disconnect()
            await client.disconnect()
            raise
        connected.clear()
        # Device sessions live on: the persistent session delivers what was queued meanwhile.
        up_s = time.monotonic() - up_since
        if up_s >= STABLE_CONNECTION_S:  # it held: the broker restarted, the network came back
            delay = RECONNECT_FIRST_S
            wait = _jittered(delay)
            log.warning("%s: lost the broker %s:%d; reconnecting in %.1f s", label, host, port, wait)
        else:  # lost again soon: back off, or two clients with one id take the session from each other
            wait = _jittered(delay)
            losses.warning(delay, "%s: lost the broker %s:%d %.1f s after it accepted the connection; reconnecting "
                           "in %.1f s, backing off up to %.0f s (does another client use the same client id? "
                           "see the broker's log)", label, host, port, up_s, wait, RECONNECT_MAX_S)
        await asyncio.sleep(wait)
        delay = min(delay * 2, RECONNECT_MAX_S)


def _jittered(delay: float) -> float:
    return delay * random.uniform(1 - RECONNECT_JITTER, 1 + RECONNECT_JITTER)
