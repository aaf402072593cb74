"""Whether this CPU has the integer dot-product instructions onnxruntime's 8-bit `MatMulNBits`
kernels need (the int8 Moonshine decoder and the int8 MiniLM run on them).

onnxruntime 1.32 registers its 8-bit block-quantized int8 kernels (accuracy level 4) for x86-64
with AVX2 and for ARM64 with the dot-product extension (ARMv8.2 `asimddp`: Raspberry Pi 5's
Cortex-A76, not Pi 4's Cortex-A72); elsewhere the operator falls back to dequantizing the whole
weight matrix at every call, many times slower than multiplying by float weights. There the
Moonshine decoder runs its DynamicQuantizeMatMul variant (moonshine_nbits.py, 8-bit integer GEMM
with plain NEON kernels) and the MiniLM its float products. Read from /proc/cpuinfo (the kernel's
own list of the CPU's features).
"""

from __future__ import annotations

import platform
from pathlib import Path

_NEEDED = {"x86_64": "avx2", "amd64": "avx2", "aarch64": "asimddp", "arm64": "asimddp"}


def _flags(cpuinfo: str) -> set[str]:
    words: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            words.update(value.split())
    return words


def int8_matmul_kernels(cpuinfo: str | None = None, machine: str | None = None) -> bool:
    """True when onnxruntime multiplies by 8-bit weights with its integer kernels on this CPU."""
    needed = _NEEDED.get((machine or platform.machine()).lower())
    if needed is None:
        return False
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return False
    return needed in _flags(cpuinfo)
