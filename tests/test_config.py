"""gateway.yaml and the config loader: the shipped file, validation messages, ${ENV}, immutability."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ValidationError

from gateway.config import GatewayConfig, load_config, parse_config
from gateway.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "gateway.yaml"
SECTIONS: dict[str, type[BaseModel]] = {
    name: field.annotation  # type: ignore[misc]
    for name, field in GatewayConfig.model_fields.items()
    if name != "base_dir"
}


def config_error(data: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert info.value.code == "config-invalid"
    return str(info.value)


# ---- the shipped gateway.yaml cannot drift from the code ---------------------------------------


def test_shipped_gateway_yaml_loads_and_equals_the_defaults() -> None:
    cfg, defaults = load_config(SHIPPED), GatewayConfig()
    for section in SECTIONS:
        assert getattr(cfg, section) == getattr(defaults, section), f"gateway.yaml [{section}] != defaults"
    assert cfg.base_dir == ROOT


# Keys gateway.yaml shows only as a comment, because their default depends on another key.
COMMENTED = {"asr": {"model"}}  # the engine's own model


def test_every_key_in_the_code_is_in_gateway_yaml_and_vice_versa() -> None:
    text = SHIPPED.read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    assert set(raw) == set(SECTIONS)
    for section, model in SECTIONS.items():
        commented = COMMENTED.get(section, set())
        assert set(raw[section]) == set(model.model_fields) - commented, f"keys of [{section}] differ"
        for key in commented:
            assert re.search(rf"^  # {key}: ", text, re.MULTILINE), f"gateway.yaml does not show {section}.{key}"


def test_the_shipped_asr_section_with_only_the_engine_changed_runs_that_engines_model() -> None:
    raw = yaml.safe_load(SHIPPED.read_text(encoding="utf-8"))
    asr = parse_config({"asr": {**raw["asr"], "engine": "whisper"}}).asr
    assert asr.models() == {"whisper-tiny-en"}


@pytest.mark.parametrize(("engine", "model", "own"), [
    ("whisper", "moonshine-base-en", "whisper-tiny-en"),
    ("moonshine", "whisper-tiny-en", "moonshine-base-en"),
    ("moonshine-sherpa", "whisper-tiny-en", "moonshine-base-en"),
])
def test_a_model_of_another_asr_engine_is_refused_when_the_config_loads(engine: str, model: str, own: str) -> None:
    msg = config_error({"asr": {"engine": engine, "model": model}})
    assert f"asr: engine {engine!r} cannot run model {model!r}" in msg
    assert f"leave asr.model out for the engine's own ({own})" in msg


@pytest.mark.parametrize("engine", [["whisper"], {"name": "whisper"}])
def test_an_asr_engine_given_as_a_list_or_mapping_is_a_clear_error(engine: Any) -> None:
    msg = config_error({"asr": {"engine": engine}})
    assert f"asr.engine = {engine!r}:" in msg
    assert "'moonshine', 'moonshine-sherpa', 'whisper', 'transducer' or 'paraformer'" in msg


def _commented_asr_examples() -> list[dict[str, str]]:
    """The `#   engine: ...` blocks in gateway.yaml's asr section, as mappings."""
    examples: list[dict[str, str]] = []
    for line in SHIPPED.read_text(encoding="utf-8").splitlines():
        if m := re.fullmatch(r"\s*#\s+(engine|encoder|decoder|joiner|tokens):\s+(\S+)", line):
            if m.group(1) == "engine":
                examples.append({})
            examples[-1][m.group(1)] = m.group(2)
    return examples


def test_commented_sherpa_onnx_examples_in_gateway_yaml_are_valid_asr_sections() -> None:
    examples = _commented_asr_examples()
    assert len(examples) == 3
    for example in examples:
        cfg = parse_config({"asr": example})
        assert cfg.asr.tokens is not None and cfg.asr.tokens.name == "tokens.txt"
        archive = Path(example["tokens"]).parent.name
        assert all(Path(v).parent.name == archive for k, v in example.items() if k != "engine")


def test_docs_config_md_describes_every_key() -> None:
    doc = (ROOT / "docs" / "CONFIG.md").read_text(encoding="utf-8")
    for section, model in SECTIONS.items():
        for key in model.model_fields:
            assert f"`{section}.{key}`" in doc, f"docs/CONFIG.md does not describe {section}.{key}"


# ---- validation messages ---------------------------------------------------------------------------


def test_bad_value_names_the_key_the_value_and_the_allowed_range() -> None:
    msg = config_error({"vad": {"trailing_silence_ms": -5}})
    assert "vad.trailing_silence_ms = -5" in msg
    assert "greater than or equal to 100" in msg


