"""The `listen:` section: when a heard utterance is a turn (wake word, follow-up, always, ptt),
the stop words, and the echo check of barge-in. Modes are explained in docs/CONFIG.md."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gateway.config.base import _Section

ListenModeName = Literal["wake", "follow-up", "always", "ptt"]

DEFAULT_STOP_WORDS = ("stop", "stop it", "be quiet", "quiet", "shut up", "that's enough", "enough",
                      "cancel", "never mind", "停", "停止", "停下", "别说了", "闭嘴", "安静", "够了")


class ListenConfig(_Section):
    mode: ListenModeName = "always"
    wake_words: tuple[str, ...] = ("okay_nabu",)
    threshold: float | None = Field(None, gt=0, lt=1)  # None: each model's own cutoff (okay_nabu 0.85)
    wake_window_s: float = Field(5.0, ge=0.5, le=60)  # after a bare wake word: time to start the question
    follow_up_s: float = Field(6.0, ge=0, le=120)
    stop_words: tuple[str, ...] = DEFAULT_STOP_WORDS
    echo_check: bool = True  # barge-in only by speech that is not the reply's own echo
    echo_similarity: float = Field(0.9, gt=0, lt=1)  # correlation with the reply at and above which it is echo
    devices: dict[str, ListenModeName] = {}  # per-device mode: device id -> mode

    @field_validator("stop_words")
    @classmethod
    def _normalised(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(w.strip().lower() for w in words if w.strip())

    def mode_for(self, device_id: str, wakes_itself: bool) -> ListenModeName:
        """A device's mode: its entry in `devices`, else `always` when it announced its own wake word
        (Hello capability WAKE_WORD: it streams only once woken) unless `mode` is `ptt` (which holds for
        every device: its AudioStart..AudioStop, a xiaozhi box's `listen start`..`listen stop`), else `mode`."""
        if device_id in self.devices:
            return self.devices[device_id]
        return "always" if wakes_itself and self.mode != "ptt" else self.mode

    def needs_wake_word(self) -> bool:
        """Whether any device may need the wake-word model (so it is loaded at start-up)."""
        return self.mode in ("wake", "follow-up") or any(m in ("wake", "follow-up") for m in self.devices.values())
