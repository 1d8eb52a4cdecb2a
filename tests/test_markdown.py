"""Markdown tables: one helper writes every table the package writes, exactly as GitHub renders it."""
import ast
import re
from pathlib import Path

import pytest

from timm_pkmixer.markdown import markdown_table

PACKAGE = Path(__file__).resolve().parent.parent / 'timm_pkmixer'


def test_a_table_is_its_header_separator_and_rows():
    assert markdown_table(['model', 'params'], [['`a`', 1], ('b', 2.5)]) == (
        '| model | params |\n|---|---|\n| `a` | 1 |\n| b | 2.5 |')
    assert markdown_table(('a',), []) == '| a |\n|---|'


def test_columns_are_aligned_as_asked():
    assert markdown_table(['a', 'b', 'c', 'd'], [[1, 2, 3, 4]], align=[None, 'left', 'center', 'right']) == (
        '| a | b | c | d |\n|---|:--|:-:|--:|\n| 1 | 2 | 3 | 4 |')


def test_a_cell_cannot_break_its_row():
    assert markdown_table(['a'], [['x | y\nz']]).splitlines()[-1] == '| x \\| y z |'


@pytest.mark.parametrize('rows,align,message', [
    ([[1, 2, 3]], None, 'row 1 has 3 cells for 2 columns: [1, 2, 3]'),
    ([[1, 2], [3]], None, 'row 2 has 1 cells for 2 columns: [3]'),
    ([], ['left'], 'align has 1 entries for 2 columns'),
    ([], ['left', 'middle'], "align must be one of [None, 'left', 'center', 'right'], got 'middle'"),
])
def test_a_row_or_alignment_of_another_width_is_refused(rows, align, message):
    with pytest.raises(ValueError) as e:
        markdown_table(['a', 'b'], rows, align=align)
    assert str(e.value) == message


_SEPARATOR = re.compile(r'\|\s*:?-{3,}:?\s*\|')  # a separator cell between its bars
_SEPARATOR_PIECE = re.compile(r'\s*\|?\s*:?-{3,}:?\s*\|?\s*')  # a string that is one cell of it, joined by code


def test_no_other_module_writes_a_table_by_hand():
    """A separator line (``|---|``, ``| --- |``), or a string that is a piece of one (``'---|'``), in any module but
    markdown.py is a table assembled by hand."""
    found = []
    for path in sorted(PACKAGE.rglob('*.py')):
        if path.name == 'markdown.py' and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    _SEPARATOR.search(node.value) or _SEPARATOR_PIECE.fullmatch(node.value)):
                found.append(f'{path.relative_to(PACKAGE)}:{node.lineno}')
    assert found == []
