"""The dashboard in headless Chromium: loads with the network limited to the server, renders
every section from simulated data, logs no console errors; a screenshot is kept."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from learning_bot.engine import Arm, ReportedArm, RunReport, ToolCall
from learning_bot.simulate import simulate
from tests.processes import inherited

from .conftest import Live, start_server, stop_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


@pytest.fixture(scope="module")
def dashboard_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    if CHROMIUM is None:
        if os.environ.get("LEARNING_BOT_REQUIRE_TESTS"):
            pytest.fail("Chromium is required for the dashboard test (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    live = start_server(f"sqlite:///{tmp_path_factory.mktemp('dash')}/dash.sqlite")
    service = live.app.service()
    simulate(service, traces=240, arms=24, seed=5)
    rare = Arm("tool:ext:RarelyOffered", 90)
    service.observe(
        RunReport("rare-1", (ReportedArm(rare),), tool_calls=(ToolCall("RarelyOffered"),))
    )
    service.reward("RarelyOffered", 1, actor="tester", reason="<b>not markup</b>")
    yield live
    stop_server(live)


def test_dashboard_renders_every_section(dashboard_server: Live) -> None:
    from playwright.sync_api import sync_playwright

    origin = dashboard_server.url
    blocked: list[str] = []
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
            env=inherited(),
        )
        try:
            for scheme in ("light", "dark"):
                page = browser.new_page(
                    color_scheme=scheme, viewport={"width": 1400, "height": 1000}
                )

                def only_the_server(route: object) -> None:
                    url = route.request.url  # type: ignore[attr-defined]
                    if url.startswith(origin):
                        route.continue_()  # type: ignore[attr-defined]
                    else:
                        blocked.append(url)
                        route.abort()  # type: ignore[attr-defined]

                page.route("**/*", only_the_server)
                page.on(
                    "console",
                    lambda msg: problems.append(msg.text) if msg.type == "error" else None,
                )
                page.on("pageerror", lambda exc: problems.append(str(exc)))
                page.goto(f"{origin}/__openclaw__/api/learning/dashboard")
                page.wait_for_selector("body[data-ready='1']", timeout=30_000)
                assert page.locator("#phase").inner_text() == "ACTIVE"
                assert page.locator("#cards .card").count() >= 5
                savings = page.locator("#token-savings .value")
                assert "%" in savings.inner_text()
                assert "good" in savings.get_attribute("class") or "bad" in savings.get_attribute(
                    "class"
                )
                for section in ("#convergence", "#baseline", "#tokens"):
                    assert page.locator(f"{section} svg").count() == 1, section
                assert page.locator("#runs .runs div").count() == 2
                assert page.locator("#convergence svg path.series").count() >= 2
                assert page.locator("#tokens svg rect").count() >= 2
                assert page.locator("#heatmap svg rect").count() >= 24 * 40
                rows = page.locator("#posteriors table tr")
                assert rows.count() == 26  # header + 25 arms
                assert page.locator("#posteriors .badge.seed").count() >= 1
                assert page.locator("#posteriors .badge.explore").count() >= 1
                assert page.locator("#posteriors .bar .range").count() == 25
                assert page.locator("#error").is_hidden()
                assert "<b>" not in page.content().split("<script>")[0]
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"dashboard-{scheme}.png"), full_page=True)
                page.close()
        finally:
            browser.close()
    assert problems == []
    assert blocked == []
