"""The sections of `gateway.yaml`: validated, typed, immutable.

Every section is a frozen pydantic model that rejects unknown keys, so a typo is an error,
not a silently ignored setting. `${NAME}` anywhere in a string value is replaced by the
environment variable NAME (use it for API keys and tokens; `${NAME:-default}` gives a default).
Relative paths are resolved against the directory of the config file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.base import _Section
from gateway.config.cluster import ClusterConfig
from gateway.config.brain import BrainConfig, LlmProviderConfig, McpServerConfig, PrestartToolConfig
from gateway.config.listen import ListenConfig
from gateway.config.memory import McpConfig, MemoryConfig
from gateway.config.storage import DevicesConfig, StorageConfig

class ServerConfig(_Section):
    host: str = "0.0.0.0"
    websocket_port: int = Field(8765, ge=0, le=65535)
    websocket_path: str = "/ws"
    max_frame_bytes: int = Field(65536, ge=256, le=16 * 1024 * 1024)
    hello_timeout_s: float = Field(10.0, gt=0, le=300)
    max_sessions: int = Field(64, ge=1, le=100_000)  # WebSocket + CoAP connections at once
    max_sessions_per_peer: int = Field(8, ge=1, le=100_000)  # ... from one IP address
    session_idle_s: float = Field(300.0, ge=0, le=86400)  # silent this long: Ping, then closed; 0: never


class ModelsConfig(_Section):
    dir: Path = Path("models")
    manifest: Path = Path("models/manifest.yaml")


class VadConfig(_Section):
    model: str = "silero-vad"
    threshold: float = Field(0.5, gt=0, lt=1)
    min_speech_ms: int = Field(150, ge=30, le=2000)
    trailing_silence_ms: int = Field(500, ge=100, le=5000)
    speculative_after_ms: int = Field(120, ge=0, le=5000)
    max_utterance_s: float = Field(20.0, ge=1, le=120)
    preroll_ms: int = Field(300, ge=0, le=2000)
    barge_in: bool = True
    relative_drop_db: float = Field(0.0, ge=0, le=40)  # 0 = off (gateway/voice/endpointing.py); 8 recommended in noise

    @model_validator(mode="after")
    def _speculation_before_endpoint(self) -> "VadConfig":
        if self.speculative_after_ms > self.trailing_silence_ms:
            raise ValueError(
                f"speculative_after_ms ({self.speculative_after_ms}) must not exceed "
                f"trailing_silence_ms ({self.trailing_silence_ms})"
            )
        return self


_ASR_FILES: dict[str, tuple[str, ...]] = {
    "moonshine": (),  # files come from the model manifest (asr.model)
    "moonshine-sherpa": (),
    "whisper": (),  # a CTranslate2 Whisper model of the manifest (asr.model)
    "transducer": ("encoder", "decoder", "joiner", "tokens"),
    "paraformer": ("encoder", "decoder", "tokens"),  # streaming paraformer
}


_ASR_DEFAULT_MODEL = {"whisper": "whisper-tiny-en"}  # asr.model when not given; else moonshine-base-en


class AsrConfig(_Section):
    engine: Literal["moonshine", "moonshine-sherpa", "whisper", "transducer", "paraformer"] = "moonshine"
    model: str = "moonshine-base-en"  # the default depends on the engine (_ASR_DEFAULT_MODEL)
    num_threads: int = Field(2, ge=1, le=16)
    # moonshine: which decoder runs: the derived int8-weight one (int8), the derived float one
    # (float, ~+100 MB), or the packaged one (packaged: dequantizes at every step, slow)
    moonshine_decoder: Literal["int8", "float", "packaged"] = "int8"
    beam_size: int = Field(1, ge=1, le=10)  # moonshine and whisper: 1 = greedy, more = beam search
    # moonshine only: decode again with Whisper tiny.en when Moonshine is unsure (empty, looped, or
    # mean token log-probability below second_opinion_below), keep the surer transcript
    # (gateway/engines/asr_second_opinion.py)
    second_opinion: Literal["none", "whisper"] = "none"
    second_opinion_below: float = Field(-0.5, ge=-10.0, le=0.0)
    # which transcript the second opinion keeps: the surer by its own model (own), or the best
    # weighted score of both models of every candidate (cross, asr_cross.py; cross_score sum | mean)
    second_opinion_choice: Literal["own", "cross"] = "own"
    cross_weight: float = Field(0.5, ge=0.0, le=1.0)
    cross_score: Literal["sum", "mean"] = "sum"
    # whisper only (gateway/engines/whisper_ct2.py):
    language: str = Field("en", pattern=r"^[a-z]{2,3}$")  # a Whisper language code; .en models: en
    compute_type: Literal["int8", "int8_float32", "int16", "float32"] = "int8"
    window: Literal["10s", "30s"] = "10s"  # the encoder's input: >= 10 s (3x less work), or Whisper's 30 s
    # For engine: transducer / paraformer (streaming sherpa-onnx models you download yourself):
    encoder: Path | None = None
    decoder: Path | None = None
    joiner: Path | None = None
    tokens: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _model_of_engine(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("model") is None and data.get("engine") in _ASR_DEFAULT_MODEL:
            return {**data, "model": _ASR_DEFAULT_MODEL[data["engine"]]}
        return data

    @model_validator(mode="after")
    def _second_opinion_of_moonshine(self) -> "AsrConfig":
        if self.second_opinion != "none" and self.engine != "moonshine":
            raise ValueError(f"second_opinion {self.second_opinion!r} needs engine moonshine (the engine it "
                             f"double-checks), not {self.engine!r}: set second_opinion: none")
        if self.second_opinion_choice == "cross" and self.second_opinion == "none":
            raise ValueError("second_opinion_choice 'cross' needs a second opinion to choose with "
                             "(second_opinion: whisper)")
        return self

    def second_opinion_asr(self) -> "AsrConfig | None":
        """The engine that double-checks this one (asr.second_opinion), or None."""
        if self.second_opinion != "whisper":
            return None
        return AsrConfig(engine="whisper", num_threads=self.num_threads, compute_type=self.compute_type,
                         window=self.window)

    def models(self) -> set[str]:
        """The manifest models this ASR runs (the downloaded transducer / paraformer files are none)."""
        own = {self.model} if self.engine in ("moonshine", "moonshine-sherpa", "whisper") else set()
        second = self.second_opinion_asr()
        return own | (second.models() if second else set())

    @model_validator(mode="after")
    def _files_match_engine(self) -> "AsrConfig":
        needed = set(_ASR_FILES[self.engine])
        given = {name for name in ("encoder", "decoder", "joiner", "tokens") if getattr(self, name) is not None}
        if extra := sorted(given - needed):
            raise ValueError(
                f"engine {self.engine!r} does not use {', '.join(extra)} (remove it or change the engine)"
            )
        if missing := sorted(needed - given):
            raise ValueError(f"engine {self.engine!r} needs {', '.join(missing)} (the path of the model's file)")
        return self


class TtsConfig(_Section):
    engine: Literal["piper"] = "piper"
    voice: str = "piper-joe-medium"
    length_scale: float = Field(1.0, gt=0.3, le=3.0)
    num_threads: int = Field(2, ge=1, le=16)
    # The voice with its 1-D convolutions run as 2-D ones, when the manifest derives one
    # (gateway/engines/piper_conv2d.py): less CPU per second of speech, the same audio. `auto`: on
    # where it was measured to pay off (x86-64 with AVX2, gateway/engines/cpu_features.py).
    conv2d: bool | Literal["auto"] = "auto"
    # Seconds of synthesized audio kept for texts said again (gateway/engines/tts_cache.py; ~2.6 MB
    # per minute at the voice's 22.05 kHz); 0 = synthesize every text.
    cache_seconds: float = Field(60.0, ge=0.0, le=3600.0)


class EnginesConfig(_Section):
    """How many calls of each engine run at once (gateway/engines/runner.py)."""

    asr_workers: int = Field(0, ge=0, le=64)  # 0: one per CPU core (os.cpu_count())
    tts_workers: int = Field(0, ge=0, le=64)
    max_waiting_turns: int = Field(32, ge=1, le=10000)


class AudioConfig(_Section):
    chunk_ms: int = Field(60, ge=10, le=500)
    prebuffer_ms: int = Field(300, ge=0, le=5000)
    default_sample_rate: int = Field(16000, ge=8000, le=48000)


class SerialPortConfig(_Section):
    port: str = Field(min_length=1)
    baud: int = Field(921600, ge=1200, le=12_000_000)


class SerialConfig(_Section):
    ports: tuple[SerialPortConfig, ...] = ()


class MqttConfig(_Section):
    enabled: bool = True
    host: str = ""  # empty: the embedded broker; else an external broker's host name
    port: int = Field(1883, ge=0, le=65535)
    topic_prefix: str = Field("gw", pattern=r"^[A-Za-z0-9_.-]{1,32}$")
    protocol: Literal["3.1.1", "5"] = "3.1.1"
    username: str = ""
    password: str = ""
    client_id: str = Field("edge-gateway", min_length=1, max_length=23)
    inbox_messages: int = Field(256, ge=8, le=65536)
    offline_queue: int = Field(1000, ge=0, le=1_000_000)


class CoapConfig(_Section):
    enabled: bool = True
    port: int = Field(5683, ge=1, le=65535)
    outbox_bytes: int = Field(1 << 20, ge=4096, le=64 << 20)
    session_idle_s: float = Field(120.0, gt=0, le=86400)


class XiaozhiConfig(_Section):
    """Stock xiaozhi-esp32 boxes: OTA bootstrap and their WebSocket protocol on server.websocket_port."""

    enabled: bool = True
    ota_path: str = Field("/xiaozhi/ota/", pattern=r"^/[A-Za-z0-9_./-]*$")
    ws_path: str = Field("/xiaozhi/v1/", pattern=r"^/[A-Za-z0-9_./-]*$")
    websocket_url: str = Field("", pattern=r"^(wss?://\S+)?$")  # "": derived from the OTA request's address
    mqtt_udp: bool = False  # offer boxes the MQTT+UDP transport (on the MQTT link's broker)
    mqtt_port: int = Field(1884, ge=0, le=65535)  # with the embedded broker: the boxes' own small broker, on server.host
    udp_port: int = Field(8766, ge=0, le=65535)  # their UDP audio, on server.host
    udp_host: str = ""  # the address boxes send UDP audio to; "": the one their OTA request reached
    sample_rate: Literal[16000, 24000] = 24000
    frame_duration_ms: Literal[20, 40, 60] = 60
    max_ahead_ms: int = Field(1200, ge=100, le=2400)
    emotions: Path = Path("config/xiaozhi_emotions.yaml")
    activation_ttl_s: int = Field(600, ge=30, le=86400)  # how long an activation code (and an approval) stays valid
    device_actions: Path = Path("config/device_actions.yaml")  # Action code -> the box's own tool
    tool_timeout_s: float = Field(10.0, ge=0.5, le=120)  # a call of a box's own MCP tool

    @model_validator(mode="after")
    def _distinct_paths(self) -> "XiaozhiConfig":
        if self.ota_path.rstrip("/") == self.ws_path.rstrip("/"):
            raise ValueError("ota_path and ws_path must differ")
        return self


class LoggingConfig(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class ExpressionConfig(_Section):
    action_rules: Path = Path("config/action_rules.csv")
    sentiment: Path = Path("config/sentiment.yaml")
    servo_map: Path = Path("config/servo_map.yaml")
    hints: Path = Path("config/hints.yaml")
    mouth_frame_ms: int = Field(40, ge=10, le=255)


class ScreensConfig(_Section):
    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = Field(8767, ge=0, le=65535)
    path: str = Field("/screen", pattern=r"^/[A-Za-z0-9_./-]*$")
    audio_cache: int = Field(64, ge=1, le=10000)
    tls: bool = True  # https for other machines (self-signed on first run), http on this one: one port
    cert: Path = Path("data/screens-cert.pem")
    key: Path = Path("data/screens-key.pem")
    access_key: Path = Path("data/screens-access-key")  # the screen key, made on first run


class ConsoleConfig(_Section):
    """The web console at <screen server>/console (gateway/console/)."""

    enabled: bool = True
    password_file: Path = Path("data/console-password")  # the admin password, scrypt-hashed
    session_hours: float = Field(12, gt=0, le=720)
    talk_turns: int = Field(20, ge=1, le=200)  # turns per device kept in memory for the Talk page, audio included
    max_failed_logins: int = Field(5, ge=1, le=100)  # per peer address, then locked out (doubling)


class GatewayConfig(_Section):
    server: ServerConfig = ServerConfig()
    models: ModelsConfig = ModelsConfig()
    vad: VadConfig = VadConfig()
    listen: ListenConfig = ListenConfig()
    asr: AsrConfig = AsrConfig()
    tts: TtsConfig = TtsConfig()
    engines: EnginesConfig = EnginesConfig()
    audio: AudioConfig = AudioConfig()
    brain: BrainConfig = BrainConfig()
    expression: ExpressionConfig = ExpressionConfig()
    screens: ScreensConfig = ScreensConfig()
    console: ConsoleConfig = ConsoleConfig()
    devices: DevicesConfig = DevicesConfig()
    storage: StorageConfig = StorageConfig()
    serial: SerialConfig = SerialConfig()
    mqtt: MqttConfig = MqttConfig()
    cluster: ClusterConfig = ClusterConfig()
    coap: CoapConfig = CoapConfig()
    xiaozhi: XiaozhiConfig = XiaozhiConfig()
    memory: MemoryConfig = MemoryConfig()
    mcp: McpConfig = McpConfig()
    logging: LoggingConfig = LoggingConfig()
    base_dir: Path = Field(default=Path("."), exclude=True)

    @model_validator(mode="after")
    def _cluster_needs(self) -> "GatewayConfig":
        if self.cluster.enabled:  # the members meet on one external broker and one PostgreSQL
            missing = [why for bad, why in (
                (not self.mqtt.enabled, "mqtt.enabled: true"),
                (not self.mqtt.host, "mqtt.host: an external broker every gateway of the cluster uses"),
                (self.mqtt.protocol != "5", 'mqtt.protocol: "5" (Last Will and message expiry of the member records)'),
                (self.storage.backend != "postgres", "storage: postgres (the device leases and the shared store)"),
            ) if bad]
            if missing:
                raise ValueError("cluster.enabled needs " + "; ".join(missing))
            if self.xiaozhi.mqtt_udp:  # every member would answer every box's hello (docs/XIAOZHI.md)
                raise ValueError("cluster.enabled does not support xiaozhi.mqtt_udp yet: every member would answer "
                                 "a box's MQTT hello; set xiaozhi.mqtt_udp: false (the boxes keep the WebSocket, "
                                 "which holds its lease in cluster mode)")
        return self

    def path(self, p: Path) -> Path:
        """Resolve a configured path against the config file's directory."""
        return p if p.is_absolute() else (self.base_dir / p).resolve()
