"""The package's layout is its architecture: the model core (the package root, ``layers/``, ``models/``) imports
nothing from the wings; the wings stand in layers — ``analysis/``, ``distributed/``, ``data/`` and ``runs/`` (what a
run folder holds) on the core, ``sweeps/`` (recipes and sweeps) above them, ``training/`` (train.py, the demo) and
``reports/`` above that, ``launch/`` (which runs a folder of recipes) and ``publish/`` (which publishes what a run
made) above those — and import only downwards, never a sibling;
``cli/`` sits on top; and no two modules import each other, directly or around a loop. Only ``cli/`` prints or
configures logging; the library logs its progress and takes no progress callback. Read from the source with ``ast``,
imports inside functions included."""
import ast
from pathlib import Path
from typing import Dict, List, Set

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / 'timm_pkmixer'
WINGS = ('analysis', 'distributed', 'data', 'runs', 'sweeps', 'training', 'reports', 'launch', 'publish')
RANK = {'core': 0, 'analysis': 1, 'distributed': 1, 'data': 1, 'runs': 1, 'sweeps': 2, 'training': 3, 'reports': 3,
        'launch': 4, 'publish': 4, 'cli': 5}
# the stable names that forward to a wing: the package's lazy public names, `python -m timm_pkmixer`, and the two
# --device-modules names every recipe uses
FACADES = {'timm_pkmixer', 'timm_pkmixer.__main__', 'timm_pkmixer.replica_check', 'timm_pkmixer.cpu_ddp'}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix('').parts)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _modules() -> Dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob('*.py')}


def import_graph() -> Dict[str, Set[str]]:
    """module -> the package's modules it imports (``from .x import y`` counts ``.x.y`` when that is a module)."""
    modules = _modules()
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split('.')[:len(package.split('.')) - node.level + 1]
                    target = '.'.join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ''
                for alias in node.names:
                    sub = f'{target}.{alias.name}'
                    targets.add(sub if sub in modules else target)
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def layer(module: str) -> str:
    """'core', one of WINGS, 'cli', or 'facade'."""
    if module in FACADES:
        return 'facade'
    parts = module.split('.')
    if len(parts) > 1 and parts[1] in WINGS + ('cli',):
        return parts[1]
    return 'core'


def upward_imports(graph: Dict[str, Set[str]]) -> list:
    """(importer, imported) pairs that go up a layer or sideways between two wings of one rank."""
    bad = []
    for a, targets in graph.items():
        for b in targets:
            la, lb = layer(a), layer(b)
            if 'facade' in (la, lb) or la == lb:
                continue
            if RANK[lb] >= RANK[la]:
                bad.append((a, b))
    return sorted(bad)


def test_every_import_goes_down_a_layer():
    assert upward_imports(import_graph()) == []


@pytest.mark.parametrize('module,layer_name', [
    ('timm_pkmixer.layers.pk_layer', 'core'), ('timm_pkmixer.width', 'core'),
    ('timm_pkmixer.sweeps.sweep_plan', 'sweeps'), ('timm_pkmixer.publish.hub', 'publish'),
    ('timm_pkmixer.launch.launcher', 'launch'), ('timm_pkmixer.replica_check', 'facade'),
    ('timm_pkmixer.cli.train', 'cli')])
def test_layers_are_read_from_the_folders(module, layer_name):
    assert module in _modules()
    assert layer(module) == layer_name


