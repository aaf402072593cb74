"""The TTS's recent texts and their audio (`tts.cache_seconds`), so a reply the gateway says often
("Sorry, I did not catch that.", a greeting, a reading read back) costs no synthesis the second
time and its first audio is ready at once, without waiting for a TTS worker.

Keyed by the exact text the speaker asks for (a sentence, or a piece of one); one voice per
gateway, so the text is the whole key. Bounded by the seconds of audio it holds, least recently
used out first. The chunks handed out are shared: their arrays are made read-only, so a caller
that wrote into one would fail loudly instead of changing what the next caller hears.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from gateway.engines.base import SynthChunk


def _seconds(chunks: list[SynthChunk]) -> float:
    return sum(c.pcm.size / c.sample_rate for c in chunks)


class TtsCache:
    def __init__(self, seconds: float) -> None:
        self.limit_s = seconds
        self._chunks: OrderedDict[str, tuple[list[SynthChunk], float]] = OrderedDict()
        self._held_s = 0.0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, text: str) -> list[SynthChunk] | None:
        with self._lock:
            entry = self._chunks.get(text)
            if entry is None:
                self.misses += 1
                return None
            self._chunks.move_to_end(text)
            self.hits += 1
            return list(entry[0])

    def put(self, text: str, chunks: list[SynthChunk]) -> None:
        seconds = _seconds(chunks)
        if not chunks or seconds > self.limit_s:
            return
        for c in chunks:
            c.pcm.flags.writeable = False
        with self._lock:
            if (old := self._chunks.pop(text, None)) is not None:
                self._held_s -= old[1]
            self._chunks[text] = (list(chunks), seconds)
            self._held_s += seconds
            while self._held_s > self.limit_s:
                _, (_, dropped_s) = self._chunks.popitem(last=False)
                self._held_s -= dropped_s

    @property
    def held_s(self) -> float:
        return self._held_s
