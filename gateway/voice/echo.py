"""Is what the microphone hears the box's own reply coming back? (echo-proof barge-in)

The gateway knows what it is playing: `EchoReference` keeps the last 3 s of the reply audio
sent to one device, at 16 kHz. `similarity(mic)` is the highest normalized cross-correlation of a
short microphone window with the reference, over every delay the reference covers (so no clock
alignment is needed: the box's buffering, the pacing's lead and the acoustic path are all just a
delay). The box's own echo, attenuated and noisy, correlates near 1; a person talking over it adds
energy the reference does not explain, so the peak falls (equal loudness: ~0.7). Computed with FFTs:
5-9 ms for a 250 ms window against 3 s of reference (2-core VM at load average 7); checked
every 90 ms only while a reply plays and the VAD hears speech (run it off the event loop all the same).
A quiet echo in room noise correlates less: then what the reference leaves unexplained is compared
with the room's noise level (`verdict`). A room's reverberation lowers the echo's peak too and
leaves more unexplained: `listen.echo_similarity` sets where echo ends.

The reference is laid out on the box's own clock, which the gateway sees as its microphone stream
(seconds of microphone audio received): audio sent after the box must have played all it had (a
late TTS piece) gets that much silence before it. It is kept, and compared, by when the box plays it:
the 3 s before the box's clock now, not the last 3 s sent (the audio sent ahead of playback, a
prebuffer and whatever the gateway's loop sent late in a burst, is not yet played and cannot be
echoed; counted in, it had pushed what was playing out of the reference). Where that estimate is off (a box's jitter buffer,
a network burst) a window across the cut holds two pieces at two delays and correlates less with
either; so a window that is not echo as a whole is compared again as up to three parts cut at
multiples of 1/PIECES of it, each at its own delay, their unexplained power summed
(`cut_similarity`; measured on the windows that had interrupted a reply: 0.54-0.89 as a whole,
0.89-0.998 in parts). A
voice over the echo adds power in both parts: a person as loud as the echo stays near 0.7 either way. Between `UNSURE_FROM` and the threshold the verdict is
UNSURE (a quiet voice, or an echo the alignment still misses): the caller decides by the words
(gateway/voice/echo_guard.py).
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np

from gateway.audio.pcm import StreamResampler, int16_to_float

RATE = 16000
MAX_GAP_S = 1.0
AHEAD_S = 0.25  # compared beyond the box's clock now: what the estimate of its playback may be off by
NOISE_MARGIN = 4.0  # 6 dB above the room's noise is more than noise
PIECES = 4  # a window not explained as a whole is compared again in this many parts (62.5 ms of 250)
UNSURE_FROM = 0.8  # below the threshold down to here: UNSURE (a voice ~2.5 dB and more below the echo)


class Verdict(enum.Enum):
    ECHO = "echo"
    VOICE = "voice"
    UNSURE = "unsure"


@dataclass(frozen=True)
class EchoCheck:
    """A verdict and what it was made of (the log line of a barge-in over the echo says them)."""

    verdict: Verdict
    similarity: float  # the best of the whole window and its parts
    power: float  # the microphone window's power per sample
    noise: float | None  # the room's noise power it was compared with (None: not known yet)

    def describe(self) -> str:
        noise = "room noise not known yet" if self.noise is None else (
            f"{10 * np.log10(max(self.power, 1e-12) / max(self.noise, 1e-12)):+.1f} dB over the room noise")
        return f"similarity {self.similarity:.2f}, {noise}"


class EchoReference:
    def __init__(self, out_rate: int, keep_s: float = 3.0) -> None:
        self._resampler = StreamResampler(out_rate, RATE)
        self._keep = int(keep_s * RATE)
        # the reply audio sent, as pieces (joined when compared): a chunk sent every ~40 ms adds its
        # own samples, not a copy of the whole 3 s reference. `verdict` runs on a thread while the
        # loop goes on sending: the lock guards the pieces (held for a copy of 3 s at most).
        self._pieces: deque[np.ndarray] = deque()
        self._size = 0
        self._lock = threading.Lock()
        self._play_end: float | None = None  # clock time at which the box has played all that was sent

    def played(self, pcm: bytes, now: float) -> None:
        """Reply audio sent to the device (16-bit mono PCM at its output rate) at box time `now` (s: the
        microphone audio received from it so far).

        Audio sent after the box must have played all it had (the TTS was late) leaves a gap in what
        the box plays: that much silence (at most MAX_GAP_S) goes into the reference before it."""
        audio = self._resampler.push(int16_to_float(np.frombuffer(pcm, "<i2")))
        start = now if self._play_end is None else max(now, self._play_end)  # when the box plays it
        if self._play_end is not None and now > self._play_end:
            gap = np.zeros(int(min(now - self._play_end, MAX_GAP_S) * RATE), np.float32)
            audio = np.concatenate([gap, audio])
            start -= gap.size / RATE
        self._play_end = start + audio.size / RATE  # (the gap is before `now`, not after it)
        if audio.size:
            keep = self._keep + int((self._play_end - now) * RATE)  # keep_s played before now, and the rest
            with self._lock:
                self._pieces.append(audio)
                self._size += audio.size
                while self._size - self._pieces[0].size >= keep:  # played more than keep_s before now
                    self._size -= self._pieces.popleft().size

    def stopped(self, now: float) -> None:
        """The reply was cut at box time `now` (an aborted stream): the box drops what it had not played,
        so does the reference, and the next reply plays from now."""
        if self._play_end is None or self._play_end <= now:
            return
        unplayed = int((self._play_end - now) * RATE)
        self._play_end = now
        with self._lock:
            while unplayed and self._pieces:
                last = self._pieces.pop()
                cut = min(unplayed, last.size)
                self._size -= cut
                unplayed -= cut
                if cut < last.size:
                    self._pieces.append(last[: last.size - cut])

    @property
    def empty(self) -> bool:
        return not self._size

    def _reference(self, now: float | None = None) -> np.ndarray:
        """A copy of the reply audio the box plays from keep_s before box time `now` to AHEAD_S after it
        (`now` None: the last keep_s sent)."""
        with self._lock:
            if not self._pieces:
                return np.zeros(0, np.float32)
            if len(self._pieces) > 1:
                self._pieces = deque([np.concatenate(self._pieces)])
            ref = self._pieces[0]
            if now is None or self._play_end is None:
                return ref[-self._keep:].copy()
            end = max(0, ref.size - max(0, int((self._play_end - now - AHEAD_S) * RATE)))  # AHEAD_S unplayed
            return ref[max(0, end - self._keep - int(AHEAD_S * RATE)) : end].copy()

    def similarity(self, mic: np.ndarray, now: float | None = None) -> float:
        """Peak normalized correlation (0..1) of `mic` (16 kHz float32, ending at box time `now`) with
        the reference."""
        return similarity(mic, self._reference(now))

    def verdict(self, mic: np.ndarray, threshold: float, noise_power: float | None,
                now: float | None = None) -> Verdict:
        """`check`'s verdict."""
        return self.check(mic, threshold, noise_power, now).verdict

    def check(self, mic: np.ndarray, threshold: float, noise_power: float | None,
              now: float | None = None) -> EchoCheck:
        """Is `mic` the echo? ECHO when it correlates with the reference at `threshold` or more (as a
        whole or in parts across cuts), or when what the reference leaves unexplained (mic power x
        (1 - similarity^2)) is no more than the room's noise (`noise_power`, per sample: the microphone
        between utterances) x NOISE_MARGIN: a quiet echo in noise correlates less, but a person's
        voice adds power the noise does not. UNSURE from UNSURE_FROM up to `threshold`, else VOICE.
        `now`: the box time at the end of `mic` (the seconds of microphone audio received; None:
        compared with the last keep_s sent)."""
        ref = self._reference(now)
        sim = similarity(mic, ref)
        if sim < threshold and mic.size >= PIECES * 160:
            sim = max(sim, cut_similarity(mic, ref))
        power = float(np.mean(mic.astype(np.float64) ** 2)) if mic.size else 0.0
        if sim >= threshold:
            return EchoCheck(Verdict.ECHO, sim, power, noise_power)
        if noise_power is not None and mic.size and power * (1.0 - sim * sim) <= noise_power * NOISE_MARGIN:
            return EchoCheck(Verdict.ECHO, sim, power, noise_power)
        return EchoCheck(Verdict.UNSURE if sim >= UNSURE_FROM else Verdict.VOICE, sim, power, noise_power)

    def explains(self, mic: np.ndarray, threshold: float, noise_power: float | None,
                 now: float | None = None) -> bool:
        """`verdict` is ECHO."""
        return self.verdict(mic, threshold, noise_power, now) is Verdict.ECHO


