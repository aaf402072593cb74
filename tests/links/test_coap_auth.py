"""CoAP requests are bound to the session a Hello opened: libcoap's coap-client as an attacker on
device B's session (posting as B, observing B's downlink, ending B's session) is refused with a
4.xx and a diagnostic, each refusal is logged with the attacker's address and the reason, and B
keeps being served."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import aiocoap
import pytest
import pytest_asyncio
from aiocoap.optiontypes import BlockOption

from firmware_protocol import Error, Hello, ReadingStatus, ReplyText, SensorReading, TextInput, encode
from gateway.app import Gateway
from gateway.config import parse_config
from gateway.devices.auth import add_device
from gateway.links.coap import CoapLink
from gateway.links.coap_resources import GatewayResources
from tests.links.test_coap_link import BaseUri, coap_client, coap_raw, free_udp_port, hello, post

pytestmark = [
    pytest.mark.asyncio(loop_scope="session"),
    pytest.mark.skipif(shutil.which("coap-client-notls") is None, reason="needs libcoap3-bin"),
]
ROOT = Path(__file__).resolve().parents[2]
B = "coap-b"
READING = SensorReading(1, "humidity", 0, (("percent", "%", 41.0),))


@pytest_asyncio.fixture(loop_scope="session")
async def session_b(fake_runner, tmp_path) -> AsyncIterator[tuple[BaseUri, Gateway, str]]:
    """A gateway with device B registered (it has a device token) and B's open CoAP session."""
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}}, ROOT)
    link = CoapLink("127.0.0.1", free_udp_port())
    gateway = Gateway(cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    await asyncio.wait_for(ready.wait(), 10)
    base = BaseUri(f"coap://127.0.0.1:{link.port}/gw", link)
    device_token = await gateway.db.run(add_device, B, "")
    token = await hello(base, B, tmp_path, Hello(device_id=B, token=device_token))
    await gateway.registry.wait_until(lambda r: B in r.connected(), 5)
    yield base, gateway, token
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def post_raw(base: str, path: str, payload: bytes, tmp_path: Path) -> tuple[bytes, str]:
    file = tmp_path / "attack.bin"
    file.write_bytes(payload)
    return await coap_raw("-m", "post", "-f", str(file), f"{base}{path}")


async def b_is_still_served(base: BaseUri, gateway: Gateway, token: str, tmp_path: Path, seq: int) -> None:
    assert B in gateway.registry.connected()
    [ack] = await post(base, B, SensorReading(seq, "humidity", 0, (("percent", "%", 42.0),)), tmp_path, token=token)
    assert ack.status == ReadingStatus.STORED


async def test_posting_as_b_without_or_with_a_wrong_token_is_refused_401_and_logged(session_b, tmp_path, caplog):
    base, gateway, token = session_b
    with caplog.at_level(logging.WARNING, logger="gateway.links.coap"):
        out, err = await post_raw(base, f"/{B}/up", encode(READING), tmp_path)
        assert out == b"" and err.startswith("4.01 session-token-missing: add ?s=<token>")
        out, err = await post_raw(base, f"/{B}/up?s=guessed", encode(TextInput(text="open the door")), tmp_path)
        assert out == b"" and err.startswith("4.01 session-token-wrong:")
    assert "coap 127.0.0.1:" in caplog.text
    assert f"POST /gw/{B}/up refused: session-token-missing ({B}'s session from 127.0.0.1:" in caplog.text
    assert f"POST /gw/{B}/up refused: session-token-wrong" in caplog.text
    await b_is_still_served(base, gateway, token, tmp_path, seq=1)  # STORED, not DUPLICATE: the attacker's seq 1 was not


async def test_observing_or_fetching_bs_downlink_without_its_token_is_refused_and_b_still_gets_its_replies(
        session_b, tmp_path, caplog):
    base, gateway, token = session_b
    with caplog.at_level(logging.WARNING, logger="gateway.links.coap"):
        out, err = await coap_raw("-s", "3", f"{base}/{B}/down")
        assert out == b"" and err.startswith("4.01 session-token-missing")
        out, err = await coap_raw("-m", "get", f"{base}/{B}/down?s=0000")
        assert out == b"" and err.startswith("4.01 session-token-wrong")
    assert f"GET /gw/{B}/down refused: session-token-missing" in caplog.text
    observer = asyncio.create_task(coap_client("-s", "8", "-B", "8", f"{base}/{B}/down?s={token}", timeout=20))
    await asyncio.wait_for(base.link.connections[B].observed.wait(), 5)
    await post(base, B, TextInput(text="What time is it?"), tmp_path, token=token)
    finals = [m for m in await observer if isinstance(m, ReplyText) and m.final]
    assert finals and finals[0].text.startswith("It is")


async def test_a_hello_as_b_without_bs_device_token_does_not_end_bs_session(session_b, tmp_path, caplog):
    base, gateway, token = session_b
    session = base.link.connections[B]
    with caplog.at_level(logging.WARNING):
        [err] = await post(base, B, Hello(device_id=B, token="stolen?"), tmp_path)
    assert isinstance(err, Error) and err.code == "auth-failed"
    assert "auth-failed" in caplog.text and "coap 127.0.0.1:" in caplog.text
    assert base.link.connections[B] is session  # the refused Hello replaced nothing
    await b_is_still_served(base, gateway, token, tmp_path, seq=2)


async def test_a_hello_posted_to_another_devices_path_is_refused_400(session_b, tmp_path):
    base, gateway, token = session_b
    out, err = await post_raw(base, "/coap-x/up", encode(Hello(device_id=B)), tmp_path)
    assert err.startswith(f"4.00 hello-device-mismatch: the Hello is for '{B}'; POST it to /gw/{B}/up")
    await b_is_still_served(base, gateway, token, tmp_path, seq=3)


async def test_observe_on_up_is_405_and_unknown_paths_are_404_with_the_resources_listed(session_b, tmp_path):
    base, gateway, token = session_b
    out, err = await coap_raw("-s", "2", f"{base}/{B}/up?s={token}")
    assert err.startswith(f"4.05 method-not-allowed: /gw/{B}/up takes POST; replies are observed on /gw/{B}/down")
    out, err = await coap_raw("-m", "get", f"{base.removesuffix('/gw')}/nothing/here")
    assert err == ("4.04 unknown-resource: no resource /nothing/here; the resources are "
                   "POST /gw/<device id>/up, GET or Observe /gw/<device id>/down")
    out, err = await coap_raw("-m", "delete", f"{base}/{B}/down?s={token}")
    assert err.startswith("4.05 method-not-allowed")
    await b_is_still_served(base, gateway, token, tmp_path, seq=4)


async def test_the_simulators_coap_device_carries_its_session_token_on_every_request(session_b, tmp_path):
    from firmware_protocol import Welcome
    from gateway.links.coap_device import CoapDevice

    base, gateway, token = session_b
    device = CoapDevice("coap-sim", base)
    await device.connect()
    try:
        await device.send(Hello(device_id="coap-sim"))
        assert isinstance(await asyncio.wait_for(device.receive(), 5), Welcome)
        await asyncio.wait_for(base.link.connections["coap-sim"].observed.wait(), 5)
        await device.send(TextInput(text="What time is it?"))
        while not (isinstance(reply := await asyncio.wait_for(device.receive(), 10), ReplyText) and reply.final):
            pass
        assert reply.text.startswith("It is")
    finally:
        await device.close()
    await b_is_still_served(base, gateway, token, tmp_path, seq=5)


async def test_fetching_or_observing_the_downlink_of_a_device_without_a_session_is_404_hello_required(
        session_b, tmp_path):
    base, gateway, token = session_b
    for args in (("-m", "get"), ("-s", "2")):
        out, err = await coap_raw(*args, f"{base}/coap-nobody/down?s={token}")
        assert out == b"" and err.startswith(
            "4.04 hello-required: coap-nobody has no session; POST a Hello to /gw/coap-nobody/up first")
    await b_is_still_served(base, gateway, token, tmp_path, seq=6)


async def test_a_block_wise_upload_larger_than_a_message_is_refused_413_before_it_is_buffered(session_b, tmp_path, caplog):
    base, gateway, token = session_b
    big = tmp_path / "big.bin"
    big.write_bytes(b"\x11" * (3 * base.link.max_frame_bytes))  # three times the limit, in 1 KiB blocks
    with caplog.at_level(logging.WARNING, logger="gateway.links.coap"):
        out, err = await coap_raw("-m", "post", "-b", "1024", "-f", str(big), f"{base}/{B}/up?s={token}")
    assert out == b"" and err.startswith(
        f"4.13 frame-too-large: a message is at most {base.link.max_frame_bytes} bytes (server.max_frame_bytes)")
    assert f"POST /gw/{B}/up refused: frame-too-large (block-wise upload beyond" in caplog.text
    await b_is_still_served(base, gateway, token, tmp_path, seq=7)


@pytest.mark.parametrize(("path", "answer"), [
    ("/coap-nobody/up", "4.04 hello-required"),  # no session at all
    (f"/{B}/up", "4.01 session-token-missing"),  # B's session, without its token
])
async def test_a_block_wise_upload_without_a_session_is_refused_at_its_first_block(session_b, tmp_path, caplog, path, answer):
    """Before, aiocoap put such uploads together first (keeping the blocks for minutes, for anyone)."""
    base, gateway, token = session_b
    big = tmp_path / "big.bin"
    big.write_bytes(encode(TextInput("x" * 3000)))  # within the size limit, in 1 KiB blocks
    with caplog.at_level(logging.WARNING, logger="gateway.links.coap"):
        out, err = await coap_raw("-m", "post", "-b", "1024", "-f", str(big), f"{base}{path}")
    assert err.startswith(answer), (out, err)
    if answer.startswith("4.01"):  # an attempt on a live session is logged with its address
        assert f"/gw/{B}/up refused: session-token-missing" in caplog.text
    await b_is_still_served(base, gateway, token, tmp_path, seq=11)


async def test_a_block_wise_upload_within_bs_session_is_put_together_and_answered(session_b, tmp_path):
    base, gateway, token = session_b
    big = tmp_path / "big.bin"
    big.write_bytes(encode(TextInput("x" * 3000)))
    out, err = await coap_raw("-m", "post", "-b", "1024", "-f", str(big), f"{base}/{B}/up?s={token}")
    assert not err.startswith("4.") and not err.startswith("5."), (out, err)
    assert B in gateway.registry.connected()


@pytest.mark.parametrize(("path", "with_token", "assembled"), [
    (("gw", "coap-nobody", "up"), False, False), (("gw", B, "up"), False, False), (("gw", B, "up"), True, True)])
async def test_only_block_wise_uploads_to_a_session_with_its_token_are_put_together(session_b, path, with_token, assembled):
    base, _, token = session_b
    first_block = aiocoap.Message(code=aiocoap.POST, uri_path=path, payload=b"\x11" * 1024,
                                  uri_query=[f"s={token}"] if with_token else [],
                                  block1=BlockOption.BlockwiseTuple(0, True, 6))
    assert await GatewayResources(base.link).needs_blockwise_assembly(first_block) is assembled
