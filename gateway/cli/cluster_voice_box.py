"""An emulated MQTT voice box for cluster mode (the cluster tests).

It does what PROTOCOL.md "MQTT" asks of a device whose gateway may change: Hello after
connecting, Hello again whenever an Error `hello-required` comes (the member that has just taken
its lease asks for one), and questions only once welcomed. A question is streamed and its reply
collected like `gateway simulate` does (gateway/cli/virtual_box.py `converse`).
"""

from __future__ import annotations

import asyncio

import numpy as np

from firmware_protocol import AudioFormat, Capability, Error, Hello, Welcome, decode, encode
from gateway.audio.pcm import resample
from gateway.cli.virtual_box import SimResult, converse
from gateway.links.device_side import FramedDevice
from gateway.links.mqtt_device import MqttDevice

RATE = 16000


class ClusterVoiceBox:
    def __init__(self, device_id: str, prefix: str = "gw") -> None:
        self.device_id = device_id
        self.device = MqttDevice(device_id, prefix=prefix, protocol="5")
        self.frames = FramedDevice(self.device)
        self.out_rate = RATE

    def _hello(self) -> bytes:
        return encode(Hello(device_id=self.device_id, firmware="cluster-voice-box",
                            capabilities=Capability.AUDIO_IN | Capability.AUDIO_OUT,
                            audio_in=AudioFormat(sample_rate=RATE), audio_out=AudioFormat(sample_rate=RATE)))

    async def connect(self, host: str, port: int) -> None:
        await self.device.connect(host, port)

    async def welcomed(self, timeout: float) -> Welcome:
        """Say Hello, and again on every `hello-required`, until a Welcome comes."""
        await self.frames.send(self._hello())  # dropped while no member holds its lease yet
        async with asyncio.timeout(timeout):
            while True:
                msg = decode(await self.frames.recv())
                if isinstance(msg, Welcome):
                    self.out_rate = msg.audio_out.sample_rate
                    return msg
                if isinstance(msg, Error) and msg.code == "hello-required":
                    await self.frames.send(self._hello())

    async def ask(self, audio: np.ndarray, rate: int, timeout: float, speed: float = 1.0) -> SimResult:
        """Stream a question (float32 mono at `rate`, sent at the box's 16 kHz), then silence, until
        the reply's final text."""
        result = SimResult(out_rate=self.out_rate)
        return await converse(self.frames, resample(audio, rate, RATE), RATE, result, speed=speed, timeout=timeout,
                              peer=f"the cluster for {self.device_id}")

    async def close(self) -> None:
        await self.device.close()
