"""Command line: `gateway run | simulate | doctor | service | models | devices | readings | memory | mcp | storage |
screens | console | bench*`.

Each command lives in its own module of this package and registers its parser (`add_parser`); this
module assembles them, loads the configuration once and hands it to the command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from gateway import __version__
from gateway.cli import bench, bench_asr, bench_capacity, bench_cluster, bench_limits, bench_links, bench_wake, console, devices, doctor, memory, models, run, screens, service, simulate, storage
from gateway.config import load_config
from gateway.errors import GatewayError


def _config_path(arg: str | None) -> Path | None:
    """--config, else $GATEWAY_CONFIG, else ./gateway.yaml if present, else embedded defaults."""
    if arg:
        return Path(arg)
    if os.environ.get("GATEWAY_CONFIG"):
        return Path(os.environ["GATEWAY_CONFIG"])
    local = Path("gateway.yaml")
    return local if local.exists() else None


class _HelpWithDefaults(argparse.HelpFormatter):
    """Each option's help ends with its default, unless the help names it already or there is none to show."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (not action.option_strings or "default" in text or default in (None, False, "", [], ())
                or default is argparse.SUPPRESS):
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _HelpWithDefaults
    for action in parser._actions:  # argparse keeps its subcommands' parsers only here
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _show_defaults(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway",
        description="Offline edge gateway for ESP32 voice boxes, robots and sensors. "
        "Devices stream microphone audio; the gateway hears where a sentence ends (Silero VAD), "
        "transcribes it (Moonshine on onnxruntime by default), answers from local rules and its long-term "
        "memory (or an optional OpenAI-compatible LLM) and streams speech back (piper). Sensors' readings "
        "are stored and remembered.",
        epilog="Config: --config FILE, else $GATEWAY_CONFIG, else ./gateway.yaml, else built-in defaults. "
        "Every command has --help.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", metavar="FILE", help="gateway.yaml to use")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # --config is accepted before or after the command (`gateway run --config FILE`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="gateway.yaml to use")

    run.add_parser(sub, common)
    simulate.add_parser(sub, common)
    doctor.add_parser(sub, common)
    service.add_parser(sub, common)
    bench.add_parser(sub, common)
    devices.add_devices_parsers(sub, common)
    bench_links.add_parser(sub, common)
    bench_asr.add_parser(sub, common)
    bench_capacity.add_parser(sub, common)
    bench_limits.add_parser(sub, common)
    bench_cluster.add_parser(sub, common)
    bench_wake.add_parser(sub, common)
    models_parser = models.add_models_parser(sub)
    memory.add_memory_parsers(sub, common)
    storage.add_parser(sub, common)
    screens.add_parser(sub, common)
    console.add_parser(sub, common)
    models_parser.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="gateway.yaml to use")
    _show_defaults(parser)
    return parser


HUGE_PAGES = "glibc.malloc.hugetlb=1"


def _reexec_with_huge_pages() -> None:
    """Restart this process once with glibc's transparent-huge-page malloc tunable.

    The default ASR gives its scratch memory back after every decoding step; with huge pages the
    kernel refills it ~3x faster (gateway/engines/moonshine_ort.py). Tunables are read only at
    process start, hence the re-exec. Harmless where unsupported (non-glibc, THP off).
    """
    current = os.environ.get("GLIBC_TUNABLES", "")
    if sys.platform != "linux" or "glibc.malloc.hugetlb" in current:
        return
    env = {**os.environ, "GLIBC_TUNABLES": ":".join(filter(None, (current, HUGE_PAGES)))}
    try:
        os.execve(sys.executable, [sys.executable, "-m", "gateway", *sys.argv[1:]], env)
    except OSError:  # cannot re-exec (unusual sandbox): run as we are, decoding a bit slower
        return


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if argv is None and args.command in ("run", "bench", "bench-asr", "bench-capacity"):
        _reexec_with_huge_pages()
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        cfg = load_config(_config_path(args.config))
        logging.getLogger().setLevel(logging.DEBUG if args.verbose else cfg.logging.level)
        if not args.verbose:  # the embedded broker's state machine logs every transition at INFO,
            for noisy in ("transitions", "amqtt", "mcp.client"):  # the MCP SDK client each session id
                logging.getLogger(noisy).setLevel(logging.WARNING)
        return args.func(args, cfg)
    except GatewayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
