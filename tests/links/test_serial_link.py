"""The serial link against a real pty pair made by socat: framing, noise, unplug and replug, and a
port's frames bound to the device whose Hello opened the session on it."""

from __future__ import annotations

import asyncio
import logging
import shutil
import subprocess
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import pytest_asyncio
import serial

from firmware_protocol import (
    Error,
    Hello,
    Message,
    Ping,
    Pong,
    ProtocolError,
    ReadingAck,
    ReadingStatus,
    SensorReading,
    StreamDeframer,
    Welcome,
    encode_stream_frame,
)
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import add_device
from gateway.links.serial_link import INBOX_FRAMES, SerialConnection, SerialLink, SerialPort

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("socat") is None, reason="needs socat (Debian package socat)"),
]
ROOT = Path(__file__).resolve().parents[2]


class Socat:
    """A virtual serial cable: two ptys linked at `gateway_end` and `device_end`."""

    def __init__(self, tmp: Path) -> None:
        self.gateway_end = tmp / "ttyGW"
        self.device_end = tmp / "ttyDEV"
        self.proc: subprocess.Popen[str] | None = None

    def plug(self) -> None:
        self.proc = subprocess.Popen(
            ["socat", "-d", "-d", f"pty,raw,echo=0,link={self.gateway_end}", f"pty,raw,echo=0,link={self.device_end}"],
            stderr=subprocess.PIPE, text=True,
        )
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # both ptys and links exist once socat says this
            if "starting data transfer loop" in line:
                return
        raise RuntimeError("socat did not start")

    def pull(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None


class Device:
    """The ESP32 side: plain blocking pyserial in a worker thread, its own deframer."""

    def __init__(self, path: Path) -> None:
        self.port = serial.Serial(str(path), 921600, timeout=0.05)
        self.deframer = StreamDeframer()
        self.inbox: deque[Message | ProtocolError] = deque()

    async def write(self, data: bytes) -> None:
        await asyncio.to_thread(self.port.write, data)

    async def send(self, msg: Message) -> None:
        await self.write(encode_stream_frame(msg))

    async def recv(self, timeout: float = 5) -> Message | ProtocolError:
        deadline = time.monotonic() + timeout
        while not self.inbox:
            if time.monotonic() > deadline:
                raise TimeoutError("nothing received")
            self.inbox.extend(self.deframer.feed(await asyncio.to_thread(self.port.read, 4096)))
        return self.inbox.popleft()

    async def hello(self, device_id: str, timeout: float = 10, token: str = "") -> Welcome:
        """Send Hello until a Welcome comes (the gateway may still be reopening its end)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await self.send(Hello(device_id=device_id, token=token))
            try:
                while not isinstance(reply := await self.recv(0.5), Welcome):
                    pass
                return reply
            except TimeoutError:
                continue
        raise TimeoutError("no Welcome")

    def close(self) -> None:
        self.port.close()


@pytest.fixture
def cable(tmp_path: Path) -> Iterator[Socat]:
    socat = Socat(tmp_path)
    socat.plug()
    yield socat
    socat.pull()


@asynccontextmanager
async def _gateway_on(cable: Socat, fake_runner, tmp_path: Path, hello_timeout_s: float = 5,
                      open_enrolment: bool = True) -> AsyncIterator[tuple[Gateway, SerialLink]]:
    """A gateway serving the cable's gateway end, until the block ends."""
    cfg = parse_config({"server": {"hello_timeout_s": hello_timeout_s},
                        "devices": {"database": str(tmp_path / "g.db"), "open_enrolment": open_enrolment}}, ROOT)
    link = SerialLink([SerialPort(str(cable.gateway_end))])
    gateway = Gateway(cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        yield gateway, link
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(loop_scope="session")
async def serial_gateway(cable: Socat, fake_runner, tmp_path: Path) -> AsyncIterator[SerialLink]:
    async with _gateway_on(cable, fake_runner, tmp_path) as (_, link):
        yield link


async def test_a_device_on_a_serial_port_is_welcomed_and_its_reading_is_acked_stored(serial_gateway, cable):
    dev = Device(cable.device_end)
    try:
        await dev.hello("uart-bp-1")
        await dev.send(SensorReading(1, "blood_pressure", 0, (("systolic", "mmHg", 121.0), ("diastolic", "mmHg", 79.0))))
        ack = await dev.recv()
        assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (1, ReadingStatus.STORED)
    finally:
        dev.close()


async def test_line_noise_between_frames_is_reported_and_the_next_frame_is_served(serial_gateway, cable, caplog):
    dev = Device(cable.device_end)
    try:
        await dev.hello("uart-noisy")
        with caplog.at_level(logging.WARNING):
            await dev.write(bytes(range(1, 200)) + b"\x00")  # a burst of noise, then a delimiter
            err = await dev.recv()
            assert isinstance(err, Error) and err.code in ("bad-crc", "bad-framing")
            await dev.send(Ping(nonce=42))
            assert await dev.recv() == Pong(nonce=42)
        assert f"serial {cable.gateway_end} (uart-noisy): {err.code}" in caplog.text
    finally:
        dev.close()


async def test_a_cable_pulled_mid_frame_is_reopened_when_the_device_comes_back(serial_gateway, cable, caplog):
    dev = Device(cable.device_end)
    await dev.hello("uart-replug")
    frame = encode_stream_frame(SensorReading(5, "humidity", 0, (("percent", "%", 40.0),)))
    with caplog.at_level(logging.INFO):
        await dev.write(frame[: len(frame) // 2])  # half a frame, then the cable goes
        dev.close()
        cable.pull()
        cable.plug()
        dev = Device(cable.device_end)
        try:
            await dev.hello("uart-replug")
            await dev.send(SensorReading(6, "humidity", 0, (("percent", "%", 41.0),)))
            ack = await dev.recv()
            assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (6, ReadingStatus.STORED)
        finally:
            dev.close()
    assert serial_gateway.opened[str(cable.gateway_end)] >= 2
    assert "reopening when it comes back" in caplog.text


async def test_two_ports_serve_two_devices_at_once(fake_runner, tmp_path):
    cables = [Socat(tmp_path / name) for name in ("one", "two")]
    for cable in cables:
        cable.gateway_end.parent.mkdir()
        cable.plug()
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}}, ROOT)
    link = SerialLink([SerialPort(str(c.gateway_end)) for c in cables])
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, fake_runner, [link]).serve(ready))
    devices = []
    try:
        await asyncio.wait_for(ready.wait(), 10)
        devices = [Device(c.device_end) for c in cables]
        for i, dev in enumerate(devices):
            await dev.hello(f"uart-{i}")
        for i, dev in enumerate(devices):
            await dev.send(SensorReading(1, "humidity", 0, (("percent", "%", 30.0 + i),)))
        for dev in devices:
            ack = await dev.recv()
            assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED
    finally:
        for dev in devices:
            dev.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for cable in cables:
            cable.pull()


