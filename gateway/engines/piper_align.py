"""Derive the alignment-patched Piper voice (model store step `piper-alignment`).

Piper voices compute per-phoneme-id sample counts (the `Ceil` of the duration predictor) but do
not output them. Marking that tensor as a graph output (what `python -m
piper.patch_voice_with_alignment` does) makes `PiperVoice.synthesize(include_alignments=True)`
return phoneme timings, from which the visemes are built. Offline, deterministic, needs the
`onnx` package (not onnxruntime); only the model store calls it, once.
"""

from __future__ import annotations

from pathlib import Path

from gateway.errors import ModelError


def patched_voice(src: Path) -> tuple[bytes, str]:
    """The bytes of `src` with its phoneme-duration tensor exposed, and a summary line."""
    try:
        import onnx
        from piper.patch_voice_with_alignment import add_alignment_output
    except ImportError as exc:
        raise ModelError(f"the onnx package is needed to prepare the aligned Piper voice: {exc}") from None
    model = onnx.load(str(src))
    try:
        tensor = add_alignment_output(model)
    except ValueError as exc:
        raise ModelError(f"cannot expose phoneme alignments in {src}: {exc}") from None
    return model.SerializeToString(), f"alignment output {tensor}"
