"""timm's train.py's two argument parsers rebuilt from its source, without importing it: importing train.py imports
torch and timm (seconds, up to a minute on a busy machine), and a check of its arguments needs only its parsers.
They are read with :mod:`ast` from its module-level ``argparse`` statements (``config_parser = parser =
argparse.ArgumentParser(…)``, ``group = parser.add_argument_group(…)``, ``group.add_argument('--x', …)``), each
argument with its option strings, ``nargs``, ``action``, literal choices and ``int`` / ``float`` / ``str`` types,
so the rebuilt parsers take the same tokens and refuse what train.py's refuse (an unknown or ambiguous flag, a
missing value, an invalid choice or number). What they cannot know (a custom type or action, a choice list or
default held in a variable) is left out: they refuse less, never more.

A train.py whose parsers are built otherwise (an argument added in a branch, a loop or a function, a ``**kwargs``,
a parser method the rebuild does not know, a ``_parse_args`` that does more than its two-stage parse) is not
rebuilt: :func:`rebuild_train_py` returns None and the import checks it (:func:`.train_py.prepare_train`)."""
import argparse
import ast
import functools
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from ..data.datasets import DataSource
from ..sweeps.recipes import check_recipe_keys, load_recipe, resolve_recipe
from .train_py import _TRAIN_PY_NAMES, _data_source, _resolve, find_train_py, train_py_arguments

__all__ = ['rebuild_train_py', 'CheckedArgs', 'check_train_args']

_BUILDERS = ('add_argument', 'add_argument_group', 'add_mutually_exclusive_group')
_TYPES = {'int': int, 'float': float, 'str': str}
# keywords that change no refusal, or make fewer of them when left out: left out when they are not literal
_LEFT_OUT = ('help', 'default', 'choices', 'const', 'type', 'metavar', 'description', 'epilog', 'usage', 'prog',
             'title', 'formatter_class')
_PARSE_CALLS = {'config_parser.parse_known_args', 'parser.set_defaults', 'parser.parse_args', 'open',
                'yaml.safe_load', 'yaml.safe_dump'}  # what train.py's _parse_args calls, and nothing else


class _Unreadable(Exception):
    """The source builds its parsers in a way the rebuild does not read exactly."""


_NOTHING = object()


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise _Unreadable from None


def _keywords(call: ast.Call) -> Dict[str, Any]:
    """A call's keyword arguments, evaluated; a non-literal one of :data:`_LEFT_OUT` (or a custom ``action`` with
    its ``nargs`` given: it takes what they say, as timm's ``ParseKwargs``) left out, ``type=int`` kept."""
    given = {kw.arg for kw in call.keywords}
    out: Dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:  # **kwargs
            raise _Unreadable
        try:
            out[kw.arg] = _literal(kw.value)
        except _Unreadable:
            if kw.arg == 'type' and isinstance(kw.value, ast.Name) and kw.value.id in _TYPES:
                out['type'] = _TYPES[kw.value.id]
            elif kw.arg not in _LEFT_OUT and not (kw.arg == 'action' and 'nargs' in given):
                raise
    return out


def _call_name(call: ast.Call) -> str:
    """``a.b`` of a call ``a.b(…)``, ``f`` of ``f(…)`` ('' otherwise)."""
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return f'{func.value.id}.{func.attr}'
    return ''


def _build(call: ast.Call, objects: Dict[str, Any]) -> Any:
    """What a module-level call makes of the parsers (a parser, a group, an argument), or :data:`_NOTHING` for a
    call that is not theirs."""
    name = _call_name(call)
    owner, _, method = name.rpartition('.')
    if name in ('argparse.ArgumentParser', 'ArgumentParser'):
        target = argparse.ArgumentParser
    elif owner in objects and method in _BUILDERS:
        target = getattr(objects[owner], method)
    else:
        return _NOTHING
    if any(isinstance(a, ast.Starred) for a in call.args):
        raise _Unreadable
    try:
        return target(*[_literal(a) for a in call.args], **_keywords(call))
    except (argparse.ArgumentError, TypeError, ValueError):
        raise _Unreadable from None


