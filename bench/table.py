"""The one table printer of the benchmarks: Markdown tables, as BENCHMARKS.md shows them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def table_lines(
    header: Sequence[str], rows: Iterable[Sequence[object]], left: int = 1
) -> list[str]:
    """A Markdown table's lines: the first `left` columns are text (aligned left), the rest
    figures (aligned right); every column as wide as its widest cell."""
    cells = [[str(cell) for cell in row] for row in rows]
    for i, row in enumerate(cells):
        if len(row) != len(header):
            raise ValueError(f"row {i} has {len(row)} cells for {len(header)} columns")
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(header)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        aligned = [
            cell.ljust(w) if i < left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(aligned) + " |")
    return lines


def print_table(header: Sequence[str], rows: Iterable[Sequence[object]], left: int = 1) -> None:
    """Print `table_lines(header, rows, left)`."""
    print("\n".join(table_lines(header, rows, left)))
