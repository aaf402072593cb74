"""What this CPU gives onnxruntime's kernels, read from /proc/cpuinfo (the kernel's own list of the
CPU's features), for the engines whose best model file depends on it.

`int8_matmul_kernels`: onnxruntime 1.32 registers its 8-bit block-quantized int8 kernels (accuracy
level 4) for x86-64 with AVX2 and for ARM64 with the dot-product extension (ARMv8.2 `asimddp`:
Raspberry Pi 5's Cortex-A76, not Pi 4's Cortex-A72); elsewhere the operator falls back to
dequantizing the whole weight matrix at every call, many times slower than multiplying by float
weights. There the Moonshine decoder runs its DynamicQuantizeMatMul variant (moonshine_nbits.py,
8-bit integer GEMM with plain NEON kernels) and the MiniLM its float products.

`nchwc_conv_kernels`: onnxruntime's NCHWc layout optimiser (blocked direct 2-D convolutions) is
measured to save TTS CPU with the conv2d Piper voice (`tts.conv2d: auto`, piper_conv2d.py) on
x86-64 with AVX2, where MLAS blocks channels by 8 (16 with AVX-512). It is not measured anywhere
else (no Raspberry Pi yet), so `auto` keeps the packaged voice there.
"""

from __future__ import annotations

import platform
from pathlib import Path

_INT8_MATMUL = {"x86_64": "avx2", "amd64": "avx2", "aarch64": "asimddp", "arm64": "asimddp"}
_NCHWC_CONV = {"x86_64": "avx2", "amd64": "avx2"}


def _flags(cpuinfo: str) -> set[str]:
    words: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            words.update(value.split())
    return words


def _has(needed_per_machine: dict[str, str], cpuinfo: str | None, machine: str | None) -> bool:
    needed = needed_per_machine.get((machine or platform.machine()).lower())
    if needed is None:
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    return needed in _flags(cpuinfo)


def int8_matmul_kernels(cpuinfo: str | None = None, machine: str | None = None) -> bool:
    """True when onnxruntime multiplies by 8-bit weights with its integer kernels on this CPU."""
    return _has(_INT8_MATMUL, cpuinfo, machine)


def nchwc_conv_kernels(cpuinfo: str | None = None, machine: str | None = None) -> bool:
    """True when onnxruntime's blocked NCHWc convolutions are measured to pay off on this CPU."""
    return _has(_NCHWC_CONV, cpuinfo, machine)
