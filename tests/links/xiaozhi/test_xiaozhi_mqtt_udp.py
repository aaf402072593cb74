"""A xiaozhi-esp32 box on its MQTT + UDP transport (the emulator in box_mqtt.py) talks to a running
gateway on loopback: OTA -> mqtt section -> MQTT login -> hello -> udp section -> speech over
AES-CTR datagrams -> stt/tts over MQTT and the Opus reply over UDP, which the fake ASR reads back;
goodbye both ways; and the bad inputs (replayed, out-of-order, wrong-key and unknown datagrams, a
wrong MQTT password), each dropped with a log line naming the box while the others are served."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from gateway.app import Gateway
from gateway.config import GatewayConfig
from gateway.audio.pcm import s16le_to_float
from gateway.engines.runner import EngineRunner
from gateway.links.mqtt import MqttLink
from gateway.links.mqtt_client import MqttConnectError
from gateway.links.websocket import WebSocketLink
from gateway.links.xiaozhi.emotions import EmotionTable
from gateway.links.xiaozhi.endpoint import XiaozhiEndpoint
from gateway.links.xiaozhi.udp_audio import HEADER, new_nonce, open_payload, opus_packet_ms, parse_header, seal
from tests.links.xiaozhi.box_mqtt import XiaozhiMqttBox, header_fields
from tests.links.xiaozhi.conftest import xiaozhi_cfg
from tests.links.xiaozhi.test_xiaozhi_session import mic

OTA = "/xiaozhi/ota/"


async def serve_mqtt_udp(cfg: GatewayConfig, runner: EngineRunner, broker_port: int | None = None) -> AsyncIterator[dict[str, Any]]:
    """The WebSocket link (OTA) and the MQTT link with the xiaozhi MQTT+UDP extension: the embedded
    broker, or an external one on 127.0.0.1:broker_port."""
    s = cfg.server
    endpoint = XiaozhiEndpoint.from_config(cfg.xiaozhi, EmotionTable.load(cfg.path(cfg.xiaozhi.emotions)), s.max_frame_bytes)
    extension = endpoint.mqtt_udp("127.0.0.1", 0)
    ws = WebSocketLink("127.0.0.1", 0, s.websocket_path, s.max_frame_bytes, [endpoint])
    external = broker_port is not None
    mqtt = MqttLink("127.0.0.1", broker_port or 0, embedded=not external, extensions=[extension],
                    client_id="edge-gateway-xz", max_frame_bytes=s.max_frame_bytes, extension_port=0)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, runner, [ws, mqtt]).serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    await asyncio.wait_for(mqtt.connected.wait(), 10)
    yield {"ota": f"http://127.0.0.1:{ws.port}{OTA}", "mqtt": mqtt, "udp_port": extension.udp.port}
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def xz_mqtt(tmp_path_factory: pytest.TempPathFactory, fake_runner: EngineRunner) -> AsyncIterator[dict[str, Any]]:
    cfg = xiaozhi_cfg(tmp_path_factory.mktemp("xz-mqtt"), xiaozhi={"mqtt_udp": True})
    async for gw in serve_mqtt_udp(cfg, fake_runner):
        yield gw


async def booted(gw: dict[str, Any], mac: str) -> XiaozhiMqttBox:
    box = XiaozhiMqttBox(mac=mac)
    status, reply = await box.ota(gw["ota"])
    assert status == 200 and "mqtt" in reply, reply
    return box


async def turn(box: XiaozhiMqttBox, fake_speak, fake_transcribe, question: str = "What time is it?") -> str:
    stops, seen, heard = box.events.count("tts:stop"), len(box.messages), len(box.reply_pcm)
    await box.listen("auto")
    await box.say(mic(fake_speak, question), silence_s=1.5)
    await box.wait_until(lambda: box.events.count("tts:stop") > stops, 30)
    new = box.messages[seen:]
    assert [m["text"] for m in new if m.get("type") == "stt"] == [question]
    reply = " ".join(m["text"] for m in new if m.get("type") == "tts" and m.get("state") == "sentence_start")
    audio = s16le_to_float(bytes(box.reply_pcm[heard:]))
    assert reply and fake_transcribe(audio, box.server_rate) == reply  # the Opus reply over UDP says it
    return reply


def logged(caplog: pytest.LogCaptureFixture, *parts: str) -> bool:
    return any(all(p in r.getMessage() for p in parts) for r in caplog.records)


async def until_logged(caplog: pytest.LogCaptureFixture, *parts: str, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not logged(caplog, *parts):
            await asyncio.sleep(0.01)  # polls the captured log; no fixed wait


def wrong_key(box: XiaozhiMqttBox, packet: bytes, sequence: int) -> bytes:
    """A key other than the session's whose datagram does not decrypt to something Opus-shaped
    under the session key (AES-CTR has no integrity check: about 1 key in 70 would)."""
    for n in range(1, 1000):
        candidate = n.to_bytes(16, "big")
        data = seal(candidate, box.nonce(), packet, 0, sequence)
        if opus_packet_ms(open_payload(box.key(), data)) is None:
            return candidate
    raise AssertionError("no wrong key found")


# ---- the pure datagram format ---------------------------------------------------------------


def test_a_datagram_is_the_16_byte_header_then_the_payload_encrypted_under_it():
    key, nonce = bytes(range(16)), new_nonce(0x11223344)
    packet = bytes([0x58]) + b"opus!"  # TOC 0x58: SILK wide band 60 ms, mono
    data = seal(key, nonce, packet, timestamp=120, sequence=7)
    assert header_fields(data) == (1, 0, len(packet), 0x11223344, 120, 7)
    assert data[HEADER.size:] != packet and parse_header(data).sequence == 7
    assert open_payload(key, data) == packet and open_payload(bytes(16), data) != packet


def test_opus_packet_durations_come_from_the_toc_byte():
    assert opus_packet_ms(bytes([0x58, 1, 2])) == 60  # config 11 (SILK WB 60 ms), one frame
    assert opus_packet_ms(bytes([0xF8 | 3, 3, 0])) == 60  # CELT 20 ms, code 3 with three frames
    assert opus_packet_ms(bytes([0x5C])) is None  # stereo
    assert opus_packet_ms(b"") is None


# ---- the bootstrap and a conversation -------------------------------------------------------


async def test_the_ota_answer_offers_mqtt_with_the_boxs_login_and_topics(xz_mqtt):
    box = XiaozhiMqttBox(mac="a0:b1:c2:10:00:01", client_id="5a4e8a76-0000-4000-8000-000000000001")
    status, reply = await box.ota(xz_mqtt["ota"])
    m = reply["mqtt"]
    # the address the OTA came in on, not 8883 (TLS); with the embedded mosquitto, the boxes' own broker
    assert m["endpoint"] == f"127.0.0.1:{xz_mqtt['mqtt'].extension_port}"
    assert m["client_id"] == "GID_edge@@@a0_b1_c2_10_00_01@@@5a4e8a76-0000-4000-8000-000000000001"
    assert m["username"] == "xiaozhi-a0b1c2100001" and m["password"] == reply["websocket"]["token"]
    assert m["publish_topic"] == "xiaozhi/xiaozhi-a0b1c2100001/up"
    assert m["subscribe_topic"] == "xiaozhi/xiaozhi-a0b1c2100001/down" and m["keepalive"] == 240


async def test_a_box_on_mqtt_and_udp_is_heard_and_answered_in_encrypted_opus(xz_mqtt, fake_speak, fake_transcribe, caplog):
    caplog.set_level(logging.INFO)
    box = await booted(xz_mqtt, "a0:b1:c2:10:00:02")
    hello = await box.open()
    assert hello["transport"] == "udp" and hello["session_id"]
    assert hello["audio_params"] == {"format": "opus", "sample_rate": 24000, "channels": 1, "frame_duration": 60}
    udp = hello["udp"]
    assert (udp["server"], udp["port"], udp["encryption"]) == ("127.0.0.1", xz_mqtt["udp_port"], "aes-128-ctr")
    assert len(bytes.fromhex(udp["key"])) == 16 and bytes.fromhex(udp["nonce"])[0] == 1
    assert (await turn(box, fake_speak, fake_transcribe)).startswith("It is ")
    assert box.events.index("tts:start") < box.events.index("audio") and box.packets_dropped == 0
    assert box.datagrams_dropped == 0
    await box.wait_until(lambda: "tools/list" in box.mcp_methods, 10)  # its own tools, over MQTT too
    await box.goodbye()  # the box ends its session
    await until_logged(caplog, "xiaozhi mqtt xiaozhi-a0b1c2100002", "the box said goodbye")
    assert box.goodbyes == 0  # no goodbye back to a box that said it
    second = await box.open()  # a new audio channel: a new session, a new key
    assert second["session_id"] != hello["session_id"] and second["udp"]["key"] != udp["key"]
    assert (await turn(box, fake_speak, fake_transcribe)).startswith("It is ")
    await box.close()


async def test_the_gateway_says_goodbye_to_a_message_outside_a_session_and_when_it_ends_one(xz_mqtt):
    box = await booted(xz_mqtt, "a0:b1:c2:10:00:03")
    await box.connect()
    box.session_id = "stale-session"
    await box.send_json({"session_id": "stale-session", "type": "listen", "state": "start", "mode": "auto"})
    bye = await box.wait_for(lambda m: m.get("type") == "goodbye", 10)
    assert bye["session_id"] == "stale-session" and box.goodbyes == 1  # the firmware closes its channel
    await box.send_json({"type": "hello", "version": 3, "transport": "udp",
                         "audio_params": {"format": "opus", "sample_rate": 12345, "channels": 1, "frame_duration": 60}})
    await box.wait_until(lambda: len(box.of_type("goodbye")) == 2, 10)  # refused hello: the session ends with goodbye
    await box.close()


# ---- bad input ------------------------------------------------------------------------------


async def test_replayed_out_of_order_wrong_key_and_unknown_datagrams_are_dropped_and_logged(
        xz_mqtt, fake_speak, fake_transcribe, caplog):
    caplog.set_level(logging.INFO)
    box = await booted(xz_mqtt, "a0:b1:c2:10:00:04")
    await box.open()
    peer = "xiaozhi mqtt xiaozhi-a0b1c2100004"
    packets = box.mic_packets(mic(fake_speak, "Hello!"))
    # Before the box's first datagram: a stranger sends a datagram of its session under a wrong key,
    # and one naming no session at all. Neither may teach the gateway an address.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
        stranger.sendto(box.datagram(packets[0], sequence=1, key=wrong_key(box, packets[0], 1)), ("127.0.0.1", xz_mqtt["udp_port"]))
        stranger.sendto(seal(bytes(16), new_nonce(0x0BADCAFE), packets[0], 0, 1), ("127.0.0.1", xz_mqtt["udp_port"]))
        await until_logged(caplog, peer, "does not decrypt to a 60 ms Opus packet")
        await until_logged(caplog, "ssrc 0badcafe belongs to no session")
    first = box.datagram(packets[0], sequence=5)
    box.send_datagram(first)
    box.send_datagram(first)  # replayed
    await until_logged(caplog, peer, "sequence 5 is not above the last accepted 5 (replayed or out of order)")
    box.send_datagram(box.datagram(packets[1], sequence=3))  # out of order
    await until_logged(caplog, peer, "sequence 3 is not above the last accepted 5")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:  # a copy with a fresh number, elsewhere
        stranger.sendto(box.datagram(packets[1], sequence=9), ("127.0.0.1", xz_mqtt["udp_port"]))
        await until_logged(caplog, peer, "not the box's address")
    assert sum("audio from" in r.getMessage() and peer in r.getMessage() for r in caplog.records) == 1
    box.local_sequence = 9
    assert (await turn(box, fake_speak, fake_transcribe)).startswith("It is ")  # the session goes on, replies reach the box
    await box.close()


async def test_a_wrong_mqtt_password_is_refused_and_other_boxes_keep_being_served(xz_mqtt, fake_speak, fake_transcribe, caplog):
    caplog.set_level(logging.INFO)
    good = await booted(xz_mqtt, "a0:b1:c2:10:00:05")
    await good.open()
    intruder = await booted(xz_mqtt, "a0:b1:c2:10:00:06")
    intruder.mqtt["password"] = base64.b64encode(b"not the token").decode()
    with pytest.raises(MqttConnectError):
        await intruder.connect()
    await until_logged(caplog, "auth-failed", "GID_edge@@@a0_b1_c2_10_00_06")
    squatter = await booted(xz_mqtt, "a0:b1:c2:10:00:07")  # logs in as itself, publishes as the good box
    await squatter.connect()
    squatter.mqtt["publish_topic"] = good.mqtt["publish_topic"]
    await squatter.send_json({"type": "abort"})
    await until_logged(caplog, "may not", good.mqtt["publish_topic"])
    assert (await turn(good, fake_speak, fake_transcribe)).startswith("It is ")
    await squatter.close()
    await good.close()


# ---- an external broker -----------------------------------------------------------------------


async def test_with_an_external_mosquitto_the_box_is_served_through_it(mosquitto, tmp_path, fake_runner, fake_speak, fake_transcribe):
    """mosquitto cannot push a topic to a client that never subscribed (EMQX's auto-subscribe can):
    here the box subscribes its subscribe_topic itself, standing in for that broker feature."""
    cfg = xiaozhi_cfg(tmp_path, xiaozhi={"mqtt_udp": True})
    async for gw in serve_mqtt_udp(cfg, fake_runner, broker_port=mosquitto.port):
        box = await booted(gw, "a0:b1:c2:10:00:08")
        assert box.mqtt["endpoint"] == f"127.0.0.1:{mosquitto.port}"
        await box.connect()
        box._mqtt.subscribe(box.mqtt["subscribe_topic"], 0)  # what the broker's auto-subscription does
        await box.open()
        assert (await turn(box, fake_speak, fake_transcribe)).startswith("It is ")
        await box.close()
