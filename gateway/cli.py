"""Command line: `gateway run | simulate | doctor | models | bench`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

from gateway import __version__
from gateway.config import GatewayConfig, load_config
from gateway.errors import GatewayError

DEFAULT_URL = "ws://127.0.0.1:8765/ws"


def _progress(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _config_path(arg: str | None) -> Path | None:
    """--config, else $GATEWAY_CONFIG, else ./gateway.yaml if present, else embedded defaults."""
    if arg:
        return Path(arg)
    if os.environ.get("GATEWAY_CONFIG"):
        return Path(os.environ["GATEWAY_CONFIG"])
    local = Path("gateway.yaml")
    return local if local.exists() else None


def _cmd_run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.app import Gateway, connect_hints, default_links, load_runner

    if args.port is not None or args.host is not None:
        server = cfg.server.model_copy(
            update={k: v for k, v in (("websocket_port", args.port), ("host", args.host)) if v is not None}
        )
        # The LAN screens follow: same address, and any free port when the devices' port is 0.
        screens = cfg.screens.model_copy(update={k: v for k, v in (("host", args.host), ("port", 0 if args.port == 0 else None)) if v is not None})
        cfg = cfg.model_copy(update={"server": server, "screens": screens})
    print(f"edge-voice-gateway {__version__}: loading models (first start prepares them)...", file=sys.stderr)
    runner = load_runner(cfg, _progress)
    links = default_links(cfg)
    memory = None
    if cfg.memory.enabled:
        from gateway.memory.service import MemoryService

        memory = MemoryService.from_config(cfg, progress=_progress)
    gateway = Gateway(cfg, runner, links, memory=memory)

    async def main() -> None:
        ready = asyncio.Event()
        task = asyncio.create_task(gateway.serve(ready))
        await ready.wait()
        port = links[0].port
        print("\nGateway ready. Voice boxes connect to:", flush=True)
        for hint in connect_hints(cfg, port):
            print(f"  {hint}")
        for link in links:
            if link.name == "screens":
                host = cfg.screens.host if cfg.screens.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
                print(f"Screens and the browser voice box: {link.scheme}://{host}:{link.port}/  (from the LAN: this machine's name)")
        print("\nTry it without hardware, in another terminal:")
        print(f'  gateway simulate --say "What time is it?" --url ws://127.0.0.1:{port}{cfg.server.websocket_path} --out reply.wav')
        print("Stop with Ctrl+C.\n", flush=True)
        await task

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    except OSError as exc:
        print(f"error: cannot listen on {cfg.server.host}:{cfg.server.websocket_port}: {exc.strerror}. "
              "Is another gateway running? Change server.websocket_port or pass --port.", file=sys.stderr)
        return 1
    finally:
        runner.close()
    return 0


def _sim_caps(args: argparse.Namespace) -> int:
    """Hello capabilities of the simulated box: visemes + action, plus what --mouth/--servo add."""
    from firmware_protocol import Capability
    from gateway.simulate import EXPRESSIVE

    caps = EXPRESSIVE
    if args.mouth:
        caps |= Capability.MOUTH
    if args.servo:  # an ESP32 servo board: ready keyframes instead of the raw Action
        caps = (caps | Capability.SERVO) & ~Capability.ACTION
    return caps


def _cmd_simulate(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.links.device_side import DEFAULT_URLS
    from gateway.simulate import SimulateError, load_input, simulate, write_wav

    def emit(event: dict) -> None:
        if args.json:
            print(json.dumps(event, ensure_ascii=False), flush=True)
        else:
            detail = " ".join(f"{k}={v}" for k, v in event.items() if k != "event")
            print(f"{event['event']:>15}  {detail}", flush=True)

    def synthesize(text: str):
        from gateway.engines.factory import load_tts
        from gateway.modelstore import ModelStore
        return load_tts(cfg, ModelStore(cfg), _progress).synthesize_float(text)

    try:
        audio, rate = load_input(Path(args.wav) if args.wav else None, args.say, synthesize)
        result = asyncio.run(
            simulate(args.url or DEFAULT_URLS[args.transport], audio, rate, device_id=args.device_id,
                     transport=args.transport, token=args.token, out_rate=args.rate, speed=args.speed,
                     push_to_talk=args.ptt, timeout=args.timeout, emit=emit, capabilities=_sim_caps(args))
        )
    except SimulateError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        write_wav(Path(args.out), result.reply_audio, result.out_rate)
        if not args.json:
            print(f"reply audio saved to {args.out} ({result.audio_seconds:.1f} s at {result.out_rate} Hz)")
    return 0 if result.reply_text else 1


def _cmd_doctor(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.doctor import run_doctor

    return run_doctor(cfg)


def _cmd_bench(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    if args.llm:
        from gateway.bench_llm import run_bench_llm

        if args.no_speculate:  # for comparison: the brain is asked only after the endpoint
            cfg = cfg.model_copy(update={"brain": cfg.brain.model_copy(update={"speculate": False})})
        return run_bench_llm(cfg, args.utterances, args.llm_first_sentence_ms, args.json)
    from gateway.bench import run_bench

    return run_bench(cfg, utterances=args.utterances, as_json=args.json)


def _cmd_bench_links(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.app import load_runner
    from gateway.bench_links import Broker, run_bench_links

    broker = Broker.parse(args.broker, args.broker_username, args.broker_password) if args.broker else None
    return run_bench_links(cfg, args.readings, args.json, lambda: load_runner(cfg, _progress), broker)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gateway",
        description="Offline edge gateway for ESP32 voice boxes, robots and sensors. "
        "Devices stream microphone audio; the gateway detects speech (Silero VAD), transcribes it "
        "(sherpa-onnx), decides a reply (local rules) and streams speech back (piper).",
        epilog="Config: --config FILE, else $GATEWAY_CONFIG, else ./gateway.yaml, else built-in defaults.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", metavar="FILE", help="gateway.yaml to use")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # --config is accepted before or after the command (`gateway run --config FILE`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="gateway.yaml to use")

    run = sub.add_parser("run", parents=[common], help="serve devices (prints where they connect)")
    run.add_argument("--port", type=int, help="WebSocket port (overrides server.websocket_port; 0 = any free port)")
    run.add_argument("--host", help="address to listen on (overrides server.host)")
    run.set_defaults(func=_cmd_run)

    sim = sub.add_parser("simulate", parents=[common], help="a virtual voice box: stream a WAV (or spoken text) and receive the reply",
                         description="Connects like an ESP32 voice box, streams the audio in real time, keeps "
                         "streaming silence until the reply ends, and saves the reply. Exit code 0 when a reply "
                         "came back, 1 when none did, 2 when it could not connect.")
    src = sim.add_mutually_exclusive_group(required=True)
    src.add_argument("--wav", metavar="FILE", help="16-bit PCM WAV to send (any rate, mono or stereo)")
    src.add_argument("--say", metavar="TEXT", help="speak TEXT with the local TTS and send that")
    sim.add_argument("--url", default=None, help=f"where the gateway is: ws://... (default {DEFAULT_URL}), "
                     "mqtt://host:port (default mqtt://127.0.0.1:1883), coap://host:port (default coap://127.0.0.1:5683), "
                     "or a serial port path for --transport serial")
    sim.add_argument("--transport", choices=("ws", "mqtt", "coap", "serial"), default="ws",
                     help="how to reach the gateway, like a device would (default ws)")
    sim.add_argument("--token", default="", help="the device token from `gateway devices add` (when enrolment is closed)")
    sim.add_argument("--out", metavar="FILE", help="save the reply audio as a WAV")
    sim.add_argument("--json", action="store_true", help="print one JSON object per event")
    sim.add_argument("--speed", type=float, default=1.0, help="streaming speed, 1 = real time, 0 = as fast as possible")
    sim.add_argument("--ptt", action="store_true", help="push-to-talk: end the audio stream right after the WAV")
    sim.add_argument("--rate", type=int, default=16000, help="sample rate to ask for the reply (default 16000)")
    sim.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    sim.add_argument("--device-id", default="simulator", help="device id to announce")
    sim.add_argument("--mouth", action="store_true", help="also ask for Mouth values (a servo jaw or LED mouth)")
    sim.add_argument("--servo", action="store_true", help="act as a servo board: ask for servo keyframes instead of Action")
    sim.set_defaults(func=_cmd_simulate)

    doc = sub.add_parser("doctor", parents=[common], help="check models, ports, SQLite and audio libraries; say what to fix")
    doc.set_defaults(func=_cmd_doctor)

    bench = sub.add_parser("bench", parents=[common], help="measure latency and real-time factors (prints medians and p95)")
    bench.add_argument("--utterances", type=int, default=20, help="how many utterances (default 20)")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.add_argument("--llm", action="store_true", help="answer with an LLM brain (a scripted OpenAI-compatible "
                       "server on 127.0.0.1): endpoint -> first reply audio vs the LLM's own first-sentence latency")
    bench.add_argument("--llm-first-sentence-ms", type=float, default=300.0, metavar="MS",
                       help="with --llm: the scripted model's first-sentence latency (default 300)")
    bench.add_argument("--no-speculate", action="store_true",
                       help="with --llm: ask the LLM only after the endpoint (brain.speculate off), for comparison")
    bench.set_defaults(func=_cmd_bench)

    from gateway.cli_devices import add_devices_parsers

    add_devices_parsers(sub, common)
    bl = sub.add_parser("bench-links", parents=[common], help="sensor readings per second through each link into SQLite; "
                        "MQTT CPU per message vs a bare paho loop")
    bl.add_argument("--readings", type=int, default=2000, help="readings per link (default 2000; CoAP sends a fifth)")
    bl.add_argument("--json", action="store_true", help="print the figures as JSON")
    bl.add_argument("--broker", metavar="HOST:PORT", help="also measure MQTT through this external broker "
                    "(e.g. a mosquitto; topics bench/...), next to the embedded one")
    bl.add_argument("--broker-username", help="login for --broker (devices log in as their id)")
    bl.add_argument("--broker-password", help="password for --broker-username")
    bl.set_defaults(func=_cmd_bench_links)

    from gateway.cli_models import add_models_parser

    models = add_models_parser(sub)
    from gateway.cli_memory import add_memory_parsers

    add_memory_parsers(sub, common)
    models.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help="gateway.yaml to use")
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
    if argv is None and args.command in ("run", "bench"):
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
