"""A connection the broker accepted and then lost is retried with back-off too: two gateways with one
client id on one broker (a second gateway started with the default `mqtt.client_id`), which
mosquitto disconnects in turn, reconnect a few times in seconds, not a thousand times a second,
and the log says so once per back-off step. Real mosquitto; the MQTT link's own client.
(A single gateway whose broker restarts still reconnects: tests/links/test_mqtt_link.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.links.base import DeviceConnection
from gateway.links.mqtt import MqttLink

pytestmark = pytest.mark.asyncio(loop_scope="session")
WATCHED_S = 5.0  # how long the two links are watched taking the session from each other


async def no_sessions(conn: DeviceConnection) -> None:
    """No device talks here."""


async def test_two_links_with_one_client_id_back_off_instead_of_kicking_each_other_off_in_a_loop(mosquitto, caplog):
    links = [MqttLink("127.0.0.1", mosquitto.port, client_id="twin-gateway") for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="gateway.links.mqtt_reconnect"):
        serving = [asyncio.create_task(link.serve(no_sessions)) for link in links]
        try:
            async with asyncio.timeout(30):  # both got in once: from here on they take turns
                while not all(link.connects for link in links):
                    await asyncio.sleep(0.05)
            before = sum(link.connects for link in links)
            await asyncio.sleep(WATCHED_S)  # an observation window: counted, not timed
            connects = sum(link.connects for link in links) - before
            assert not any(task.done() for task in serving), serving
        finally:
            for task in serving:
                task.cancel()
            await asyncio.gather(*serving, return_exceptions=True)
    # without a back-off after a lost connection: ~1,200 connects and ~2,500 log lines a second
    assert 1 <= connects < 20, f"{connects} connects in {WATCHED_S:.0f} s"
    lost = [r.getMessage() for r in caplog.records if "lost the broker" in r.getMessage()]
    assert lost and len(lost) < 20, lost
    assert "after it accepted the connection" in lost[0] and "same client id" in lost[0]
