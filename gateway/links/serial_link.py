"""Serial link (UART, USB serial) on pyserial: COBS + CRC-16 frames, one device per port.

Each configured port has a supervisor that opens it, runs one device session on it, and when the
port goes away (USB cable pulled, device reset) or the session ends, reopens it with back-off
until the device comes back. Reads and writes use the port's file descriptor with the event
loop's reader/writer callbacks: no threads, no polling. A partial frame left by a pulled cable
is dropped with the old connection; line noise costs at most the frame it hits (the framing
resynchronises at the next 0x00 delimiter).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import serial

from firmware_protocol import Message, ProtocolError, StreamDeframer, encode_stream_frame
from gateway.links.base import ConnectionHandler, LinkClosed, LinkServices

log = logging.getLogger(__name__)

REOPEN_FIRST_S = 0.1
REOPEN_MAX_S = 5.0


@dataclass(frozen=True)
class SerialPort:
    url: str  # a device path: /dev/ttyUSB0, /dev/ttyACM0, /dev/serial/by-id/... (stable names)
    baud: int = 921600


class SerialConnection:
    """One open port as a DeviceConnection."""

    def __init__(self, port: serial.SerialBase, name: str, max_frame_bytes: int) -> None:
        self.peer = f"serial {name}"
        self._port = port
        self._fd = port.fileno()
        self._deframer = StreamDeframer(max_frame_bytes)
        self._inbox: deque[Message | ProtocolError] = deque()
        self._readable = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._closed: str | None = None
        self._loop = asyncio.get_running_loop()
        os.set_blocking(self._fd, False)
        self._loop.add_reader(self._fd, self._on_readable)

    @property
    def closed_reason(self) -> str | None:
        return self._closed

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

    def _lost(self, why: str) -> None:
        if self._closed is None:
            self._closed = f"port lost: {why}"
        self._loop.remove_reader(self._fd)
        self._readable.set()

    async def receive(self) -> Message | ProtocolError:
        while not self._inbox:
            if self._closed is not None:
                raise LinkClosed(self._closed)
            self._readable.clear()
            await self._readable.wait()
        return self._inbox.popleft()

    async def send(self, message: Message) -> None:
        data = memoryview(encode_stream_frame(message))
        async with self._write_lock:  # frames of concurrent senders must not interleave
            while data:
                if self._closed is not None:
                    raise LinkClosed(self._closed)
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
        async with asyncio.TaskGroup() as tg:
            for port, first_try in zip(self.ports, tried):
                tg.create_task(self._supervise(port, handler, first_try), name=f"serial {port.url}")
            await asyncio.gather(*(event.wait() for event in tried))
            if ready is not None:
                ready.set()  # ports that are not plugged in yet are opened when they appear

    async def _supervise(self, port: SerialPort, handler: ConnectionHandler, first_try: asyncio.Event) -> None:
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
            conn = SerialConnection(sp, port.url, self.max_frame_bytes)
            first_try.set()
            try:
                await handler(conn)
            finally:
                await conn.close()
            if conn.lost:
                log.warning("serial %s: %s; reopening when it comes back", port.url, conn.closed_reason)
