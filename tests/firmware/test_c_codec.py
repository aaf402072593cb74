"""The C99 wire codec (firmware_protocol/c): golden vectors both ways, fuzzing, RISC-V build."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from firmware_protocol import ProtocolError, decode, encode

ROOT = Path(__file__).resolve().parents[2]
C_DIR = ROOT / "firmware_protocol" / "c"
FUZZ_SECONDS = os.environ.get("FP_FUZZ_SECONDS", "30")
sys.path.insert(0, str(C_DIR))

import gen_tables  # noqa: E402


def make(target: str, build: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(C_DIR), target, f"BUILD={build}",
         f"PYTHON={sys.executable}", *extra],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_generated_c_tables_match_the_python_messages():
    stale = [
        path.name
        for path, text in gen_tables.expected_files().items()
        if not path.exists() or path.read_text("utf-8") != text
    ]
    assert not stale, f"{stale} are stale: run `python firmware_protocol/c/gen_tables.py --write`"


def test_c_codec_passes_every_golden_vector_both_ways_under_sanitizers(tmp_path: Path):
    done = make("test", tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    counts = re.search(r"C codec: (\d+) valid and (\d+) invalid vectors, 0 failures", out)
    assert counts, out
    valid = json.loads((ROOT / "firmware_protocol/vectors/v1.json").read_text("utf-8"))
    invalid = json.loads((ROOT / "firmware_protocol/vectors/v1_invalid.json").read_text("utf-8"))
    assert (int(counts[1]), int(counts[2])) == (len(valid), len(invalid))
    assert "all vectors passed" in out


def test_c_vector_runner_reports_a_vector_whose_bytes_disagree(tmp_path: Path):
    assert make("test", tmp_path).returncode == 0
    lines = (tmp_path / "vectors.txt").read_text().splitlines()
    target = next(i for i, line in enumerate(lines) if line.startswith("valid ping-zero "))
    lines[target] = lines[target].replace("x0300000000", "x0300000001", 1)
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    done = subprocess.run([tmp_path / "test_vectors", bad], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "FAIL ping-zero: decode(hex) differs from the message" in done.stdout


def test_fuzzing_the_c_decoders_finds_no_crash(tmp_path: Path):
    done = make("fuzz", tmp_path, f"FUZZ_SECONDS={FUZZ_SECONDS}", timeout=int(FUZZ_SECONDS) + 240)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    runs = re.search(r"Done (\d+) runs", out)
    assert runs and int(runs[1]) > 10_000, out[-3000:]
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out


def test_c_codec_cross_compiles_warning_free_for_rv32imc_and_reports_its_size(tmp_path: Path):
    if shutil.which("riscv64-unknown-elf-gcc") is None:
        pytest.skip("riscv64-unknown-elf-gcc is not installed (Debian gcc-riscv64-unknown-elf)")
    done = make("riscv", tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "warning" not in out.lower(), out
    total = re.search(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+\d+\s+\w+\s+\(TOTALS\)", out, re.M)
    assert total, out
    print(f"rv32imc -Os code size: text {total[1]} B, data {total[2]} B, bss {total[3]} B")
    assert 0 < int(total[1]) < 32_000


def _mutants(count: int, seed: int = 7) -> list[bytes]:
    """Deterministic hostile inputs: every vector, then random flips, cuts, splices and tails."""
    rng = random.Random(seed)
    valid = [bytes.fromhex(v["hex"]) for v in json.loads((ROOT / "firmware_protocol/vectors/v1.json").read_text("utf-8"))]
    out = list(valid)
    while len(out) < count:
        data = bytearray(rng.choice(valid))
        for _ in range(rng.randint(1, 3)):
            op = rng.randrange(5)
            if op == 0 and data:
                data[rng.randrange(len(data))] = rng.randrange(256)
            elif op == 1 and data:
                del data[rng.randrange(len(data)) :]
            elif op == 2:
                data[rng.randint(0, len(data)) : rng.randint(0, len(data))] = rng.randbytes(rng.randint(0, 6))
            elif op == 3 and len(data) > 1:
                data[rng.randrange(1, len(data))] = rng.choice((0x00, 0x01, 0x02, 0x7F, 0x80, 0xC0, 0xED, 0xF4, 0xFF))
            else:
                data += rng.randbytes(rng.randint(1, 4))
        out.append(bytes(data))
    return out


def _python_verdict(data: bytes) -> str:
    try:
        msg = decode(data)
    except ProtocolError as exc:
        return f"err {exc.code}"
    return f"ok {msg.NAME} {encode(msg).hex()}"


def test_c_and_python_codecs_agree_on_thousands_of_hostile_messages(tmp_path: Path):
    done = make("cli", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    inputs = _mutants(20_000)
    run = subprocess.run([tmp_path / "fp_cli"], input="".join(d.hex() + "\n" for d in inputs),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    c_lines = run.stdout.splitlines()
    assert len(c_lines) == len(inputs)
    differ = [
        (data.hex(), c_line, py)
        for data, c_line in zip(inputs, c_lines)
        if c_line != (py := _python_verdict(data))
    ]
    assert not differ, f"{len(differ)} disagreements, e.g. {differ[:5]}"
    accepted = sum(line.startswith("ok ") for line in c_lines)
    assert accepted > 1000  # the mutants reach deep into the messages, not only the type byte
