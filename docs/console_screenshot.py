"""Regenerate docs/screenshots/console.png, a console session (`make screenshots`).

Simulates a workload into a temporary database, types a short session into `learning-bot
console` through a pseudo-terminal (Tab completion included), and draws what the terminal
showed, colours and all, as a PNG with Pillow and matplotlib's DejaVu Sans Mono.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "screenshots" / "console.png"
COLUMNS, ROWS = 100, 60
PROMPT = b"learning> "
# What is typed, one command at a time (each waits for the next prompt)
SESSION: list[bytes] = [
    b"sta\ttop 3\r",  # Tab completes the command
    b"reward Writ\tgood helpful\r",  # and a label to its arm id
    b"phase\r",
    b"quit\r",
]

BACKGROUND = (30, 30, 36)
FOREGROUND = (220, 220, 220)
PALETTE = {
    30: (40, 40, 48),
    31: (240, 98, 98),
    32: (110, 210, 120),
    33: (236, 196, 92),
    34: (110, 150, 240),
    35: (200, 130, 220),
    36: (100, 200, 210),
    37: (220, 220, 220),
}


@dataclass
class Cell:
    char: str = " "
    fg: tuple[int, int, int] = FOREGROUND
    bg: tuple[int, int, int] | None = None
    bold: bool = False
    dim: bool = False


@dataclass
class Screen:
    """Just enough of a terminal for a readline session: printable text, CR, LF, BS, SGR
    colours, cursor forward and erase to the end of the line; other sequences are ignored."""

    width: int
    lines: list[list[Cell]] = field(default_factory=lambda: [[]])
    row: int = 0
    col: int = 0
    style: Cell = field(default_factory=Cell)

    def _sgr(self, params: str) -> None:
        for code in [int(p) if p else 0 for p in params.split(";")]:
            if code == 0:
                self.style = Cell()
            elif code == 1:
                self.style.bold = True
            elif code == 2:
                self.style.dim = True
            elif 30 <= code <= 37:
                self.style.fg = PALETTE[code]
            elif 40 <= code <= 47:
                self.style.bg = PALETTE[code - 10]

    def _put(self, char: str) -> None:
        if self.col >= self.width:
            self._newline()
        line = self.lines[self.row]
        while len(line) <= self.col:
            line.append(Cell())
        s = self.style
        line[self.col] = Cell(char, s.fg, s.bg, s.bold, s.dim)
        self.col += 1

    def _newline(self) -> None:
        self.row += 1
        self.col = 0
        while len(self.lines) <= self.row:
            self.lines.append([])

    def feed(self, data: str) -> None:
        i = 0
        while i < len(data):
            ch = data[i]
            if ch == "\x1b":
                csi = re.match(r"\x1b\[([0-9;?]*)([A-Za-z])", data[i:])
                if csi:
                    params, final = csi.groups()
                    if final == "m":
                        self._sgr(params)
                    elif final == "C":
                        self.col += int(params or 1)
                    elif final == "D":
                        self.col = max(0, self.col - int(params or 1))
                    elif final == "K":
                        del self.lines[self.row][self.col :]
                    i += csi.end()
                    continue
                i += 2  # a two-character escape (keypad modes): nothing to draw
                continue
            if ch == "\r":
                self.col = 0
            elif ch == "\n":
                self._newline()
            elif ch == "\b":
                self.col = max(0, self.col - 1)
            elif ch == "\x07":
                pass
            elif ch >= " ":
                self._put(ch)
            i += 1


def transcript(exe: str, env: dict[str, str]) -> bytes:
    """Type SESSION into `learning-bot console` in a pseudo-terminal; all it printed."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execve(exe, [exe, "console"], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    out = b""

    def until(needle: bytes, seen: int) -> None:
        nonlocal out
        deadline = time.monotonic() + 60
        while out.count(needle) < seen:
            if time.monotonic() > deadline:
                raise SystemExit(f"console: no {needle!r} after {out[-500:]!r}")
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    return
                if not chunk:
                    return
                out += chunk

    try:
        until(PROMPT, 1)
        for n, keys in enumerate(SESSION, start=2):
            os.write(fd, keys)
            if keys != b"quit\r":
                until(PROMPT, n)
        os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return out


def draw(screen: Screen, out: Path) -> None:
    import matplotlib
    from PIL import Image, ImageDraw, ImageFont

    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    regular = ImageFont.truetype(str(fonts / "DejaVuSansMono.ttf"), 15)
    bold = ImageFont.truetype(str(fonts / "DejaVuSansMono-Bold.ttf"), 15)
    _, top, _, bottom = regular.getbbox("M")
    cell_w, cell_h = int(regular.getlength("M")), int((bottom - top) * 1.55)
    lines = screen.lines
    while lines and not "".join(c.char for c in lines[-1]).strip():
        lines = lines[:-1]
    pad = 18
    image = Image.new(
        "RGB", (screen.width * cell_w + 2 * pad, len(lines) * cell_h + 2 * pad), BACKGROUND
    )
    pen = ImageDraw.Draw(image)
    for y, line in enumerate(lines):
        for x, cell in enumerate(line):
            px, py = pad + x * cell_w, pad + y * cell_h
            if cell.bg is not None:
                pen.rectangle((px, py, px + cell_w, py + cell_h), fill=cell.bg)
            if cell.char != " ":
                fg = tuple(int(c * 0.6) for c in cell.fg) if cell.dim else cell.fg
                font = bold if cell.bold else regular
                pen.text((px, py + 2), cell.char, fill=fg, font=font)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.save(out, optimize=True)


def learning_bot() -> str:
    beside = Path(sys.executable).with_name("learning-bot")
    found = str(beside) if beside.exists() else shutil.which("learning-bot")
    if not found:
        sys.exit("console screenshot: learning-bot is not installed (make run installs it)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG (default {OUT})")
    args = parser.parse_args(argv)
    exe = learning_bot()
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": tmp,
            "LEARNING_BOT_DATABASE_URL": f"sqlite:///{tmp}/console.sqlite",
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
        }
        subprocess.run(
            [exe, "simulate", "--seed", "0"],
            env=env,
            check=True,
            capture_output=True,
        )
        raw = transcript(exe, env)
    screen = Screen(COLUMNS)
    screen.feed(raw.decode("utf-8", "replace"))
    draw(screen, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
