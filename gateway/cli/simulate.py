"""`gateway simulate`: a virtual voice box (gateway/cli/virtual_box.py) from the command line."""

from __future__ import annotations

import argparse

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from gateway.cli.progress import progress
from gateway.config import GatewayConfig

_ANY_ADDRESS = ("0.0.0.0", "::", "")


def _url_host(host: str) -> str:
    """Where a gateway listening on `host` is reached from this machine (an IPv6 address in brackets)."""
    host = "127.0.0.1" if host in _ANY_ADDRESS else host
    return f"[{host}]" if ":" in host else host


def default_url(cfg: GatewayConfig, transport: str) -> str:
    """The gateway of this config, as a device on this machine reaches it over `transport`."""
    host = _url_host(cfg.server.host)
    if transport == "ws":
        return f"ws://{host}:{cfg.server.websocket_port}{cfg.server.websocket_path}"
    if transport == "mqtt":  # an external broker (mqtt.host), else the embedded one on server.host
        broker = _url_host(cfg.mqtt.host) if cfg.mqtt.host else host
        return f"mqtt://{broker}:{cfg.mqtt.port}/{cfg.mqtt.topic_prefix}"
    if transport == "coap":
        return f"coap://{host}:{cfg.coap.port}/gw"
    return cfg.serial.ports[0].port if cfg.serial.ports else ""  # serial: the first configured port


def _sim_caps(args: argparse.Namespace) -> int:
    """Hello capabilities of the simulated box: visemes + action, plus what --mouth/--servo add."""
    from firmware_protocol import Capability
    from gateway.cli.virtual_box import EXPRESSIVE

    caps = EXPRESSIVE
    if args.mouth:
        caps |= Capability.MOUTH
    if args.servo:  # an ESP32 servo board: ready keyframes instead of the raw Action
        caps = (caps | Capability.SERVO) & ~Capability.ACTION
    return caps


def run(args: argparse.Namespace, cfg: GatewayConfig) -> int:
    from gateway.cli.virtual_box import SimulateError, load_input, simulate, write_wav

    def emit(event: dict) -> None:
        if args.json:
            print(json.dumps(event, ensure_ascii=False), flush=True)
        else:
            detail = " ".join(f"{k}={v}" for k, v in event.items() if k != "event")
            print(f"{event['event']:>15}  {detail}", flush=True)

    def synthesize(text: str):
        from gateway.engines.factory import load_tts
        from gateway.engines.store import ModelStore
        return load_tts(cfg, ModelStore(cfg), progress).synthesize_float(text)

    try:
        audio, rate = load_input(Path(args.wav) if args.wav else None, args.say, synthesize)
        result = asyncio.run(
            simulate(args.url or default_url(cfg, args.transport), audio, rate, device_id=args.device_id,
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


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    sim = sub.add_parser("simulate", parents=[common], help="a virtual voice box: stream a WAV (or spoken text) and receive the reply",
                         description="Connects like an ESP32 voice box, streams the audio in real time, keeps "
                         "streaming silence until the reply ends, and saves the reply. Exit code 0 when a reply "
                         "came back, 1 when none did, 2 when it could not connect.")
    src = sim.add_mutually_exclusive_group(required=True)
    src.add_argument("--wav", metavar="FILE", help="16-bit PCM WAV to send (any rate, mono or stereo)")
    src.add_argument("--say", metavar="TEXT", help="speak TEXT with the local TTS and send that")
    sim.add_argument("--url", default=None, help="where the gateway is: ws://host:port/path, mqtt://host:port[/topic "
                     "prefix], coap://host:port, or a serial port path for --transport serial (default: the "
                     "config's: server.websocket_port and websocket_path, mqtt.port, coap.port or the first "
                     "serial port, on 127.0.0.1, or on server.host when it is one address)")
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
    sim.set_defaults(func=run)
