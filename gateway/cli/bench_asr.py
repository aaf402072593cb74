"""`gateway bench-asr`: word error rate and speed of each ASR engine, clean and in noise.

Builds the evaluation set (gateway/asreval: 40 held-out sentences, the piper voice at several
speeds and espeak-ng voices, white/pink/babble noise at 20/10/5 dB SNR; nothing is read from
disk but the models), runs every engine of `--engines` over it, whole files and through the
gateway's VAD/endpointing (and, with `--paths speech`, cut to the question as a perfect
endpointer would), and prints per engine and SNR: WER, empty transcripts, RTF, ms per decode,
how many utterances reached the ASR, how many were ended by the endpointer (not only by the end
of the clip), and the decoded audio over the questions' audio (with `second_opinion=whisper`: how
many decodes Whisper ran too); `--detail` adds WER per speaker kind and noise
kind and each misheard utterance (gateway/asreval/detail.py). `--rss` adds each engine's resident memory
(loaded and warm, in a fresh process). The score that picks the default ASR (docs/CONFIG.md,
asr.engine) is printed last.

An engine is `NAME[:key=value,...]` with asr keys, e.g. `whisper:window=30s,beam_size=5`;
`configured` is the asr section of gateway.yaml as it is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import wave
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gateway.asreval.detail import breakdown, misheard
from gateway.asreval.measure import SNRS, Score, condition_audio, evaluate
from gateway.asreval.render import RATE, render
from gateway.config import GatewayConfig
from gateway.config.engines import AsrConfig
from gateway.engines.factory import load_asr, load_vad
from gateway.engines.store import ModelStore

DEFAULT_ENGINES = "moonshine,whisper,whisper:window=30s"
PATHS = ("whole", "vad", "speech")
TARGETS = {"wer_clean": 0.05, "wer_10db": 0.10, "rtf": 0.15}


def asr_of(spec: str, cfg: GatewayConfig) -> AsrConfig:
    """`whisper:window=30s,beam_size=5` -> an AsrConfig (num_threads from gateway.yaml unless given)."""
    if spec == "configured":
        return cfg.asr
    name, _, opts = spec.partition(":")
    values: dict[str, Any] = {"engine": name, "num_threads": cfg.asr.num_threads}
    for pair in filter(None, opts.split(",")):
        key, _, value = pair.partition("=")
        values[key.strip()] = yaml.safe_load(value)
    return AsrConfig(**values)


def engine_specs(text: str) -> list[str]:
    """`moonshine,moonshine:beam_size=2,second_opinion=whisper,whisper` -> the three specs: a piece
    with `=` but no `:` is one more key of the spec before it."""
    specs: list[str] = []
    for piece in filter(None, (p.strip() for p in text.split(","))):
        if specs and "=" in piece and ":" not in piece:
            specs[-1] += "," + piece
        else:
            specs.append(piece)
    return specs


def _with_asr(cfg: GatewayConfig, asr: AsrConfig) -> GatewayConfig:
    return cfg.model_copy(update={"asr": asr})


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def engine_rss(cfg: GatewayConfig, speech: np.ndarray) -> float:
    """RSS growth (MB) of loading this config's ASR and decoding `speech` (run in a fresh process)."""
    from gateway.engines.malloc_tuning import tune_malloc

    tune_malloc()  # as `gateway run` does before loading the models
    before = _rss_mb()
    asr = load_asr(cfg, ModelStore(cfg))
    for _ in range(3):
        asr.transcribe(speech)
    return _rss_mb() - before


def cost(s: dict[str, float]) -> float:
    """The score (lower is better): (0.01 + mean WER through the VAD over clean, 20, 10, 5 dB)
    x RTF through the VAD x RSS in units of 100 MB (RSS 1 when not measured)."""
    rss = s.get("rss_mb", 100.0)
    return (0.01 + s["wer_mean"]) * s["rtf"] * (rss / 100.0)


def _row(name: str, snr: float | None, path: str, sc: Score, n: int) -> dict[str, Any]:
    return {"engine": name, "snr_db": snr, "path": path, "wer": round(sc.wer, 4), "empty": sc.empty,
            "rtf": round(sc.rtf, 4), "ms_per_decode": round(sc.ms_per_decode, 1),
            "reached_asr": sc.survived if path == "vad" else n, "endpointed": sc.endpointed if path == "vad" else n,
            "utterance_ratio": round(sc.utterance_ratio, 3), "clips": n,
            **({"second_opinions": sc.second_opinions} if sc.second_opinions is not None else {})}