def test_the_graph_sees_a_planted_upward_import():
    """The checker finds what it is for: a core module that imports a wing, read through the same code."""
    graph = import_graph()
    graph['timm_pkmixer.width'] = graph['timm_pkmixer.width'] | {'timm_pkmixer.reports.report'}
    graph['timm_pkmixer.analysis.cka'] = graph['timm_pkmixer.analysis.cka'] | {'timm_pkmixer.distributed.replicas'}
    graph['timm_pkmixer.sweeps.sweep_plan'] = (graph['timm_pkmixer.sweeps.sweep_plan']
                                                    | {'timm_pkmixer.publish.hub'})
    assert upward_imports(graph) == [('timm_pkmixer.analysis.cka', 'timm_pkmixer.distributed.replicas'),
                                     ('timm_pkmixer.sweeps.sweep_plan', 'timm_pkmixer.publish.hub'),
                                     ('timm_pkmixer.width', 'timm_pkmixer.reports.report')]


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Every import loop of `graph` found by a depth-first search, each as the modules around it (first one
    repeated at the end). An import of the package root ``timm_pkmixer`` (its lazy names) is not a dependency."""
    found, state = [], {}  # state: 1 on the DFS stack, 2 done
    stack: List[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target == 'timm_pkmixer':
                continue
            if state.get(target) == 1:
                found.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def test_no_module_imports_itself_around_a_loop():
    assert cycles(import_graph()) == [], 'import cycles: ' + '; '.join(' → '.join(c) for c in cycles(import_graph()))


def test_the_cycle_check_sees_a_planted_loop_and_ignores_the_package_root():
    graph = import_graph()
    graph['timm_pkmixer.sizes'] = graph['timm_pkmixer.sizes'] | {'timm_pkmixer.models.pk_mixer'}
    assert ['timm_pkmixer.sizes', 'timm_pkmixer.models.pk_mixer', 'timm_pkmixer.sizes'] in cycles(graph)
    root = {'timm_pkmixer': {'timm_pkmixer.width'}, 'timm_pkmixer.width': {'timm_pkmixer'}}
    assert cycles(root) == []


def prints(tree: ast.AST) -> List[int]:
    """Lines of ``print(…)`` calls and of writes to ``sys.stdout`` / ``sys.stderr`` in a module's syntax tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'print':
            found.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in ('stdout', 'stderr') and \
                isinstance(node.value, ast.Name) and node.value.id == 'sys':
            found.append(node.lineno)
    return found


def test_only_the_commands_print():
    """The library says what it is doing through ``logging`` and what went wrong by raising; only ``cli/`` writes
    to the terminal (so a notebook or a script using the library gets no stray output)."""
    printing = {name: lines for name, path in _modules().items()
                if layer(name) != 'cli' and (lines := prints(ast.parse(path.read_text(encoding='utf-8'))))}
    assert printing == {}


def test_the_print_check_sees_a_print_and_a_write_to_stderr():
    assert prints(ast.parse('import sys\nprint(1)\nsys.stderr.write("x")\n')) == [2, 3]


# a module whose job is to hold imported names under one roof: the private timm names (each with why)
REEXPORTING = {'timm_pkmixer._timm'}


def _module_level(tree: ast.Module) -> List[ast.stmt]:
    """The statements run at import: the module's own, and those inside its top-level ``if`` / ``try`` blocks."""
    out: List[ast.stmt] = []
    for node in tree.body:
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            out += _module_level(ast.Module(body=node.body + node.orelse + getattr(node, 'finalbody', []),
                                            type_ignores=[]))
    return out


