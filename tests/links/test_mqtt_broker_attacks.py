"""The embedded mosquitto under attack (issue 13): real mosquitto run by the gateway, paho and the
mosquitto command-line clients as attackers. Each attack is refused and logged with the peer and
the reason, and the victim device (and the gateway's own session) keeps being served."""

from __future__ import annotations

import asyncio
import logging
import shutil
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import paho.mqtt.client as paho
import pytest
import pytest_asyncio

from firmware_protocol import Hello, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import add_device, remove_device
from gateway.links import mosquitto as mosquitto_module
from gateway.links.base import LinkServices
from gateway.links.mosquitto import MosquittoMissing
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_client import AsyncPaho, MqttConnectError
from gateway.links.mqtt_device import MqttDevice

pytestmark = pytest.mark.skipif(mosquitto_module.find_mosquitto() is None, reason="needs mosquitto")
on_the_loop = pytest.mark.asyncio(loop_scope="session")
ROOT = Path(__file__).resolve().parents[2]
HUMID = (("percent", "%", 45.0),)
needs_clients = pytest.mark.skipif(shutil.which("mosquitto_pub") is None, reason="needs mosquitto-clients")


@dataclass
class Setup:
    gateway: Gateway
    link: MqttLink
    victim: MqttDevice
    tokens: dict[str, str]
    victim_port: int  # its local port: the address mosquitto logs for it
    seq: list[int] = field(default_factory=lambda: [100])

    async def victim_is_served(self) -> None:
        """The victim's next reading is stored and acked, on the connection it had all along."""
        assert not self.victim._client.disconnected.is_set(), "the victim lost its broker session"
        self.seq[0] += 1
        await self.victim.send(SensorReading(self.seq[0], "humidity", 0, HUMID))
        ack = await asyncio.wait_for(self.victim.receive(), 5)
        assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (self.seq[0], ReadingStatus.STORED)
        assert self.link.connects == 1, "the gateway lost its own broker session"


async def wait_for_log(caplog, text: str, timeout: float = 10) -> str:
    """The broker's lines come through its log pipe, a moment after the client saw the refusal."""
    try:
        async with asyncio.timeout(timeout):
            while text not in caplog.text:
                await asyncio.sleep(0.02)
    except TimeoutError:
        raise AssertionError(f"no log line with {text!r} within {timeout} s; the log:\n{caplog.text[-3000:]}") from None
    return next(line for line in caplog.text.splitlines() if text in line)


async def serve(tmp_path: Path, open_enrolment: bool, runner) -> AsyncIterator[Setup]:
    cfg = parse_config({"server": {"hello_timeout_s": 5},
                        "devices": {"database": str(tmp_path / "g.db"), "open_enrolment": open_enrolment}}, ROOT)
    link = MqttLink("127.0.0.1", 0, embedded=True, broker_folder=tmp_path / "mosquitto", max_frame_bytes=65536)
    gateway = Gateway(cfg, runner, [link])
    tokens = {d: await gateway.db.run(add_device, d, "") for d in ("dev-a", "dev-b")}
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.wait_for(link.connected.wait(), 10)
        victim = MqttDevice("dev-a", tokens["dev-a"])
        await victim.connect("127.0.0.1", link.port)
        await victim.send(Hello(device_id="dev-a", token=tokens["dev-a"]))
        assert isinstance(await asyncio.wait_for(victim.receive(), 5), Welcome)
        yield Setup(gateway, link, victim, tokens, victim._client.client.socket().getsockname()[1])
        await victim.close()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session", params=[False, True], ids=["enrolment-closed", "enrolment-open"])
async def setup(request, tmp_path, fake_runner) -> AsyncIterator[Setup]:
    async for s in serve(tmp_path, request.param, fake_runner):
        yield s


@pytest_asyncio.fixture(loop_scope="session")
async def open_setup(tmp_path, fake_runner) -> AsyncIterator[Setup]:
    async for s in serve(tmp_path, True, fake_runner):
        yield s


