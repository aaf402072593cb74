"""cpu_features: which CPUs get the int8 Moonshine decoder and the int8 MiniLM, and the conv2d Piper voice."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from gateway.engines.cpu_features import int8_matmul_kernels, nchwc_conv_kernels

PI4 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU part\t: 0xd08
"""
PI5 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU part\t: 0xd0b
"""
X86_AVX2 = "processor\t: 0\nflags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma\n"
X86_OLD = "processor\t: 0\nflags\t\t: fpu vme sse sse2 ssse3 sse4_1 sse4_2 avx\n"


@pytest.mark.parametrize(("cpuinfo", "machine", "expected"), [
    (PI4, "aarch64", False),  # Cortex-A72: no dot product
    (PI5, "aarch64", True),  # Cortex-A76: asimddp
    (X86_AVX2, "x86_64", True),
    (X86_OLD, "x86_64", False),
    (X86_AVX2, "riscv64", False),  # no int8 kernels registered for it here
    ("", "aarch64", False),
])
def test_the_kernels_are_there_only_with_the_instructions_they_need(cpuinfo: str, machine: str, expected: bool) -> None:
    assert int8_matmul_kernels(cpuinfo, machine) is expected


def test_this_machine_is_read_from_proc_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text()
    assert int8_matmul_kernels() is int8_matmul_kernels(text, platform.machine())


@pytest.mark.parametrize(("cpuinfo", "machine", "expected"), [
    (X86_AVX2, "x86_64", True),
    (X86_OLD, "x86_64", False),  # MLAS blocks no channels without AVX2: no NCHWc layout
    (PI5, "aarch64", False),  # not measured on a Pi: tts.conv2d auto keeps the packaged voice there
    (PI4, "aarch64", False),
    ("", "x86_64", False),
])
def test_blocked_convolutions_are_chosen_only_where_they_were_measured(cpuinfo: str, machine: str,
                                                                       expected: bool) -> None:
    assert nchwc_conv_kernels(cpuinfo, machine) is expected
