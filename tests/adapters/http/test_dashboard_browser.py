"""The dashboard in Chromium against `learning-bot serve`, filled by `learning-bot simulate`.

At 390 px and 1440 px, light and dark: no sideways page scroll, every text at least 11 px as
rendered (SVG scaling included), time labels on the time axes, chart lines with contrast against
their panel, every panel filled, the arms' key figures on screen. The empty state's command is
run as printed. The actions are clicked: reset all (confirmed, with the API token asked for),
undo, thumbs up and down, and the API shows the posteriors they changed. An arm's row opens
its detail (by click and from the keyboard) with what its usefulness depends on, in the words
`status arm` uses; an arm id that is markup is shown as text. Screenshots are saved
under $LEARNING_BOT_ARTIFACTS (or pytest's temporary directory).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.e2e.launch import served as serve
from tests.processes import inherited

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXE = str(Path(sys.executable).with_name("learning-bot"))
TOKEN = "dashboard-browser-token-0123456789"
BASE = "/__openclaw__/api/learning"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWS = [(width, scheme) for width in (390, 1440) for scheme in ("light", "dark")]


@dataclass
class Served:
    url: str
    env: dict[str, str]
    artifacts: Path

    @property
    def dashboard(self) -> str:
        return self.url + BASE + "/dashboard"

    def get(self, path: str, **params: str) -> Any:
        response = httpx.get(self.url + BASE + path, params=params, timeout=30)
        response.raise_for_status()
        return response.json()


def run_cli(args: list[str], env: dict[str, str]) -> str:
    result = subprocess.run(
        [EXE, *args], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    if CHROMIUM is None:
        if os.environ.get("LEARNING_BOT_REQUIRE_TESTS"):
            pytest.fail("Chromium is required for the dashboard test (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    tmp = tmp_path_factory.mktemp("dashboard-browser")
    env = {
        k: v
        for k, v in inherited().items()
        if not k.startswith(("LEARNING_BOT_", "SLACK_", "DISCORD_"))
    }
    env.update(
        LEARNING_BOT_DATABASE_URL=f"sqlite:///{tmp}/dashboard.sqlite",
        LEARNING_BOT_SPOOL_DIR=str(tmp / "spool"),
        LEARNING_BOT_API_TOKEN=TOKEN,
        HOME=str(tmp / "home"),
        XDG_CONFIG_HOME=str(tmp / "home" / ".config"),
        XDG_DATA_HOME=str(tmp / "home" / ".local" / "share"),
    )
    run_cli(["simulate", "--traces", "300"], env)
    with serve(env) as server:
        url = server.url
        artifacts_root = os.environ.get("LEARNING_BOT_ARTIFACTS")
        artifacts = (
            Path(artifacts_root) / "dashboard"
            if artifacts_root
            else tmp_path_factory.mktemp("artifacts")
        )
        artifacts.mkdir(parents=True, exist_ok=True)
        yield Served(url, env, artifacts)


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=inherited()
        )
        yield chromium
        chromium.close()


class Page:
    """A page limited to the server's origin that collects console errors and page errors."""

    def __init__(
        self,
        browser: Any,
        served: Served,
        width: int,
        scheme: str,
        *,
        answers: tuple[int, ...] = (),
    ) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 900}, color_scheme=scheme)
        self.problems: list[str] = []
        self.blocked: list[str] = []
        self.page.route("**/*", self._only_the_server(served.url))
        self.answers = answers
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.problems.append(str(exc)))

    def _console(self, msg: Any) -> None:
        # Chromium logs the refusals a test provokes (a 401 is how the server asks for the token).
        expected = any(f"status of {status} " in msg.text for status in self.answers)
        if msg.type == "error" and not expected:
            self.problems.append(msg.text)

    def _only_the_server(self, origin: str) -> Any:
        def handle(route: Any) -> None:
            if route.request.url.startswith(origin):
                route.continue_()
            else:
                self.blocked.append(route.request.url)
                route.abort()

        return handle

    def open(self, url: str) -> Any:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=30_000)
        return self.page

    def close(self) -> None:
        self.page.close()
        assert self.problems == []
        assert self.blocked == []


