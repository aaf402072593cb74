"""Voice works the same over MQTT, CoAP and serial as over WebSocket (the simulator as the device)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import add_device
from gateway.links.coap import CoapLink
from gateway.links.mqtt import MqttLink
from gateway.links.serial_link import SerialLink, SerialPort
from gateway.cli.virtual_box import SimulateError, simulate
from tests.conftest import words

from .test_serial_link import Socat

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]
ROOT = Path(__file__).resolve().parents[2]


async def _serve(links, runner, tmp_path: Path, open_enrolment: bool = True):
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "open_enrolment": open_enrolment}}, ROOT)
    gateway = Gateway(cfg, runner, links)
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    return gateway, task


async def _stop(task: asyncio.Task) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_spoken_question_is_answered_over_mqtt_through_the_embedded_broker(runner, speak, tmp_path):
    link = MqttLink("127.0.0.1", 0, embedded=True)
    gateway, task = await _serve([link], runner, tmp_path, open_enrolment=False)
    try:
        await asyncio.wait_for(link.connected.wait(), 10)
        token = await gateway.db.run(add_device, "mqtt-box", "")
        await link.broker.reload()  # the embedded mosquitto reads the new login now, not at its next poll
        audio, rate = speak("What time is it?")
        url = f"mqtt://127.0.0.1:{link.port}"
        result = await simulate(url, audio, rate, device_id="mqtt-box", token=token, transport="mqtt",
                                push_to_talk=True, speed=0, timeout=30)
        assert words(result.transcript) == ["what", "time", "is", "it"]
        assert result.reply_text.startswith("It is") and result.audio_seconds > 0.5
        with pytest.raises(SimulateError, match="refused"):
            await simulate(url, audio, rate, device_id="mqtt-box", token="wrong", transport="mqtt", timeout=5)
    finally:
        await _stop(task)


@pytest.mark.skipif(shutil.which("socat") is None, reason="needs socat")
async def test_a_spoken_question_is_answered_over_a_serial_line(runner, speak, tmp_path):
    cable = Socat(tmp_path)
    cable.plug()
    _, task = await _serve([SerialLink([SerialPort(str(cable.gateway_end))])], runner, tmp_path)
    try:
        audio, rate = speak("What time is it?")
        result = await simulate(str(cable.device_end), audio, rate, device_id="uart-box", transport="serial",
                                push_to_talk=True, speed=0, timeout=30)
        assert words(result.transcript) == ["what", "time", "is", "it"]
        assert result.reply_text.startswith("It is") and result.audio_seconds > 0.5
    finally:
        await _stop(task)
        cable.pull()


async def test_a_spoken_question_is_answered_over_coap(runner, speak, tmp_path):
    from .test_coap_link import free_udp_port

    link = CoapLink("127.0.0.1", free_udp_port())
    _, task = await _serve([link], runner, tmp_path)
    try:
        audio, rate = speak("What time is it?")
        result = await simulate(f"coap://127.0.0.1:{link.port}", audio, rate, device_id="coap-box", transport="coap",
                                push_to_talk=True, speed=0, timeout=30)
        assert words(result.transcript) == ["what", "time", "is", "it"]
        assert result.reply_text.startswith("It is") and result.audio_seconds > 0.5
    finally:
        await _stop(task)