def reexports(tree: ast.Module) -> List[str]:
    """Names a module's ``__all__`` lists (``__all__ = […]`` and ``__all__ += […]``) that it imports rather than
    defines."""
    imported: Set[str] = set()
    listed: List[str] = []
    for node in _module_level(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported.update(a.asname or a.name.split('.')[0] for a in node.names)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign) else []
        if any(isinstance(t, ast.Name) and t.id == '__all__' for t in targets) and isinstance(
                node.value, (ast.List, ast.Tuple)):
            listed += [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return sorted(n for n in set(listed) if n in imported)


def test_a_modules_all_lists_only_names_it_defines():
    """Callers import a name from the module that defines it: no module forwards another's names in its ``__all__``
    (package ``__init__.py`` files, the packages' faces, and :data:`REEXPORTING` are exempt)."""
    found = {name: names for name, path in _modules().items()
             if path.name != '__init__.py' and name not in REEXPORTING
             and (names := reexports(ast.parse(path.read_text(encoding='utf-8'))))}
    assert found == {}


def test_the_reexport_check_sees_a_planted_one():
    tree = ast.parse('import os.path as osp\nfrom .a import x, y as z\ntry:\n    from .b import w\n'
                     'except ImportError:\n    w = None\n\n\ndef f():\n    pass\n\n\n__all__ = ["f", "x"]\n'
                     '__all__ += ("z", "w", "osp")\n')
    assert reexports(tree) == ['osp', 'w', 'x', 'z']
    assert reexports(ast.parse('from .a import x\n\n\ndef f():\n    pass\n\n\n__all__ = ["f"]\n')) == []


# the names a progress callback went by in the library before it logged (``logging``, issue 32): `progress` (16
# functions), `log` (the demo's 2), `say` (the launcher's 2); and the other usual spellings of one
PROGRESS_PARAMETERS = ('progress', 'on_progress', 'report_progress', 'log', 'say', 'echo')


def progress_parameters(tree: ast.AST) -> List[str]:
    """``function:line`` of each function (method, lambda) in a module's syntax tree with an argument named as a
    progress callback (:data:`PROGRESS_PARAMETERS`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None]
            if any(n in PROGRESS_PARAMETERS for n in names):
                found.append(f'{getattr(node, "name", "<lambda>")}:{node.lineno}')
    return sorted(found, key=lambda f: int(f.rsplit(':', 1)[1]))


def library_progress_parameters(sources: Dict[str, str]) -> Dict[str, List[str]]:
    """{module: its functions that take a progress parameter} over `sources` (module name → text) outside ``cli/``."""
    return {name: found for name, text in sources.items()
            if layer(name) != 'cli' and (found := progress_parameters(ast.parse(text)))}


def _sources() -> Dict[str, str]:
    return {name: path.read_text(encoding='utf-8') for name, path in _modules().items()}


def test_no_library_function_takes_a_progress_callback():
    """The library says what it is doing through ``logging.getLogger(__name__)``, as timm does, never through a
    callback handed down: the command line installs the one handler that writes the lines to stderr."""
    assert library_progress_parameters(_sources()) == {}


def test_the_progress_parameter_check_sees_planted_ones():
    """Planted in a real library module (a keyword, a method's `say`, a lambda's `log`), and in a command (allowed)."""
    sources = _sources()
    catalog = sources['timm_pkmixer.catalog']
    signature = 'def summarize_all(names: Sequence[str])'
    assert signature in catalog
    line = catalog[:catalog.index(signature)].count('\n') + 1
    sources['timm_pkmixer.catalog'] = catalog.replace(signature, signature[:-1] + ', *, progress=None)')
    end = sources['timm_pkmixer.width'].count('\n')  # width.py's lines (two empty ones, the class, then these)
    sources['timm_pkmixer.width'] += '\n\nclass Said:\n    def __init__(self, say):\n        self.f = lambda log: log\n'
    sources['timm_pkmixer.cli.models'] += '\n\ndef shown(progress):\n    return progress\n'
    assert library_progress_parameters(sources) == {
        'timm_pkmixer.catalog': [f'summarize_all:{line}'],
        'timm_pkmixer.width': [f'__init__:{end + 4}', f'<lambda>:{end + 5}']}
    assert progress_parameters(ast.parse('async def f(*log):\n    pass\n\n\ndef g(**echo):\n    pass\n')) == [
        'f:1', 'g:5']


_CONFIGURING = ('basicConfig', 'dictConfig', 'fileConfig', 'addHandler', 'removeHandler', 'setLevel')


def configures_logging(tree: ast.AST) -> List[int]:
    """Lines that configure logging: a call of :data:`_CONFIGURING` (``logging.basicConfig(…)``,
    ``logger.addHandler(…)``, …) or an assignment to a logger's ``propagate``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'attr', getattr(node.func, 'id', None)) in _CONFIGURING:
            found.append(node.lineno)
        elif isinstance(node, ast.Assign) and any(getattr(t, 'attr', None) == 'propagate' for t in node.targets):
            found.append(node.lineno)
    return sorted(found)


def test_the_library_never_configures_logging():
    """Where its lines go is the caller's choice (timm's rule): only ``cli/`` installs a handler, for a command."""
    found = {name: lines for name, text in _sources().items()
             if layer(name) != 'cli' and (lines := configures_logging(ast.parse(text)))}
    assert found == {}
    assert configures_logging(ast.parse(_sources()['timm_pkmixer.cli._stderr'])) != []  # the one that does


def test_the_logging_configuration_check_sees_planted_ones():
    tree = ast.parse('import logging\nlogging.basicConfig(level=logging.INFO)\nlog = logging.getLogger("x")\n'
                     'log.addHandler(logging.NullHandler())\nlog.propagate = False\nlog.info("fine")\n'
                     'from logging import basicConfig\nbasicConfig()\n')
    assert configures_logging(tree) == [2, 4, 5, 8]


# ------------------------------------------------------------------------------------ one module opens the files

# the wings whose files are the package's own state (recipes, sweeps, run folders, reports, the launcher's files)
FILE_WINGS = ('launch', 'runs', 'sweeps', 'reports')
# calls that open a file or parse one's text from disk; anywhere in FILE_WINGS they go through state_files
_METHODS = {'fdopen', 'read_text', 'write_text', 'read_bytes', 'write_bytes', 'safe_load'}
_MODULE_CALLS = {('os', 'open'), ('yaml', 'load'), ('json', 'load'), ('json', 'dump'), ('io', 'open')}
# files that are not the package's: what the kernel says of a process (launch/liveness.py reads /proc)
NOT_STATE_FILES = {('timm_pkmixer.launch.liveness', 'read_text')}


def file_openers(tree: ast.AST, module: str) -> List[str]:
    """``module:line: call`` for each call in `tree` that opens a file itself (``open(…)``, ``os.open``,
    ``os.fdopen``, ``Path.read_text`` and the like, ``yaml.safe_load``, ``json.load``) rather than through
    ``state_files`` (whose own ``read_text(path, problem)``, called by name, is the way)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            name, hit = f.id, f.id == 'open'
        elif isinstance(f, ast.Attribute):
            base = f.value.id if isinstance(f.value, ast.Name) else ''
            name, hit = f.attr, f.attr in _METHODS or (base, f.attr) in _MODULE_CALLS
        else:
            continue
        if hit and (module, name) not in NOT_STATE_FILES:
            found.append(f'{module}:{node.lineno}: {name}')
    return found


def test_one_module_opens_the_packages_files():
    """`timm_pkmixer/state_files.py` opens every state file; the launcher, the run folders' readers, the sweeps (and
    the recipes, in `sweeps/`) and the report call it, never `open` or `Path.read_text` themselves."""
    found = []
    users = set()
    for name, path in sorted(_modules().items()):
        if layer(name) in FILE_WINGS:
            found += file_openers(ast.parse(path.read_text(encoding='utf-8')), name)
    for name, targets in import_graph().items():
        if 'timm_pkmixer.state_files' in targets:
            users.add(layer(name))
    assert found == []
    assert set(FILE_WINGS) <= users  # and each of them uses it


def test_the_file_check_sees_each_way_of_opening():
    tree = ast.parse("open(p)\nos.open(p, 0)\nos.fdopen(3)\nPath(p).read_text()\nq.write_bytes(b'')\n"
                     "yaml.safe_load(s)\nread_text(p, problem)\njson.loads(s)\n")
    assert file_openers(tree, 'm') == ['m:1: open', 'm:2: open', 'm:3: fdopen', 'm:4: read_text', 'm:5: write_bytes',
                                       'm:6: safe_load']


# ------------------------------------------------------------------------------------------- rooms of one size

MAX_MODULES, MAX_LINES = 14, 3000  # a folder past these does more than one job (cli/: one module per command)


def folder_sizes() -> Dict[str, tuple]:
    """package folder (relative, '.' for the root) -> (modules, lines)."""
    sizes: Dict[str, list] = {}
    for path in PACKAGE.rglob('*.py'):
        entry = sizes.setdefault(path.parent.relative_to(PACKAGE).as_posix(), [0, 0])
        entry[0] += 1
        entry[1] += len(path.read_text(encoding='utf-8').splitlines())
    return {k: tuple(v) for k, v in sizes.items()}


def test_no_folder_holds_more_than_one_rooms_worth():
    sizes = folder_sizes()
    assert {'.', 'data', 'runs', 'sweeps', 'training', 'reports', 'launch'} <= set(sizes)
    too_big = {k: v for k, v in sizes.items() if k != 'cli' and (v[0] > MAX_MODULES or v[1] > MAX_LINES)}
    assert too_big == {}


MAX_RESULT_FILES = 8  # a results folder past this is several experiments, or one experiment's parts unsorted


def test_no_results_folder_holds_more_than_8_files():
    root = PACKAGE.parent / 'benchmarks'
    crowded = {d.relative_to(root).as_posix(): n for d in [root, *root.rglob('*')] if d.is_dir()
               and (n := sum(1 for f in d.iterdir() if f.is_file())) > MAX_RESULT_FILES}
    assert crowded == {}


def test_every_folder_says_its_one_job():
    """Each package folder's ``__init__.py`` opens with a docstring of at least one sentence: what the folder does."""
    silent = []
    for init in sorted(PACKAGE.rglob('__init__.py')):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding='utf-8'))) or ''
        if len(doc.split()) < 6 or '.' not in doc:
            silent.append(init.parent.relative_to(PACKAGE.parent).as_posix())
    assert silent == []
