"""Beam search over a step-by-step decoder (Moonshine's merged decoder, gateway/engines/moonshine_ort.py).

`beam_search` keeps the `beam_size` best partial transcripts; at every step it asks `step` for
the next token's log-probabilities of each (one batched decoder run), keeps the best
continuations, and sets a continuation that ends (EOS among the best `beam_size`) or starts
repeating itself (gateway/engines/decode_loop.py: cut to one copy) aside as finished. It stops
when `beam_size` transcripts have finished (as CTranslate2's beam search does with patience 1),
when no open beam could still beat the best finished one (`_settled`), or at the length bound,
and returns the finished one with the best length-normalized score (`n_best`: all of them, best
first): the sum of its tokens' log-probabilities (EOS included) over its length, Whisper's and
CTranslate2's default. With `beam_size` 1 this is greedy decoding: the argmax at every step.

`step(tokens, parents)` runs the decoder for one token per beam: `tokens[i]` continues the beam
`parents[i]` of the previous step (None at the first step, which has one beam: the start token),
so the caller reorders its key/value cache by `parents` before the run. `cancel` is checked
before every step (DecodeCancelled).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gateway.engines.base import DecodeCancelled
from gateway.engines.decode_loop import loop_start

Step = Callable[[np.ndarray, "np.ndarray | None"], np.ndarray]  # (tokens, parents) -> log-probs (beams, vocab)


@dataclass(frozen=True)
class Hypothesis:
    ids: list[int]  # the output tokens, without EOS (a looped one cut to its first copy)
    logprob: float  # sum of the log-probabilities of every token decoded for it (EOS included)
    length: int  # how many tokens that sum is over
    looped: bool = False

    @property
    def mean_logprob(self) -> float:
        return self.logprob / self.length if self.length else 0.0


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax of (beams, vocab) float32 logits."""
    top = logits.max(axis=-1, keepdims=True)
    shifted = logits - top
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _settled(finished: list[Hypothesis], open_beams: list[tuple[list[int], float]]) -> bool:
    """No open beam could beat the best finished one even if it ended at the next step at no
    cost (log-probability 0): its mean would be its sum over its length + 1 (the heuristic of
    Hugging Face's beam search without early stopping: a longer beam's mean can still rise, rarely)."""
    best = max(h.mean_logprob for h in finished)
    return all(score / (len(seq) + 1) <= best for seq, score in open_beams)


def beam_search(step: Step, start: int, eos: int, beam_size: int, max_tokens: int,
                cancel: threading.Event | None = None) -> Hypothesis:
    return n_best(step, start, eos, beam_size, max_tokens, cancel)[0]


def n_best(step: Step, start: int, eos: int, beam_size: int, max_tokens: int,
           cancel: threading.Event | None = None) -> list[Hypothesis]:
    """Every finished hypothesis of the search, the best mean log-probability first."""
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    tokens = np.array([start], np.int64)
    parents: np.ndarray | None = None
    finished: list[Hypothesis] = []
    for _ in range(max_tokens):
        if cancel is not None and cancel.is_set():  # nobody waits for the text: stop here
            raise DecodeCancelled()
        total = step(tokens, parents) + np.array([s for _, s in beams], np.float32)[:, None]
        vocab = total.shape[1]
        flat = total.ravel()
        n = min(2 * beam_size, flat.size)
        best = np.argpartition(-flat, n - 1)[:n]
        best = best[np.argsort(-flat[best], kind="stable")]
        kept: list[tuple[list[int], float]] = []
        kept_parents: list[int] = []
        for rank, index in enumerate(best.tolist()):
            parent, token = divmod(index, vocab)
            seq, score = beams[parent][0], float(flat[index])
            if token == eos:
                if rank < beam_size:  # an end among the best continuations
                    finished.append(Hypothesis(seq, score, len(seq) + 1))
                continue
            grown = seq + [token]
            if (keep := loop_start(grown)) is not None:  # repeating itself (in noise): one copy
                finished.append(Hypothesis(grown[:keep], score, len(grown), looped=True))
                continue
            kept.append((grown, score))
            kept_parents.append(parent)
            if len(kept) == beam_size:
                break
        if len(finished) >= beam_size or not kept or (finished and _settled(finished, kept)):
            break
        beams = kept
        tokens = np.array([seq[-1] for seq, _ in kept], np.int64)
        parents = np.array(kept_parents, np.int64)
    else:  # the length bound: the open beams end here
        finished += [Hypothesis(seq, score, len(seq)) for seq, score in beams]
    return sorted(finished, key=lambda h: h.mean_logprob, reverse=True)
