"""The end-to-end proof with the real models: a xiaozhi box's spoken question (real TTS, Opus)
is heard by the real ASR, and the Opus reply it plays says the reply text (real ASR of the
decoded audio)."""

from __future__ import annotations

import difflib

import pytest

from gateway.audio.pcm import resample
from tests.conftest import words
from tests.links.xiaozhi.box import XiaozhiBox

pytestmark = pytest.mark.models


@pytest.mark.parametrize("version", [1, 3])
async def test_a_spoken_question_over_opus_gets_a_spoken_opus_reply_that_says_the_reply_text(
        xz_real_gateway, speak, transcribe, version):
    box = XiaozhiBox(mac=f"a0:b1:c2:0e:2e:0{version}", version=version)
    assert (await box.ota(xz_real_gateway + "/xiaozhi/ota/"))[0] == 200
    box.version = version
    await box.open()
    await box.listen("auto")
    audio, rate = speak("How are you?")  # a reply without clock numbers (the ASR writes "12 06" or "twelve zero six")
    await box.say(resample(audio, rate, 16000), silence_s=1.5)
    stt = await box.wait_for(lambda m: m.get("type") == "stt", 30)
    assert words(stt["text"]) == ["how", "are", "you"]
    await box.wait_for(lambda m: m.get("type") == "tts" and m.get("state") == "stop", 60)
    shown = " ".join(m["text"] for m in box.of_type("tts", state="sentence_start"))
    assert shown.startswith("I am doing well") and box.packets_dropped == 0
    heard = words(transcribe(box.reply_audio(), box.server_rate))
    direct = words(transcribe(*speak(shown)))  # the same sentence straight from the TTS, no Opus
    similarity = difflib.SequenceMatcher(None, "".join(heard), "".join(direct)).ratio()  # "a m" == "am"
    assert heard[:2] == ["i", "am"] and similarity >= 0.85, (heard, direct)
    await box.close()
