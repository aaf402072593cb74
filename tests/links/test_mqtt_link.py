"""The MQTT link against real brokers: the embedded mosquitto (the gateway runs it) and an external one.

The attacks on the embedded broker are in test_mqtt_broker_attacks.py."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import (
    Error,
    Hello,
    ReadingAck,
    ReadingStatus,
    SensorReading,
    Welcome,
    decode,
    encode,
)
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import add_device
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_client import AsyncPaho, MqttConnectError
from gateway.links.mqtt_device import MqttDevice

pytestmark = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]
HUMID = (("percent", "%", 45.0),)


async def recv(dev, timeout: float = 5):
    return await asyncio.wait_for(dev.receive(), timeout)


async def start_gateway(link: MqttLink, runner, tmp_path: Path, open_enrolment: bool):
    cfg = parse_config({"server": {"hello_timeout_s": 5},
                        "devices": {"database": str(tmp_path / "g.db"), "open_enrolment": open_enrolment}}, ROOT)
    gateway = Gateway(cfg, runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    await asyncio.wait_for(link.connected.wait(), 10)
    return gateway, task


async def wait_for_log(caplog, text: str, timeout: float = 5) -> bool:
    """The broker's lines arrive through its log pipe, a moment after the client saw the refusal."""
    async with asyncio.timeout(timeout):
        while text not in caplog.text:
            await asyncio.sleep(0.02)
    return True


async def stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def embedded(fake_runner, tmp_path) -> AsyncIterator[tuple[Gateway, MqttLink]]:
    link = MqttLink("127.0.0.1", 0, embedded=True)
    gateway, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=False)
    yield gateway, link
    await stop(task)


async def test_a_registered_device_logs_in_to_the_embedded_broker_and_its_reading_is_acked(embedded):
    gateway, link = embedded
    token = await gateway.db.run(add_device, "mqtt-bp", "")
    assert await link.broker.reload()  # the registry changed: new password file + ACL, SIGHUP
    dev = MqttDevice("mqtt-bp", token)
    await dev.connect("127.0.0.1", link.port)
    await dev.send(Hello(device_id="mqtt-bp", token=token))
    assert isinstance(await recv(dev), Welcome)
    await dev.send(SensorReading(1, "humidity", 0, HUMID))
    ack = await recv(dev)
    assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED
    await dev.close()


@pytest.mark.parametrize(("device_id", "register"), [("mqtt-wrong", True), ("mqtt-stranger", False)])
async def test_the_embedded_broker_refuses_a_wrong_token_or_an_unknown_device(embedded, caplog, device_id, register):
    gateway, link = embedded
    if register:
        await gateway.db.run(add_device, device_id, "")
        await link.broker.reload()
    with caplog.at_level(logging.WARNING), pytest.raises(MqttConnectError, match="refused"):
        await MqttDevice(device_id, "not-the-token").connect("127.0.0.1", link.port)
    # mosquitto's line, forwarded, with the address the tracker found for it
    assert await wait_for_log(caplog, "disconnected, not authorised. (peer 127.0.0.1:")


async def test_a_device_cannot_publish_under_another_devices_topics(embedded, caplog):
    gateway, link = embedded
    token = await gateway.db.run(add_device, "mqtt-a", "")
    await link.broker.reload()
    dev = MqttDevice("mqtt-a", token)
    await dev.connect("127.0.0.1", link.port)
    dev._client.publish("gw/mqtt-b/up", encode(Hello(device_id="mqtt-b")), 1)  # the ACL drops it
    await dev.send(Hello(device_id="mqtt-a", token=token))  # published after, so answered after
    assert isinstance(await recv(dev), Welcome)
    assert "mqtt-b" not in link.connections
    await dev.close()


needs_clients = pytest.mark.skipif(shutil.which("mosquitto_pub") is None, reason="needs mosquitto-clients")


