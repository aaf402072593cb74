"""`gateway bench-asr --detail --json` on a small part of the set, with the real VAD and Whisper."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.models
ROOT = Path(__file__).resolve().parents[2]


def test_detail_gives_the_wer_per_speaker_and_noise_kind_beside_the_summary() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gateway", "bench-asr", "--config", str(ROOT / "gateway.yaml"), "--limit", "3",
         "--voices", "piper", "--engines", "whisper", "--paths", "vad", "--detail", "--json"],
        check=True, capture_output=True, text=True, timeout=600, cwd=ROOT).stdout
    report = json.loads(out)
    assert report["clips"] == 3
    groups = report["breakdown"]["whisper"]
    assert set(groups) == {"voice:piper", "noise:white", "noise:pink", "noise:babble"}
    assert set(groups["voice:piper"]) == {"clean", "20dB", "10dB", "5dB"}
    assert set(groups["noise:babble"]) == {"20dB", "10dB", "5dB"}
    assert groups["voice:piper"]["clean"] <= 0.2  # the piper voice, clean: at most a word or two wrong
    summary = report["summary"]["whisper"]
    assert summary["wer_clean"] == pytest.approx(groups["voice:piper"]["clean"])
