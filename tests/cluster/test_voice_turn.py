"""One voice turn end to end in cluster mode, with the real models, and the next one after a kill.

Two member processes load the models `gateway run` loads (the real VAD, ASR and TTS:
cluster_target's `real_models`) and serve as cluster members behind a real mosquitto, with the
default timings (heartbeat 2 s, member timeout and lease 6 s). An emulated MQTT voice box
(gateway/cli/cluster_voice_box.py) is welcomed by the member that owns it, asks a spoken question
and gets the reply as speech. That member is killed (SIGKILL); the other takes the box's lease and
asks it for a Hello, the box is welcomed again within the failover bound (checked with a generous
margin: the bound itself is measured by `gateway bench-cluster`) and its next spoken question is
answered, in speech, by the other member. No downlink was sent under an older lease than one seen.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from gateway.audio.pcm import rms_dbfs, s16le_to_float
from gateway.cli.cluster_rig import ClusterRig
from gateway.cli.cluster_voice_box import ClusterVoiceBox
from gateway.links.mosquitto import find_mosquitto
from tests.conftest import words

pytestmark = [pytest.mark.skipif(find_mosquitto() is None, reason="needs mosquitto (Debian package mosquitto)"),
              pytest.mark.models]

MEMBERS = ["gw-a", "gw-b"]
BOUND_S = 8.0  # docs/SCALE-OUT.md
GENEROUS = 2 * BOUND_S
BOX = "voice-box-1"
ASK_S = 300  # a hang bound, not a speed check: an emulated Pi takes minutes per reply


def spoken_by(rig: ClusterRig, after: float) -> set[str | None]:
    return {d.gateway for d in rig.observer.seen if d.device_id == BOX and d.at > after}


async def test_a_spoken_question_is_answered_in_cluster_mode_and_the_next_by_another_member_after_a_kill(
        postgres_dsn, tmp_path: Path, speak, transcribe):
    rig = ClusterRig(tmp_path, postgres_dsn)
    rig.start_broker()
    box = ClusterVoiceBox(BOX)
    try:
        await rig.start_members(MEMBERS, {m: {"real_models": True} for m in MEMBERS})
        await rig.observe()
        await box.connect("127.0.0.1", rig.broker_port)
        await box.welcomed(timeout=120)
        asked = time.monotonic()
        audio, rate = speak("How are you?")
        first = await box.ask(audio, rate, timeout=ASK_S, speed=2.0)
        (server,) = spoken_by(rig, asked)
        assert server in MEMBERS
        assert words(first.transcript) == ["how", "are", "you"]
        assert first.reply_text.startswith("I am doing well")
        assert first.audio_seconds > 1.0 and rms_dbfs(s16le_to_float(first.reply_audio)) > -35

        killed_at = rig.kill(server, signal.SIGKILL)
        await box.welcomed(timeout=GENEROUS)  # the other member took the lease and asked for a Hello
        welcomed_after = time.monotonic() - killed_at
        audio, rate = speak("What is your name?")
        second = await box.ask(audio, rate, timeout=ASK_S, speed=2.0)
    finally:
        await box.close()
        await rig.stop()

    (other,) = set(MEMBERS) - {server}
    assert spoken_by(rig, killed_at) == {other}, f"welcomed again {welcomed_after:.1f} s after the kill"
    assert "voice assistant" in second.reply_text
    assert "assistant" in words(transcribe(s16le_to_float(second.reply_audio), second.out_rate))
    assert rig.observer.overlaps() == []