@pytest_asyncio.fixture(loop_scope="session")
async def closed_serial_gateway(cable: Socat, fake_runner, tmp_path: Path) -> AsyncIterator[tuple[Gateway, SerialLink]]:
    """Enrolment closed: only registered devices with their token are let in."""
    async with _gateway_on(cable, fake_runner, tmp_path, open_enrolment=False) as served:
        yield served


async def _next_of(dev: Device, kind: type, timeout: float = 5):
    while not isinstance(msg := await dev.recv(timeout), kind):
        pass
    return msg


async def test_frames_before_hello_are_refused_with_an_error_and_a_log_line_naming_the_port(serial_gateway, cable, caplog):
    dev = Device(cable.device_end)
    try:
        with caplog.at_level(logging.WARNING):
            await dev.send(SensorReading(1, "humidity", 0, (("percent", "%", 40.0),)))
            err = await dev.recv()
            assert isinstance(err, Error) and err.code == "hello-required"
            await dev.send(Ping(nonce=7))  # Ping is allowed before Hello
            assert await dev.recv() == Pong(nonce=7)
        assert f"serial {cable.gateway_end}: hello-required: send hello first (got sensor_reading)" in caplog.text
        await dev.hello("uart-late")
        await dev.send(SensorReading(1, "humidity", 0, (("percent", "%", 40.0),)))
        ack = await dev.recv()
        assert isinstance(ack, ReadingAck) and ack.status == ReadingStatus.STORED  # the refused one was not stored
    finally:
        dev.close()


async def test_a_hello_as_another_device_without_its_token_is_refused_and_the_session_goes_on(
        closed_serial_gateway, cable, caplog):
    gateway, link = closed_serial_gateway
    token_a = await gateway.db.run(add_device, "uart-a", "")
    await gateway.db.run(add_device, "uart-b", "")
    dev = Device(cable.device_end)
    try:
        await dev.hello("uart-a", token=token_a)
        await gateway.registry.wait_until(lambda r: "uart-a" in r.connected(), 5)
        with caplog.at_level(logging.WARNING):
            for wrong in ("", "guessed", token_a):  # no token, a guess, A's token: none is B's
                await dev.send(Hello(device_id="uart-b", token=wrong))
                err = await _next_of(dev, Error)
                assert err.code == "auth-failed" and "Hello as uart-b refused" in err.text
        assert (f"serial {cable.gateway_end} (uart-a): auth-failed: Hello as uart-b refused: wrong or missing "
                "token for uart-b; the session of uart-a on this port goes on") in caplog.text
        assert "uart-b" not in gateway.registry.connected()
        # A's session is untouched: its reading is stored as A's.
        await dev.send(SensorReading(1, "humidity", 0, (("percent", "%", 40.0),)))
        ack = await _next_of(dev, ReadingAck)
        assert ack.status == ReadingStatus.STORED
        assert "uart-a" in gateway.registry.connected()
        assert link.opened[str(cable.gateway_end)] == 1  # nothing reopened the port
    finally:
        dev.close()


