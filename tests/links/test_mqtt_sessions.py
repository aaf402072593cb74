"""MQTT device sessions under abuse, through a real mosquitto: a cap shared with the gateway's
other links (server.max_sessions), and silent sessions pinged, then closed (server.session_idle_s).

Before these limits any publish on `gw/<new id>/up` opened a session (each holding a VAD clone
with the real engines) and a device gone without its last will kept its session for ever."""

from __future__ import annotations

import asyncio
import logging

import pytest

from firmware_protocol import Error, Hello, Ping, Pong, ReadingAck, ReadingStatus, SensorReading, Welcome
from gateway.links.limits import PeerLimits
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_device import MqttDevice
from tests.links.test_mqtt_link import HUMID, recv, start_gateway, stop

pytestmark = pytest.mark.asyncio(loop_scope="session")
HANG_S = 30  # a hang bound only


async def hello(dev: MqttDevice, port: int) -> object:
    await dev.connect("127.0.0.1", port)
    await dev.send(Hello(device_id=dev.device_id))
    return await recv(dev, HANG_S)


async def test_mqtt_sessions_count_towards_max_sessions_and_a_freed_slot_is_taken_again(
        mosquitto, fake_runner, tmp_path, caplog):
    limits = PeerLimits(max_sessions=2)
    link = MqttLink("127.0.0.1", mosquitto.port, limits=limits)
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    devices = [MqttDevice(f"cap-{i}") for i in range(3)]
    try:
        assert isinstance(await hello(devices[0], mosquitto.port), Welcome)
        assert isinstance(await hello(devices[1], mosquitto.port), Welcome)
        with caplog.at_level(logging.WARNING, "gateway.links.mqtt"):
            refused = await hello(devices[2], mosquitto.port)
        assert isinstance(refused, Error) and refused.code == "too-many-sessions", refused
        assert "server.max_sessions" in refused.text
        assert "mqtt cap-2: too-many-sessions" in caplog.text
        assert set(link.connections) == {"cap-0", "cap-1"} and limits.sessions == 2

        # A new Hello of a device already served replaces its session in the same slot.
        await devices[1].send(Hello(device_id="cap-1"))
        assert isinstance(await recv(devices[1], HANG_S), Welcome)
        assert limits.sessions == 2

        await devices[0].close()  # its last will says offline: its session ends, its slot is free
        async with asyncio.timeout(HANG_S):
            while "cap-0" in link.connections:
                await asyncio.sleep(0.02)
        assert limits.sessions == 1
        await devices[2].send(Hello(device_id="cap-2"))
        assert isinstance(await recv(devices[2], HANG_S), Welcome)
        await devices[2].send(SensorReading(1, "humidity", 0, HUMID))
        ack = await recv(devices[2], HANG_S)
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED
    finally:
        for dev in devices[1:]:
            await dev.close()
        await stop(task)


async def test_a_silent_mqtt_session_is_pinged_then_closed_and_a_device_that_answers_stays(
        mosquitto, fake_runner, tmp_path, caplog):
    limits = PeerLimits(max_sessions=8)
    link = MqttLink("127.0.0.1", mosquitto.port, limits=limits, idle_s=0.5, idle_probe_s=1.0)
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    live, gone = MqttDevice("idle-live"), MqttDevice("idle-gone")
    try:
        assert isinstance(await hello(live, mosquitto.port), Welcome)
        assert isinstance(await hello(gone, mosquitto.port), Welcome)
        with caplog.at_level(logging.WARNING, "gateway.links.mqtt"):
            for _ in range(3):  # the live device answers each Ping; the other stays silent
                ping = await recv(live, HANG_S)
                assert isinstance(ping, Ping), ping
                await live.send(Pong(nonce=ping.nonce))
            assert isinstance(await recv(gone, HANG_S), Ping)
            closed = await recv(gone, HANG_S)
        assert isinstance(closed, Error) and closed.code == "idle-timeout", closed
        assert "idle-gone: idle-timeout" in caplog.text and "server.session_idle_s" in caplog.text
        async with asyncio.timeout(HANG_S):
            while "idle-gone" in link.connections:
                await asyncio.sleep(0.02)
        assert "idle-live" in link.connections and limits.sessions == 1

        # The device was only quiet: its next message is answered hello-required, as the protocol says.
        await gone.send(SensorReading(7, "humidity", 0, HUMID))
        answer = await recv(gone, HANG_S)
        assert isinstance(answer, Error) and answer.code == "hello-required", answer
    finally:
        await live.close()
        await gone.close()
        await stop(task)
