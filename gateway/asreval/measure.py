"""Run one ASR engine over the evaluation set: WER and speed per condition, whole files,
through the gateway's VAD and endpointing, and cut to the question.

Conditions: clean, then 20 / 10 / 5 dB SNR; at each SNR the noise kind goes round by clip
(white, pink, babble, white, ...), so every SNR has all three kinds in equal parts.

`whole`: the engine gets the whole clip (0.6 s silence, the question, 1.0 s silence), as a
recording. `vad`: the clip is streamed in `audio.chunk_ms` chunks through a Listener (the
session's Silero VAD clone, Endpointer and pre-roll from the `vad` section), exactly as a voice
session hears a device; every utterance it ends is transcribed, and the clip's transcript is
their words in order. A clip "survives" when the VAD hands at least one utterance to the ASR;
it is "endpointed" when every utterance ended by the endpointer's trailing silence, not only
because the clip ended (a live session would still be waiting: in continuous babble the VAD
hears the background talkers as speech and the endpoint never comes). `speech`: the noisy clip
cut where the question is (the set knows), with `vad.preroll_ms` before and
`vad.trailing_silence_ms` after it, what a perfect endpointer would hand the ASR: the ASR's
own errors, without the VAD's. RTF is decode time over the decoded audio's length (the
utterances for `vad`); `utterance_ratio` is that audio over the clips' speech. With
`asr.second_opinion` each score also counts the decodes Whisper ran too (`second_opinions`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from gateway.asreval.noise import KINDS, mix
from gateway.asreval.render import RATE, Clip
from gateway.asreval.wer import wer
from gateway.config import GatewayConfig
from gateway.engines.base import AsrEngine, CountsSecondOpinions, VadEngine
from gateway.engines.runner import EngineRunner
from gateway.voice.endpointing import Endpointer, Event
from gateway.voice.listener import Listener

SNRS: tuple[float | None, ...] = (None, 20.0, 10.0, 5.0)  # None = clean


@dataclass
class Score:
    """One engine x condition x path: what was heard and how fast."""

    refs: list[str] = field(default_factory=list)
    hyps: list[str] = field(default_factory=list)
    decode_s: float = 0.0
    audio_s: float = 0.0
    decodes: int = 0
    survived: int = 0  # vad path: clips that reached the ASR
    endpointed: int = 0  # vad path: clips whose utterances all ended by trailing silence
    speech_s: float = 0.0  # seconds of question in the clips (utterance_ratio's denominator)
    second_opinions: int | None = None  # asr.second_opinion: decodes the second engine ran too (else None)

    @property
    def wer(self) -> float:
        return wer(self.refs, self.hyps)

    @property
    def rtf(self) -> float:
        return self.decode_s / self.audio_s if self.audio_s else float("nan")

    @property
    def ms_per_decode(self) -> float:
        return 1000 * self.decode_s / self.decodes if self.decodes else float("nan")

    @property
    def utterance_ratio(self) -> float:
        """Decoded audio over the questions' audio (~1.3 when the endpoints are right)."""
        return self.audio_s / self.speech_s if self.speech_s else float("nan")

    @property
    def empty(self) -> int:
        return sum(1 for h in self.hyps if not h.strip())


def condition_audio(clip: Clip, snr: float | None, clips: list[Clip]) -> np.ndarray:
    if snr is None:
        return clip.audio
    return mix(clip, KINDS[clip.index % len(KINDS)], snr, clips)


async def _timed(runner: EngineRunner, audio: np.ndarray, score: Score, asr: AsrEngine) -> str:
    seconds_before = asr.second_opinions if isinstance(asr, CountsSecondOpinions) else None
    started = time.perf_counter()
    text = await runner.transcribe(audio)  # on the ASR thread, as a session decodes
    score.decode_s += time.perf_counter() - started
    score.audio_s += audio.size / RATE
    score.decodes += 1
    if isinstance(asr, CountsSecondOpinions) and seconds_before is not None:
        score.second_opinions = (score.second_opinions or 0) + asr.second_opinions - seconds_before
    return text


@dataclass(frozen=True)
class Heard:
    utterances: list[np.ndarray]
    endpointed: bool  # no utterance was still open when the audio ended


def speech_span(cfg: GatewayConfig, clip: Clip, audio: np.ndarray) -> np.ndarray:
    """`audio` (the clip, maybe noisy) from vad.preroll_ms before the question to
    vad.trailing_silence_ms after it: what a perfect endpointer hands the ASR."""
    before = RATE * cfg.vad.preroll_ms // 1000
    after = RATE * cfg.vad.trailing_silence_ms // 1000
    return audio[max(0, clip.speech.start - before) : clip.speech.stop + after]


async def through_vad(cfg: GatewayConfig, runner: EngineRunner, vad: VadEngine, audio: np.ndarray) -> Heard:
    """The utterances a voice session would hand to the ASR for this audio (16 kHz)."""
    v = cfg.vad
    listener = Listener(runner, vad.clone(),
                        Endpointer(v.min_speech_ms, v.trailing_silence_ms, v.speculative_after_ms,
                                   v.max_utterance_s * 1000, v.relative_drop_db), RATE, preroll_ms=v.preroll_ms)
    step = RATE * cfg.audio.chunk_ms // 1000
    utterances: list[np.ndarray] = []
    for start in range(0, audio.size, step):
        last = start + step >= audio.size
        for heard in await listener.feed(audio[start : start + step], last=last):
            if heard.event is Event.ENDPOINT:
                utterances.append(listener.utterance_audio())
                listener.end_utterance()
    pending = listener.utterance_audio()
    cut = listener.force_endpoint() and pending.size > 0  # the stream ended mid-utterance
    if cut:
        utterances.append(pending)
    return Heard(utterances, not cut)


async def evaluate(cfg: GatewayConfig, asr: AsrEngine, vad: VadEngine, clips: list[Clip],
                   paths: tuple[str, ...] = ("whole", "vad")) -> dict[tuple[float | None, str], Score]:
    """(snr, path) -> Score for this engine over every clip."""
    runner = EngineRunner(vad, asr, None)  # type: ignore[arg-type]  # no TTS here
    scores: dict[tuple[float | None, str], Score] = {}
    try:
        for snr in SNRS:
            for clip in clips:
                audio = condition_audio(clip, snr, clips)
                if "whole" in paths:
                    s = scores.setdefault((snr, "whole"), Score())
                    s.speech_s += (clip.speech.stop - clip.speech.start) / RATE
                    s.refs.append(clip.text)
                    s.hyps.append(await _timed(runner, audio, s, asr))
                if "vad" in paths:
                    s = scores.setdefault((snr, "vad"), Score())
                    heard = await through_vad(cfg, runner, vad, audio)
                    s.survived += bool(heard.utterances)
                    s.endpointed += bool(heard.utterances) and heard.endpointed
                    s.speech_s += (clip.speech.stop - clip.speech.start) / RATE
                    s.refs.append(clip.text)
                    s.hyps.append(" ".join([await _timed(runner, u, s, asr) for u in heard.utterances]))
                if "speech" in paths:
                    s = scores.setdefault((snr, "speech"), Score())
                    s.speech_s += (clip.speech.stop - clip.speech.start) / RATE
                    s.refs.append(clip.text)
                    s.hyps.append(await _timed(runner, speech_span(cfg, clip, audio), s, asr))
    finally:
        runner.close()
    return scores
