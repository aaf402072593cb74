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
with the room's noise level (`explains`). A room's reverberation lowers the echo's peak too and
leaves more unexplained: `listen.echo_similarity` sets where echo ends.
"""

from __future__ import annotations

import numpy as np

from gateway.audio.pcm import StreamResampler, int16_to_float

RATE = 16000
MAX_GAP_S = 1.0
NOISE_MARGIN = 4.0  # 6 dB above the room's noise is more than noise


class EchoReference:
    def __init__(self, out_rate: int, keep_s: float = 3.0) -> None:
        self._resampler = StreamResampler(out_rate, RATE)
        self._keep = int(keep_s * RATE)
        self._audio = np.zeros(0, np.float32)
        self._play_end: float | None = None  # clock time at which the box has played all that was sent

    def played(self, pcm: bytes, now: float) -> None:
        """Reply audio sent to the device (16-bit mono PCM at its output rate) at clock time `now` (s).

        Audio sent after the box must have played all it had (the TTS was late) leaves a gap in what
        the box plays: that much silence (at most MAX_GAP_S) goes into the reference before it."""
        audio = self._resampler.push(int16_to_float(np.frombuffer(pcm, "<i2")))
        if self._play_end is not None and now > self._play_end:
            gap = np.zeros(int(min(now - self._play_end, MAX_GAP_S) * RATE), np.float32)
            audio = np.concatenate([gap, audio])
        self._play_end = max(now, self._play_end or now) + audio.size / RATE
        self._audio = np.concatenate([self._audio, audio])[-self._keep:]

    @property
    def empty(self) -> bool:
        return not self._audio.size

    def similarity(self, mic: np.ndarray) -> float:
        """Peak normalized correlation (0..1) of `mic` (16 kHz float32) with the reference."""
        return similarity(mic, self._audio.copy())

    def explains(self, mic: np.ndarray, threshold: float, noise_power: float | None) -> bool:
        """Is `mic` the echo? Yes when it correlates with the reference at `threshold` or more, or
        when what the reference leaves unexplained (mic power x (1 - similarity^2)) is no more than
        the room's noise (`noise_power`, per sample: the microphone between utterances) x NOISE_MARGIN:
        a quiet echo in noise correlates less, but a person's voice adds power the noise does not."""
        sim = self.similarity(mic)
        if sim >= threshold:
            return True
        if noise_power is None or not mic.size:
            return False
        residual = float(np.mean(mic.astype(np.float64) ** 2)) * (1.0 - sim * sim)
        return residual <= noise_power * NOISE_MARGIN


def similarity(mic: np.ndarray, ref: np.ndarray) -> float:
    n = mic.size
    if n == 0 or not ref.size:
        return 0.0
    # The window may hold the echo's onset (the reference starts inside it) or the echo's end (the
    # box played all that was sent, then silence): both ends padded with silence.
    pad = np.zeros(n, np.float32)
    ref = np.concatenate([pad, ref, pad])
    mic = mic - mic.mean()
    mic_norm = float(np.sqrt(np.dot(mic, mic)))
    if mic_norm < 1e-6:
        return 0.0
    size = 1 << int(np.ceil(np.log2(ref.size + n)))
    corr = np.fft.irfft(np.fft.rfft(ref, size) * np.conj(np.fft.rfft(mic, size)), size)[: ref.size - n + 1]
    energy = np.concatenate([[0.0], np.cumsum(ref.astype(np.float64) ** 2)])
    window = np.sqrt(np.maximum(energy[n:] - energy[:-n], 0.0))  # |ref[k:k+n]| for every lag k
    sims = corr / np.maximum(window * mic_norm, 1e-9)
    sims[window < 1e-3 * np.sqrt(n)] = 0.0  # silent reference there: nothing to echo
    return float(np.clip(sims.max(), 0.0, 1.0))
