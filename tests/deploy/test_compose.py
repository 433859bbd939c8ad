"""The container deployment (deploy/, Dockerfile): the compose file, the proxy and the image
agree with each other and with `learning-bot serve`; with a container engine, the smoke test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from learning_bot.cli import main
from tests.processes import inherited

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLICAS = ("app-1", "app-2")


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return data


def dockerfile_port() -> int:
    text = (ROOT / "Dockerfile").read_text()
    exposed = re.findall(r"^EXPOSE (\d+)$", text, re.M)
    assert len(exposed) == 1, exposed
    return int(exposed[0])


def test_replicas_start_after_the_migration_on_a_healthy_database() -> None:
    services = compose()["services"]
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["restart"] == "no"
    for name in REPLICAS:
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}
        assert depends["postgres"] == {"condition": "service_healthy"}
        assert services[name]["environment"] == services["migrate"]["environment"]
    proxy = services["proxy"]["depends_on"]
    assert {name: proxy[name]["condition"] for name in REPLICAS} == dict.fromkeys(
        REPLICAS, "service_healthy"
    )


def test_each_replica_has_its_own_spool_volume() -> None:
    services = compose()["services"]
    volumes = [services[name]["volumes"] for name in REPLICAS]
    assert all(len(v) == 1 and v[0].endswith(":/data") for v in volumes)
    assert len({v[0] for v in volumes}) == len(REPLICAS)


def test_the_proxy_balances_over_every_replica_on_the_image_port() -> None:
    conf = (DEPLOY / "proxy" / "nginx.conf").read_text()
    upstream = re.search(r"upstream learning_bot \{(.*?)\}", conf, re.S)
    assert upstream is not None
    servers = re.findall(r"server ([\w.-]+):(\d+)", upstream.group(1))
    assert sorted(servers) == [(name, str(dockerfile_port())) for name in REPLICAS]
    assert "add_header X-Upstream $upstream_addr" in conf


def test_the_soak_override_adds_a_third_replica_like_the_others() -> None:
    """deploy/soak.compose.yaml (bench/soak.py) must not drift from compose.yaml: its app-3 is
    app-1 with its own volume, and its proxy's nginx-soak.conf is nginx.conf with app-3."""
    base = compose()["services"]
    soak = yaml.safe_load((DEPLOY / "soak.compose.yaml").read_text())["services"]
    third = soak["app-3"]
    for key in ("image", "restart", "depends_on"):
        assert third[key] == base["app-1"][key], key
    env = third["environment"]
    assert {k: env[k] for k in base["app-1"]["environment"]} == base["app-1"]["environment"]
    added = {k: v for k, v in env.items() if k not in base["app-1"]["environment"]}
    assert soak["app-1"]["environment"] == soak["app-2"]["environment"] == added
    assert third["volumes"] == ["app-3:/data"]
    assert soak["proxy"]["volumes"] == ["./proxy/nginx-soak.conf:/etc/nginx/nginx.conf:ro"]

    def lines(name: str) -> list[str]:
        text = (DEPLOY / "proxy" / name).read_text()
        return [line for line in text.splitlines() if not line.startswith("#")]

    expected = lines("nginx.conf")
    second = next(i for i, line in enumerate(expected) if line.strip().startswith("server app-2:"))
    expected.insert(second + 1, expected[second].replace("app-2", "app-3"))
    assert lines("nginx-soak.conf") == expected


def test_the_image_serves_and_checks_health_on_the_port_it_exposes() -> None:
    text = (ROOT / "Dockerfile").read_text()
    port = dockerfile_port()
    assert f"127.0.0.1:{port}/__openclaw__/api/learning/healthz" in text
    assert f'CMD ["serve", "--host", "0.0.0.0", "--port", "{port}"]' in text
    assert 'ENTRYPOINT ["learning-bot"]' in text


def test_the_image_command_refuses_to_listen_without_a_token(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented default command is one `serve` accepts, and it needs the token."""
    monkeypatch.delenv("LEARNING_BOT_API_TOKEN", raising=False)
    monkeypatch.delenv("LEARNING_BOT_CONFIG", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--port", str(dockerfile_port())]) != 0
    assert "without LEARNING_BOT_API_TOKEN" in capsys.readouterr().err


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    done = subprocess.run(["docker", "info"], env=inherited(), capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("LEARNING_BOT_TEST_DEPLOY") != "1",
    reason="set LEARNING_BOT_TEST_DEPLOY=1 (after deploy/build-images.sh) to run the smoke test",
)
def test_the_compose_smoke_test_passes() -> None:
    if not _docker_ready():
        pytest.skip("no container engine answers `docker info`")
    result = subprocess.run(
        [str(DEPLOY / "smoke.sh")],
        env=inherited(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "smoke: passed" in result.stdout
