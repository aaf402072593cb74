"""Speak the corpus: the gateway's piper voice and Debian espeak-ng voices, as 16 kHz clips.

Deterministic: espeak-ng's synthesis is (same text, voice and rate -> same samples); piper's
VITS model draws random noise in onnxruntime (its RandomNormalLike nodes), so each run spoke the
sentences a little differently and the WER in noise moved by several points from run to run (10 dB:
0.33 and 0.38 for the same Moonshine). `render` seeds onnxruntime (`onnxruntime.set_seed`, read by
each random node when its session is made) before it loads the voices, and loads them in corpus
order, so every run and every process speaks the same set. Each clip is padded with 0.6 s of silence before and 1.0 s after the
speech, as a voice box hears a question (the endpointing needs the trailing silence).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import wave
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnxruntime

from gateway.audio.pcm import int16_to_float, resample
from gateway.asreval.corpus import Voice, assignment
from gateway.config import GatewayConfig
from gateway.engines.store import ModelStore
from gateway.errors import GatewayError

RATE = 16000
SEED = 18  # onnxruntime's random seed for piper's noise
LEAD_S, TAIL_S = 0.6, 1.0
_ESPEAK_WPM = 175  # espeak-ng's default rate = speed 1.0


@dataclass(frozen=True)
class Clip:
    index: int
    text: str
    voice: Voice
    audio: np.ndarray  # 16 kHz float32, speech with LEAD_S / TAIL_S of silence around it
    speech: slice  # where the speech is in `audio`


def _espeak(text: str, voice: Voice) -> tuple[np.ndarray, int]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise GatewayError("espeak-ng is not installed (Debian: apt-get install espeak-ng); "
                           "or use --voices piper")
    wav = subprocess.run(
        [exe, "-v", voice.name, "-s", str(round(_ESPEAK_WPM * voice.speed)), "-p", str(voice.pitch),
         "--stdout", text], check=True, capture_output=True, timeout=60).stdout
    with wave.open(io.BytesIO(wav)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        return int16_to_float(pcm), w.getframerate()


def _piper_speaker(cfg: GatewayConfig, store: ModelStore) -> Callable[[str, Voice], tuple[np.ndarray, int]]:
    from gateway.engines.piper_tts import PiperTts

    loaded: dict[tuple[str, float], PiperTts] = {}

    def speak(text: str, voice: Voice) -> tuple[np.ndarray, int]:
        key = (voice.name, voice.speed)
        if key not in loaded:
            files = store.files_of(voice.name)
            loaded[key] = PiperTts(files["model"], files["config"], 1.0 / voice.speed, cfg.tts.num_threads)
        chunks = list(loaded[key].synthesize(text))
        return np.concatenate([int16_to_float(c.pcm) for c in chunks]), chunks[0].sample_rate

    return speak


def _trim(audio: np.ndarray, floor: float = 1e-3) -> np.ndarray:
    """Cut the synthesizer's own leading/trailing silence, so LEAD_S/TAIL_S are exact."""
    loud = np.flatnonzero(np.abs(audio) > floor)
    return audio[loud[0] : loud[-1] + 1] if loud.size else audio


def render(cfg: GatewayConfig, limit: int | None = None, engines: tuple[str, ...] = ("piper", "espeak-ng"),
           progress: Callable[[str], None] = lambda _: None) -> list[Clip]:
    """The evaluation clips, in corpus order (first `limit` sentences; only the given voice engines)."""
    onnxruntime.set_seed(SEED)  # before the piper sessions exist: their random nodes read it
    piper = _piper_speaker(cfg, ModelStore(cfg))
    clips: list[Clip] = []
    for index, (text, voice) in enumerate(assignment()):
        if voice.engine not in engines:
            continue
        if limit is not None and len(clips) >= limit:
            break
        audio, rate = (piper if voice.engine == "piper" else _espeak)(text, voice)
        speech = _trim(resample(audio, rate, RATE).astype(np.float32))
        lead, tail = int(LEAD_S * RATE), int(TAIL_S * RATE)
        padded = np.concatenate([np.zeros(lead, np.float32), speech, np.zeros(tail, np.float32)])
        clips.append(Clip(index, text, voice, padded, slice(lead, lead + speech.size)))
    progress(f"evaluation set: {len(clips)} clips, {sum(c.audio.size for c in clips) / RATE:.0f} s of audio, "
             f"{len({c.voice for c in clips})} voices")
    return clips