async def test_a_new_hello_with_that_devices_token_opens_its_session_on_the_same_port(
        closed_serial_gateway, cable, caplog):
    gateway, link = closed_serial_gateway
    token_a = await gateway.db.run(add_device, "uart-a", "")
    token_b = await gateway.db.run(add_device, "uart-b", "")
    dev = Device(cable.device_end)
    try:
        first = await dev.hello("uart-a", token=token_a)
        await gateway.registry.wait_until(lambda r: "uart-a" in r.connected(), 5)
        with caplog.at_level(logging.INFO):
            await dev.send(Hello(device_id="uart-b", token=token_b))
            welcome = await _next_of(dev, Welcome)
            assert welcome.session_id != first.session_id
            await gateway.registry.wait_until(lambda r: "uart-b" in r.connected() and "uart-a" not in r.connected(), 5)
        assert f"serial {cable.gateway_end} (uart-a): a new Hello as uart-b" in caplog.text
        await dev.send(SensorReading(1, "humidity", 0, (("percent", "%", 40.0),)))
        ack = await _next_of(dev, ReadingAck)
        assert ack.status == ReadingStatus.STORED
        rows = await gateway.db.run(lambda c: c.execute("SELECT device_id FROM readings").fetchall())
        assert [r[0] for r in rows] == ["uart-b"]  # the reading is B's, not A's
        # The same device saying Hello again (it rebooted) gets a new session too.
        await dev.send(Hello(device_id="uart-b", token=token_b))
        assert (await _next_of(dev, Welcome)).session_id != welcome.session_id
        assert link.opened[str(cable.gateway_end)] == 1  # one port, kept open across the sessions
    finally:
        dev.close()


@pytest_asyncio.fixture(loop_scope="session")
async def quick_hello_gateway(cable: Socat, fake_runner, tmp_path: Path) -> AsyncIterator[SerialLink]:
    """A hello timeout of 1 s, so that several would have passed in the tests below."""
    async with _gateway_on(cable, fake_runner, tmp_path, hello_timeout_s=1) as (_, link):
        yield link


async def test_a_silent_port_is_not_timed_out_and_its_device_is_welcomed_first_when_it_wakes(
        quick_hello_gateway, cable, caplog):
    """A device that is off or asleep says nothing: the port stays open without `hello-timeout`
    warnings or reopening, and no Error waits in the line for the device to read before its Welcome."""
    dev = Device(cable.device_end)
    try:
        with caplog.at_level(logging.INFO):
            await asyncio.sleep(3.5)  # three hello timeouts
        assert "hello-timeout" not in caplog.text
        assert quick_hello_gateway.opened[str(cable.gateway_end)] == 1
        await dev.send(Hello(device_id="uart-sleepy"))
        assert isinstance(await dev.recv(), Welcome)  # the first frame the device reads
    finally:
        dev.close()


async def test_once_a_device_has_spoken_it_still_has_the_hello_timeout_to_say_hello(quick_hello_gateway, cable, caplog):
    dev = Device(cable.device_end)
    try:
        with caplog.at_level(logging.WARNING):
            await dev.send(Ping(nonce=7))
            assert await dev.recv() == Pong(nonce=7)
            err = await _next_of(dev, Error)
        assert err.code == "hello-timeout"
        assert f"serial {cable.gateway_end}: hello-timeout: no hello within 1 s" in caplog.text
        await dev.hello("uart-late")  # the port is served again
    finally:
        dev.close()


async def test_a_device_that_floods_the_port_is_not_read_ahead_unbounded_and_loses_nothing(cable):
    """2,000 readings in one write, none waiting for its ack: the gateway stops reading the port once
    INBOX_FRAMES frames wait (the rest stays in the pty, the device's write blocks), then reads on as
    the session takes them; every frame arrives, in order."""
    conn = SerialConnection(serial.Serial(str(cable.gateway_end), 921600), "flood", 65536)
    dev = Device(cable.device_end)
    frames = b"".join(encode_stream_frame(SensorReading(seq, "humidity", 0, (("percent", "%", 45.0),)))
                      for seq in range(1, 2001))
    writing = asyncio.create_task(dev.write(frames))
    try:
        async with asyncio.timeout(30):  # a hang bound
            while conn.queued < INBOX_FRAMES:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # time to read more, had the port stayed read
        assert conn.queued < INBOX_FRAMES + 4096 // 20  # at most one more os.read of small frames
        assert not writing.done()  # the rest waits in the port
        seqs = []
        async with asyncio.timeout(60):
            while len(seqs) < 2000:
                msg = await conn.receive()
                assert isinstance(msg, SensorReading), msg
                seqs.append(msg.seq)
            await writing
        assert seqs == list(range(1, 2001))
    finally:
        writing.cancel()
        dev.close()
        await conn.shutdown("test over")
