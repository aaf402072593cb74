"""Listen modes end to end on the real models (Silero VAD, Moonshine, piper, microWakeWord): speech
made with the gateway's TTS and espeak-ng, fed to a Conversation as a box's microphone would be."""

from __future__ import annotations

import asyncio
import io
import subprocess
import time
import wave
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from firmware_protocol import AudioChunk, AudioFormat, AudioStop, ListenState, StopReason, Transcript, VadEvent
from gateway.audio.pcm import int16_to_float, resample
from gateway.cli.echo_box import EchoBox, stream
from gateway.config import parse_config
from gateway.engines.piper_tts import PiperTts
from gateway.engines.runner import EngineRunner
from gateway.engines.wake_word import MicroWakeWords
from gateway.voice.conversation import Conversation
from gateway.voice.events import TurnEvents
from gateway.voice.wire import to_device
from tests.conftest import words as words_of
from tests.voice.scripted_brain import ScriptedBrain
from tests.voice.test_conversation import MIC, STORY, Device, answers, final, say, silence

pytestmark = [pytest.mark.models, pytest.mark.asyncio(loop_scope="session")]

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "what time is it"


@pytest.fixture(scope="module")
def wake_runner(runner: EngineRunner) -> AsyncIterator[EngineRunner]:
    """The real engines with the okay_nabu wake word."""
    r = EngineRunner(runner.vad, runner.asr, runner.tts, wake=MicroWakeWords(("okay_nabu",)))
    yield r
    r.close()


def piper(runner: EngineRunner, text: str) -> np.ndarray:
    """`text` said by the gateway's piper voice, the same audio in every run (its sampling noise
    off: with it, a run's "Stop." was once heard as "Start.")."""
    assert isinstance(runner.tts, PiperTts)
    chunks = list(runner.tts.steady().synthesize(text))
    return resample(np.concatenate([int16_to_float(c.pcm) for c in chunks]), chunks[0].sample_rate, MIC)


def espeak(text: str, voice: str) -> np.ndarray:
    out = subprocess.run(["espeak-ng", "-v", voice, "--stdout", text], capture_output=True, check=True).stdout
    with wave.open(io.BytesIO(out)) as w:
        audio = int16_to_float(np.frombuffer(w.readframes(w.getnframes()), np.int16))
        return resample(audio, w.getframerate(), MIC)


def noisy(audio: np.ndarray, snr_db: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, 1, audio.size).astype(np.float32)
    noise *= np.sqrt(np.mean(audio**2) / 10 ** (snr_db / 10) / np.mean(noise**2))
    return (audio + noise).astype(np.float32)


def utter(audio: np.ndarray) -> np.ndarray:
    """An utterance as a box streams it: 0.5 s before, 0.8 s of silence after."""
    return np.concatenate([silence(500), audio, silence(800)])


@pytest_asyncio.fixture(loop_scope="session")
async def box(wake_runner: EngineRunner, request: pytest.FixtureRequest) -> AsyncIterator[tuple]:
    mode = getattr(request, "param", "wake")
    cfg = parse_config({"audio": {"prebuffer_ms": 300}, "listen": {"mode": mode, "follow_up_s": 6}}, ROOT)
    brain, dev = ScriptedBrain(answers), Device()
    detector = await wake_runner.wake_detector()
    conv = Conversation("box-1", "test", cfg, wake_runner, brain, dev.send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev.send, listen_state=True)]),
                        wake=detector, mode=mode)
    yield conv, brain, dev
    await conv.close()


def transcripts(dev: Device) -> list[list[str]]:
    return [words_of(m.text) for m in dev.of(Transcript)]


def is_the_question(heard: list[str]) -> bool:
    """The question without the wake word: its words (one misheard at most; the ASR on noisy
    espeak-ng speech), at most one more, nothing of "okay nabu"."""
    wanted = QUESTION.split()
    return (sum(w in heard for w in wanted) >= len(wanted) - 1 and len(heard) <= len(wanted) + 1
            and not {"okay", "ok", "nabu"} & set(heard))


