"""`gateway service install|status|uninstall`: the systemd unit it writes, where, and what it asks
systemctl to do (a fake systemd here: these machines run none)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli.main import main
from gateway.cli.service import SYSTEM_UNIT_DIR, NoSystemd, install, status, uninstall, unit_spec
from gateway.cli.service_unit import UNIT_FILE, UnitSpec, quote_arg, render_unit
from gateway.errors import GatewayError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "gateway.yaml"
VENV_GATEWAY = Path(sys.prefix) / "bin" / "gateway"


def _sections(unit: str) -> dict[str, list[tuple[str, str]]]:
    """[Section] -> (key, value) pairs in order (systemd allows a key more than once)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in unit.splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        elif line and not line.startswith("#"):
            key, _, value = line.partition("=")
            current.append((key, value))
    return sections


def _spec(user: str = "pi") -> UnitSpec:
    return UnitSpec(user=user, working_directory=ROOT,
                    command=(str(VENV_GATEWAY), "run", "--config", str(CONFIG)))


def _me() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


class FakeSystemd:
    """A running systemd that records each systemctl call; `failing` makes that command fail."""

    def __init__(self, failing: str = "") -> None:
        self.calls: list[str] = []
        self.failing = failing

    def unavailable(self) -> str:
        return ""

    def systemctl(self, *args: str) -> int:
        self.calls.append(" ".join(args))
        return 1 if self.failing and " ".join(args).startswith(self.failing) else 0


def test_the_unit_runs_gateway_run_with_the_config_as_the_user_restarts_on_failure_and_logs_to_journald() -> None:
    unit = _sections(render_unit(_spec()))
    service = dict(unit["Service"])
    assert service["User"] == "pi"
    assert service["WorkingDirectory"] == str(ROOT)
    assert service["ExecStart"] == f"{VENV_GATEWAY} run --config {CONFIG}"
    assert ("Environment", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1") in unit["Service"]
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"]) > 0
    assert service["RestartPreventExitStatus"] == "2"  # a bad config: restarting cannot help
    assert service["StandardOutput"] == service["StandardError"] == "journal"
    assert service["KillSignal"] == "SIGTERM"
    assert int(service["TimeoutStopSec"]) >= 10
    assert dict(unit["Unit"])["After"] == "network-online.target"
    assert dict(unit["Unit"])["Wants"] == "network-online.target"
    assert unit["Install"] == [("WantedBy", "multi-user.target")]


def test_unit_values_with_spaces_percent_or_dollar_are_quoted_for_systemd() -> None:
    assert quote_arg("/srv/gw/gateway.yaml") == "/srv/gw/gateway.yaml"
    assert quote_arg("/srv/my gw/gateway.yaml") == '"/srv/my gw/gateway.yaml"'
    assert quote_arg("/srv/100%/$HOME") == "/srv/100%%/$$HOME"
    assert quote_arg('a"b') == '"a\\"b"'
    spec = UnitSpec(user="pi", working_directory=Path("/srv/50% gw"), command=("/srv/50% gw/gateway", "run"))
    service = dict(_sections(render_unit(spec))["Service"])
    assert service["WorkingDirectory"] == "/srv/50%% gw"
    assert service["ExecStart"] == '"/srv/50%% gw/gateway" run'


def test_the_spec_runs_this_installations_gateway_in_the_configs_folder() -> None:
    spec = unit_spec(CONFIG, "pi")
    assert spec.working_directory == ROOT
    assert spec.command[-3:] == ("run", "--config", str(CONFIG))
    assert spec.command[0] == str(VENV_GATEWAY) or spec.command[:3] == (sys.executable, "-m", "gateway")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian package systemd)")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    spec = UnitSpec(user=_me(), working_directory=ROOT, command=unit_spec(CONFIG, _me()).command)
    path = tmp_path / UNIT_FILE
    path.write_text(render_unit(spec))
    res = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    ours = [line for line in (res.stdout + res.stderr).splitlines() if UNIT_FILE in line]
    assert res.returncode == 0 and not ours, res.stdout + res.stderr


