"""Watching a device's conversation and fetching its audio need the screen key: a screen without
it, or with a wrong one, is closed with 4401 and the reason (logged with the peer), the audio is
401; with the key a screen gets the messages, and audio ids are random, not sequential."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import urllib.error
import urllib.request

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from gateway.cli.virtual_box import simulate
from gateway.screens.access import screen_key
from tests.screens.conftest import SCREEN_KEY
from tests.screens.test_screen_fanout import http_get, next_human, subscribed

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.parametrize("key", [None, "wrong-key"])
async def test_a_screen_without_the_right_key_is_closed_with_the_reason_and_logged(fake_screens_gateway, key, caplog):
    base = fake_screens_gateway.screen_url.split("?")[0]
    url = f"{base}?device=all" + (f"&key={key}" if key else "")
    with caplog.at_level(logging.WARNING, logger="gateway.screens.server"):
        async with connect(url) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    expected = "screen-key-missing" if key is None else "screen-key-wrong"
    assert closed.value.rcvd.reason.startswith(expected) and "gateway screens key" in closed.value.rcvd.reason
    assert re.search(rf"screen 127\.0\.0\.1:\d+: screen refused \(device all\): {expected}", caplog.text)


async def test_with_the_key_a_screen_gets_the_sentences_and_their_audio_ids_are_not_sequential(
        fake_screens_gateway, fake_speak, caplog) -> None:
    audio, rate = fake_speak("Thank you, goodbye.")
    async with connect(f"{fake_screens_gateway.screen_url}&device=box-keyed") as ws:
        await subscribed(ws, "box-keyed")
        sim = asyncio.create_task(simulate(fake_screens_gateway.device_url, audio, rate, device_id="box-keyed",
                                           speed=2.0, timeout=30))
        first, second = await next_human(ws, "audio"), await next_human(ws, "audio")
        await sim
    urls = [m["Data"]["HttpValue"] for m in (first, second)]
    ids = [re.fullmatch(r"http://127\.0\.0\.1:\d+/audio/([A-Za-z0-9_-]{22})\.wav\?key=" + SCREEN_KEY, u).group(1)
           for u in urls]
    assert ids[0] != ids[1] and not any(i.isdigit() for i in ids)
    status, ctype, _ = await asyncio.to_thread(http_get, urls[0])
    assert status == 200 and ctype == "audio/wav"
    with caplog.at_level(logging.WARNING, logger="gateway.screens.server"):
        for bad in (urls[0].split("?")[0], urls[0].replace(SCREEN_KEY, "nope")):
            with pytest.raises(urllib.error.HTTPError) as info:
                await asyncio.to_thread(http_get, bad)
            assert info.value.code == 401 and info.value.read().decode().startswith("screen-key-")
    assert re.search(r"screen 127\.0\.0\.1:\d+: audio /audio/\S+\.wav refused: screen-key-missing", caplog.text)
    assert "refused: screen-key-wrong" in caplog.text


async def test_the_key_is_made_once_in_the_data_folder_private_and_replaced_only_on_request(tmp_path):
    path = tmp_path / "data" / "screens-access-key"
    key = screen_key(path)
    assert len(key) >= 24 and screen_key(path) == key and path.stat().st_mode & 0o777 == 0o600
    assert screen_key(path, new=True) != key


async def test_gateway_screens_key_prints_the_key_and_the_banner_prints_the_page_url_with_it(tmp_path, capsys):
    from types import SimpleNamespace

    from gateway.cli.main import main
    from gateway.cli.run import _announce
    from gateway.config import load_config

    config = tmp_path / "gateway.yaml"
    config.write_text("screens:\n  port: 8799\n")
    assert main(["screens", "key", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    key = out.splitlines()[0]
    assert key == (tmp_path / "data" / "screens-access-key").read_text().strip()
    assert f"http://127.0.0.1:8799/?watch=all&key={key}" in out and f"/screen?device=all&key={key}" in out
    cfg = load_config(config)
    _announce(cfg, [SimpleNamespace(name="ws", port=8765), SimpleNamespace(name="screens", scheme="http", port=8799)])
    assert f":8799/?watch=all&key={key}" in capsys.readouterr().out  # the same key, not a new one
    _announce(cfg, [SimpleNamespace(name="ws", port=8765), SimpleNamespace(name="screens", scheme="https", port=8799)])
    banner = capsys.readouterr().out  # with TLS: https for the LAN, http on this machine
    assert f"https://{socket.gethostname()}:8799/?watch=all&key={key}" in banner
    assert "accept it once" in banner and "also http://127.0.0.1:8799/" in banner
    assert main(["screens", "key", "--new", "--config", str(config)]) == 0
    assert capsys.readouterr().out.splitlines()[0] != key