def _statements(tree: ast.Module) -> Tuple[Dict[str, Any], Set[int]]:
    """The parsers and groups the module-level statements build, by name, and the calls read (their ids)."""
    objects: Dict[str, Any] = {}
    read: Set[int] = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.Expr)) else None
        built = _build(value, objects) if isinstance(value, ast.Call) else _NOTHING
        if built is not _NOTHING:
            read.add(id(value))
        if isinstance(stmt, ast.Expr) and isinstance(value, ast.Tuple):  # `group.add_argument(…),`: a stray comma
            for call in value.elts:
                if isinstance(call, ast.Call) and _build(call, objects) is not _NOTHING:
                    read.add(id(call))
        for target in stmt.targets if isinstance(stmt, ast.Assign) else ():
            if isinstance(target, ast.Name) and built is not _NOTHING:
                objects[target.id] = built
            elif isinstance(target, ast.Name):
                objects.pop(target.id, None)
            elif any(isinstance(n, ast.Name) and n.id in objects for n in ast.walk(target)):
                raise _Unreadable
    return objects, read


def _check_every_use(tree: ast.Module, names: Set[str], read: Set[int]) -> None:
    """Every use of the parsers' names is a call the rebuild read, a ``parser.error`` (what main() reports), or
    ``_parse_args``'s two-stage parse; ``_parse_args`` calls nothing else."""
    parse_args = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == '_parse_args'), None)
    if parse_args is None:
        raise _Unreadable
    calls = {_call_name(n) for n in ast.walk(parse_args) if isinstance(n, ast.Call)}
    if not calls <= _PARSE_CALLS or not {'config_parser.parse_known_args', 'parser.parse_args'} <= calls:
        raise _Unreadable
    inside = {id(n) for n in ast.walk(parse_args)}
    built = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and id(n) in read}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names and \
                id(node) not in built and node.attr != 'error' and id(node) not in inside:
            raise _Unreadable


@functools.lru_cache(maxsize=8)
def _readable_source(path: str, stamp: Tuple[int, int]) -> Optional[ast.Module]:
    """train.py's syntax tree when its parsers can be rebuilt from it (`stamp`: its mtime and size, so an edited
    file is read again)."""
    try:
        source = Path(path).read_text(encoding='utf-8')
        tree = ast.parse(source)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    try:
        objects, read = _statements(tree)
        if not set(_TRAIN_PY_NAMES) - {'config_parser', 'parser'} <= names or \
                not all(isinstance(objects.get(n), argparse.ArgumentParser) for n in ('config_parser', 'parser')):
            return None
        bound = {t.id for s in tree.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)
                 and isinstance(s.value, ast.Call) and id(s.value) in read}
        _check_every_use(tree, bound, read)
    except _Unreadable:
        return None
    return tree


def rebuild_train_py(path: Path) -> Optional[SimpleNamespace]:
    """train.py at `path` as far as its arguments go, torch-free: ``config_parser``, ``parser`` and a
    ``_parse_args()`` doing train.py's two-stage parse (``--config`` first, its recipe as the defaults, then the
    rest), fresh each call (a parse sets defaults); None when its source builds them otherwise."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    tree = _readable_source(str(path), (st.st_mtime_ns, st.st_size))
    if tree is None:
        return None
    objects, _ = _statements(tree)
    config_parser, parser = objects['config_parser'], objects['parser']

    def _parse_args() -> Tuple[argparse.Namespace, str]:
        args_config, remaining = config_parser.parse_known_args()
        if args_config.config:
            parser.set_defaults(**load_recipe(args_config.config))
        return parser.parse_args(remaining), ''
    return SimpleNamespace(config_parser=config_parser, parser=parser, _parse_args=_parse_args)


class CheckedArgs(NamedTuple):
    """train.py's arguments as its rebuilt parsers read them (a custom action's values as given), and where they
    have it read its data (None for a train.py without ``--data-dir``)."""
    args: argparse.Namespace
    data: Optional[DataSource]


def check_train_args(recipe: str, train_args: List[str], train_py: Optional[str] = None) -> Optional[CheckedArgs]:
    """The first checks of :func:`.train_py.prepare_train` without importing train.py (so neither torch nor timm): the
    recipe's keys against train.py's arguments, and train.py's own parse of ``--config RECIPE *train_args``, on the
    parsers :func:`rebuild_train_py` makes; the same refusals, raised as it raises them (a
    :class:`.train_py.TrainArgumentError` for train.py's parser). Returns train.py's arguments and data, or None
    when its parsers cannot be rebuilt from its source (nothing is checked: the import does it)."""
    path = find_train_py(train_py)
    module = rebuild_train_py(path)
    if module is None:
        return None
    recipe = str(resolve_recipe(recipe))
    options = train_py_arguments(module)
    check_recipe_keys(load_recipe(recipe), options, recipe)
    args = _resolve(module, [str(path), '--config', recipe, *train_args])
    return CheckedArgs(args, _data_source(args, options))