def test_install_dry_run_prints_the_unit_and_writes_nothing(tmp_path: Path, capsys) -> None:
    units = tmp_path / "units"
    rc = main(["--config", str(CONFIG), "service", "install", "--dry-run", "--user", _me(),
               "--unit-dir", str(units)])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"would write {units / UNIT_FILE}" in out
    assert "systemctl enable --now edge-voice-gateway" in out
    assert f"User={_me()}\n" in out and f"--config {CONFIG}" in out and "WantedBy=multi-user.target" in out
    assert not units.exists()


def test_install_writes_the_unit_status_shows_it_and_uninstall_removes_it(tmp_path: Path, capsys) -> None:
    units = tmp_path / "units"
    common = ["--unit-dir", str(units)]
    assert main(["service", "install", "--config", str(CONFIG), "--user", _me(), *common]) == 0
    out = capsys.readouterr().out
    unit = units / UNIT_FILE
    assert unit.read_text() == render_unit(unit_spec(CONFIG, _me()))
    assert f"wrote {unit}" in out
    assert "sudo systemctl daemon-reload" in out and "sudo systemctl enable --now edge-voice-gateway" in out

    assert main(["service", "status", *common]) == 0
    out = capsys.readouterr().out
    assert f"installed: {unit}" in out and f"User={_me()}" in out and "ExecStart=" in out

    assert main(["service", "uninstall", *common]) == 0
    assert f"removed {unit}" in capsys.readouterr().out
    assert not unit.exists()
    assert main(["service", "status", *common]) == 1
    assert "not installed" in capsys.readouterr().out


def test_install_without_a_config_file_says_to_pass_one(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GATEWAY_CONFIG", raising=False)
    assert main(["service", "install", "--unit-dir", str(tmp_path / "units")]) == 2
    assert "pass --config FILE" in capsys.readouterr().err


def test_a_system_unit_needs_root_and_the_error_says_to_use_sudo() -> None:
    with pytest.raises(GatewayError, match=r"needs root: run it with sudo, e\.g\. `sudo .*gateway service install --user \$USER`"):
        install(_spec(), SYSTEM_UNIT_DIR, NoSystemd("test"), print, euid=1000)
    with pytest.raises(GatewayError, match=r"needs root: run it with sudo, e\.g\. `sudo .*gateway service uninstall`"):
        uninstall(SYSTEM_UNIT_DIR, NoSystemd("test"), print, euid=1000)


def test_where_systemd_runs_install_reloads_and_enables_now_and_uninstall_disables_first(tmp_path: Path) -> None:
    systemd, lines = FakeSystemd(), []
    assert install(_spec(), tmp_path, systemd, lines.append) == 0
    assert systemd.calls == ["daemon-reload", "enable --now edge-voice-gateway"]
    assert any("enabled and started; it starts again at every boot" in line for line in lines)
    assert install(_spec(user="root"), tmp_path, systemd, lines.append) == 0  # a changed unit: restarted
    assert systemd.calls[2:] == ["daemon-reload", "enable --now edge-voice-gateway", "try-restart edge-voice-gateway"]
    assert status(tmp_path, systemd, lines.append) == 0
    assert systemd.calls[-1] == "status --no-pager edge-voice-gateway"
    systemd.calls.clear()
    assert uninstall(tmp_path, systemd, lines.append) == 0
    assert systemd.calls == ["disable --now edge-voice-gateway", "daemon-reload"]
    assert not (tmp_path / UNIT_FILE).exists()


def test_a_failing_systemctl_is_reported_and_uninstall_then_keeps_the_unit(tmp_path: Path) -> None:
    lines: list[str] = []
    assert install(_spec(), tmp_path, FakeSystemd(failing="enable"), lines.append) == 1
    assert any("`systemctl enable --now edge-voice-gateway` failed" in line for line in lines)
    assert uninstall(tmp_path, FakeSystemd(failing="disable"), lines.append) == 1
    assert (tmp_path / UNIT_FILE).exists()