@pytest.mark.parametrize("voice, snr_db", [("piper", 20), ("piper", None), ("en-us", None), ("en-gb", 20),
                                           ("en-gb-x-rp", None)])
async def test_wake_word_and_question_in_one_breath_is_one_turn_with_the_question(
        box, wake_runner: EngineRunner, voice: str, snr_db: float | None) -> None:
    conv, brain, dev = box
    text = f"okay nabu, {QUESTION}?"
    audio = piper(wake_runner, text) if voice == "piper" else espeak(text, voice)
    await say(conv, utter(audio if snr_db is None else noisy(audio, snr_db, seed=len(voice))))
    await dev.until(final, timeout=30)
    heard = transcripts(dev)
    assert len(heard) == 1 and is_the_question(heard[0]), heard
    assert len(brain.utterances) == 1
    states = [(m.state, m.word) for m in dev.of(ListenState)]
    assert states[:2] == [(ListenState.ASLEEP, ""), (ListenState.WOKEN, "okay_nabu")]
    starts = [m for m in dev.of(VadEvent) if m.event == VadEvent.SPEECH_START]
    assert len(starts) == 1


async def test_the_question_without_the_wake_word_is_no_turn(box, wake_runner: EngineRunner) -> None:
    conv, brain, dev = box
    await say(conv, utter(noisy(piper(wake_runner, "What time is it?"), 20, seed=1)))
    await say(conv, utter(espeak("tell me a story about the weather", "en-gb")))
    await say(conv, silence(1000))
    assert brain.utterances == [] and dev.of(Transcript) == [] and dev.of(VadEvent) == []
    assert [m.state for m in dev.of(ListenState)] == [ListenState.ASLEEP]


async def test_a_bare_wake_word_then_the_question(box, wake_runner: EngineRunner) -> None:
    conv, brain, dev = box
    await say(conv, utter(piper(wake_runner, "Okay nabu.")))
    await say(conv, utter(piper(wake_runner, "What time is it?")))
    await dev.until(final, timeout=30)
    assert transcripts(dev) == [QUESTION.split()]
    assert [m.state for m in dev.of(ListenState)][:2] == [ListenState.ASLEEP, ListenState.WOKEN]


@pytest.mark.parametrize("box", ["follow-up"], indirect=True)
async def test_follow_up_answered_without_the_wake_word_then_the_window_closes(
        box, wake_runner: EngineRunner) -> None:
    conv, brain, dev = box
    await say(conv, utter(piper(wake_runner, "Okay nabu, what time is it?")))
    first = await dev.until(final, timeout=30)
    await dev.until(lambda m: isinstance(m, ListenState) and m.state == ListenState.LISTENING, after=first)
    await say(conv, utter(piper(wake_runner, "Tell me a joke.")))  # no wake word: the follow-up window
    second = await dev.until(final, after=first + 1, timeout=30)
    assert len(brain.utterances) == 2 and {"tell", "joke"} <= set(words_of(brain.utterances[1]))
    await dev.until(lambda m: isinstance(m, ListenState) and m.state == ListenState.LISTENING, after=second)
    await say(conv, silence(6500))  # nobody answers: the window closes
    assert dev.of(ListenState)[-1].state == ListenState.ASLEEP
    await say(conv, utter(piper(wake_runner, "What is the weather like?")))
    await say(conv, silence(1000))
    assert len(brain.utterances) == 2


@pytest.mark.parametrize("stop", ["Stop.", "Be quiet."])
async def test_stop_ends_the_reply_at_once_without_a_new_turn(box, wake_runner: EngineRunner, stop: str) -> None:
    conv, brain, dev = box
    await conv.on_text("tell me a story")  # the reply that plays (a typed question: no ASR needed)
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 10, timeout=30)  # the story plays
    await say(conv, utter(piper(wake_runner, stop)))  # no wake word needed for a stop word
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED, timeout=15)
    assert final(dev.sent[aborted + 1]) and dev.sent[aborted + 1].text != " ".join(STORY)
    await say(conv, silence(1000))
    assert len(brain.utterances) == 1  # "stop" was no turn