# Every element with text of its own, with its size as drawn (an SVG scaled down by its
# viewBox draws smaller than its CSS font-size says).
RENDERED_TEXT_SIZES = """() => {
  const out = [];
  for (const el of document.querySelectorAll("body *")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || el.closest("dialog, title, script, style")) continue;
    const box = el.getBoundingClientRect();
    if (!box.width || !box.height) continue;
    let size = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGGraphicsElement) size *= el.getScreenCTM().a;
    out.push([el.closest("section, header, div[id]")?.id || el.tagName, el.textContent.trim(),
              size]);
  }
  return out;
}"""


def luminance(css: str) -> float:
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", css)[:3])

    def channel(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


@pytest.mark.parametrize(("width", "scheme"), VIEWS)
def test_dashboard_reads_well(browser: Any, served: Served, width: int, scheme: str) -> None:
    summary = served.get("/summary")
    posteriors = served.get("/posteriors")
    assert summary["traceCount"] == 300
    tab = Page(browser, served, width, scheme)
    page = tab.open(served.dashboard)

    # The page never scrolls sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")

    # Every text is at least 11 px as drawn, chart and heatmap text included.
    sizes = page.evaluate(RENDERED_TEXT_SIZES)
    small = [(where, text[:30], round(size, 1)) for where, text, size in sizes if size < 11]
    assert small == []
    drawn = page.evaluate(
        """() => [...document.querySelectorAll(
             "#convergence svg text, #tokens svg text, #baseline svg text, #heatmap svg text")]
           .map((t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a)"""
    )
    assert len(drawn) > 40
    assert min(drawn) >= 11

    # The headline: the prompt cost saved first (as status), what was kept, the prompt tokens
    # saved against the full prompt when the summary has them, then the baseline-run
    # comparison with what it compares.
    if summary.get("promptCostSavingsPercent") is not None:
        lead = page.locator("#headline > div").first
        assert lead.get_attribute("id") == "cost-savings"
        assert "of prompt cost against full-prompt sessions" in lead.inner_text()
    if summary.get("promptSavingsPercent") is not None:
        headline = page.locator("#prompt-savings").inner_text()
        assert headline.startswith(("Saved", "Sent"))
        assert "compared with sending every component" in headline or "more prompt" in headline
        assert f"{abs(summary['promptSavingsPercent']):.0f}%" in headline.replace(",", "")
    if summary.get("estimatedRecall") is not None:
        assert "of the components the model used" in page.locator("#recall").inner_text()
    second = page.locator("#token-savings")
    assert "%" in second.inner_text()
    assert "Tokens per run, selected against baseline runs" in second.inner_text()
    assert "a baseline session sends every component" in second.inner_text()
    assert re.search(r"\b(good|bad)\b", second.locator(".value").get_attribute("class") or "")
    assert page.locator("#empty-hint").count() == 0

    # Every panel has data.
    assert page.locator("#phase").inner_text() == "ACTIVE"
    # traces, arms, tokens, budget, date range, and the sessions redrawn (simulate runs sessions)
    assert page.locator("#cards .card").count() == 6
    redrawn = page.locator("#sessions-redrawn .value").inner_text()
    assert re.fullmatch(r"[\d,]+ of [\d,]+", redrawn), redrawn
    assert page.locator("#cards .card").first.inner_text().endswith("300")
    assert page.locator("#convergence svg path.series").count() >= 2
    assert page.locator("#tokens svg rect").count() >= 2
    assert page.locator("#baseline svg rect").count() == 2
    # simulate runs sessions: the cost per session of both groups, hour by hour
    assert page.locator("#session-cost svg path.series").count() == 2
    assert "session" in (page.locator("#session-cost svg circle title").first.text_content() or "")
    assert page.locator("#runs .runs div").count() == 2
    shown = int(page.locator("#heatmap-count").inner_text())
    assert 20 <= shown <= 50
    assert page.locator("#heatmap svg rect").count() == shown * len(posteriors)
    assert page.locator("#posteriors tr[data-arm]").count() == len(posteriors)
    assert page.locator("#posteriors .badge.seed").count() >= 1
    assert page.locator("#error").is_hidden()
    assert page.locator("#tokens-section h2").inner_text().lower() == "avg tokens / run"

    # The date range is one line.
    date = page.locator("#cards .card").filter(has_text="Date range").locator(".value")
    box = date.bounding_box()
    assert box is not None
    line = page.evaluate(
        "(el) => parseFloat(getComputedStyle(el).fontSize) * 1.45",
        date.element_handle(),
    )
    assert box["height"] <= line * 1.2

    # Time labels on every time axis.
    for chart in ("#convergence", "#tokens"):
        labels = page.eval_on_selector_all(
            f"{chart} svg text", "(els) => els.map((e) => e.textContent)"
        )
        times = [t for t in labels if re.fullmatch(r"\d\d:\d\d|\w{3} \d{1,2}( \d\d:\d\d)?", t)]
        assert len(times) >= 2, (chart, labels)

    # Every line stands out from its panel in this theme.
    panel = page.evaluate(
        "getComputedStyle(document.querySelector('#convergence-section')).backgroundColor"
    )
    strokes = page.evaluate(
        """[...document.querySelectorAll('#convergence path.series')]
           .map((p) => getComputedStyle(p).stroke)"""
    )
    assert len(set(strokes)) == len(strokes)
    for stroke in strokes:
        assert contrast(stroke, panel) >= 3, (stroke, panel, scheme)

    # The arms' key figures are on screen without scrolling sideways.
    top = posteriors[0]
    row = page.locator(f'#posteriors tr[data-arm="{top["armId"]}"]')
    for cell, text in (
        ("td.arm", top["armId"]),
        ("td.mean", f"{top['mean']:.3f}"),
        ("td.pulls", f"{top['pulls']:,}"),
        ("td.confidence", top.get("confidenceBand") or top["confidence"]),
    ):
        located = row.locator(cell)
        assert text in located.inner_text()
        box = located.bounding_box()
        assert box is not None
        assert box["x"] >= 0
        assert box["x"] + box["width"] <= width, cell
    for thumb in ("button.thumb.up", "button.thumb.down"):
        box = row.locator(thumb).bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= width

    page.screenshot(path=str(served.artifacts / f"dashboard-{width}-{scheme}.png"), full_page=True)
    tab.close()


def test_empty_state_names_a_way_to_get_data(browser: Any, served: Served) -> None:
    from playwright.sync_api import expect

    tab = Page(browser, served, 390, "light")
    page = tab.open(served.dashboard + "?learner=fresh")
    hint = page.locator("#empty-hint")
    assert "No traces recorded yet" in hint.inner_text()
    assert "POST " + BASE + "/observe" in hint.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    page.screenshot(path=str(served.artifacts / "dashboard-empty-390.png"), full_page=True)
    command = shlex.split(hint.locator("code").first.inner_text())
    assert command[0] == "learning-bot"
    assert command[-1] == "simulate"
    run_cli([*command[1:], "--traces", "60"], served.env)
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    expect(page.locator("#cards .card").first).to_contain_text("60")
    expect(page.locator("#empty-hint")).to_have_count(0)
    expect(page.locator("#posteriors tr[data-arm]").first).to_be_visible()
    tab.close()


def posterior_map(served: Served) -> dict[str, dict[str, Any]]:
    return {p["armId"]: p for p in served.get("/posteriors")}


def test_reset_undo_and_thumbs(browser: Any, served: Served) -> None:
    from playwright.sync_api import expect

    before = posterior_map(served)
    tab = Page(browser, served, 390, "dark", answers=(401,))
    page = tab.open(served.dashboard)
    cells = page.locator("#posteriors tr[data-arm]")
    expect(cells).to_have_count(len(before))

    # Reset all: the page asks first, then asks for the token the server wants.
    asked: list[str] = []

    def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    page.locator("#reset").click()
    expect(page.locator("#token-dialog")).to_be_visible()
    page.locator("#token-input").fill(TOKEN)
    page.locator("#token-save").click()
    expect(page.locator("#notice-text")).to_contain_text(f"Reset {len(before)} arms")
    assert asked
    assert "Reset all" in asked[0]
    assert page.evaluate("sessionStorage.getItem('learning-bot-api-token')") == TOKEN
    assert page.evaluate("localStorage.getItem('learning-bot-api-token')") is None
    expect(page.locator("#posteriors td.mean")).to_have_text(["0.500"] * len(before))
    expect(page.locator("#posteriors td.pulls")).to_have_text(["0"] * len(before))
    after_reset = posterior_map(served)
    assert set(after_reset) == set(before)
    assert all(p["mean"] == 0.5 and p["pulls"] == 0 for p in after_reset.values())

    # Undo brings every posterior back.
    expect(page.locator("#undo")).to_be_visible()
    page.locator("#undo").click()
    expect(page.locator("#notice-text")).to_contain_text("Undone")
    expect(page.locator("#undo")).to_be_hidden()
    restored = posterior_map(served)
    for arm, p in before.items():
        got = restored[arm]
        assert (got["alpha"], got["beta"], got["pulls"]) == (p["alpha"], p["beta"], p["pulls"])
    top = next(iter(before))
    expect(page.locator(f'#posteriors tr[data-arm="{top}"] td.mean')).to_have_text(
        f"{before[top]['mean']:.3f}"
    )

    # Thumbs up on one arm, thumbs down on another: one observation each, in the posterior
    # (the default policy forgets a little of the old evidence at each: alpha and beta move
    # toward the prior first, so the checks are on the direction of each change).
    up, down = list(before)[2], list(before)[5]
    page.locator(f'#posteriors tr[data-arm="{up}"] button.thumb.up').click()
    expect(page.locator("#notice-text")).to_contain_text(f"Thumbs up recorded for {up}")
    page.locator(f'#posteriors tr[data-arm="{down}"] button.thumb.down').click()
    expect(page.locator("#notice-text")).to_contain_text(f"Thumbs down recorded for {down}")
    now = posterior_map(served)
    assert now[up]["pulls"] == before[up]["pulls"] + 1
    assert now[up]["mean"] > before[up]["mean"]
    assert now[up]["beta"] <= before[up]["beta"] < now[up]["beta"] + 1
    assert now[down]["pulls"] == before[down]["pulls"] + 1
    assert now[down]["mean"] < before[down]["mean"]
    assert now[down]["alpha"] <= before[down]["alpha"] < now[down]["alpha"] + 1
    expect(page.locator(f'#posteriors tr[data-arm="{up}"] td.pulls')).to_have_text(
        f"{now[up]['pulls']:,}"
    )
    assert page.locator("#error").is_hidden()
    assert page.locator("#notice.failed").count() == 0
    page.screenshot(path=str(served.artifacts / "dashboard-actions-390-dark.png"))
    tab.close()


def test_a_refused_action_shows_the_servers_error(browser: Any, served: Served) -> None:
    from playwright.sync_api import expect

    tab = Page(browser, served, 1440, "light", answers=(401,))
    page = tab.open(served.dashboard)
    page.evaluate("sessionStorage.setItem('learning-bot-api-token', 'not-the-token-at-all')")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#reset").click()
    expect(page.locator("#token-dialog")).to_be_visible()
    expect(page.locator("#token-error")).to_contain_text("refused")
    page.locator("#token-cancel").click()
    expect(page.locator("#notice.failed #notice-text")).to_contain_text("API token")
    assert page.evaluate("sessionStorage.getItem('learning-bot-api-token')") is None
    assert served.get("/summary")["traceCount"] > 0
    tab.close()


def test_the_servers_error_is_shown(browser: Any, served: Served) -> None:
    from playwright.sync_api import expect

    tab = Page(browser, served, 390, "light", answers=(400, 404, 409))
    page = tab.open(served.dashboard)
    page.evaluate(f"sessionStorage.setItem('learning-bot-api-token', '{TOKEN}')")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#reset").click()
    expect(page.locator("#undo")).to_be_visible()
    # Undone elsewhere meanwhile: the page's Undo now meets the server's refusal.
    with httpx.Client(
        base_url=served.url + BASE, headers={"Authorization": f"Bearer {TOKEN}"}
    ) as api:
        assert api.post("/reset/undo", json={}).status_code == 200
        refused = api.post("/reset/undo", json={})
    assert refused.status_code >= 400
    page.locator("#undo").click()
    expect(page.locator("#notice.failed #notice-text")).to_have_text(refused.json()["error"])
    assert page.locator("#token-dialog").is_hidden()
    tab.close()


EXPLAINED = "explained"
"""The learner the arm-detail test fills with runs that carry a request context."""
FORECAST = "tool:t:forecast"
DEFERRED = "tool:t:Tool04"
HOSTILE = "tool:x:<img src=x onerror=alert(1)>"


def observe_with_context(served: Served) -> None:
    """A new, active learner and twelve runs: the forecast tool called in the half whose
    message mentions rain, Tool04
    deferred in all (their runtime reports what it loaded: nothing), and one run without a
    context that offers the hostile arm."""
    arms = [
        {"armId": FORECAST, "tokenCost": 100, "description": "weather rain forecast"},
        *({"armId": f"tool:t:Tool{i:02d}", "tokenCost": 100} for i in range(5)),
    ]
    with httpx.Client(
        base_url=served.url + BASE,
        headers={"Authorization": f"Bearer {TOKEN}"},
        params={"learner": EXPLAINED},
        timeout=30,
    ) as api:
        # a learner starts passive, where nothing is learnt from runs
        assert api.post("/select", json={"arms": arms}).status_code == 200
        active = api.post("/phase", json={"phase": "active", "confirm": True})
        assert active.status_code == 200, active.text
        # the inventory's words become nameable once an active select has read them
        chosen = api.post("/select", json={"arms": arms, "context": {"message": "rain"}})
        assert chosen.status_code == 200, chosen.text
        for i in range(12):
            rain = i % 2 == 0
            report = {
                "traceId": f"explained-{i}",
                "arms": [{**a, "included": a["armId"] != DEFERRED} for a in arms],
                "toolCalls": [{"name": "forecast" if rain else "Tool00"}],
                "context": {"message": "rain" if rain else "", "loaded": []},
            }
            assert api.post("/observe", json=report).status_code == 200
        quiet = {
            "traceId": "explained-hostile",
            "arms": [*arms[:2], {"armId": HOSTILE, "tokenCost": 50}],
            "toolCalls": [{"name": "<img src=x onerror=alert(1)>"}],
        }
        assert api.post("/observe", json=quiet).status_code == 200


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (1440, "dark")])
def test_an_arms_detail_says_what_its_usefulness_depends_on(
    browser: Any, served: Served, width: int, scheme: str
) -> None:
    from playwright.sync_api import expect

    if EXPLAINED not in served.get("/learners")["learners"]:
        observe_with_context(served)
    api = {
        arm: served.get("/arms/" + quote(arm, safe=""), learner=EXPLAINED)["explanation"]
        for arm in (FORECAST, DEFERRED, HOSTILE)
    }
    rain = next(d for d in api[FORECAST]["dependsOn"] if "'rain'" in d["feature"])
    assert rain["text"].startswith("used in 100% of 6 runs where the message mentions 'rain'; ")
    assert api[DEFERRED]["deferredText"] == "0 of 12 runs (0%)"
    assert api[HOSTILE] == {"dependsOn": [], "deferred": 0, "loaded": 0, "deferredText": None}

    tab = Page(browser, served, width, scheme)
    dialogs: list[str] = []
    tab.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page = tab.open(served.dashboard + "?learner=" + EXPLAINED)
    panel = page.locator("#arm-detail")
    expect(panel).to_have_count(0)

    # A click on the arm opens its detail under its row, in the words `status arm` uses.
    button = page.locator(f'#posteriors tr[data-arm="{FORECAST}"] button.arm-name')
    button.click()
    expect(panel).to_be_visible()
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(panel.locator("h3")).to_have_text(FORECAST)
    expect(panel.locator("ul.depends-on li")).to_have_count(len(api[FORECAST]["dependsOn"]))
    sentence = "U" + rain["text"][1:]
    assert sentence.startswith("Used in 100% of 6 runs where the message mentions 'rain'; ")
    expect(panel.locator("ul.depends-on li").filter(has_text="'rain'")).to_have_text(sentence)
    expect(panel.locator(".deferred")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    page.screenshot(path=str(served.artifacts / f"dashboard-arm-{width}-{scheme}.png"))

    # From the keyboard: Tool04's button, Enter; then Escape closes it, focus back on the arm.
    deferred = page.locator(f'#posteriors tr[data-arm="{DEFERRED}"] button.arm-name')
    deferred.focus()
    page.keyboard.press("Enter")
    expect(panel.locator("h3")).to_have_text(DEFERRED)
    expect(panel.locator(".deferred")).to_have_text("Deferred, then loaded: 0 of 12 runs (0%)")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(page.locator("#posteriors tr.arm-detail")).to_have_count(1)
    panel.focus()
    page.keyboard.press("Escape")
    expect(panel).to_have_count(0)
    expect(deferred).to_be_focused()

    # An arm id that is markup is shown as text; an arm seen without context says so.
    hostile = page.locator("#posteriors button.arm-name").filter(has_text="onerror")
    expect(hostile).to_have_text(HOSTILE)
    hostile.click()
    expect(panel.locator("h3")).to_have_text(HOSTILE)
    expect(panel.locator(".empty-detail")).to_have_text(
        "No request context observed for this tool yet"
    )
    assert page.locator("img").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")

    # The detail stays open, and is read again, across the page's refreshes.
    refreshes = page.evaluate("Number(document.body.dataset.refreshes)")
    page.evaluate("refresh()")
    page.wait_for_function(f"Number(document.body.dataset.refreshes) > {refreshes}")
    expect(panel.locator("h3")).to_have_text(HOSTILE)
    panel.locator("button.close-detail").click()
    expect(panel).to_have_count(0)
    assert dialogs == []
    tab.close()


SWITCHED = "switched"
"""The learner the projection test records passive runs for, then switches to active."""


def test_the_projection_shows_while_passive_and_beside_the_measured_figures_once_active(
    browser: Any, served: Served
) -> None:
    """Passive: the dashboard charts what going active would keep and save, per budget (GET
    phase). Confirmed active: the projection kept at the switch stands beside what status
    measures now."""
    from playwright.sync_api import expect

    env = {**served.env, "LEARNING_BOT_LEARNER": SWITCHED}
    run_cli(["simulate", "--phase", "passive", "--traces", "400"], env)
    assert served.get("/phase", learner=SWITCHED)["phase"] == "passive"

    tab = Page(browser, served, 1440, "light")
    page = tab.open(served.dashboard + "?learner=" + SWITCHED)
    expect(page.locator("#projection-section")).to_be_visible()
    expect(page.locator("#projection-title")).to_have_text("Going active: kept against cost saved")
    expect(page.locator("#projection svg circle")).to_have_count(5)  # one point per budget
    expect(page.locator("#projection svg circle.s1")).to_have_count(1)  # the current one
    tab.close()

    with httpx.Client(
        base_url=served.url + BASE,
        headers={"Authorization": f"Bearer {TOKEN}"},
        params={"learner": SWITCHED},
        timeout=120,
    ) as api:
        switched = api.post("/phase", json={"phase": "active", "confirm": True})
        assert switched.status_code == 200, switched.text
        kept = api.get("/phase").json()["projectedAtSwitch"]
    assert kept is not None and 0 < kept["recall"] <= 1 and kept["runs"] == 400

    tab = Page(browser, served, 1440, "light")
    page = tab.open(served.dashboard + "?learner=" + SWITCHED)
    expect(page.locator("#projection-title")).to_have_text(
        "Active: projected at the switch against now"
    )
    expect(page.locator("#projection svg rect")).to_have_count(4)
    expect(page.locator("#projection-note")).to_contain_text("from 400 runs")
    tab.close()
