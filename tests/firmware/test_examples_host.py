"""The ESP32 examples' host builds (esp32_examples/, gcc + POSIX HAL) against a real gateway."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import uuid
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


def test_bp_outbox_retries_until_acknowledged_in_host_unit_tests(host_bin):
    done = subprocess.run([host_bin / "test_bp_outbox"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert re.search(r"bp outbox: \d+ checks, 0 failures", done.stdout), done.stdout


@pytest.mark.asyncio(loop_scope="session")
async def test_host_bp_sensor_resends_a_reading_whose_ack_was_lost_until_the_gateway_acknowledges_it(
    fake_ws_gateway, host_bin, tmp_path
):
    device = f"bp-host-{uuid.uuid4().hex[:8]}"
    seq_file = tmp_path / "seq"
    code, log = await run_host(host_bin / "bp_sensor_host", fake_ws_gateway, device, seq_file,
                               "--lose-acks", "1", "128/82/71", "118/76", "30/20/70")  # fmt: skip

    assert code == 0, log
    # seq 1: stored, but its ack was lost on the way; the resend is acknowledged as a duplicate
    assert "send seq 1 (attempt 1)" in log and "dropped an incoming message 0x41" in log, log
    assert "resend seq 1 (attempt 2)" in log and "ack seq 1 duplicate" in log, log
    assert "ack seq 2 stored" in log, log
    # an implausible reading is rejected with the reason and not retried
    assert re.search(r"ack seq 3 rejected: systolic 30 mmHg is outside", log), log
    assert "resend seq 3" not in log
    assert "1 stored, 1 duplicate, 1 rejected, 1 resent, next seq 4" in log, log
    assert seq_file.read_text().strip() == "4"

    # the seq survives a "reboot": the next run continues at 4
    code, log = await run_host(host_bin / "bp_sensor_host", fake_ws_gateway, device, seq_file, "121/79/64")
    assert code == 0 and "ack seq 4 stored" in log, log


def test_servo_motion_player_follows_the_keyframe_vector_within_limits_in_host_unit_tests(host_bin):
    done = subprocess.run([host_bin / "test_servo_motion"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout
    assert re.search(r"servo motion: \d+ checks, 0 failures", done.stdout), done.stdout


@pytest.mark.asyncio(loop_scope="session")
async def test_host_servo_robot_moves_its_servos_within_limits_as_the_gateway_says_goodbye(
    fake_ws_gateway, host_bin
):
    code, log = await run_host(host_bin / "servo_robot_host", fake_ws_gateway, "robot-c-host", "Goodbye!")

    assert code == 0, log
    assert re.search(r"keyframes for stream \d+: \d+ keyframes, led #[0-9a-f]{6}", log), log
    limits = {0: (30, 150), 1: (60, 120), 2: (0, 180), 3: (0, 180)}
    moves = [(int(c), int(a)) for c, a in re.findall(r"servo (\d+) -> (\d+) deg", log)]
    arm = [angle for channel, angle in moves if channel == 2]
    assert max(arm) >= 100, log  # the wave lifts the right arm well above its neutral 20
    assert all(limits[c][0] <= a <= limits[c][1] for c, a in moves), moves
    assert moves[-1] == (2, 20) or arm[-1] == 20, log  # and the motion ends at neutral
    assert re.search(r"result: done, [1-9]\d* keyframe messages", log), log


def test_examples_portable_logic_cross_compiles_warning_free_for_rv32imc(tmp_path):
    if shutil.which("riscv64-unknown-elf-gcc") is None:
        pytest.skip("riscv64-unknown-elf-gcc is not installed (Debian gcc-riscv64-unknown-elf)")
    done = subprocess.run(["make", "--no-print-directory", "-C", str(EXAMPLES), "riscv", f"BUILD={tmp_path}"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "warning" not in out.lower(), out
    for unit in ("device", "voice_box", "servo_motion", "servo_robot", "bp_outbox", "bp_sensor"):
        assert re.search(rf"^\s*\d+\s+\d+\s+\d+\s+\d+\s+\w+\s+\S*/{unit}\.o$", out, re.M), out


@pytest.fixture
def serial_cable(tmp_path: Path):
    """A virtual serial cable (socat pty pair): (gateway end, device end)."""
    if shutil.which("socat") is None:
        pytest.skip("needs socat (Debian package socat)")
    gw_end, dev_end = tmp_path / "ttyGW", tmp_path / "ttyDEV"
    proc = subprocess.Popen(["socat", "-d", "-d", f"pty,raw,echo=0,link={gw_end}", f"pty,raw,echo=0,link={dev_end}"],
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # both ptys exist once socat says this
        if "starting data transfer loop" in line:
            break
    yield gw_end, dev_end
    proc.terminate()
    proc.wait(10)


@pytest.mark.asyncio(loop_scope="session")
async def test_host_bp_sensor_on_a_serial_line_frames_with_the_c_codec_and_retries_until_acked(
    serial_cable, fake_runner, host_bin, tmp_path
):
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.links.serial_link import SerialLink, SerialPort

    gw_end, dev_end = serial_cable
    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db")}}, ROOT)
    ready = asyncio.Event()
    task = asyncio.create_task(Gateway(cfg, fake_runner, [SerialLink([SerialPort(str(gw_end))])]).serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        code, log = await run_host(host_bin / "bp_sensor_serial_host", f"serial://{dev_end}", "uart-bp-c",
                                   tmp_path / "seq", "--lose-acks", "1", "131/85/77", "119/78")  # fmt: skip
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert code == 0, log
    assert "resend seq 1 (attempt 2)" in log and "ack seq 1 duplicate" in log, log
    assert "ack seq 2 stored" in log and "frame dropped" not in log, log
    assert "1 stored, 1 duplicate, 0 rejected, 1 resent, next seq 3" in log, log


@pytest.mark.asyncio(loop_scope="session")
async def test_host_bp_sensor_over_mqtt_logs_in_with_its_token_and_retries_until_acked(fake_runner, host_bin, tmp_path):
    from gateway.app import Gateway
    from gateway.config import parse_config
    from gateway.devices.auth import add_device
    from gateway.links.mqtt import MqttLink

    cfg = parse_config({"devices": {"database": str(tmp_path / "g.db"), "open_enrolment": False}}, ROOT)
    link = MqttLink("127.0.0.1", 0, embedded=True)
    gateway = Gateway(cfg, fake_runner, [link])
    ready = asyncio.Event()
    task = asyncio.create_task(gateway.serve(ready))
    try:
        await asyncio.wait_for(ready.wait(), 10)
        await asyncio.wait_for(link.connected.wait(), 10)
        token = await gateway.db.run(add_device, "mqtt-bp-c", "")
        await link.broker.reload()  # the embedded mosquitto reads the new login now, not at its next poll
        url = f"mqtt://mqtt-bp-c:{token}@127.0.0.1:{link.port}"
        code, log = await run_host(host_bin / "bp_sensor_mqtt_host", url, "mqtt-bp-c", tmp_path / "seq",
                                   "--token", token, "--lose-acks", "1", "126/84/70", "117/75")  # fmt: skip
        bad_code, bad_log = await run_host(host_bin / "bp_sensor_mqtt_host", f"mqtt://mqtt-bp-c:wrong@127.0.0.1:{link.port}",
                                           "mqtt-bp-c", tmp_path / "seq2", "--token", "wrong", "120/80")  # fmt: skip
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    assert code == 0, log
    assert "resend seq 1 (attempt 2)" in log and "ack seq 1 duplicate" in log and "ack seq 2 stored" in log, log
    assert "1 stored, 1 duplicate, 0 rejected, 1 resent, next seq 3" in log, log
    assert bad_code == 1 and "the broker refused the login of mqtt-bp-c" in bad_log, bad_log
