"""`gateway bench-wake`: the wake word and the echo-proof barge-in, measured (issue 14).

Wake word (listen.wake_words' first model, listen.threshold): false rejects over generated wake-word
utterances (5 phrases x the 10 voices of the ASR evaluation set, piper and espeak-ng, clean and in
pink noise at 10 dB SNR: 100), per voice; false accepts per hour over the evaluation set's 40
non-wake sentences (clean, pink 10 dB, babble 5 dB), near misses ("okay", "Nabucco is an opera", ...
in every voice, clean and pink 10 dB) and pink/white noise; CPU per device-second (thread CPU time).

Echo: boxes that mix the reply they receive back into their microphone (gateway/cli/echo_box.py:
delay 50-300 ms, gain 0.2-0.9, room noise), each through a real Conversation on the real models in
real time, several at once: self-interruptions per reply (target 0); then a second voice starting
0.6-1.6 s into the reply: barge-in latency from the voice's onset to the abort, in microphone audio
time (p50/p95, target p95 <= 300 ms), and misses.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

import numpy as np

from firmware_protocol import AudioFormat
from gateway.asreval.corpus import VOICES
from gateway.asreval.noise import mix, pink, white
from gateway.asreval.render import Clip, _espeak, _piper_speaker, _trim, render
from gateway.audio.pcm import resample
from gateway.brain.contract import BrainContext, BrainSession, Sentence
from gateway.cli.echo_box import RATE, EchoBox, stream
from gateway.config import GatewayConfig
from gateway.engines.store import ModelStore
from gateway.engines.wake_word import MicroWakeWords, pcm16
from gateway.voice.events import TurnEvents
from gateway.voice.wire import to_device

PHRASES = ("okay nabu", "okay nabu, what time is it?", "okay nabu, turn on the light",
           "okay nabu tell me a joke", "okay nabu, how are you?")
# Non-wake phrases that sound like parts of "okay nabu" (said by every voice, clean and in pink 10 dB):
# the false accepts a lower threshold risks first.
NEAR_MISSES = ("okay", "okay, now what?", "okay then, thank you", "a new bar opened", "Nabucco is an opera",
               "okay, no problem", "oh, a new boo", "can I borrow it?")
REPLY = "Once upon a time there was a small robot that lived in a very big house. It cleaned every floor."


def _wake_clips(cfg: GatewayConfig, voices: int | None = None, phrases: tuple[str, ...] = PHRASES) -> list[Clip]:
    piper = _piper_speaker(cfg, ModelStore(cfg))
    clips = []
    for v, voice in enumerate(VOICES[:voices]):
        for p, phrase in enumerate(phrases):
            audio, rate = (piper if voice.engine == "piper" else _espeak)(phrase, voice)
            speech = _trim(resample(audio, rate, RATE).astype(np.float32))
            lead = np.zeros(RATE // 2, np.float32)
            padded = np.concatenate([lead, speech, np.zeros(RATE, np.float32)])
            clips.append(Clip(v * 10 + p, phrase, voice, padded, slice(lead.size, lead.size + speech.size)))
    return clips


def _detections(engine: MicroWakeWords, audio: np.ndarray) -> tuple[int, float]:
    """Detections in `audio` streamed through a fresh detector in 20 ms chunks, and its CPU seconds."""
    detector = engine.detector()
    started = time.thread_time()
    found = sum(len(detector.process(pcm16(audio[i : i + 320]))) for i in range(0, audio.size, 320))
    return found, time.thread_time() - started


def bench_wake_word(cfg: GatewayConfig, say, voices: int | None = None, sentences: int | None = None,
                    noise_s: float = 300.0) -> dict[str, Any]:
    """The wake-word figures over the first `voices` voices' wake-word utterances, the first
    `sentences` non-wake sentences and `noise_s` of pink and of white noise (None: all)."""
    engine = MicroWakeWords(cfg.listen.wake_words[:1], cfg.listen.threshold)
    positives = _wake_clips(cfg, voices)
    rejects, cpu, audio_s = [], 0.0, 0.0
    per_voice: dict[str, list[int]] = {}  # voice -> [misses clean, misses in pink 10 dB]
    for clip in positives:
        for k, snr in enumerate((None, 10.0)):
            audio = clip.audio if snr is None else mix(clip, "pink", snr, positives)
            found, used = _detections(engine, audio)
            cpu, audio_s = cpu + used, audio_s + audio.size / RATE
            misses = per_voice.setdefault(clip.voice.label, [0, 0])
            if not found:
                misses[k] += 1
                rejects.append(f"{clip.voice.label} {'clean' if snr is None else f'pink {snr:g} dB'}: {clip.text!r}")
    say(f"wake word {engine.words[0]} (threshold {engine.cutoffs[0]:g}): {len(rejects)} false rejects of "
        f"{2 * len(positives)}")
    for label, (clean, noisy) in per_voice.items():
        say(f"  {label}: {clean} of {len(PHRASES)} missed clean, {noisy} of {len(PHRASES)} in pink 10 dB")
    for r in rejects:
        say(f"  missed: {r}")
    negatives = render(cfg, limit=sentences)
    near = _wake_clips(cfg, voices, NEAR_MISSES)
    rng = np.random.default_rng(14)
    streams = [np.concatenate([c.audio for c in negatives]),
               np.concatenate([mix(c, "pink", 10.0, negatives) for c in negatives]),
               np.concatenate([mix(c, "babble", 5.0, negatives) for c in negatives]),
               np.concatenate([c.audio for c in near]), np.concatenate([mix(c, "pink", 10.0, near) for c in near]),
               0.05 * pink(int(RATE * noise_s), rng), 0.02 * white(int(RATE * noise_s), rng)]
    accepts, neg_s = 0, 0.0
    for audio in streams:
        found, used = _detections(engine, audio.astype(np.float32))
        accepts, neg_s = accepts + found, neg_s + audio.size / RATE
        cpu, audio_s = cpu + used, audio_s + audio.size / RATE
    per_hour = accepts / (neg_s / 3600)
    say(f"false accepts: {accepts} in {neg_s / 60:.1f} min of non-wake speech and noise = {per_hour:.1f} per hour")
    say(f"CPU: {1000 * cpu / audio_s:.2f} ms per device-second ({audio_s / 60:.0f} min of audio)")
    return {"wake_word": engine.words[0], "threshold": engine.cutoffs[0], "utterances": 2 * len(positives),
            "false_rejects": len(rejects), "false_rejects_per_voice": per_voice,
            "false_accepts": accepts, "non_wake_minutes": round(neg_s / 60, 1),
            "false_accepts_per_hour": round(per_hour, 2), "cpu_ms_per_device_s": round(1000 * cpu / audio_s, 3)}


class _Storyteller(BrainSession):
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def reply(self, utterance: str, ctx: BrainContext):
        self.asked.append(utterance)
        yield Sentence(REPLY if utterance == "story" else "It is noon.")


async def _echo_round(cfg: GatewayConfig, runner, boxes: int, round_no: int, voice: np.ndarray | None) -> list[dict]:
    from gateway.voice.conversation import Conversation  # the voice pipeline, as gateway run builds it

    async def one(k: int) -> dict:
        rng = np.random.default_rng([round_no, k])
        delay, gain = int(rng.integers(50, 301)), float(rng.uniform(0.2, 0.9))
        sent: list = []

        async def keep(m) -> None:
            sent.append(m)

        box = EchoBox(keep, delay, gain, seed=int(rng.integers(1 << 30)))
        brain = _Storyteller()
        conv = Conversation(f"echo-{k}", "bench", cfg, runner, brain, box.send, AudioFormat(sample_rate=RATE),
                            AudioFormat(sample_rate=RATE), TurnEvents([to_device(box.send)]))
        voice_at = 0
        try:
            await stream(conv.on_audio, box, 0.5)
            await conv.on_text("story")
            if voice is None:
                await stream(conv.on_audio, box, 15.0, done=lambda: box.replies_ended > 0 and box.mic > RATE)
            else:
                while box.start is None:  # the reply's first audio, then the voice 0.6-1.6 s into it
                    await stream(conv.on_audio, box, 0.02)
                voice_at = box.start + int(rng.uniform(0.6, 1.6) * RATE)
                await stream(conv.on_audio, box, 4.0, voice, voice_at, done=lambda: box.aborted_at is not None)
        finally:
            await conv.close()
        onset = voice_at + int(np.flatnonzero(np.abs(voice) > 0.02)[0]) if voice is not None else 0
        return {"delay_ms": delay, "gain": round(gain, 2), "aborted_at": box.aborted_at, "onset": onset,
                "turns": len(brain.asked) - 1}

    return list(await asyncio.gather(*(one(k) for k in range(boxes))))


async def bench_echo(cfg: GatewayConfig, runner, replies: int, boxes: int, say) -> dict[str, Any]:
    results: list[dict] = []
    for r in range((replies + boxes - 1) // boxes):
        results += await _echo_round(cfg, runner, min(boxes, replies - len(results)), r, None)
    self_interruptions = sum(x["aborted_at"] is not None or x["turns"] > 0 for x in results)
    say(f"echo: {self_interruptions} self-interruptions in {len(results)} echoed replies "
        f"(delay 50-300 ms, gain 0.2-0.9, {boxes} boxes at once)")
    for x in results:
        if x["aborted_at"] is not None or x["turns"] > 0:
            say(f"  interrupted itself: delay {x['delay_ms']} ms, gain {x['gain']}, at mic sample {x['aborted_at']}, "
                f"{x['turns']} turn(s) of its echo")
    chunks = list(runner.tts.synthesize("What time is it?"))
    voice = resample(np.concatenate([c.pcm for c in chunks]).astype(np.float32) / 32768, chunks[0].sample_rate, RATE)
    over: list[dict] = []
    for r in range((replies + boxes - 1) // boxes):
        over += await _echo_round(cfg, runner, min(boxes, replies - len(over)), 100 + r, voice * 0.8)
    latencies = [(x["aborted_at"] - x["onset"]) * 1000 / RATE for x in over if x["aborted_at"] is not None]
    missed = len(over) - len(latencies)
    p50, p95 = (float(np.percentile(latencies, q)) for q in (50, 95)) if latencies else (float("nan"),) * 2
    say(f"barge-in over the echo: {len(latencies)} of {len(over)} stopped the reply, latency from the voice's "
        f"onset p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(latencies, default=float('nan')):.0f} ms")
    return {"echoed_replies": len(results), "self_interruptions": self_interruptions,
            "barge_ins": len(over), "missed": missed, "latency_p50_ms": round(p50, 1), "latency_p95_ms": round(p95, 1)}


def missed_targets(echo: dict[str, Any]) -> list[str]:
    """The echo figures that miss the issue's targets: no self-interruption, every voice over the echo
    stops the reply, p95 of that within 300 ms of the voice's onset."""
    missed = []
    if echo["self_interruptions"]:
        missed.append(f"{echo['self_interruptions']} self-interruptions (target 0)")
    if echo["missed"]:
        missed.append(f"{echo['missed']} of {echo['barge_ins']} voices over the echo did not stop the reply")
    if not echo["latency_p95_ms"] <= 300:  # NaN (nothing stopped) misses it too
        missed.append(f"barge-in latency p95 {echo['latency_p95_ms']} ms (target <= 300)")
    return missed


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    say = (lambda _: None) if args.json else (lambda m: print(m, flush=True))
    say(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    out: dict[str, Any] = {}
    if not args.echo_only:
        out["wake"] = bench_wake_word(cfg, say, args.voices, args.sentences, args.noise_s)
    if not args.wake_only:
        from gateway.app import load_runner

        runner = load_runner(cfg.model_copy(update={"listen": cfg.listen.model_copy(update={"mode": "always"})}),
                             lambda _: None)
        try:
            out["echo"] = asyncio.run(bench_echo(cfg, runner, args.replies, args.boxes, say))
        finally:
            runner.close()
    out["missed_targets"] = missed_targets(out["echo"]) if "echo" in out else []
    for missed in out["missed_targets"]:
        say(f"target missed: {missed}")
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    say(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        print(json.dumps(out))
    return 1 if out["missed_targets"] else 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    b = sub.add_parser("bench-wake", parents=[common], help="wake word false rejects / false accepts per hour / "
                       "CPU, and echo-proof barge-in: self-interruptions and barge-in latency (exit 1 when an "
                       "echo target is missed)",
                       description="Wake word: false rejects over generated wake-word utterances, false accepts "
                       "per hour over other speech and noise, CPU per device-second. Echo: boxes that hear their own "
                       "replies: self-interruptions and barge-in latency. Exit code 1 when an echo target is missed.")
    b.add_argument("--replies", type=int, default=100, help="echoed replies (and barge-ins) to play (default 100)")
    b.add_argument("--boxes", type=int, default=10, help="echo boxes at once (default 10)")
    b.add_argument("--voices", type=int, default=None, help="wake-word utterances of the first N of the 10 voices "
                   "(5 phrases each, clean and in noise; default all: 100 utterances)")
    b.add_argument("--sentences", type=int, default=None, help="non-wake sentences (default all 40)")
    b.add_argument("--noise-s", type=float, default=300.0, help="seconds each of pink and white noise (default 300)")
    b.add_argument("--wake-only", action="store_true", help="only the wake-word part")
    b.add_argument("--echo-only", action="store_true", help="only the echo part")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=run)


__all__ = ["add_parser", "run"]
