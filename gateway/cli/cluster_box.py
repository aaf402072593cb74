"""An emulated MQTT sensor box for cluster mode (the cluster tests and `gateway bench-cluster`).

It does what PROTOCOL.md "MQTT" asks of a device: Hello after connecting, Hello again on Error
`hello-required` and then the reading not yet acknowledged, and a resend of a reading whose
ReadingAck did not come within `resend_s`. Like real firmware it reconnects when it loses the
broker (a broker restart, a bridge's broker going away): again every `RECONNECT_S`, then Hello,
then the reading that was not acknowledged. It sends a SensorReading every `every_s` once
welcomed, and records which seqs were acknowledged STORED or DUPLICATE: those must be in the
store exactly once.
"""

from __future__ import annotations

import asyncio
import logging
import time

from firmware_protocol import Error, Hello, ReadingAck, ReadingStatus, SensorReading, Welcome
from gateway.links.base import LinkClosed
from gateway.links.mqtt_client import MqttConnectError
from gateway.links.mqtt_device import MqttDevice

log = logging.getLogger(__name__)

RECONNECT_S = 0.5  # a lost broker: try again this often (firmware retries with a back-off too)


class ClusterBox:
    def __init__(self, device_id: str, prefix: str = "gw", every_s: float = 0.5, resend_s: float = 2.0) -> None:
        self.device_id = device_id
        self.every_s = every_s
        self.resend_s = resend_s
        self.device = MqttDevice(device_id, prefix=prefix, protocol="5")
        self.acked: set[int] = set()  # seqs acknowledged STORED or DUPLICATE
        self.ack_ms: list[float] = []  # reading sent -> its ack, for the readings not resent
        self.welcomes = 0
        self.connects = 0  # successful (re)connections to the broker
        self.next_seq = 1
        self._pending: tuple[int, float] | None = None  # (seq, when sent) not acknowledged yet
        self._resent = False
        self._welcomed = asyncio.Event()

    def _reading(self, seq: int) -> SensorReading:
        return SensorReading(seq=seq, kind="temperature", measured_at=int(time.time()),
                             values=(("celsius", "C", 20.0 + seq % 10),))

    async def _send_reading(self, seq: int) -> None:
        self._resent = self._pending is not None and self._pending[0] == seq
        self._pending = (seq, time.monotonic())
        await self.device.send(self._reading(seq))

    async def _receive(self) -> None:
        while True:
            msg = await self.device.receive()
            if isinstance(msg, Welcome):
                self.welcomes += 1
                self._welcomed.set()
                if self._pending is not None:  # what the last gateway left unanswered
                    await self._send_reading(self._pending[0])
            elif isinstance(msg, Error) and msg.code == "hello-required":
                self._welcomed.clear()
                await self.device.send(Hello(device_id=self.device_id, firmware="cluster-box"))
            elif isinstance(msg, ReadingAck) and self._pending is not None and msg.seq == self._pending[0]:
                if msg.status in (ReadingStatus.STORED, ReadingStatus.DUPLICATE):
                    self.acked.add(msg.seq)
                    if not self._resent:
                        self.ack_ms.append((time.monotonic() - self._pending[1]) * 1000)
                    self._pending = None
                    self.next_seq = msg.seq + 1

    async def run(self, host: str, port: int) -> None:
        """Connect and send readings, reconnecting whenever the broker is lost, until cancelled
        (then it says offline and disconnects)."""
        try:
            while True:
                try:
                    await self.device.connect(host, port)
                except MqttConnectError as exc:
                    log.info("%s: %s; again in %.1f s", self.device_id, exc, RECONNECT_S)
                    await asyncio.sleep(RECONNECT_S)
                    continue
                self.connects += 1
                try:
                    await self._session()
                except* LinkClosed as exc:
                    log.warning("%s: %s; reconnecting", self.device_id, exc.exceptions[0])
                self._welcomed.clear()
        finally:
            await self.device.close()

    async def _session(self) -> None:
        """One broker connection: Hello, then readings, until the connection is lost."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self._receive())
            tg.create_task(self._until_disconnected())
            await self.device.send(Hello(device_id=self.device_id, firmware="cluster-box"))
            while True:
                await asyncio.sleep(self.every_s)
                if not self._welcomed.is_set():
                    continue
                if self._pending is None:
                    await self._send_reading(self.next_seq)
                elif time.monotonic() - self._pending[1] >= self.resend_s:
                    await self._send_reading(self._pending[0])

    async def _until_disconnected(self) -> None:
        await self.device.disconnected.wait()
        raise LinkClosed("lost the broker")