def _save(clips: list, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for clip in clips:
        for snr in SNRS:
            audio = condition_audio(clip, snr, clips)
            tag = "clean" if snr is None else f"{snr:g}dB"
            with wave.open(str(folder / f"{clip.index:02d}-{tag}.wav"), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(RATE)
                w.writeframes((np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes())
    (folder / "transcripts.tsv").write_text("".join(f"{c.index:02d}\t{c.voice.label}\t{c.text}\n" for c in clips))


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    say = (lambda _: None) if args.json else (lambda m: print(m, flush=True))
    paths = tuple(filter(None, args.paths.split(",")))
    if not paths or set(paths) - set(PATHS):
        print(f"error: --paths {args.paths!r}: give one or more of {', '.join(PATHS)}", file=sys.stderr)
        return 2
    clips = render(cfg, args.limit, tuple(args.voices.split(",")), say)
    if args.save:
        _save(clips, Path(args.save))
        say(f"saved the set to {args.save}")
    store = ModelStore(cfg)
    vad = load_vad(cfg, store)
    rows: list[dict[str, Any]] = []
    summary: dict[str, dict[str, float]] = {}
    details: dict[str, dict[str, dict[str, float]]] = {}  # --detail: engine -> group -> condition -> WER
    for spec in engine_specs(args.engines):
        ecfg = _with_asr(cfg, asr_of(spec, cfg))
        say(f"== {spec}: loading")
        asr = load_asr(ecfg, store)
        scores = asyncio.run(evaluate(ecfg, asr, vad, clips, paths))
        del asr
        for (snr, path), sc in scores.items():
            rows.append(_row(spec, snr, path, sc, len(clips)))
            if not args.json:
                r = rows[-1]
                say(f"  {'clean' if snr is None else f'{snr:g} dB':>6} {path:6}  WER {r['wer']:.3f}  empty "
                    f"{r['empty']:2}/{len(clips)}  RTF {r['rtf']:.3f}  {r['ms_per_decode']:6.0f} ms/decode  "
                    f"reached ASR {r['reached_asr']}/{len(clips)}  endpointed {r['endpointed']}/{len(clips)}  "
                    f"audio/speech {r['utterance_ratio']:.2f}"
                    + (f"  2nd opinion {sc.second_opinions}/{sc.decodes}" if sc.second_opinions is not None else ""))
        key = next(p for p in ("vad", "whole", "speech") if p in paths)  # the score's path
        if args.detail:
            details[spec] = groups = breakdown(clips, scores, key)
            if not args.json:
                say(f"  WER by speaker and noise (path {key}):")
                for group, by_cond in groups.items():
                    say(f"    {group:16}" + "  ".join(f"{c} {w:.3f}" for c, w in by_cond.items()))
                say(f"  misheard utterances (path {key}):")
                misheard(clips, scores, key, say)
        summary[spec] = {"wer_clean": scores[(None, key)].wer, "wer_10db": scores[(10.0, key)].wer,
                         "wer_mean": sum(scores[(s, key)].wer for s in SNRS) / len(SNRS),
                         "rtf": sum(scores[(s, key)].decode_s for s in SNRS) / sum(scores[(s, key)].audio_s for s in SNRS)}
        if args.rss:
            with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
                summary[spec]["rss_mb"] = pool.submit(engine_rss, ecfg, clips[0].audio).result()
    for spec, s in summary.items():
        s["meets_targets"] = float(s["wer_clean"] <= TARGETS["wer_clean"] and s["wer_10db"] <= TARGETS["wer_10db"]
                                   and s["rtf"] <= TARGETS["rtf"])
        s["score"] = cost(s)
    if args.json:
        print(json.dumps({"load": os.getloadavg()[0], "clips": len(clips), "rows": rows, "summary": summary,
                          **({"breakdown": details} if args.detail else {})}, indent=1))
        return 0
    say(f"\nsummary (path {key}; load {os.getloadavg()[0]:.1f}; score = (0.01 + mean WER) x RTF x RSS/100 MB, lower is better)")
    for spec, s in sorted(summary.items(), key=lambda kv: kv[1]["score"]):
        rss = f"{s['rss_mb']:.0f} MB" if "rss_mb" in s and not math.isnan(s["rss_mb"]) else "-"
        say(f"  {spec:28} WER clean {s['wer_clean']:.3f}  10 dB {s['wer_10db']:.3f}  mean {s['wer_mean']:.3f}  "
            f"RTF {s['rtf']:.3f}  RSS {rss:>7}  score {s['score']:.5f}  "
            f"{'meets the targets' if s['meets_targets'] else 'misses a target'}")
    return 0


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    b = sub.add_parser("bench-asr", parents=[common], help="WER and RTF of each ASR engine, clean and at "
                       "20/10/5 dB SNR, whole files and through the VAD (a generated, held-out set)",
                       description="Generates a held-out set (40 sentences, piper and espeak-ng voices, clean and "
                       "in noise at 20/10/5 dB SNR) and prints each ASR engine's word error rate and real-time "
                       "factor, on whole files and through the VAD's endpointing, and the score that picks the default.")
    b.add_argument("--engines", default=DEFAULT_ENGINES, help=f"comma-separated NAME[:key=value,...] "
                   f"(asr keys; default {DEFAULT_ENGINES}; `configured` = gateway.yaml's asr)")
    b.add_argument("--limit", type=int, help="only the first N sentences (default all 40)")
    b.add_argument("--voices", default="piper,espeak-ng", help="voice engines to use (default piper,espeak-ng)")
    b.add_argument("--paths", default="whole,vad", help="comma-separated: whole (the file), vad (through the "
                   "endpointing), speech (cut to the question with the VAD's pre-roll and trailing silence)")
    b.add_argument("--rss", action="store_true", help="also each engine's RSS, loaded and warm, in a fresh process")
    b.add_argument("--save", metavar="DIR", help="also write the set as 16-bit WAVs (+ transcripts.tsv) to DIR")
    b.add_argument("--detail", action="store_true", help="also WER per speaker kind and noise kind, and every "
                   "misheard utterance (said | heard)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=run)
