"""Where an engine's errors are (`gateway bench-asr --detail`): WER per speaker kind (the piper
voice, the espeak-ng voices) and per noise kind at each SNR, and every misheard utterance with
what was said, what was heard and what the VAD handed to the ASR.
"""

from __future__ import annotations

from collections.abc import Callable

from gateway.asreval.measure import SNRS, Score
from gateway.asreval.noise import KINDS
from gateway.asreval.render import Clip
from gateway.asreval.wer import edit_distance, normalise


def _wer(pairs: list[tuple[str, str]]) -> float:
    words = sum(len(normalise(r)) for r, _ in pairs)
    return sum(edit_distance(normalise(r), normalise(h)) for r, h in pairs) / words if words else 0.0


def breakdown(clips: list[Clip], scores: dict[tuple[float | None, str], Score], path: str) -> dict[str, dict[str, float]]:
    """group -> condition -> WER, groups `voice:piper`, `voice:espeak-ng`, `noise:white`, ...;
    conditions `clean`, `20dB`, ... (noise groups: only the noisy conditions)."""
    out: dict[str, dict[str, float]] = {}
    for snr in SNRS:
        score = scores.get((snr, path))
        if score is None:
            continue
        cond = "clean" if snr is None else f"{snr:g}dB"
        rows = list(zip(clips, score.refs, score.hyps, strict=True))
        for engine in sorted({c.voice.engine for c in clips}):
            out.setdefault(f"voice:{engine}", {})[cond] = _wer([(r, h) for c, r, h in rows if c.voice.engine == engine])
        if snr is not None:
            for k, kind in enumerate(KINDS):
                out.setdefault(f"noise:{kind}", {})[cond] = _wer([(r, h) for c, r, h in rows
                                                                  if c.index % len(KINDS) == k])
    return out


def misheard(clips: list[Clip], scores: dict[tuple[float | None, str], Score], path: str,
             say: Callable[[str], None]) -> None:
    """One line per utterance with at least one word wrong: condition, voice, errors, said | heard."""
    for snr in SNRS:
        score = scores.get((snr, path))
        if score is None:
            continue
        for clip, ref, hyp in zip(clips, score.refs, score.hyps, strict=True):
            errors = edit_distance(normalise(ref), normalise(hyp))
            if errors:
                noise = "clean" if snr is None else f"{snr:g} dB {KINDS[clip.index % len(KINDS)]}"
                say(f"    {noise:15} {clip.voice.label:32} {errors}/{len(normalise(ref))}  {ref} | {hyp or '(nothing)'}")
