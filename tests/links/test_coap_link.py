"""The CoAP link with libcoap's coap-client as the device: POST up, block-wise audio, observe down."""

from __future__ import annotations

import asyncio
import logging
import shutil
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from firmware_protocol import (
    AudioChunk,
    Error,
    Hello,
    Message,
    ReadingAck,
    ReadingStatus,
    ReplyText,
    SensorReading,
    StreamDeframer,
    TextInput,
    Welcome,
    encode,
)
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.links.coap import CoapLink

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("coap-client-notls") is None, reason="needs libcoap3-bin"),
]
ROOT = Path(__file__).resolve().parents[2]


class BaseUri(str):
    def __new__(cls, value: str, link: CoapLink) -> "BaseUri":
        uri = super().__new__(cls, value)
        uri.link = link
        return uri


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest_asyncio.fixture(loop_scope="session")
async def coap(fake_runner, tmp_path) -> AsyncIterator[str]:
    """A gateway behind a CoAP link; yields the base URI (the link is `coap.link`)."""
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}}, ROOT)
    link = CoapLink("127.0.0.1", free_udp_port())
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, fake_runner, [link]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    yield BaseUri(f"coap://127.0.0.1:{link.port}/gw", link)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def coap_client(*args: str, timeout: float = 15) -> list[Message]:
    proc = await asyncio.create_subprocess_exec("coap-client-notls", *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0
    return StreamDeframer().feed(out)


async def coap_raw(*args: str, timeout: float = 15) -> tuple[bytes, str]:
    """coap-client's stdout (the payload) and stderr (for a 4.xx: the code and the diagnostic)."""
    proc = await asyncio.create_subprocess_exec("coap-client-notls", *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return out, err.decode().strip()


def with_token(uri: str, token: str | None) -> str:
    return uri if token is None else f"{uri}?s={token}"


async def post(base: str, device: str, msg: Message | bytes, tmp_path: Path, *extra: str,
               token: str | None = None) -> list[Message]:
    payload = tmp_path / "payload.bin"
    payload.write_bytes(msg if isinstance(msg, bytes) else encode(msg))
    return await coap_client("-m", "post", "-f", str(payload), *extra, with_token(f"{base}/{device}/up", token))


async def hello(base: str, device: str, tmp_path: Path, hello_msg: Hello | None = None) -> str:
    """Say Hello as `device`; returns the session token (the Welcome's session_id)."""
    [welcome, *_] = await post(base, device, hello_msg or Hello(device_id=device), tmp_path)
    assert isinstance(welcome, Welcome) and welcome.session_id
    return welcome.session_id


async def test_a_coap_device_says_hello_and_its_reading_is_acked_in_the_response(coap, tmp_path):
    token = await hello(coap, "coap-bp", tmp_path)
    reading = SensorReading(1, "blood_pressure", 0, (("systolic", "mmHg", 130.0), ("diastolic", "mmHg", 85.0)))
    [ack] = await post(coap, "coap-bp", reading, tmp_path, token=token)
    assert isinstance(ack, ReadingAck) and (ack.seq, ack.status) == (1, ReadingStatus.STORED)
    [again] = await post(coap, "coap-bp", reading, tmp_path, token=token)  # a retransmitted reading
    assert again.status == ReadingStatus.DUPLICATE


async def test_audio_larger_than_a_datagram_arrives_by_block_wise_transfer(coap, tmp_path):
    token = await hello(coap, "coap-mic", tmp_path)
    chunk = AudioChunk(1, 0, bytes(3200))  # 100 ms of 16 kHz silence, 3207 bytes on the wire
    assert await post(coap, "coap-mic", chunk, tmp_path, "-b", "64", token=token) == []  # accepted, nothing to say


async def test_garbage_is_answered_with_an_error_and_the_device_is_still_served(coap, tmp_path, caplog):
    token = await hello(coap, "coap-junk", tmp_path)
    with caplog.at_level(logging.WARNING):
        [err] = await post(coap, "coap-junk", b"\x07\x01\x02", tmp_path, token=token)
    assert isinstance(err, Error) and err.code == "unknown-message-type"
    assert "coap 127.0.0.1" in caplog.text and "(coap-junk): unknown-message-type" in caplog.text
    [ack] = await post(coap, "coap-junk", SensorReading(1, "humidity", 0, (("percent", "%", 50.0),)), tmp_path,
                       token=token)
    assert ack.status == ReadingStatus.STORED


async def test_replies_reach_an_observing_device(coap, tmp_path):
    token = await hello(coap, "coap-box", tmp_path)
    observer = asyncio.create_task(coap_client("-s", "8", "-B", "8", f"{coap}/coap-box/down?s={token}", timeout=20))
    await asyncio.wait_for(coap.link.connections["coap-box"].observed.wait(), 5)
    await post(coap, "coap-box", TextInput(text="What time is it?"), tmp_path, token=token)
    messages = await observer
    finals = [m for m in messages if isinstance(m, ReplyText) and m.final]
    assert finals and finals[0].text.startswith("It is")