def similarity(mic: np.ndarray, ref: np.ndarray) -> float:
    """Peak normalized correlation (0..1) of `mic` with `ref` over every delay."""
    return float(_Reference(ref, mic.size).peaks(mic[None, :])[0]) if mic.size and ref.size else 0.0


def cut_similarity(mic: np.ndarray, ref: np.ndarray, pieces: int = PIECES, parts: int = 3) -> float:
    """`mic` as up to `parts` contiguous parts, each at its own best delay (cuts in what the box played
    at multiples of 1/`pieces` of the window: a gap the reference misplaced is two cuts), the best
    split: sqrt(1 - unexplained / total power)."""
    n = mic.size // pieces
    if n == 0 or not ref.size:
        return 0.0
    mic = mic[: n * pieces]
    total = float(np.sum(mic.astype(np.float64) ** 2))
    if total <= 0.0:
        return 0.0
    reference = _Reference(ref, mic.size)  # one FFT of the reference for every part
    unexplained = {}  # (first, end) piece index -> that part's power x (1 - its peak^2)
    for length in range(1, pieces + 1):
        spans = [(a, a + length) for a in range(pieces - length + 1)]
        rows = np.stack([mic[a * n : b * n] for a, b in spans])
        for span, row, sim in zip(spans, rows, reference.peaks(rows)):
            unexplained[span] = float(np.sum(row.astype(np.float64) ** 2)) * (1.0 - float(sim) ** 2)
    # best[k][j]: the least unexplained power of pieces [0, j) in k parts
    best = [[0.0] + [np.inf] * pieces]
    for _ in range(parts):
        prev = best[-1]
        best.append([0.0] + [min(prev[i] + unexplained[i, j] for i in range(j)) for j in range(1, pieces + 1)])
    least = min(row[pieces] for row in best[1:])
    return float(np.sqrt(max(0.0, 1.0 - least / total)))