class Attacker:
    """A paho client that records every publish it receives (topic, payload)."""

    def __init__(self, client_id: str, username: str | None = None, password: str | None = None) -> None:
        self.got: list[tuple[str, bytes]] = []
        self.arrived = asyncio.Event()
        self.client = AsyncPaho(client_id, self._on_message, username=username, password=password, persistent=False)

    def _on_message(self, msg: paho.MQTTMessage) -> None:
        self.got.append((msg.topic, msg.payload))
        self.arrived.set()

    async def until(self, topic: str, timeout: float = 5) -> None:
        async with asyncio.timeout(timeout):
            while not any(t == topic for t, _ in self.got):
                self.arrived.clear()
                await self.arrived.wait()


@on_the_loop
@pytest.mark.parametrize("as_user", [True, False], ids=["its-username", "anonymous"])
async def test_a_login_with_the_gateways_client_id_and_a_wrong_password_takes_nothing_over(setup, caplog, as_user):
    link = setup.link
    caplog.set_level(logging.INFO)
    for client_id in (link.client_id, "edge-gateway"):  # its real (random) id, and the old fixed one
        attacker = Attacker(client_id, link.username if as_user else "edge-gateway", "wrong-password")
        with pytest.raises(MqttConnectError, match="refused|not authori"):
            await attacker.client.connect("127.0.0.1", link.port)
    line = await wait_for_log(caplog, "not authorised")
    assert "(peer 127.0.0.1:" in line, line
    await setup.victim_is_served()


@on_the_loop
async def test_a_login_with_a_devices_id_and_a_wrong_password_does_not_drop_that_device(setup, caplog):
    caplog.set_level(logging.INFO)
    attacker = Attacker("dev-a", "dev-a", "not-the-token")
    with pytest.raises(MqttConnectError, match="refused|not authori"):
        await attacker.client.connect("127.0.0.1", setup.link.port)
    assert "(peer 127.0.0.1:" in await wait_for_log(caplog, "not authorised")
    await setup.victim_is_served()


@on_the_loop
async def test_a_registered_device_cannot_take_another_devices_client_id_when_enrolment_is_closed(fake_runner, tmp_path):
    async for s in serve(tmp_path, False, fake_runner):
        intruder = Attacker("dev-a", "dev-b", s.tokens["dev-b"])  # a valid login, the victim's client id
        await intruder.client.connect("127.0.0.1", s.link.port)  # the broker names it dev-b instead
        await s.victim_is_served()
        await intruder.client.disconnect()


@on_the_loop
async def test_a_client_without_a_login_is_refused_when_enrolment_is_closed(fake_runner, tmp_path):
    async for s in serve(tmp_path, False, fake_runner):
        with pytest.raises(MqttConnectError, match="refused|not authori"):
            await Attacker("mallory").client.connect("127.0.0.1", s.link.port)
        await s.victim_is_served()


