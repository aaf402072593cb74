"""`gateway bench-links`: sensor readings per second through each link into durable storage, and
the CPU the gateway spends per MQTT message compared with a bare paho publish+receive loop.

Everything runs in this process on loopback (the embedded MQTT broker too), with a throw-away
database; every reading counted was acked STORED, i.e. committed to SQLite first. The readings
through the embedded mosquitto and the bare loop alternate `--rounds` times (their medians and the
median of the rounds' ratios are printed). With `--broker HOST:PORT` the MQTT figures are also taken through that external broker (e.g. a
mosquitto), under the topic prefix `bench` so a gateway using the same broker is not disturbed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from firmware_protocol import Hello, Message, ReadingAck, ReadingStatus, SensorReading, Welcome, decode, encode
from gateway.app import Gateway
from gateway.cli.progress import progress
from gateway.config import GatewayConfig
from gateway.engines.runner import EngineRunner
from gateway.errors import ConfigError
from gateway.links.coap import CoapLink
from gateway.links.device_side import open_device
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_client import AsyncPaho
from gateway.links.mqtt_device import MqttDevice
from gateway.links.serial_link import SerialLink, SerialPort
from gateway.links.websocket import WebSocketLink

VALUES = (("percent", "%", 45.0),)


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Bytes:
    """A device connection of bytes (WebSocket, CoAP, serial): messages decoded, `send_encoded` a
    message's bytes."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def send(self, message: Message) -> None:
        await self.send_encoded(encode(message))

    async def send_encoded(self, data: bytes) -> None:
        await self.conn.send(data)

    async def receive(self) -> Message:
        return decode(await self.conn.recv())


def _encoded_readings(n: int) -> list[bytes]:
    """The device's readings, seq 1..n, encoded before the clock starts: building and encoding them
    is the device's work (an ESP32's), not the gateway's, and the bare paho loop publishes one
    payload encoded beforehand too."""
    return [encode(SensorReading(seq, "humidity", 0, VALUES)) for seq in range(1, n + 1)]


async def _readings(conn: Any, readings: list[bytes], window: int) -> float:
    """Send the encoded readings with at most `window` unacked; returns seconds until the last
    STORED ack. The device side costs one decode per ack (MQTT: MqttDevice); it fails when 29-30 s
    pass without an ack (one timer, moved on by an ack once it is a second old: no task per ack,
    and no new timer per ack, ~3 us each, which the bare loop does not pay)."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    n = len(readings)
    sent = acked = 0
    async with asyncio.timeout(30) as no_ack:
        while acked < n:
            while sent < n and sent - acked < window:
                await conn.send_encoded(readings[sent])
                sent += 1
            ack = await conn.receive()
            if isinstance(ack, ReadingAck):
                if ack.status != ReadingStatus.STORED:
                    raise RuntimeError(f"reading {ack.seq} not stored: {ack}")
                acked += 1
                if (deadline := no_ack.when()) is not None and deadline - loop.time() < 29:
                    no_ack.reschedule(loop.time() + 30)
    return time.perf_counter() - start


async def _through(cfg: GatewayConfig, runner: EngineRunner, link: Any, transport: str, url: Callable[[], str],
                   n: int, window: int) -> dict[str, float]:
    gateway = Gateway(cfg, runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        if isinstance(link, MqttLink):
            await asyncio.wait_for(link.connected.wait(), 10)
        device_id = f"bench-{transport}"
        conn: Any
        if isinstance(link, MqttLink):  # the device as a message connection: no bytes round trip
            address = urlsplit(url())
            conn = MqttDevice(device_id, prefix=address.path.strip("/") or "gw")
            await conn.connect(address.hostname or "127.0.0.1", address.port or 1883)
        else:
            conn = _Bytes(await open_device(transport, url(), device_id))
        await conn.send(Hello(device_id=device_id))
        assert isinstance(await asyncio.wait_for(conn.receive(), 10), Welcome)
        readings = _encoded_readings(n)
        cpu0 = _gateway_cpu(gateway)
        seconds = await _readings(conn, readings, window)
        cpu = _gateway_cpu(gateway) - cpu0
        await (conn.close() if isinstance(conn, MqttDevice) else conn.conn.close())
        return {"readings": n, "per_s": round(n / seconds, 1), "cpu_us_per_reading": round(cpu / n * 1e6, 1)}
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _gateway_cpu(gateway: Gateway) -> float:
    """CPU seconds of the gateway's process (the simulated device's included) and of its
    readings' writer process."""
    writer = gateway.reading_writer
    return time.process_time() + (writer.cpu_seconds() if writer is not None else 0.0)


