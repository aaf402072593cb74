"""Serial link (UART, USB serial) on pyserial: COBS + CRC-16 frames, one device per port.

Each configured port has a supervisor that opens it, runs one device session on it once the
device sends its first frame (a port says nothing about whether a device is on it; the hello
timeout counts from there), and when the port goes away (USB cable pulled, device reset) or the
session ends, reopens it with back-off until the device comes back. Reads and writes use the port's file descriptor with the event
loop's reader/writer callbacks: no threads, no polling. A partial frame left by a pulled cable
is dropped with the old connection; line noise costs at most the frame it hits (the framing
resynchronises at the next 0x00 delimiter). A device that sends faster than its session handles
(readings without waiting for their acks, a stalled database) is not read further once
`INBOX_FRAMES` frames wait: its bytes stay in the port (the kernel's buffer, then the device's
write blocks) until the session catches up, so memory stays bounded and nothing is dropped.

A port's frames belong to the device whose Hello opened the session on it (its token checked as on
every link). Before a Hello the session refuses everything but Ping (`hello-required`). A later
Hello on the same port (the device rebooted, or another device was plugged in) opens a new session
only when its token is accepted (`LinkServices.check_credentials`): then the current session ends
and the new one starts with that Hello; a refused one is answered `auth-failed`, logged with the
port and the reason, and the current session goes on untouched.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import serial

from firmware_protocol import Error, Hello, Message, ProtocolError, StreamDeframer, encode_stream_frame
from gateway.links.base import ConnectionHandler, CredentialCheck, LinkClosed, LinkServices, open_door

log = logging.getLogger(__name__)

REOPEN_FIRST_S = 0.1
REOPEN_MAX_S = 5.0
INBOX_FRAMES = 256  # frames read ahead of the session at most; then the port is not read until it catches up


@dataclass(frozen=True)
class SerialPort:
    url: str  # a device path: /dev/ttyUSB0, /dev/ttyACM0, /dev/serial/by-id/... (stable names)
    baud: int = 921600


class SerialConnection:
    """One open port as a DeviceConnection, one device session after the other."""

    def __init__(self, port: serial.SerialBase, name: str, max_frame_bytes: int,
                 check_credentials: CredentialCheck = open_door) -> None:
        self.peer = f"serial {name}"
        self._port = port
        self._fd = port.fileno()
        self._deframer = StreamDeframer(max_frame_bytes)
        self._inbox: deque[Message | ProtocolError] = deque()
        self._readable = asyncio.Event()
        self._paused = False  # not reading the port while the inbox is full
        self._write_lock = asyncio.Lock()
        self._closed: str | None = None
        self._check_credentials = check_credentials
        self.device_id: str | None = None  # whose Hello opened the current session
        self._next_hello: Hello | None = None  # an accepted later Hello: it opens the next session
        self._loop = asyncio.get_running_loop()
        os.set_blocking(self._fd, False)
        self._loop.add_reader(self._fd, self._on_readable)

    @property
    def closed_reason(self) -> str | None:
        return self._closed

    @property
    def queued(self) -> int:
        """Frames read from the port that the session has not taken yet."""
        return len(self._inbox)

    @property
    def lost(self) -> bool:
        """True when the port went away (as opposed to the session closing it)."""
        return (self._closed or "").startswith("port lost")

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, 4096)
        except BlockingIOError:
            return
        except OSError as exc:  # EIO: the other end is gone (USB unplugged, pty closed)
            self._lost(exc.strerror or str(exc))
            return
        if not data:
            self._lost("end of file")
            return
        self._inbox.extend(self._deframer.feed(data))
        if self._inbox:
            self._readable.set()
        if len(self._inbox) >= INBOX_FRAMES and self._closed is None:  # the session is behind:
            self._loop.remove_reader(self._fd)  # leave the bytes in the port (back-pressure, nothing lost)
            self._paused = True

    def _lost(self, why: str) -> None:
        if self._closed is None:
            self._closed = f"port lost: {why}"
        self._loop.remove_reader(self._fd)
        self._readable.set()

    async def first_frame(self) -> None:
        """Wait, without a time limit, until the port brings a frame (or garbage, or is lost). A
        serial port says nothing about whether a device is there: the session, and its
        `server.hello_timeout_s`, start only when the device speaks, so a port whose device is off
        or asleep is not logged `hello-timeout` and reopened every few seconds, and does not queue
        an Error for the device to read first when it wakes."""
        while not self._inbox and self._closed is None:
            self._readable.clear()
            await self._readable.wait()

    async def _next(self) -> Message | ProtocolError:
        while not self._inbox:
            if self._closed is not None:
                raise LinkClosed(self._closed)
            self._readable.clear()
            await self._readable.wait()
        item = self._inbox.popleft()
        if self._paused and len(self._inbox) <= INBOX_FRAMES // 2 and self._closed is None:
            self._paused = False
            self._loop.add_reader(self._fd, self._on_readable)
        return item

    async def receive(self) -> Message | ProtocolError:
        while True:
            if self._next_hello is not None:
                raise LinkClosed(f"a new Hello as {self._next_hello.device_id} opens the next session")
            item = await self._next()
            if not isinstance(item, Hello):
                return item
            if self.device_id is None:  # the session's own Hello (its token is checked by the session)
                self.device_id = item.device_id
                return item
            if await self._check_credentials(item.device_id, item.token):
                log.info("%s (%s): a new Hello as %s: ending this session for a new one",
                         self.peer, self.device_id, item.device_id)
                self._next_hello = item
                continue
            text = (f"Hello as {item.device_id} refused: wrong or missing token for {item.device_id}; "
                    f"the session of {self.device_id} on this port goes on")
            log.warning("%s (%s): auth-failed: %s", self.peer, self.device_id, text)
            await self.send(Error(code="auth-failed", text=text))

    def next_session(self) -> bool:
        """After a session ended: True (and that Hello first in line) when an accepted Hello opens
        the next one on this port."""
        hello, self._next_hello = self._next_hello, None
        if hello is None or self._closed is not None:
            return False
        self._inbox.appendleft(hello)
        self.device_id = None
        return True

    async def send(self, message: Message) -> None:
        data = memoryview(encode_stream_frame(message))
        async with self._write_lock:  # frames of concurrent senders must not interleave
            while data:
                if self._closed is not None:
                    raise LinkClosed(self._closed)
                if self._next_hello is not None:  # the ending session's last words are dropped
                    raise LinkClosed("this session is being replaced")
                try:
                    data = data[os.write(self._fd, data):]
                except BlockingIOError:
                    await self._writable()
                except OSError as exc:
                    self._lost(exc.strerror or str(exc))

    async def _writable(self) -> None:
        ready = self._loop.create_future()
        self._loop.add_writer(self._fd, ready.set_result, None)
        try:
            async with asyncio.timeout(5):
                await ready
        except TimeoutError:
            self._lost("write stalled for 5 s")
        finally:
            self._loop.remove_writer(self._fd)

    async def close(self, reason: str = "") -> None:
        """Ends the session; the port stays open when a new Hello opens the next one on it."""
        if self._next_hello is None:
            await self.shutdown(reason)

    async def shutdown(self, reason: str = "") -> None:
        if self._closed is None:
            self._closed = reason or "closed"
        self._loop.remove_reader(self._fd)
        self._readable.set()
        self._port.close()


class SerialLink:
    name = "serial"

    def __init__(self, ports: Sequence[SerialPort], max_frame_bytes: int = 65536) -> None:
        self.ports = list(ports)
        self.max_frame_bytes = max_frame_bytes
        self.opened: dict[str, int] = {p.url: 0 for p in self.ports}  # times each port was opened

    async def serve(self, handler: ConnectionHandler, ready: asyncio.Event | None = None,
                    services: LinkServices | None = None) -> None:
        tried = [asyncio.Event() for _ in self.ports]
        check = services.check_credentials if services is not None else open_door
        async with asyncio.TaskGroup() as tg:
            for port, first_try in zip(self.ports, tried):
                tg.create_task(self._supervise(port, handler, first_try, check), name=f"serial {port.url}")
            await asyncio.gather(*(event.wait() for event in tried))
            if ready is not None:
                ready.set()  # ports that are not plugged in yet are opened when they appear

    async def _supervise(self, port: SerialPort, handler: ConnectionHandler, first_try: asyncio.Event,
                         check_credentials: CredentialCheck) -> None:
        delay = REOPEN_FIRST_S
        waiting_logged = False
        while True:
            try:
                sp = serial.Serial(port.url, baudrate=port.baud, timeout=0, write_timeout=0, exclusive=True)
            except (serial.SerialException, OSError, ValueError) as exc:
                if not waiting_logged:
                    log.warning("serial %s: cannot open (%s); retrying until it appears", port.url, exc)
                    waiting_logged = True
                first_try.set()
                await asyncio.sleep(delay)  # back-off between reopen attempts, not a poll for data
                delay = min(delay * 2, REOPEN_MAX_S)
                continue
            self.opened[port.url] += 1
            log.info("serial %s: open at %d baud", port.url, port.baud)
            delay, waiting_logged = REOPEN_FIRST_S, False
            conn = SerialConnection(sp, port.url, self.max_frame_bytes, check_credentials)
            first_try.set()
            try:
                await conn.first_frame()
                if conn.closed_reason is None:
                    await handler(conn)
                while conn.next_session():  # a new Hello on this port: the next device session
                    await handler(conn)
            finally:
                await conn.shutdown()
            if conn.lost:
                log.warning("serial %s: %s; reopening when it comes back", port.url, conn.closed_reason)
