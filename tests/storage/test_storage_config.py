"""storage: config section and the DSN from the environment."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config
from gateway.storage.dsn import postgres_dsn
from tests.conftest import ROOT


def test_default_is_sqlite() -> None:
    cfg = parse_config({}, ROOT)
    assert cfg.storage.backend == "sqlite"
    assert cfg.storage.dsn_env == "GATEWAY_PG_DSN"


def test_shorthand_and_section() -> None:
    assert parse_config({"storage": "postgres"}, ROOT).storage.backend == "postgres"
    cfg = parse_config({"storage": {"backend": "postgres", "dsn_env": "MY_DSN"}}, ROOT)
    assert (cfg.storage.backend, cfg.storage.dsn_env) == ("postgres", "MY_DSN")


@pytest.mark.parametrize("bad", [{"storage": "mysql"}, {"storage": {"backend": "postgres", "dsn": "x"}},
                                 {"storage": {"dsn_env": "not a name"}}])
def test_bad_storage_refused(bad: dict) -> None:
    with pytest.raises(ConfigError):
        parse_config(bad, ROOT)


def test_dsn_from_the_named_variable() -> None:
    storage = parse_config({"storage": {"backend": "postgres", "dsn_env": "MY_DSN"}}, ROOT).storage
    assert postgres_dsn(storage, {"MY_DSN": "postgresql://u@h/db"}) == "postgresql://u@h/db"
    with pytest.raises(ConfigError, match="MY_DSN"):
        postgres_dsn(storage, {"GATEWAY_PG_DSN": "postgresql://u@h/db"})
