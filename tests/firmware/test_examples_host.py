"""The ESP32 examples' host builds (esp32_examples/, gcc + POSIX HAL) against a real gateway."""

from __future__ import annotations

import asyncio
import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from gateway.audio.pcm import float_to_s16le, resample, rms_dbfs, s16le_to_float
from tests.conftest import words

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "esp32_examples"


@pytest.fixture(scope="module")
def host_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("esp32_host")
    done = subprocess.run(["make", "--no-print-directory", "-C", str(EXAMPLES), f"BUILD={build}"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return build


async def run_host(*cmd: str | Path, timeout: float = 120) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *map(str, cmd), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        raise
    return proc.returncode, out.decode("utf-8", "replace")


def write_wav(path: Path, audio: np.ndarray, rate: int) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(float_to_s16le(audio))


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as w:
        return s16le_to_float(w.readframes(w.getnframes())), w.getframerate()


@pytest.mark.models
@pytest.mark.asyncio(loop_scope="session")
async def test_host_voice_box_streams_a_wav_and_writes_the_spoken_reply(
    ws_gateway, speak, transcribe, host_bin, tmp_path
):
    audio, rate = speak("How are you?")
    question, answer = tmp_path / "question.wav", tmp_path / "reply.wav"
    write_wav(question, resample(audio, rate, 16000), 16000)

    code, log = await run_host(host_bin / "voice_box_host", ws_gateway, question, answer, "box-c-host")

    assert code == 0, log
    heard_line = next(line for line in log.splitlines() if line.startswith("heard: "))
    assert words(heard_line) == ["heard", "how", "are", "you"], log
    reply_line = next(line for line in log.splitlines() if line.startswith("reply: "))
    assert reply_line.startswith("reply: I am doing well"), log
    assert "mouth:" in log and "0 errors" in log, log
    reply, reply_rate = read_wav(answer)
    assert reply_rate == 16000 and len(reply) / reply_rate > 1.0
    assert rms_dbfs(reply) > -35
    heard = set(words(transcribe(reply, reply_rate)))
    expected = set(words(reply_line.removeprefix("reply: ")))
    assert len(heard & expected) / len(expected) >= 0.8, (heard, expected)
