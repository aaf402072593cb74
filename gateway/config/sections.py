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
from gateway.config.engines import AsrConfig, EnginesConfig, TtsConfig, VadConfig
from gateway.config.brain import BrainConfig
from gateway.config.listen import ListenConfig
from gateway.config.memory import McpConfig, MemoryConfig
from gateway.config.ports import listen_ports, port_clashes
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
    # open enrolment through the OTA endpoint: new boxes one address may register per hour, and
    # how many devices created so may be registered at all (docs/XIAOZHI.md)
    enrolments_per_hour_per_address: int = Field(20, ge=1, le=100_000)
    max_enrolled_boxes: int = Field(256, ge=1, le=1_000_000)
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

    @model_validator(mode="after")
    def _one_listener_per_port(self) -> "GatewayConfig":
        if clashes := port_clashes(listen_ports(self)):
            raise ValueError("; ".join(clashes))
        return self

    def path(self, p: Path) -> Path:
        """Resolve a configured path against the config file's directory."""
        return p if p.is_absolute() else (self.base_dir / p).resolve()
