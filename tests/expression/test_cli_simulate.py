"""`gateway simulate --json` prints action, sentiment and visemes events; `--servo` simulates a servo board."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest

from gateway.audio.pcm import float_to_s16le
from gateway.cli.virtual_box import write_wav

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]


async def run_simulate(url: str, wav, *extra: str) -> list[dict]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "simulate", "--wav", str(wav), "--url", url, "--json", "--speed", "2",
        "--timeout", "30", *extra, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def thanks_wav(speak, tmp_path_factory):
    audio, rate = speak("Thank you.")
    path = tmp_path_factory.mktemp("sim") / "thanks.wav"
    write_wav(path, float_to_s16le(audio), rate)
    return path


async def test_simulate_json_prints_action_sentiment_and_visemes_with_their_sentence(ws_gateway, thanks_wav) -> None:
    events = await run_simulate(ws_gateway, thanks_wav)
    by_kind = {e["event"]: e for e in events}
    assert by_kind["action"]["code"] == "social.thanks" and by_kind["action"]["sentence"] == "You are welcome."
    assert by_kind["sentiment"]["sentence"] == "You are welcome." and -2 <= by_kind["sentiment"]["value"] <= 2
    assert by_kind["visemes"]["total_ms"] > 500 and by_kind["visemes"]["visemes"][0]["start_ms"] == 0
    assert "servo" not in by_kind


async def test_simulate_servo_board_gets_keyframes_instead_of_the_action(ws_gateway, thanks_wav) -> None:
    events = await run_simulate(ws_gateway, thanks_wav, "--servo", "--mouth")
    kinds = {e["event"] for e in events}
    assert {"servo", "mouth", "visemes"} <= kinds and "action" not in kinds
    servo = next(e for e in events if e["event"] == "servo")
    assert servo["sentence"] == "You are welcome." and servo["face"] == "smile"
    assert servo["keyframes"][-1]["time_ms"] == max(k["time_ms"] for k in servo["keyframes"])
