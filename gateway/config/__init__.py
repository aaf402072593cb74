"""Configuration: `gateway.yaml` -> one validated, frozen `GatewayConfig`, loaded once and passed in.

`sections` holds the sections (one pydantic model each; `vad`, `asr`, `tts` and `engines` in
`engines`, the brain's in `brain`, the memory's and `mcp` in `memory`, `devices` and `storage` in
`storage`), `loader` reads and checks the file. Import from here: `from gateway.config import GatewayConfig, load_config`.
"""

from gateway.config.brain import BrainConfig, LlmProviderConfig, McpServerConfig, PrestartToolConfig
from gateway.config.loader import load_config, parse_config
from gateway.config.engines import AsrConfig
from gateway.config.sections import GatewayConfig
from gateway.errors import ConfigError

__all__ = ["AsrConfig", "BrainConfig", "ConfigError", "GatewayConfig", "LlmProviderConfig", "McpServerConfig",
           "PrestartToolConfig", "load_config", "parse_config"]
