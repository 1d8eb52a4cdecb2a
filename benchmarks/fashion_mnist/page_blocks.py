"""Writing generated text into hand-written Markdown pages (findings.py's): a block between two markers, and the
last columns of a table with a count line above it. Each rewrite is idempotent: writing twice gives the page once."""
import re
from typing import Callable, Dict, Sequence, Tuple


def with_block(text: str, generated: str, begin: str, end: str) -> str:
    """`text` with what lies between its `begin` and `end` markers replaced by `generated` (which holds both)."""
    if begin not in text or end not in text:
        raise ValueError(f'the page has no {begin} … {end} block')
    head, rest = text.split(begin, 1)
    return head + generated + rest.split(end, 1)[1]


def with_columns(text: str, cells: Dict[str, Tuple[str, str]], columns: Sequence[str], count_says: str,
                 missing: Callable[[str], Tuple[str, str]]) -> str:
    """`text` with the table whose header starts ``| paper | command | test |`` given the two `columns` last (set
    from `cells`, keyed by a row's first cell; `missing(item)` for a row without one, replacing any earlier
    columns of those names) and, above it, ``{count_says}: N yes, N partly, N no, of N.`` from the second column's
    first word."""
    lines = text.split('\n')
    start = end = next(i for i, line in enumerate(lines) if line.startswith('| paper | command | test |'))
    while end < len(lines) and lines[end].startswith('|'):
        end += 1
    header = [c.strip() for c in lines[start].strip('|').split(' | ')]
    keep = len(header) - sum(h in columns for h in header)
    out, counts = [], {'yes': 0, 'partly': 0, 'no': 0}
    for i, line in enumerate(lines[start:end]):
        cols = [c.strip() for c in re.split(r'(?<!\\)\|', line.strip())[1:-1]][:keep]
        if i == 0:
            cols += list(columns)
        elif i > 1:
            cite, strict = cells.get(cols[0]) or missing(cols[0])
            counts[strict.split(':')[0]] += 1
            cols += [cite, strict]
        out.append('|' + '---|' * (keep + 2) if i == 1 else '| ' + ' | '.join(cols) + ' |')
    count = (f'{count_says}: {counts["yes"]} yes, {counts["partly"]} partly, {counts["no"]} no, of '
             f'{sum(counts.values())}.')
    before = lines[:start]
    if before and before[-1] == '' and len(before) > 1 and before[-2].startswith(count_says):
        before = before[:-2]
    return '\n'.join(before + [count, ''] + out + lines[end:])
