"""Lip-sync visemes from TTS phoneme timings, through a documented IPA -> OVR viseme table.

The 15 OVR visemes and their mouth opening (seed table, Live2D `ParamMouthOpenY`):

| viseme | IPA phonemes (espeak-ng / piper)        | open |
|--------|------------------------------------------|------|
| sil    | pause: `^` `$` `_` , . ! ? ; : and -     | 0.00 |
| PP     | p b m                                    | 0.25 |
| FF     | f v                                      | 0.25 |
| TH     | θ ð                                      | 0.45 |
| DD     | t d ɾ                                    | 0.45 |
| kk     | k g ɡ ŋ h x ʔ                            | 0.65 |
| CH     | ʃ ʒ ç ʧ ʤ tɕ-family (ɕ ʑ)                 | 0.45 |
| SS     | s z                                      | 0.45 |
| nn     | n l ɫ ɲ ɬ                                | 0.25 |
| RR     | ɹ r ɻ ɚ ɝ ʀ ʁ                            | 0.45 |
| aa     | a ɑ æ ʌ ɐ ɒ ä                            | 0.85 |
| E      | e ɛ ə ɜ ɘ ᵻ                              | 0.65 |
| ih     | i ɪ j y ɨ ʏ                              | 0.45 |
| oh     | o ɔ ɵ ø œ                                | 0.65 |
| ou     | u ʊ w ɯ ɥ                                | 0.85 |

Stress marks (ˈ ˌ) give their time to the next phoneme; length marks, word spaces, tone digits,
diacritics and any symbol not in the table give their time to the previous phoneme. Runs of the
same viseme are merged, and runs shorter than `MIN_RUN_MS` (30 ms, as Fay does) are merged into
the previous one (the first into the next), so the track covers the audio exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from firmware_protocol import Viseme

MIN_RUN_MS = 30

OPEN: dict[Viseme, float] = {
    Viseme.SIL: 0.0,
    Viseme.PP: 0.25, Viseme.FF: 0.25, Viseme.NN: 0.25,
    Viseme.TH: 0.45, Viseme.DD: 0.45, Viseme.CH: 0.45, Viseme.SS: 0.45, Viseme.IH: 0.45,
    Viseme.RR: 0.45,
    Viseme.KK: 0.65, Viseme.E: 0.65, Viseme.OH: 0.65,
    Viseme.AA: 0.85, Viseme.OU: 0.85,
}  # fmt: skip

_TABLE: dict[Viseme, str] = {
    Viseme.SIL: "^$_,.!?;:-",
    Viseme.PP: "pbm",
    Viseme.FF: "fv",
    Viseme.TH: "θð",
    Viseme.DD: "tdɾ",
    Viseme.KK: "kgɡŋhxʔ",
    Viseme.CH: "ʃʒçʧʤɕʑ",
    Viseme.SS: "sz",
    Viseme.NN: "nlɫɲɬ",
    Viseme.RR: "ɹrɻɚɝʀʁ",
    Viseme.AA: "aɑæʌɐɒä",
    Viseme.E: "eɛəɜɘᵻ",
    Viseme.IH: "iɪjyɨʏ",
    Viseme.OH: "oɔɵøœ",
    Viseme.OU: "uʊwɯɥ",
}
IPA_TO_VISEME: dict[str, Viseme] = {ch: v for v, chars in _TABLE.items() for ch in chars}
STRESS = "ˈˌ"


@dataclass(frozen=True)
class VisemeRun:
    viseme: Viseme
    start_ms: int
    duration_ms: int

    @property
    def open(self) -> float:
        return OPEN[self.viseme]

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.duration_ms


def phoneme_visemes(phonemes: tuple[tuple[str, int], ...] | list[tuple[str, int]]) -> list[tuple[Viseme, int]]:
    """(viseme, samples) per phoneme, with stress/length/unknown symbols folded in."""
    out: list[tuple[Viseme, int]] = []
    carry = 0  # samples of stress marks waiting for the next phoneme
    for symbol, samples in phonemes:
        viseme = IPA_TO_VISEME.get(symbol)
        if symbol in STRESS:
            carry += samples
        elif viseme is not None:
            out.append((viseme, samples + carry))
            carry = 0
        elif out:
            prev, n = out[-1]
            out[-1] = (prev, n + samples)
        else:
            carry += samples
    if carry:
        if out:
            prev, n = out[-1]
            out[-1] = (prev, n + carry)
        else:
            out.append((Viseme.SIL, carry))
    return out


def runs_from_phonemes(phonemes: tuple[tuple[str, int], ...] | list[tuple[str, int]], sample_rate: int) -> list[VisemeRun]:
    """The viseme track of one sentence; it lasts exactly as long as the phonemes' samples."""
    runs: list[list[int]] = []  # [viseme, start_sample, end_sample]
    pos = 0
    for viseme, samples in phoneme_visemes(phonemes):
        if runs and runs[-1][0] == viseme:
            runs[-1][2] = pos + samples
        else:
            runs.append([viseme, pos, pos + samples])
        pos += samples
    return _to_ms([(Viseme(v), s, e) for v, s, e in runs], sample_rate)


def _to_ms(runs: list[tuple[Viseme, int, int]], rate: int) -> list[VisemeRun]:
    ms = [(v, round(s * 1000 / rate), round(e * 1000 / rate)) for v, s, e in runs]
    merged: list[list] = []
    for v, start, end in ms:
        if merged and (end - start < MIN_RUN_MS or merged[-1][0] == v):
            merged[-1][2] = end  # too short (or same viseme): the previous run lasts longer
        elif merged and merged[-1][2] - merged[-1][1] < MIN_RUN_MS:
            merged[-1][0], merged[-1][2] = v, end  # a short first run takes the next one's viseme
        else:
            merged.append([v, start, end])
    return [VisemeRun(Viseme(v), s, e - s) for v, s, e in merged if e > s]


def runs_from_levels(levels: list[float], frame_ms: int) -> list[VisemeRun]:
    """A coarse viseme track from mouth-open levels (0..1 per frame), for TTS without timings."""
    buckets = ((0.12, Viseme.SIL), (0.35, Viseme.NN), (0.55, Viseme.IH), (0.75, Viseme.E), (2.0, Viseme.AA))
    runs = []
    for i, level in enumerate(levels):
        viseme = next(v for limit, v in buckets if level < limit)
        runs.append((viseme, i * frame_ms, (i + 1) * frame_ms))
    return _to_ms([(v, s, e) for v, s, e in runs], 1000)
