"""`python -m firmware_protocol.vectors --write | --check`: regenerate or verify the vectors."""

from __future__ import annotations

import argparse
import sys

from .generate import expected_files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m firmware_protocol.vectors")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="regenerate the vector files")
    mode.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected_files().items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.write:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        else:
            stale.append(path)
    for path in stale:
        print(f"out of date: {path} (run with --write)", file=sys.stderr)
    if not stale and args.check:
        print("vectors are up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
