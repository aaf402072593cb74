"""A wake-word model that does not load stops `gateway run` at once, naming it (exit 2, no traceback)."""

from __future__ import annotations

import pytest

from gateway.engines.wake_word import MicroWakeWords
from gateway.errors import ModelError
from tests.test_startup import _config, _run


def test_an_unknown_wake_word_stops_start_up_naming_it(tmp_path) -> None:
    res = _run(_config(tmp_path, listen={"mode": "wake", "wake_words": ["okay_nabu", "hey_bob"]}))
    assert res.returncode == 2, res.stderr
    assert "error: wake-word model 'hey_bob' not found" in res.stderr
    assert "Traceback" not in res.stderr
    assert "models ready" not in res.stderr  # before the other models load


def test_a_broken_wake_word_model_stops_start_up_naming_its_file(tmp_path) -> None:
    broken = tmp_path / "my_word.json"
    broken.write_text('{"model": "missing.tflite", "micro": {"probability_cutoff": 0.9}}')
    res = _run(_config(tmp_path, listen={"mode": "follow-up", "wake_words": [str(broken)]}))
    assert res.returncode == 2, res.stderr
    assert f"error: cannot load the wake-word model '{broken}'" in res.stderr
    assert "Traceback" not in res.stderr


def test_every_built_in_model_loads_and_a_detector_hears_nothing_in_silence() -> None:
    engine = MicroWakeWords(("okay_nabu", "hey_jarvis", "hey_mycroft", "alexa"))
    assert engine.detector().process(bytes(32000)) == []
    with pytest.raises(ModelError, match="listen.wake_words is empty"):
        MicroWakeWords(())