async def _bare_paho(port: int, n: int, user: str | None, password: str | None,
                     host: str = "127.0.0.1") -> tuple[float, float]:
    """CPU microseconds per message and messages per second for paho publish (QoS 1) + receive
    through the same broker, with the same window of 32 messages in flight as the readings runs."""
    progress = asyncio.Event()
    count = 0

    def on_message(msg: Any) -> None:
        nonlocal count
        count += 1
        progress.set()

    subscribed = asyncio.Event()
    client = AsyncPaho("bench-bare", on_message, persistent=False, username=user, password=password,
                       on_connect=lambda: client.subscribe("bench/bare", 1))
    client.client.on_subscribe = lambda *args: subscribed.set()
    await client.connect(host, port)
    await asyncio.wait_for(subscribed.wait(), 10)
    data = encode(SensorReading(1, "humidity", 0, VALUES))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    sent = 0
    async with asyncio.timeout(120):
        while count < n:
            while sent < n and sent - count < 32:
                sent += 1
                client.publish("bench/bare", data, 1)
            progress.clear()
            await progress.wait()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    await client.disconnect()
    return cpu / n * 1e6, n / wall


@dataclass(frozen=True)
class Broker:
    """An external MQTT broker to measure through (`--broker HOST:PORT`)."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, text: str, username: str | None = None, password: str | None = None) -> "Broker":
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"--broker {text!r}: give HOST:PORT, e.g. 127.0.0.1:1883")
        return cls(host.strip("[]"), int(port), username, password)


async def _external(cfg: GatewayConfig, runner: EngineRunner, broker: Broker, n: int) -> dict[str, Any]:
    link = MqttLink(broker.host, broker.port, topic_prefix="bench", client_id="bench-gateway",
                    username=broker.username, password=broker.password, embedded=False)
    run = await _through(cfg, runner, link, "mqtt", lambda: f"mqtt://{broker.host}:{broker.port}/bench", n, 32)
    bare, bare_per_s = await _bare_paho(broker.port, n, broker.username, broker.password, broker.host)
    return {**run, "broker": f"{broker.host}:{broker.port}", "bare_paho_cpu_us_per_message": round(bare, 1),
            "bare_paho_messages_per_s": round(bare_per_s, 1),
            "gateway_vs_bare_per_message": round(run["cpu_us_per_reading"] / 2 / bare, 2)}


async def run_link_bench(cfg: GatewayConfig, runner: EngineRunner, n: int, broker: Broker | None = None,
                         rounds: int = 3) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        def fresh(name: str) -> GatewayConfig:
            devices = cfg.devices.model_copy(update={"database": Path(tmp) / f"{name}.db", "open_enrolment": True,
                                                     "max_readings_per_minute": 0})
            return cfg.model_copy(update={"devices": devices})

        ws = WebSocketLink("127.0.0.1", 0)
        results["websocket"] = await _through(fresh("ws"), runner, ws, "ws", lambda: f"ws://127.0.0.1:{ws.port}/ws", n, 32)
        # The readings through the embedded mosquitto and the bare paho loop through a mosquitto run
        # alike, alternating `rounds` times: a change of the machine's load hits both.
        mqtt_runs: list[dict[str, float]] = []
        bare_runs: list[tuple[float, float]] = []
        for i in range(max(1, rounds)):
            mqtt = MqttLink("127.0.0.1", 0, embedded=True, idle_s=cfg.server.session_idle_s or None,
                            idle_probe_s=cfg.server.hello_timeout_s)  # the idle check `gateway run` has
            mqtt_runs.append(await _through(fresh(f"mqtt-{i}"), runner, mqtt, "mqtt",
                                            lambda link=mqtt: f"mqtt://127.0.0.1:{link.port}", n, 32))
            bare_runs.append(await _bare_broker_loop(n))
        # A reading is two MQTT messages (reading up, ack down) plus a durable SQLite commit.
        ratios = [run["cpu_us_per_reading"] / 2 / bare for run, (bare, _) in zip(mqtt_runs, bare_runs)]
        results["mqtt_embedded"] = sorted(mqtt_runs, key=lambda r: r["cpu_us_per_reading"])[len(mqtt_runs) // 2]
        if broker is not None:
            results["mqtt_external"] = await _external(fresh("mqtt-external"), runner, broker, n)
        coap = CoapLink("127.0.0.1", _free_port(socket.SOCK_DGRAM))
        results["coap"] = await _through(fresh("coap"), runner, coap, "coap",
                                         lambda: f"coap://127.0.0.1:{coap.port}", max(n // 5, 50), 1)
        if shutil.which("socat"):
            results["serial"] = await _serial(fresh("serial"), runner, Path(tmp), n)
        bare, bare_per_s = sorted(bare_runs)[len(bare_runs) // 2]
        results["mqtt_bare_paho_cpu_us_per_message"] = round(bare, 1)
        results["mqtt_bare_paho_messages_per_s"] = round(bare_per_s, 1)
        results["mqtt_gateway_vs_bare_per_message"] = round(statistics.median(ratios), 2)  # of the rounds'
        results["mqtt_rounds_cpu_us_per_reading_bare_ratio"] = [
            (run["cpu_us_per_reading"], round(b, 1), round(r, 2)) for run, (b, _), r in zip(mqtt_runs, bare_runs, ratios)]
    return results


async def _serial(cfg: GatewayConfig, runner: EngineRunner, tmp: Path, n: int) -> dict[str, float]:
    a, b = tmp / "ttyA", tmp / "ttyB"
    socat = subprocess.Popen(["socat", "-d", "-d", f"pty,raw,echo=0,link={a}", f"pty,raw,echo=0,link={b}"],
                             stderr=subprocess.PIPE, text=True)
    try:
        assert socat.stderr is not None
        for line in socat.stderr:
            if "starting data transfer loop" in line:
                break
        return await _through(cfg, runner, SerialLink([SerialPort(str(a))]), "serial", lambda: str(b), n, 32)
    finally:
        socat.kill()
        socat.wait()


async def _bare_broker_loop(n: int) -> tuple[float, float]:
    """The bare paho loop through the same broker the embedded runs use: mosquitto, run as the
    gateway runs it (a scratch folder, the gateway's login)."""
    from gateway.links.base import no_logins
    from gateway.links.mosquitto import MosquittoBroker

    with tempfile.TemporaryDirectory(prefix="bench-mosquitto-") as folder:
        broker = MosquittoBroker(Path(folder), "127.0.0.1", 0, "bench", 1 << 17, no_logins, open_enrolment=True)
        await broker.start()
        try:
            return await _bare_paho(broker.port, n, broker.gateway_user, broker.gateway_password)
        finally:
            await broker.stop()


def run_bench_links(cfg: GatewayConfig, readings: int, as_json: bool,
                    load: Callable[[], EngineRunner], broker: Broker | None = None, rounds: int = 3) -> int:
    runner = load()
    try:
        results = asyncio.run(run_link_bench(cfg, runner, readings, broker, rounds))
    finally:
        runner.close()
    if as_json:
        print(json.dumps(results, indent=2))
    else:
        for name, value in results.items():
            print(f"{name:<40} {value}")
    return 0



def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.app import load_runner

    broker = Broker.parse(args.broker, args.broker_username, args.broker_password) if args.broker else None
    return run_bench_links(cfg, args.readings, args.json, lambda: load_runner(cfg, progress), broker, args.rounds)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    bl = sub.add_parser("bench-links", parents=[common], help="sensor readings per second through each link into SQLite; "
                        "MQTT CPU per message vs a bare paho loop",
                        description="Sends --readings sensor readings through each link (MQTT, CoAP, WebSocket, "
                        "serial) on loopback into a throw-away SQLite database, each acknowledged once committed: "
                        "readings per second per link, and the MQTT link's CPU per message against a bare paho loop.")
    bl.add_argument("--readings", type=int, default=2000, help="readings per link (default 2000; CoAP sends a fifth)")
    bl.add_argument("--json", action="store_true", help="print the figures as JSON")
    bl.add_argument("--rounds", type=int, default=3, help="MQTT readings runs and bare paho loops, alternating "
                    "(default 3): the medians and the median of the rounds' ratios are printed")
    bl.add_argument("--broker", metavar="HOST:PORT", help="also measure MQTT through this external broker "
                    "(e.g. a mosquitto; topics bench/...), next to the embedded one")
    bl.add_argument("--broker-username", help="login for --broker (devices log in as their id)")
    bl.add_argument("--broker-password", help="password for --broker-username")
    bl.set_defaults(func=run)