class _Reference:
    """The reference padded with `longest` samples of silence at both ends (a window may hold the
    echo's onset, where the reference starts inside it, or its end, after which the box played
    silence), transformed once for windows of up to `longest` samples."""

    def __init__(self, ref: np.ndarray, longest: int) -> None:
        pad = np.zeros(longest, np.float32)
        self._ref = np.concatenate([pad, ref, pad])
        self._size = 1 << int(np.ceil(np.log2(self._ref.size + longest)))
        self._spectrum = np.fft.rfft(self._ref, self._size)
        self._energy = np.concatenate([[0.0], np.cumsum(self._ref.astype(np.float64) ** 2)])

    def peaks(self, mics: np.ndarray) -> np.ndarray:
        """Each row of `mics` (equal lengths n): its peak normalized correlation with the reference."""
        n = mics.shape[1]
        mics = mics - mics.mean(axis=1, keepdims=True)
        norms = np.sqrt(np.sum(mics.astype(np.float64) ** 2, axis=1))
        spectra = self._spectrum[None, :] * np.conj(np.fft.rfft(mics, self._size, axis=1))
        corr = np.fft.irfft(spectra, self._size, axis=1)[:, : self._ref.size - n + 1]
        window = np.sqrt(np.maximum(self._energy[n:] - self._energy[:-n], 0.0))  # |ref[k:k+n]| per lag k
        sims = corr / np.maximum(window[None, :] * norms[:, None], 1e-9)
        sims[:, window < 1e-3 * np.sqrt(n)] = 0.0  # silent reference there: nothing to echo
        peaks = np.clip(sims.max(axis=1), 0.0, 1.0)
        peaks[norms < 1e-6] = 0.0  # a silent part explains nothing (and has no power to explain)
        return peaks
