"""Moonshine's beam search (gateway/engines/moonshine_beam.py): on a made-up decoder whose
probabilities are known, it finds the sequence greedy decoding misses, stops at the ends and loops
as greedy does, and stops at a set cancel token; on the real model (int8 decoder) beam 2 hears
synthesized questions, scores them, and a cancelled beam decode stops at its next step."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.engines.base import DecodeCancelled
from gateway.engines.factory import load_asr
from gateway.engines.moonshine_beam import beam_search, log_softmax
from gateway.engines.moonshine_ort import MoonshineOnnxAsr
from gateway.engines.store import ModelStore

START, EOS = 1, 0
VOCAB = 6


class _Table:
    """A decoder whose next-token probabilities depend on the sequence so far (a dict of
    prefixes; any other prefix ends: EOS certain). Records the batch size of every step."""

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]]) -> None:
        self.table, self.batches = table, []
        self.seqs: list[tuple[int, ...]] = [()]

    def __call__(self, tokens: np.ndarray, parents: np.ndarray | None) -> np.ndarray:
        if parents is None:
            self.seqs = [()]
        else:
            self.seqs = [self.seqs[p] + (int(t),) for p, t in zip(parents, tokens)]
        self.batches.append(len(self.seqs))
        rows = []
        for seq in self.seqs:
            probs = np.full(VOCAB, 1e-6)
            for token, p in self.table.get(seq, {EOS: 1.0}).items():
                probs[token] = p
            rows.append(np.log(probs / probs.sum()))
        return np.array(rows, np.float32)


# Greedy takes 2 (0.6) and is then unsure (0.4 / 0.3 / 0.3); the path through 3 (0.4) is then
# certain: 3 4 EOS has the better mean log-probability.
FORK = {(): {2: 0.6, 3: 0.4}, (2,): {4: 0.4, 5: 0.3, EOS: 0.3}, (2, 4): {EOS: 1.0},
        (3,): {4: 1.0}, (3, 4): {EOS: 1.0}}


def test_greedy_takes_the_likeliest_token_at_every_step() -> None:
    best = beam_search(_Table(FORK), START, EOS, beam_size=1, max_tokens=10)
    assert best.ids == [2, 4] and best.length == 3
    assert best.mean_logprob == pytest.approx(np.log(0.6 * 0.4 * 1.0) / 3, abs=1e-4)


def test_a_beam_of_two_finds_the_sequence_greedy_misses() -> None:
    decoder = _Table(FORK)
    best = beam_search(decoder, START, EOS, beam_size=2, max_tokens=10)
    assert best.ids == [3, 4] and not best.looped
    assert best.mean_logprob == pytest.approx(np.log(0.4) / 3, abs=1e-4)
    assert decoder.batches[0] == 1 and max(decoder.batches) == 2  # one batched run per step


def test_a_looping_beam_is_cut_to_one_copy_and_marked() -> None:
    loop = {(): {2: 0.9, 3: 0.1}}
    for n in range(1, 40):  # 2 3 4 5 2 3 4 5 ... a 4-token phrase over and over
        loop[tuple([2, 3, 4, 5] * 10)[:n]] = {[2, 3, 4, 5][n % 4]: 0.99}
    best = beam_search(_Table(loop), START, EOS, beam_size=1, max_tokens=30)
    assert best.ids == [2, 3, 4, 5] and best.looped


def test_the_length_bound_ends_the_open_beams() -> None:
    rng = np.random.default_rng(18)

    def never_ends(tokens: np.ndarray, parents: np.ndarray | None) -> np.ndarray:
        logits = rng.normal(size=(tokens.size, VOCAB)).astype(np.float32)
        logits[:, EOS] = -50.0
        return log_softmax(logits)

    best = beam_search(never_ends, START, EOS, beam_size=2, max_tokens=3)
    assert len(best.ids) == 3 and best.length == 3


def test_a_set_token_stops_before_the_next_step() -> None:
    token = threading.Event()
    decoder = _Table(FORK)

    def step(tokens: np.ndarray, parents: np.ndarray | None) -> np.ndarray:
        token.set()  # set while the first step runs
        return decoder(tokens, parents)

    with pytest.raises(DecodeCancelled):
        beam_search(step, START, EOS, beam_size=2, max_tokens=10, cancel=token)
    assert decoder.batches == [1]


def test_log_softmax_rows_are_log_probabilities() -> None:
    out = log_softmax(np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], np.float32))
    assert np.allclose(np.exp(out).sum(axis=1), 1.0) and out[0].argmax() == 2


@pytest.fixture(scope="module")
def beam2(prepared_cfg: GatewayConfig) -> MoonshineOnnxAsr:
    cfg = prepared_cfg.model_copy(update={"asr": prepared_cfg.asr.model_copy(update={"beam_size": 2})})
    asr = load_asr(cfg, ModelStore(cfg))
    assert isinstance(asr, MoonshineOnnxAsr)
    return asr


def _words(text: str) -> list[str]:
    return "".join(c for c in text.lower() if c.isalpha() or c == " ").split()


@pytest.mark.models
def test_beam_two_on_the_int8_decoder_hears_synthesized_questions(beam2: MoonshineOnnxAsr, speech16k) -> None:
    for said in ("What time is it?", "Turn on the lights in the living room."):
        heard = beam2.transcribe_scored(speech16k(said))
        assert _words(heard.text) == _words(said)
        assert -1.0 < heard.mean_logprob < 0.0 and not heard.looped  # sure of it, and a probability


@pytest.mark.models
def test_a_cancelled_beam_decode_stops_at_its_next_step(beam2: MoonshineOnnxAsr, speech16k) -> None:
    audio = speech16k("Could you please tell me what the weather will be like in the kitchen tomorrow morning?")
    before = beam2.decoder_steps
    beam2.transcribe(audio)
    full = beam2.decoder_steps - before
    token, run, calls = threading.Event(), beam2._dec.run, []

    def counting(names, feeds):  # noqa: ANN001, ANN202
        calls.append(feeds["input_ids"].shape[0])
        if len(calls) == 3:
            token.set()
        return run(names, feeds)

    beam2._dec.run = counting  # type: ignore[method-assign]
    try:
        with pytest.raises(DecodeCancelled) as stopped:
            beam2.transcribe(audio, cancel=token)
    finally:
        beam2._dec.run = run  # type: ignore[method-assign]
    assert stopped.value.steps == 3 == len(calls) < full
    assert calls == [1, 2, 2]  # the start token alone, then both beams in one batch


def test_greedy_is_the_default_and_beams_are_asked_for() -> None:
    from gateway.config import parse_config

    assert parse_config({}).asr.beam_size == 1  # moonshine, the default engine: greedy
    assert parse_config({"asr": {"beam_size": 2}}).asr.beam_size == 2


@pytest.mark.models
def test_asr_beam_size_two_decodes_both_beams_in_one_batch(beam2: MoonshineOnnxAsr, speech16k) -> None:
    run, batches = beam2._dec.run, []

    def counting(names, feeds):  # noqa: ANN001, ANN202
        batches.append(feeds["input_ids"].shape[0])
        return run(names, feeds)

    beam2._dec.run = counting  # type: ignore[method-assign]
    try:
        assert _words(beam2.transcribe(speech16k("What time is it?"))) == ["what", "time", "is", "it"]
    finally:
        beam2._dec.run = run  # type: ignore[method-assign]
    assert batches[0] == 1 and set(batches[1:]) == {2}