def test_bad_value_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("server:\n  websocket_port: 70000\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value)
    assert "server.websocket_port = 70000" in str(info.value) and "65535" in str(info.value)


def test_bad_choice_lists_the_allowed_values() -> None:
    msg = config_error({"asr": {"engine": "kaldi"}})
    assert "asr.engine = 'kaldi'" in msg
    assert "'moonshine', 'moonshine-sherpa', 'whisper', 'transducer' or 'paraformer'" in msg


def test_the_whisper_engine_takes_its_own_model_and_settings() -> None:
    asr = parse_config({"asr": {"engine": "whisper"}}).asr
    assert (asr.model, asr.beam_size, asr.language, asr.compute_type, asr.window) == \
        ("whisper-tiny-en", 1, "en", "int8", "10s")
    asr = parse_config({"asr": {"engine": "whisper", "model": "my-whisper", "beam_size": 5, "window": "30s"}}).asr
    assert (asr.model, asr.beam_size, asr.window) == ("my-whisper", 5, "30s")
    assert parse_config({"asr": {"engine": "moonshine"}}).asr.model == "moonshine-base-en"


def test_the_asr_names_the_models_it_runs_its_second_opinion_included() -> None:
    assert parse_config({}).asr.models() == {"moonshine-base-en"}
    assert parse_config({"asr": {"engine": "whisper"}}).asr.models() == {"whisper-tiny-en"}
    both = parse_config({"asr": {"second_opinion": "whisper", "num_threads": 3}}).asr
    assert both.models() == {"moonshine-base-en", "whisper-tiny-en"}
    second = both.second_opinion_asr()
    assert second is not None and (second.engine, second.model, second.num_threads) == ("whisper", "whisper-tiny-en", 3)
    assert parse_config({"asr": {"engine": "transducer", "encoder": "e", "decoder": "d", "joiner": "j",
                                 "tokens": "t"}}).asr.models() == set()


@pytest.mark.parametrize(("asr", "key"), [
    ({"engine": "whisper", "beam_size": 0}, "asr.beam_size"),
    ({"engine": "whisper", "compute_type": "int4"}, "asr.compute_type"),
    ({"engine": "whisper", "window": "5s"}, "asr.window"),
    ({"engine": "whisper", "language": "English"}, "asr.language"),
    ({"engine": "whisper", "encoder": "e.onnx"}, "asr"),
])
def test_bad_whisper_settings_are_refused_naming_the_key(asr: dict, key: str) -> None:
    assert key in config_error({"asr": asr})


def test_unknown_key_is_reported() -> None:
    assert "vad.treshold: unknown key" in config_error({"vad": {"treshold": 0.6}})
    assert "vadd: unknown key" in config_error({"vadd": {}})


def test_a_renamed_key_names_its_successor() -> None:
    assert "asr.float_decoder: renamed to asr.moonshine_decoder" in config_error({"asr": {"float_decoder": True}})


def test_every_bad_key_is_reported_at_once() -> None:
    msg = config_error({"vad": {"threshold": 2}, "server": {"websocket_port": -1}})
    assert "vad.threshold = 2" in msg and "server.websocket_port = -1" in msg


def test_speculation_may_not_start_after_the_endpoint() -> None:
    msg = config_error({"vad": {"speculative_after_ms": 900}})
    assert "vad: speculative_after_ms (900) must not exceed trailing_silence_ms (500)" in msg


def test_true_is_not_accepted_as_a_number() -> None:
    assert "server.websocket_port = True" in config_error({"server": {"websocket_port": True}})


@pytest.mark.parametrize(
    ("asr", "problem"),
    [
        ({"engine": "transducer", "encoder": "e", "decoder": "d", "tokens": "t"}, "engine 'transducer' needs joiner"),
        ({"engine": "paraformer", "encoder": "e"}, "engine 'paraformer' needs decoder, tokens"),
        (
            {"engine": "paraformer", "encoder": "e", "decoder": "d", "joiner": "j", "tokens": "t"},
            "engine 'paraformer' does not use joiner",
        ),
        ({"encoder": "e.onnx"}, "engine 'moonshine' does not use encoder"),
    ],
)
def test_asr_files_must_match_the_engine(asr: dict[str, str], problem: str) -> None:
    assert f"asr: {problem}" in config_error({"asr": asr})


def test_a_complete_transducer_section_is_accepted() -> None:
    files = {"encoder": "e.onnx", "decoder": "d.onnx", "joiner": "j.onnx", "tokens": "t.txt"}
    cfg = parse_config({"asr": {"engine": "transducer", **files}})
    assert cfg.asr.joiner == Path("j.onnx")


def test_top_level_must_be_a_mapping() -> None:
    assert "top level must be a mapping" in config_error(["server"])


def test_base_dir_cannot_be_set_from_the_file() -> None:
    assert "base_dir: unknown key" in config_error({"base_dir": "/"})


def test_bad_yaml_and_missing_file_are_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("server: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"broken\.yaml is not valid YAML"):
        load_config(broken)
    with pytest.raises(ConfigError, match=r"cannot read .*missing\.yaml"):
        load_config(tmp_path / "missing.yaml")


# ---- conveniences ---------------------------------------------------------------------------------


def test_an_empty_section_means_all_defaults(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("vad:\n  # threshold: 0.6\nserver:\n  websocket_port: 9000\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.vad == GatewayConfig().vad and cfg.server.websocket_port == 9000


def test_log_level_is_case_insensitive() -> None:
    assert parse_config({"logging": {"level": "debug"}}).logging.level == "DEBUG"


def test_relative_paths_resolve_against_the_config_files_directory(tmp_path: Path) -> None:
    path = tmp_path / "site" / "gw.yaml"
    path.parent.mkdir()
    path.write_text("brain:\n  replies: my/replies.yaml\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.path(cfg.brain.replies) == (tmp_path / "site" / "my" / "replies.yaml").resolve()
    assert cfg.path(Path("/abs/file")) == Path("/abs/file")


def test_no_file_gives_the_built_in_defaults() -> None:
    assert load_config(None).vad == GatewayConfig().vad


# ---- ${ENV} expansion --------------------------------------------------------------------------------


def test_env_variables_are_expanded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GW_TEST_PORT", "9001")
    monkeypatch.setenv("GW_TEST_NAME", "Robo")
    path = tmp_path / "gw.yaml"
    path.write_text(
        "server:\n  websocket_port: ${GW_TEST_PORT}\n"
        "brain:\n  fallback: 'I am ${GW_TEST_NAME}, sorry.'\n",
        encoding="utf-8",
    )
    cfg = load_config(path)
    assert cfg.server.websocket_port == 9001
    assert cfg.brain.fallback == "I am Robo, sorry."


def test_env_default_is_used_when_the_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GW_TEST_UNSET", raising=False)
    assert parse_config({"server": {"host": "${GW_TEST_UNSET:-127.0.0.1}"}}).server.host == "127.0.0.1"


def test_missing_env_variable_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GW_TEST_UNSET", raising=False)
    msg = config_error({"server": {"host": "${GW_TEST_UNSET}"}})
    assert "server.host" in msg and "environment variable GW_TEST_UNSET is not set" in msg


def test_expanded_value_is_still_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GW_TEST_PORT", "not-a-port")
    assert "server.websocket_port = 'not-a-port'" in config_error({"server": {"websocket_port": "${GW_TEST_PORT}"}})


# ---- immutability -------------------------------------------------------------------------------------


def test_config_objects_are_immutable() -> None:
    cfg = load_config(SHIPPED)
    with pytest.raises(ValidationError, match="frozen"):
        cfg.vad.threshold = 0.9  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        cfg.vad = cfg.vad  # type: ignore[misc]
    assert cfg.vad.threshold == 0.5


# ---- two listeners on one port -------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "clash"), [
    ({"screens": {"port": 8765}}, "server.websocket_port and screens.port are both TCP port 8765 on 0.0.0.0"),
    ({"screens": {"port": 9000, "host": "127.0.0.1"}, "server": {"websocket_port": 9000}},
     "server.websocket_port and screens.port are both TCP port 9000 on 0.0.0.0 and 127.0.0.1"),
    ({"mqtt": {"port": 8767}}, "screens.port and mqtt.port are both TCP port 8767 on 0.0.0.0"),
    ({"xiaozhi": {"mqtt_udp": True, "udp_port": 5683}}, "coap.port and xiaozhi.udp_port are both UDP port 5683 on 0.0.0.0"),
    ({"mcp": {"http": True, "token": "t" * 16, "port": 9001, "host": "0.0.0.0"}, "screens": {"port": 9001}},
     "screens.port and mcp.port are both TCP port 9001 on 0.0.0.0"),
])
def test_two_listeners_on_one_port_are_refused_naming_both_keys(data: dict, clash: str) -> None:
    msg = config_error(data)
    assert f"\n  {clash}: give each its own port" in msg


@pytest.mark.parametrize("data", [
    {"coap": {"port": 8765}},  # UDP beside TCP
    {"screens": {"port": 8765, "host": "127.0.0.1"}, "server": {"host": "10.0.0.2"}},  # two addresses
    {"screens": {"port": 8765, "enabled": False}},
    {"mqtt": {"port": 8767, "host": "broker.lan"}},  # an external broker: no listener here
    {"server": {"websocket_port": 0}, "screens": {"port": 0}},  # any free port
    {"xiaozhi": {"mqtt_udp": True}, "mcp": {"http": True, "token": "t" * 16}},  # 8766 on UDP and TCP
])
def test_listeners_that_can_share_a_port_number_are_accepted(data: dict) -> None:
    parse_config(data)


def test_the_ports_checked_are_the_ones_gateway_run_opens() -> None:
    from gateway.cli.preflight import run_listeners
    from gateway.config.ports import listen_ports

    cfg = parse_config({"xiaozhi": {"mqtt_udp": True}, "mcp": {"http": True, "token": "t" * 16}})
    assert {p.key for p in listen_ports(cfg)} == {p.key for p in run_listeners(cfg)} == {
        "server.websocket_port", "screens.port", "mqtt.port", "coap.port", "xiaozhi.mqtt_port", "xiaozhi.udp_port",
        "mcp.port"}


# ---- pydantic's words translated; YAML errors and duplicate keys ---------------------------------------


@pytest.mark.parametrize(("data", "line"), [
    ({"vad": [1, 2]}, "vad = [1, 2]: should be a section of keys (key: value lines, indented below it), not a list"),
    ({"tts": "piper"}, "tts = 'piper': should be a section of keys (key: value lines, indented below it), not text"),
    ({"listen": {"devices": ["box1"]}}, "listen.devices = ['box1']: should be a section of keys"),
    ({"brain": {"providers": [{"name": "x"}]}}, "brain.providers.0.base_url: missing (this key is required here)"),
    ({"serial": {"ports": [{"baud": 9600}]}}, "serial.ports.0.port: missing (this key is required here)"),
    ({"memory": {"search_weights": [1, 2]}}, "memory.search_weights = [1, 2]: give 3 values"),
    ({"memory": {"search_weights": [1, 2, 3, 4]}}, "memory.search_weights = [1, 2, 3, 4]: give 3 values"),
    ({"listen": {"stop_words": "stop"}}, "listen.stop_words = 'stop': should be a list ([a, b]; one value: [stop]), not text"),
    ({"serial": {"ports": "/dev/ttyUSB0"}}, "serial.ports = '/dev/ttyUSB0': should be a list ([a, b]; one value: "),
    ({"expression": {"servo_map": 5}}, "expression.servo_map = 5: should be a file path (text), not a number"),
    ({"memory": {"users": {1234: "anna"}}}, "memory.users: the key 1234: should be text, and YAML reads 1234 as a "
                                            "number: quote it ('1234')"),
    ({"serial": {"ports": [{"port": 7}]}}, "serial.ports.0.port = 7: should be text, and YAML reads 7 as a number: "
                                           "quote it ('7')"),
    ({"listen": {"wake_words": [True]}}, "listen.wake_words.0 = True: should be text, and YAML reads yes / no / on / "
                                         "off / true / false as true/false: quote it"),
    ({"coap": {"port": "abc"}}, "coap.port = 'abc': should be a whole number, not text"),
    ({"vad": {"trailing_silence": 500}}, "vad.trailing_silence: unknown key (did you mean trailing_silence_ms? "
                                         "See the comments in gateway.yaml)"),
    ({"sreens": {}}, "sreens: unknown key (did you mean screens? See"),
    ({"brain": {"providers": [{"name": "x", "base_url": "http://h", "model": "m", "max_token": 9}]}},
     "brain.providers.0.max_token: unknown key (did you mean max_tokens?"),
    ({"voice": {}}, "voice: unknown key (check the spelling; see the comments in gateway.yaml)"),
])
def test_config_errors_are_in_plain_words_without_pydantic_internals(data: dict, line: str) -> None:
    msg = config_error(data)
    assert f"\n  {line}" in msg
    for internal in ("Input should be a valid", "instance of", "pathlib", "Field required", "[key]", "Tuple should"):
        assert internal not in msg


def test_a_key_given_twice_is_refused_naming_the_key_and_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("vad:\n  threshold: 0.5\nserver:\n  websocket_port: 9000\nvad:\n  threshold: 0.6\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (f"config error in {path}: the key 'vad' is given twice (lines 1 and 5): the second "
                               "would replace the first; keep one")
    path.write_text("vad:\n  threshold: 0.5\n  threshold: 0.6\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"the key 'threshold' is given twice \(lines 2 and 3\)"):
        load_config(path)


def test_a_yaml_merge_key_may_still_override_what_it_merges(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("server: &s {host: 127.0.0.1}\nscreens:\n  <<: *s\n  host: 127.0.0.2\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.server.host, cfg.screens.host) == ("127.0.0.1", "127.0.0.2")


def test_a_yaml_syntax_error_names_the_config_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("server:\n  host: 127.0.0.1\nmcp: {token: ${GW_TOKEN}}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    msg = str(info.value)
    assert f'in "{path}", line 3' in msg and "<unicode string>" not in msg
    assert msg.endswith('(a ${NAME} inside { ... } must be quoted: {token: "${NAME}"})')