@pytest.mark.parametrize("box", ["always"], indirect=True)
async def test_a_stop_word_as_a_turn_stops_the_reply_and_sends_no_transcript(box, wake_runner: EngineRunner) -> None:
    """Through the normal path (listen.mode always: every utterance is a turn) "stop" is no turn: the
    reply stops, the device gets no (empty) Transcript, the brain is not asked."""
    conv, brain, dev = box
    await conv.on_text("tell me a story")
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 10, timeout=30)
    await say(conv, utter(piper(wake_runner, "Stop.")))
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED, timeout=15)
    assert final(dev.sent[aborted + 1])
    await say(conv, silence(1500))  # the decode of "stop" has long finished
    assert [m.text for m in dev.of(Transcript)] == ["tell me a story"]  # the typed question's only
    assert brain.utterances == ["tell me a story"]
    assert [m.event for m in dev.of(VadEvent)] == [VadEvent.SPEECH_START, VadEvent.SPEECH_END]


async def test_a_wake_word_during_the_reply_barges_in_and_its_question_is_answered(
        box, wake_runner: EngineRunner) -> None:
    conv, brain, dev = box
    await conv.on_text("tell me a story")  # the reply that plays (a typed question: no ASR needed)
    await dev.until(lambda m: isinstance(m, AudioChunk) and m.seq == 10, timeout=120)
    await say(conv, utter(piper(wake_runner, "Okay nabu, what time is it?")))
    aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED, timeout=60)
    await dev.until(final, after=aborted + 2, timeout=120)
    # piper's output differs a little from run to run, so the cut after the wake word can leave
    # a breath the ASR hears as "uh" or "and": the tolerance of is_the_question
    assert is_the_question(words_of(brain.utterances[1])), brain.utterances


async def stream_echo(conv: Conversation, box: EchoBox, dev: Device, seconds: float,
                      voice: np.ndarray | None = None, voice_at: int = 0) -> None:
    """The box's microphone in real time until the reply ended (or `seconds` with a voice). Without
    a voice `seconds` only bounds a hang: a slow machine (an emulated Pi) takes longer to say it."""
    await stream(conv.on_audio, box, seconds, voice, voice_at,
                 done=lambda: voice is None and box.mic > MIC and any(final(m) for m in dev.sent[-3:]))

def echo_conversation(wake_runner: EngineRunner, dev_send) -> tuple[Conversation, ScriptedBrain]:
    cfg = parse_config({"audio": {"prebuffer_ms": 300}}, ROOT)  # listen.mode always, echo_check on
    brain = ScriptedBrain(answers)
    conv = Conversation("box-1", "test", cfg, wake_runner, brain, dev_send, AudioFormat(sample_rate=MIC),
                        AudioFormat(sample_rate=16000), TurnEvents([to_device(dev_send)]))
    return conv, brain


@pytest.mark.parametrize("delay_ms, gain", [(50, 0.5), (150, 0.3), (300, 0.8)])
async def test_the_box_hearing_its_own_reply_never_interrupts_it(
        wake_runner: EngineRunner, delay_ms: int, gain: float) -> None:
    dev = Device()
    box = EchoBox(dev.send, delay_ms, gain, seed=delay_ms)
    conv, brain = echo_conversation(wake_runner, box.send)
    try:
        await conv.on_text("tell me a story")
        await stream_echo(conv, box, dev, seconds=120)
        await dev.until(final, timeout=30)
        assert box.aborted_at is None and not any(isinstance(m, VadEvent) for m in dev.sent)
        assert [m.reason for m in dev.of(AudioStop)] == [StopReason.END] * len(STORY)
        assert brain.utterances == ["tell me a story"]  # the echo was no turn
    finally:
        await conv.close()


