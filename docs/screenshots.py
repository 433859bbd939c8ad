"""Regenerate the dashboard screenshots in docs/screenshots/ (`make screenshots`).

Runs `learning-bot simulate` into a temporary database, starts `learning-bot serve` on it, and
photographs the dashboard in Chromium at 390 px and 1440 px, light and dark:
docs/screenshots/dashboard-{390,1440}-{light,dark}.png. Then the same for
`learning-bot simulate --phase passive`, at 1440 px light: the passive dashboard with its
projection of going active, docs/screenshots/dashboard-passive-1440-light.png. The images are
reduced to a palette when Pillow is installed, to keep them small in the repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Literal

HERE = Path(__file__).resolve().parent
OUT = HERE / "screenshots"
BASE = "/__openclaw__/api/learning"
Scheme = Literal["light", "dark"]
VIEWS: list[tuple[int, Scheme]] = [(390, "light"), (390, "dark"), (1440, "light"), (1440, "dark")]
PHASES: list[tuple[str, str, list[tuple[int, Scheme]]]] = [
    ("active", "dashboard", VIEWS),
    ("passive", "dashboard-passive", [(1440, "light")]),
]
"""(phase simulated, file name prefix, views photographed)."""
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


def learning_bot() -> str:
    beside = Path(sys.executable).with_name("learning-bot")
    found = str(beside) if beside.exists() else shutil.which("learning-bot")
    if not found:
        sys.exit("screenshots: learning-bot is not installed (make run installs it)")
    return found


def isolated_env(tmp: str, name: str = "screenshots") -> dict[str, str]:
    """This environment without its learning-bot, Slack and Discord settings, with a fresh
    SQLite database `name` and everything else the product writes under `tmp`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LEARNING_BOT_", "SLACK_", "DISCORD_"))
    }
    env.update(
        LEARNING_BOT_DATABASE_URL=f"sqlite:///{tmp}/{name}.sqlite",
        LEARNING_BOT_SPOOL_DIR=f"{tmp}/spool",
        HOME=tmp,
    )
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"screenshots: the server did not answer at {url}")
        time.sleep(0.1)


def shrink(path: Path) -> None:
    """A 256-colour palette: the page is flat colour, so nothing visible is lost."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(
            colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
    small.save(path, optimize=True)


def photograph(
    url: str, chromium: str, out: Path, views: list[tuple[int, Scheme]], prefix: str
) -> list[Path]:
    from playwright.sync_api import sync_playwright

    written: list[Path] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            for width, scheme in views:
                page = browser.new_page(
                    viewport={"width": width, "height": 900}, color_scheme=scheme
                )
                page.route(
                    "**/*",
                    lambda route: (
                        route.continue_() if route.request.url.startswith(url) else route.abort()
                    ),
                )
                page.goto(url + BASE + "/dashboard")
                page.wait_for_selector("body[data-ready='1']", timeout=30_000)
                path = out / f"{prefix}-{width}-{scheme}.png"
                page.screenshot(path=str(path), full_page=True, animations="disabled")
                page.close()
                shrink(path)
                written.append(path)
        finally:
            browser.close()
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help="where the PNGs go")
    parser.add_argument("--traces", type=int, default=600, help="simulated runs (default 600)")
    parser.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    parser.add_argument(
        "--chromium",
        default=os.environ.get("CHROMIUM") or shutil.which("chromium"),
        help="the Chromium binary (default: chromium on PATH)",
    )
    args = parser.parse_args()
    if not args.chromium:
        sys.exit("screenshots: Chromium is not installed (apt-get install chromium)")
    exe = learning_bot()
    args.out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="learning-bot-screenshots-") as tmp:
        for phase, prefix, views in PHASES:
            env = isolated_env(tmp, f"screenshots-{phase}")
            simulate = [exe, "simulate", "--traces", str(args.traces), "--seed", str(args.seed)]
            subprocess.run(
                [*simulate, "--phase", phase], env=env, check=True, stdout=subprocess.DEVNULL
            )
            port = free_port()
            server = subprocess.Popen(
                [exe, "serve", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            url = f"http://127.0.0.1:{port}"
            try:
                wait_for(url + BASE + "/healthz", server)
                written += photograph(url, args.chromium, args.out, views, prefix)
            finally:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    server.kill()
    for path in written:
        print(f"{path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