@on_the_loop
async def test_an_anonymous_client_cannot_read_another_devices_downlink_or_inject_its_uplink(open_setup, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    spy = Attacker("mallory")
    await spy.client.connect("127.0.0.1", s.link.port)
    for topic in ("gw/dev-a/down", "gw/dev-b/down", "gw/#", "#", "gw/mallory/down"):
        spy.client.subscribe(topic, 1)
    for seq, device in ((900, "dev-a"), (901, "dev-b")):  # injected readings in the devices' names
        spy.client.publish(f"gw/{device}/up", encode(SensorReading(seq, "humidity", 0, HUMID)), 1)
    await s.victim_is_served()  # an ack to dev-a goes out on gw/dev-a/down...
    spy.client.publish("gw/mallory/up", encode(Hello(device_id="mallory")), 1)
    await spy.until("gw/mallory/down")  # ...before the spy's own answer, in the broker's order
    assert [t for t, _ in spy.got] == ["gw/mallory/down"], spy.got
    assert isinstance(decode(spy.got[0][1]), Welcome)
    line = await wait_for_log(caplog, "anonymous client mallory subscribed to gw/dev-a/down, which its ACL does not")
    assert "(peer 127.0.0.1:" in line, line
    assert "subscribed to gw/mallory/down" not in caplog.text  # its own downlink is fine
    await spy.client.disconnect()
    rows = await s.gateway.db.run(lambda c: c.execute("SELECT device_id, seq FROM readings WHERE seq >= 900").fetchall())
    assert rows == []


@on_the_loop
async def test_an_anonymous_client_using_a_registered_id_gets_nothing_of_it(open_setup):
    s = open_setup
    spy = Attacker("dev-b")  # dev-b is registered (and offline): the ACL denies its topics to anonymous clients
    await spy.client.connect("127.0.0.1", s.link.port)
    spy.client.subscribe("gw/dev-b/down", 1)
    spy.client.subscribe("gw/spy-probe/down", 1)  # not its own: denied too (its patterns follow its client id)
    spy.client.publish("gw/dev-b/up", encode(Hello(device_id="dev-b")), 1)
    spy.client.publish("gw/dev-b/up", encode(SensorReading(902, "humidity", 0, HUMID)), 1)
    await s.victim_is_served()
    probe = MqttDevice("spy-probe")  # a separate anonymous device: answered, so the broker passed the spy's publishes on
    await probe.connect("127.0.0.1", s.link.port)
    await probe.send(Hello(device_id="spy-probe"))
    assert isinstance(await asyncio.wait_for(probe.receive(), 5), Welcome)
    await probe.close()
    assert spy.got == [] and "dev-b" not in s.link.connections
    await spy.client.disconnect()


@on_the_loop
@needs_clients
async def test_mosquitto_pub_injecting_as_a_registered_device_without_its_token_is_dropped(open_setup, tmp_path, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    payload = tmp_path / "reading.bin"
    payload.write_bytes(encode(SensorReading(903, "humidity", 0, HUMID)))
    pub = await asyncio.create_subprocess_exec("mosquitto_pub", "-h", "127.0.0.1", "-p", str(s.link.port), "-i", "dev-a",
                                               "-t", "gw/dev-a/up", "-q", "1", "-f", str(payload))
    assert await pub.wait() == 0  # mosquitto accepts and drops a denied publish (MQTT 3.1.1 cannot say no)
    # mosquitto_pub took over dev-a's client id for a moment: the documented limit of open enrolment
    # (docs/MQTT.md), logged with the intruder's address. The victim reconnects and says Hello (as a
    # device does after every reconnect); nothing of the injection was stored.
    line = await wait_for_log(caplog, "already connected, closing old connection")
    assert f"(peer 127.0.0.1:" in line and f"127.0.0.1:{s.victim_port}" not in line, line
    await asyncio.wait_for(s.victim._client.disconnected.wait(), 5)
    await s.victim.connect("127.0.0.1", s.link.port)
    await s.victim.send(Hello(device_id="dev-a", token=s.tokens["dev-a"]))
    assert isinstance(await asyncio.wait_for(s.victim.receive(), 5), Welcome)
    s.seq[0] += 1
    await s.victim.send(SensorReading(s.seq[0], "humidity", 0, HUMID))
    reply = await asyncio.wait_for(s.victim.receive(), 5)
    assert isinstance(reply, ReadingAck) and reply.seq == s.seq[0]
    rows = await s.gateway.db.run(lambda c: c.execute("SELECT seq FROM readings WHERE seq = 903").fetchall())
    assert rows == []


@on_the_loop
async def test_no_client_gets_the_retained_status_of_other_devices(setup):
    s = setup  # dev-a published a retained "online" on gw/dev-a/status when it connected
    open_enrolment = s.gateway.cfg.devices.open_enrolment
    who = ("newbie", None, None) if open_enrolment else ("dev-b", "dev-b", s.tokens["dev-b"])
    spy = Attacker(*who)
    await spy.client.connect("127.0.0.1", s.link.port)
    spy.client.subscribe("gw/+/status", 1)
    spy.client.subscribe("#", 1)
    spy.client.subscribe(f"gw/{who[0]}/down", 1)
    spy.client.publish(f"gw/{who[0]}/up", encode(Hello(device_id=who[0], token=who[2] or "")), 1)
    await spy.until(f"gw/{who[0]}/down")
    assert [t for t, _ in spy.got] == [f"gw/{who[0]}/down"], spy.got
    await spy.client.disconnect()
    # and the simulated device, which once took dev-a's status for its Welcome, sees only its own
    dev = MqttDevice(who[0], who[2] or "")
    await dev.connect("127.0.0.1", s.link.port)
    await dev.send(Hello(device_id=who[0], token=who[2] or ""))
    assert isinstance(await asyncio.wait_for(dev.receive(), 5), Welcome) and dev.ignored == 0
    await dev.close()


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@on_the_loop
@needs_clients
async def test_an_oversized_publish_is_refused_before_the_broker_buffers_it(open_setup, tmp_path, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    pid = s.link.broker._proc.pid
    before = _peak_rss_kib(pid)
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(150 * 1024 * 1024)  # 150 MB (sparse) as one publish
    pub = await asyncio.create_subprocess_exec("mosquitto_pub", "-h", "127.0.0.1", "-p", str(s.link.port), "-i", "flood",
                                               "-t", "gw/flood/up", "-f", str(big), stderr=asyncio.subprocess.PIPE)
    await asyncio.wait_for(pub.wait(), 60)
    line = await wait_for_log(caplog, "oversize packet")
    assert "flood" in line and "(peer 127.0.0.1:" in line, line
    assert _peak_rss_kib(pid) - before < 20 * 1024, "mosquitto buffered the oversized publish"
    await s.victim_is_served()


@on_the_loop
async def test_a_device_added_or_removed_while_running_can_or_can_no_longer_log_in(open_setup, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    reloads = s.link.broker.reloads
    token = await s.gateway.db.run(add_device, "dev-c", "")  # as `gateway devices add` does, from anywhere
    async with asyncio.timeout(10):  # the broker polls the registry (every 2 s)
        while s.link.broker.reloads == reloads:
            await asyncio.sleep(0.05)
    assert "added dev-c" in caplog.text
    dev = MqttDevice("dev-c", token)
    await dev.connect("127.0.0.1", s.link.port)
    await dev.close()
    await s.gateway.db.run(remove_device, "dev-c")
    assert await s.link.broker.reload()
    with pytest.raises(MqttConnectError, match="refused|not authori"):
        await MqttDevice("dev-c", token).connect("127.0.0.1", s.link.port)
    await s.victim_is_served()


@on_the_loop
async def test_mosquitto_is_restarted_when_it_dies_and_devices_are_served_again(open_setup, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    s.link.broker._proc.send_signal(signal.SIGKILL)
    await wait_for_log(caplog, "mosquitto exited")
    await asyncio.wait_for(s.victim._client.disconnected.wait(), 10)
    await wait_for_log(caplog, "mosquitto restarted", timeout=15)
    async with asyncio.timeout(15):
        while s.link.connects < 2 or not s.link.connected.is_set():
            await asyncio.sleep(0.05)
    await s.victim.connect("127.0.0.1", s.link.port)
    await s.victim.send(Hello(device_id="dev-a", token=s.tokens["dev-a"]))
    assert isinstance(await asyncio.wait_for(s.victim.receive(), 5), Welcome)
    await s.victim.send(SensorReading(1000, "humidity", 0, HUMID))
    assert (await asyncio.wait_for(s.victim.receive(), 5)).status == ReadingStatus.STORED


@on_the_loop
async def test_the_embedded_broker_speaks_mqtt_5(fake_runner, tmp_path):
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}, "mqtt": {"protocol": "5"}}, ROOT)
    link = MqttLink("127.0.0.1", 0, embedded=True, protocol="5")
    gateway = Gateway(cfg, fake_runner, [link])
    token = await gateway.db.run(add_device, "v5-dev", "")
    task = asyncio.create_task(gateway.serve(asyncio.Event()))
    try:
        await asyncio.wait_for(link.connected.wait(), 10)
        dev = MqttDevice("v5-dev", token, protocol="5")
        await dev.connect("127.0.0.1", link.port)
        await dev.send(Hello(device_id="v5-dev", token=token))
        assert isinstance(await asyncio.wait_for(dev.receive(), 5), Welcome)
        await dev.close()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@on_the_loop
async def test_without_mosquitto_the_link_says_what_to_install(monkeypatch, caplog):
    monkeypatch.setattr(mosquitto_module, "find_mosquitto", lambda: None)
    link = MqttLink("127.0.0.1", 0, embedded=True)
    with pytest.raises(MosquittoMissing, match="sudo apt install mosquitto"):
        await link.serve(lambda conn: asyncio.sleep(0), asyncio.Event(), LinkServices())
    assert "sudo apt install mosquitto" in caplog.text


def test_the_embedded_mosquitto_ends_with_a_killed_gateway_and_the_port_is_free_again(tmp_path):
    """kill -9 of `gateway run` must not leave its mosquitto holding mqtt.port for the next start."""
    import os
    import subprocess
    import sys
    import time

    from tests.links.conftest import free_port

    port = free_port()
    script = (
        "import asyncio\n"
        "from gateway.links.mqtt import MqttLink\n"
        "async def main():\n"
        f"    link = MqttLink('127.0.0.1', {port}, embedded=True)\n"
        "    ready = asyncio.Event()\n"
        "    task = asyncio.create_task(link.serve(lambda c: asyncio.sleep(0), ready))\n"
        "    await link.connected.wait()\n"
        "    print(link.broker._proc.pid, flush=True)\n"
        "    await task\n"
        "asyncio.run(main())\n")
    gateway = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        broker_pid = int(gateway.stdout.readline())
        os.kill(gateway.pid, signal.SIGKILL)
        gateway.wait(10)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{broker_pid}").exists() and Path(f"/proc/{broker_pid}/stat").read_text().split()[2] != "Z":
            assert time.monotonic() < deadline, "mosquitto outlived the killed gateway"
            time.sleep(0.05)
    finally:
        gateway.kill()
        gateway.wait()


def test_a_port_held_by_a_child_of_gateway_run_counts_as_the_gateways(tmp_path):
    """`gateway doctor` and the start-up port check see mqtt.port held by the embedded mosquitto,
    a child of `gateway run`: it is reported as the running gateway, not as a stranger."""
    import os
    import subprocess
    import sys

    from gateway.cli.ports import holder_of
    from tests.links.conftest import free_port

    port = free_port()
    fake = tmp_path / "gateway"  # a program named `gateway`, run as `gateway run`, whose child listens
    fake.write_text(
        "import socket, subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import socket, time\\n"
        f"s = socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); print(1, flush=True); time.sleep(60)'],"
        " stdout=subprocess.PIPE)\n"
        "child.stdout.readline(); print(child.pid, flush=True); child.wait()\n")
    parent = subprocess.Popen([sys.executable, str(fake), "run"], stdout=subprocess.PIPE, text=True)
    child_pid = 0
    try:
        child_pid = int(parent.stdout.readline())
        holder = holder_of(port)
        assert holder is not None and holder.pid == parent.pid and holder.is_gateway, holder
        assert holder.pid != child_pid
    finally:
        if child_pid:
            os.kill(child_pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


@on_the_loop
@needs_clients
async def test_mosquitto_sub_as_an_anonymous_spy_gets_nothing_of_another_device(open_setup, caplog):
    s = open_setup
    caplog.set_level(logging.INFO)
    sub = await asyncio.create_subprocess_exec(
        "mosquitto_sub", "-h", "127.0.0.1", "-p", str(s.link.port), "-i", "eve", "-t", "gw/dev-a/down", "-t", "gw/+/status",
        "-q", "1", "-v", "-W", "4", stdout=asyncio.subprocess.PIPE)
    await wait_for_log(caplog, "anonymous client eve subscribed to gw/dev-a/down")  # subscribed: now the traffic
    await s.victim_is_served()  # its ack goes out on gw/dev-a/down while eve listens
    out, _ = await asyncio.wait_for(sub.communicate(), 15)
    assert out == b"", out  # neither the ack nor dev-a's retained status


def test_gateway_run_says_before_the_models_load_that_mosquitto_is_needed(monkeypatch):
    from gateway.cli.preflight import file_problems

    cfg = parse_config({}, ROOT)
    assert not [p for p in file_problems(cfg) if "mosquitto" in p]
    monkeypatch.setattr(mosquitto_module, "find_mosquitto", lambda: None)
    [problem] = [p for p in file_problems(cfg) if "mosquitto" in p]
    assert "sudo apt install mosquitto" in problem and "mqtt.host" in problem
    external = parse_config({"mqtt": {"host": "broker.lan"}}, ROOT)
    assert not [p for p in file_problems(external) if "mosquitto" in p]