@needs_clients
async def test_mosquitto_command_line_clients_talk_to_the_gateway_through_an_external_mosquitto(mosquitto, fake_runner, tmp_path):
    link = MqttLink("127.0.0.1", mosquitto.port)
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    broker = ["-h", "127.0.0.1", "-p", str(mosquitto.port)]
    # A retained probe on a second topic: its arrival shows that the subscriptions are in place.
    probe = await asyncio.create_subprocess_exec("mosquitto_pub", *broker, "-t", "probe/cli-dev", "-r", "-m", "ready")
    assert await probe.wait() == 0
    sub = await asyncio.create_subprocess_exec(
        "mosquitto_sub", *broker, "-t", "probe/cli-dev", "-t", "gw/cli-dev/down", "-q", "1", "-C", "4", "-F", "%t %q %x",
        stdout=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(10):
            line = await sub.stdout.readline()
            assert line.startswith(b"probe/cli-dev"), f"mosquitto_sub: {line!r} (exit code {sub.returncode})"
            for i, msg in enumerate([Hello(device_id="cli-dev"), SensorReading(3, "humidity", 0, HUMID)]):
                payload = tmp_path / f"m{i}.bin"
                payload.write_bytes(encode(msg))
                pub = await asyncio.create_subprocess_exec("mosquitto_pub", *broker, "-t", "gw/cli-dev/up", "-q", "1", "-f", str(payload))
                assert await pub.wait() == 0
            replies, qos = [], []
            while len(replies) < 2:
                line = await sub.stdout.readline()
                assert line, f"mosquitto_sub ended early (exit code {await sub.wait()})"
                qos.append(int(line.split()[1]))
                replies.append(decode(bytes.fromhex(line.split()[2].decode())))
        assert isinstance(replies[0], Welcome)
        assert isinstance(replies[1], ReadingAck) and (replies[1].seq, replies[1].status) == (3, ReadingStatus.STORED)
        # The Welcome at QoS 1; the ack at QoS 0: the device resends an unacked reading anyway
        assert qos == [1, 0]
        pub = await asyncio.create_subprocess_exec(  # a resend (its ack lost) is answered DUPLICATE
            "mosquitto_pub", *broker, "-t", "gw/cli-dev/up", "-q", "1", "-f", str(tmp_path / "m1.bin"))
        assert await pub.wait() == 0
        line = await asyncio.wait_for(sub.stdout.readline(), 10)
        again = decode(bytes.fromhex(line.split()[2].decode()))
        assert isinstance(again, ReadingAck) and (again.seq, again.status) == (3, ReadingStatus.DUPLICATE)
    finally:
        if sub.returncode is None:
            sub.kill()
        await sub.wait()
        await stop(task)


async def test_the_gateway_reconnects_after_mosquitto_restarts_and_gets_what_was_sent_meanwhile(mosquitto, fake_runner, tmp_path):
    link = MqttLink("127.0.0.1", mosquitto.port)
    gateway, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    dev = MqttDevice("restart-dev")
    try:
        await dev.connect("127.0.0.1", mosquitto.port)
        await dev.send(Hello(device_id="restart-dev"))
        first = await recv(dev)
        assert isinstance(first, Welcome)

        mosquitto.stop()
        await asyncio.wait_for(dev._client.disconnected.wait(), 10)
        mosquitto.start()
        await asyncio.wait_for(link.connected.wait(), 15)  # cleared on loss, set again on reconnect
        assert link.connects == 2
        await dev.connect("127.0.0.1", mosquitto.port)
        await dev.send(Hello(device_id="restart-dev"))  # a device says Hello after every (re)connect
        # QoS 1 is at least once: when the broker stopped before a PUBACK of the first Welcome got
        # through (the gateway's or the device's), that Welcome comes again after the restart.
        # A repeat of a Welcome already seen is skipped; anything else fails.
        welcome = await recv(dev)
        while welcome == first:
            welcome = await recv(dev)
        assert isinstance(welcome, Welcome) and welcome.session_id != first.session_id
        await dev.send(SensorReading(10, "humidity", 0, HUMID))
        ack = await recv(dev)
        while ack in (first, welcome):
            ack = await recv(dev)
        assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (10, ReadingStatus.STORED)

        await stop(task)  # the gateway goes away; its persistent session stays on the broker
        await dev.send(SensorReading(11, "humidity", 0, HUMID))
        link2 = MqttLink("127.0.0.1", mosquitto.port)
        _, task = await start_gateway(link2, fake_runner, tmp_path, open_enrolment=True)
        err = await recv(dev)  # the queued QoS 1 reading reaches the new gateway process...
        assert isinstance(err, Error) and err.code == "hello-required"
        await dev.send(Hello(device_id="restart-dev"))  # ...which asks for a Hello; the device resends
        assert isinstance(await recv(dev), Welcome)
        await dev.send(SensorReading(11, "humidity", 0, HUMID))
        assert (await recv(dev)).status == ReadingStatus.STORED
    finally:
        await dev.close()
        await stop(task)


async def test_the_gateway_and_a_device_speak_mqtt_5_through_mosquitto(mosquitto, fake_runner, tmp_path):
    link = MqttLink("127.0.0.1", mosquitto.port, protocol="5")
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    dev = MqttDevice("mqtt5-dev", protocol="5")
    try:
        await dev.connect("127.0.0.1", mosquitto.port)
        await dev.send(Hello(device_id="mqtt5-dev"))
        assert isinstance(await recv(dev), Welcome)
        await dev.send(SensorReading(1, "humidity", 0, HUMID))
        assert (await recv(dev)).status == ReadingStatus.STORED
    finally:
        await dev.close()
        await stop(task)


async def test_mosquitto_with_the_documented_acl_keeps_each_device_on_its_own_topics(fake_runner, tmp_path):
    from tests.links.conftest import SecuredMosquitto

    if shutil.which("mosquitto_passwd") is None:
        pytest.skip("needs mosquitto (mosquitto_passwd)")
    broker = SecuredMosquitto(tmp_path, {"edge-gateway": "gateway-secret", "acl-a": "token-a", "acl-b": "token-b"})
    broker.start()
    link = MqttLink("127.0.0.1", broker.port, username="edge-gateway", password="gateway-secret")
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    try:
        with pytest.raises(MqttConnectError, match="refused|not authori"):
            await MqttDevice("acl-a", "wrong-token").connect("127.0.0.1", broker.port)
        dev = MqttDevice("acl-a", "token-a")
        await dev.connect("127.0.0.1", broker.port)
        dev._client.publish("gw/acl-b/up", encode(Hello(device_id="acl-b")), 1)  # not its topic
        await dev.send(Hello(device_id="acl-a"))  # published after, so delivered after
        assert isinstance(await recv(dev), Welcome)
        assert "acl-a" in link.connections and "acl-b" not in link.connections
        await dev.close()
    finally:
        await stop(task)
        broker.stop()


async def test_the_simulated_mqtt_box_is_answered_on_its_second_and_third_run_too(fake_runner, fake_speak, tmp_path):
    """`gateway simulate --transport mqtt` once failed on every run after the first ("expected welcome,
    got Error(unknown-message-type 0x6f)"): the broker handed it retained status of other devices and
    it decoded them as its own messages."""
    from gateway.cli.virtual_box import simulate

    link = MqttLink("127.0.0.1", 0, embedded=True)
    _, task = await start_gateway(link, fake_runner, tmp_path, open_enrolment=True)
    try:
        audio, rate = fake_speak("What time is it?")
        other = MqttDevice("other-box")  # leaves its retained status on the broker
        await other.connect("127.0.0.1", link.port)
        await other.close()
        for run in range(3):
            result = await simulate(f"mqtt://127.0.0.1:{link.port}", audio, rate, device_id="simulator",
                                    transport="mqtt", push_to_talk=True, speed=0, timeout=20)
            assert result.reply_text.startswith("It is"), f"run {run + 1}: {result}"
    finally:
        await stop(task)


async def test_the_simulated_device_decodes_only_its_own_downlink(caplog, mosquitto):
    """A publish on another topic (a broker handing out other devices' retained status, as amqtt
    did) is ignored with a warning, never taken for a message to the device."""
    dev = MqttDevice("topic-dev")
    await dev.connect("127.0.0.1", mosquitto.port)  # mosquitto with anonymous logins: no ACL here
    dev._client.subscribe("gw/other-dev/status", 1)  # as if the broker delivered it anyway
    other = MqttDevice("other-dev")
    await other.connect("127.0.0.1", mosquitto.port)  # publishes a retained "online"
    pub = AsyncPaho("pusher", lambda m: None, persistent=False)
    await pub.connect("127.0.0.1", mosquitto.port)
    with caplog.at_level(logging.WARNING):
        pub.publish("gw/topic-dev/down", encode(Welcome(session_id="s1")), 1)
        assert isinstance(await recv(dev), Welcome)  # its own topic: decoded
        async with asyncio.timeout(5):  # the status comes from another client: in its own time
            while dev.ignored == 0:
                await asyncio.sleep(0.02)
    assert "ignored a publish on gw/other-dev/status" in caplog.text
    assert dev._inbox.empty()
    for client in (dev, other):
        await client.close()
    await pub.disconnect()
