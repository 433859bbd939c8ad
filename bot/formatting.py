"""How replies write times, numbers and posteriors, and name commands, on every surface."""

from __future__ import annotations

from datetime import UTC, datetime

from learning_bot.bot.replies import Column, Table
from learning_bot.engine.views import ArmView

TERMINAL_SURFACES = frozenset({"terminal", "console"})


def command_prefix(surface: str = "") -> str:
    """How a reply names a command on the surface it goes to: `learning-bot` in a terminal,
    `/learning` in chat. Every command hint in a reply goes through this."""
    return "learning-bot" if surface in TERMINAL_SURFACES else "/learning"


def fmt_time(ms: int | None) -> str:
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt_int(n: float) -> str:
    return f"{n:,.0f}"


def fmt_pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.1f}%" if whole else "0.0%"


POSTERIOR_COLUMNS = (
    Column("Arm"),
    Column("Mean", "right"),
    Column("95% interval", "right"),
    Column("Pulls", "right"),
    Column("Confidence"),
    Column("Last updated"),
)


def posterior_row(view: ArmView) -> tuple[str, ...]:
    low, high = view.interval
    return (
        view.arm_id,
        f"{view.mean:.3f}",
        f"{low:.3f}-{high:.3f}",
        str(view.posterior.pulls),
        view.confidence.value,
        fmt_time(view.posterior.last_updated),
    )


def posterior_table(views: tuple[ArmView, ...] | list[ArmView], title: str) -> Table:
    return Table(POSTERIOR_COLUMNS, tuple(posterior_row(v) for v in views), title)
