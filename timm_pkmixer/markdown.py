"""Markdown tables, written one way: :func:`markdown_table`, for the README's models table, a sweep's SWEEP.md, the
report's report.md and Table S.3. In the core so that every layer that writes one (analysis/, experiments/, cli/)
may import it; it imports nothing."""
from typing import Any, Iterable, Optional, Sequence

__all__ = ['ALIGNMENTS', 'markdown_table']

# a column's alignment -> its cell in the separator line (GitHub-flavoured Markdown)
ALIGNMENTS = {None: '---', 'left': ':--', 'center': ':-:', 'right': '--:'}


def _cell(value: Any) -> str:
    """A value as one cell: ``str(value)``, with ``|`` escaped and line breaks as spaces (either would break the
    row)."""
    return ' '.join(str(value).replace('|', '\\|').splitlines())


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]],
                   align: Optional[Sequence[Optional[str]]] = None) -> str:
    """A Markdown table: the header line, the separator line (``|---|---|``, or per column one of
    :data:`ALIGNMENTS`: None, 'left', 'center', 'right'), one line per row (``| a | b |``, each value ``str()``'d).

    Lines joined by newlines, without a final one. A row or `align` whose length is not the headers' is refused
    (ValueError naming it).
    """
    headers = list(headers)
    align = [None] * len(headers) if align is None else list(align)
    if len(align) != len(headers):
        raise ValueError(f'align has {len(align)} entries for {len(headers)} columns')
    unknown = [a for a in align if a not in ALIGNMENTS]
    if unknown:
        raise ValueError(f'align must be one of {list(ALIGNMENTS)}, got {unknown[0]!r}')
    lines = ['| ' + ' | '.join(_cell(h) for h in headers) + ' |', '|' + ''.join(ALIGNMENTS[a] + '|' for a in align)]
    for number, row in enumerate(rows, 1):
        row = list(row)
        if len(row) != len(headers):
            raise ValueError(f'row {number} has {len(row)} cells for {len(headers)} columns: {row!r}')
        lines.append('| ' + ' | '.join(_cell(v) for v in row) + ' |')
    return '\n'.join(lines)