async def test_a_microphone_that_opens_with_the_reply_never_interrupts_it_either(wake_runner: EngineRunner) -> None:
    """No room noise heard before the echo starts (the box streams its microphone from the reply's
    first audio on): the pauses in the echo are compared with the quietest audio heard so far, not
    taken for a voice (before, this interrupted the story at its first pause between sentences)."""
    dev = Device()
    box = EchoBox(dev.send, 50, 0.5, seed=51)
    conv, brain = echo_conversation(wake_runner, box.send)
    try:
        await conv.on_text("tell me a story")
        await dev.until(lambda m: isinstance(m, AudioChunk), timeout=60)
        await stream_echo(conv, box, dev, seconds=120)
        await dev.until(final, timeout=30)
        assert box.aborted_at is None and not any(isinstance(m, VadEvent) for m in dev.sent)
        assert [m.reason for m in dev.of(AudioStop)] == [StopReason.END] * len(STORY)
        assert brain.utterances == ["tell me a story"]
    finally:
        await conv.close()


async def test_a_stalled_event_loop_mid_reply_does_not_make_the_echo_a_voice(wake_runner: EngineRunner) -> None:
    """The loop blocks 3 s while the story plays (a slow call, a long pause of the process): the
    pacer then sends the audio it owes in a burst, queued far ahead of what the box plays. The echo
    is compared with what the box plays at that moment, not with the last 3 s sent (before, every
    case interrupted itself after such a stall)."""
    dev = Device()
    box = EchoBox(dev.send, 150, 0.5, seed=3)
    conv, brain = echo_conversation(wake_runner, box.send)

    async def stall() -> None:
        while box.start is None or box.mic - box.start < 2 * MIC:
            await asyncio.sleep(0.02)
        time.sleep(3)  # blocks the event loop: nothing is received or sent meanwhile

    try:
        await conv.on_text("tell me a story")
        stalled = asyncio.create_task(stall())
        await stream_echo(conv, box, dev, seconds=120)
        await stalled
        await dev.until(final, timeout=30)
        assert box.aborted_at is None and not any(isinstance(m, VadEvent) for m in dev.sent)
        assert [m.reason for m in dev.of(AudioStop)] == [StopReason.END] * len(STORY)
    finally:
        await conv.close()


async def test_a_second_voice_over_the_echoed_reply_barges_in_within_300_ms(wake_runner: EngineRunner) -> None:
    dev = Device()
    box = EchoBox(dev.send, 150, 0.5, seed=7)
    conv, brain = echo_conversation(wake_runner, box.send)
    voice = piper(wake_runner, "What time is it?") * 0.8
    onset = int(np.flatnonzero(np.abs(voice) > 0.02)[0])  # where the person's speech starts
    try:
        await conv.on_text("tell me a story")
        async with asyncio.timeout(60):
            while box.start is None:  # the reply plays (on a busy machine its first audio may take seconds)
                await stream(conv.on_audio, box, 0.02)
        voice_at = box.start + int(1.5 * MIC)  # the person speaks 1.5 s into the echoed reply
        await stream_echo(conv, box, dev, seconds=5, voice=voice, voice_at=voice_at)
        assert box.aborted_at is not None
        latency_ms = (box.aborted_at - (voice_at + onset)) * 1000 / MIC
        assert 0 < latency_ms <= 300, latency_ms
        await stream_echo(conv, box, dev, seconds=2)
        aborted = await dev.until(lambda m: isinstance(m, AudioStop) and m.reason == StopReason.ABORTED)
        closed = await dev.until(final, after=aborted)  # the interrupted story's closing ReplyText
        await dev.until(final, after=closed + 1, timeout=60)  # the question's reply
        assert words_of(brain.utterances[1])[-3:] == ["time", "is", "it"]  # over the echo: its first word may blur
    finally:
        await conv.close()
