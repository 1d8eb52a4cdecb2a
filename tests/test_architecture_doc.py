"""docs/ARCHITECTURE.md stays true where it can be checked: the files it names exist, every module of the package is
in its table, its layout and rank rule are test_layout's, the gather modes are the table's, only ``_timm.py`` imports
private timm names, the classes and tables it names are defined, and each walkthrough's file count is its list."""
import ast
import re
from pathlib import Path
from typing import List, Set

import pytest
from test_layout import FACADES, RANK, WINGS

from timm_pkmixer.layers.gather import MODES

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'timm_pkmixer'
DOC = (ROOT / 'docs' / 'ARCHITECTURE.md').read_text(encoding='utf-8')
PROSE = re.sub(r'^```.*?^```', '', DOC, flags=re.S | re.M)  # the text without its code blocks
LAYOUT = re.search(r'^```\ntimm_pkmixer/\n(.*?)^```', DOC, flags=re.S | re.M).group(1)
TABLE = DOC.split('\n## Concepts\n')[1].split('\n## ')[0]
WALKTHROUGHS = re.findall(r'^## Walkthrough: .*?(?=^## |\Z)', DOC, flags=re.S | re.M)

# files the doc names that are not in this repository, and why
ELSEWHERE = {'train.py'}  # timm's training script, found through TIMM_TRAIN_PY / --train-py
MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob('*.py'))


def code_spans(text: str) -> List[str]:
    return re.findall(r'`([^`\n]+)`', text)


def py_paths(text: str) -> List[str]:
    """Every ``….py`` file named in a code span of `text`, as written."""
    return [t for span in code_spans(text) for t in re.findall(r'[\w./-]+\.py\b', span)]


def dotted_modules(text: str) -> List[str]:
    """Every ``timm_pkmixer.x.y`` module named in a code span of `text` (``…:name`` import paths included)."""
    return [m.group(1) for span in code_spans(text)
            if (m := re.fullmatch(r'(timm_pkmixer(?:\.\w+)+)(?::\w+)?', span))]


def package_path(name: str) -> str:
    """A doc's file or module name as a path inside the package (``layers/gather.py``)."""
    if '/' not in name and name.startswith('timm_pkmixer.'):
        name = name.replace('.', '/') + '.py'
    return name.removeprefix('timm_pkmixer/')


def new_files() -> Set[str]:
    """The files a walkthrough's **Files** line marks (new): they exist only once someone follows it."""
    return {package_path(p) for w in WALKTHROUGHS for p in re.findall(r'`([^`]+\.py)` \(new\)', w)}


def exists(name: str) -> bool:
    if (ROOT / name).is_file():  # README.md, tests/…, timm_pkmixer.pth
        return True
    path = package_path(name)
    if '/' not in path:  # a file named alone: a module of the package, a test file, or one named in ELSEWHERE
        return path in {Path(m).name for m in MODULES} or (ROOT / 'tests' / path).is_file() or path in ELSEWHERE
    return (ROOT / name).is_file() or (PACKAGE / path).is_file() or (PACKAGE / path.removesuffix('.py')).is_dir()


def test_every_file_and_module_the_doc_names_exists():
    named = py_paths(PROSE) + dotted_modules(PROSE)
    assert len(named) > 100  # the reading sees them
    missing = sorted({n for n in named if not exists(n) and package_path(n) not in new_files()})
    assert missing == []


def test_every_module_of_the_package_is_in_the_concepts_table():
    """The table names each module (``timm_pkmixer/x.py``, ``x/y.py`` or ``timm_pkmixer.x``); the sub-packages'
    ``__init__.py`` files, which only gather their package's names, are the exception."""
    named = {package_path(n) for n in py_paths(TABLE) + dotted_modules(TABLE)}
    exempt = {m for m in MODULES if m.endswith('/__init__.py')}
    assert sorted(set(MODULES) - named - exempt) == []


def test_the_layout_lists_the_root_modules_and_test_layouts_ranks():
    """The layout's left column lists the package root's modules, then each wing with test_layout's rank."""
    root_lines = LAYOUT.split('\n  analysis/')[0].splitlines()
    left = ' '.join(re.split(r'\s{3,}', line.strip())[0] for line in root_lines)
    assert set(re.findall(r'[\w]+\.py', left)) == {m for m in MODULES if '/' not in m}
    assert left.startswith('layers/  models/')  # the core's folders
    ranks = {name: int(rank) for name, rank in re.findall(r'^  (\w+)/ +\((\d)\)', LAYOUT, flags=re.M)}
    assert ranks == {k: v for k, v in RANK.items() if k != 'core'}
    assert set(ranks) == set(WINGS) | {'cli'}


def test_the_names_that_forward_into_the_wings_are_test_layouts():
    sentence = re.search(r'(\w+)\s+names\s+forward\s+into\s+the\s+wings\s+and\s+are\s+kept\s+as\s+public\s+entry\s+'
                         r'points:\s+(.*?)\.\n\n', DOC, flags=re.S)
    words = {'Four': 4, 'Three': 3, 'Five': 5}
    names = {'timm_pkmixer' if s == 'timm_pkmixer.<name>' else 'timm_pkmixer.__main__' if s.startswith('python -m')
             else s for s in code_spans(sentence.group(2)) if s.startswith(('timm_pkmixer', 'python -m'))}
    assert names == FACADES and words[sentence.group(1)] == len(FACADES)


def test_the_gather_modes_are_the_tables():
    modes = re.search(r'the modes `MODES`: ([\w /]+) \(', TABLE).group(1).split(' / ')
    assert tuple(modes) == MODES


# ------------------------------------------------------------------------------------- private timm names

def private_timm_names(tree: ast.AST) -> List[str]:
    """Imports of timm names or modules that begin with ``_``, and ``timm.…._x`` attributes, in a syntax tree."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or '').split('.')[0] == 'timm':
            parts = node.module.split('.') + [a.name for a in node.names]
            found += [f'{node.module}:{p}' for p in parts if p.startswith('_') and not p.startswith('__')]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split('.')[0] == 'timm'
                      and any(p.startswith('_') for p in a.name.split('.'))]
        elif isinstance(node, ast.Attribute) and node.attr.startswith('_') and not node.attr.startswith('__'):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id == 'timm':
                found.append(ast.unparse(node))
    return found


def test_only__timm_imports_private_timm_names():
    """The doc's claim: `_timm.py` holds the only imports of private timm names."""
    found = {m: names for m in MODULES if m != '_timm.py'
             and (names := private_timm_names(ast.parse((PACKAGE / m).read_text(encoding='utf-8'))))}
    assert found == {}
    assert private_timm_names(ast.parse((PACKAGE / '_timm.py').read_text(encoding='utf-8')))  # and it does
    assert 'the only imports of private timm names' in TABLE


def test_the_private_name_check_sees_each_form():
    tree = ast.parse('from timm.models._hub import x\nfrom timm.data.dataset_factory import _EVAL_SYNONYM\n'
                     'import timm.models._features\nimport timm\ny = timm.models._registry\n'
                     'from timm.models import create_model\nz = timm.__version__\n')
    assert private_timm_names(tree) == ['timm.models._hub:_hub', 'timm.data.dataset_factory:_EVAL_SYNONYM',
                                        'timm.models._features', 'timm.models._registry']


# ----------------------------------------------------------------------------------- names in the table

def defined_names() -> Set[str]:
    """Every class, function, argument, module-level or attribute name the package defines."""
    names: Set[str] = set()
    for m in MODULES:
        for node in ast.walk(ast.parse((PACKAGE / m).read_text(encoding='utf-8'))):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split('.')[-1])
    return names


# names the table gives that the package does not define
OTHER_PROJECTS = {'AutoModelForImageClassification',  # transformers, which loads a pushed config.json
                  'Checkpointable',                    # submitit.helpers, which SlurmTask subclasses
                  'WORLD_SIZE', 'RANK', 'LOCAL_WORLD_SIZE'}  # torchrun's environment variables


def test_the_classes_and_tables_the_concepts_table_names_are_defined():
    """A CamelCase (a class) or UPPER_CASE name (a table) in the table, alone or as ``x.Name``, is defined in the
    package: renaming one without the doc fails here."""
    spans = [s.split('.')[-1] for s in code_spans(TABLE) if re.fullmatch(r'[\w.]+', s)]
    wanted = {s for s in spans if re.fullmatch(r'_?[A-Z]\w*[a-z]\w*|_?[A-Z][A-Z0-9_]{2,}', s)}
    assert {'PERMUTATION_KINDS', 'GATHER_TABLE', 'FixedPermutation', 'ModelArgs', 'EXECUTORS'} <= wanted
    assert sorted(wanted - defined_names() - OTHER_PROJECTS) == []


# ------------------------------------------------------------------------------------------ walkthroughs

def files_line(walkthrough: str):
    """(the count, the files) of a walkthrough's ``**Files: N**: `a`, `b` (new).`` line."""
    m = re.search(r'^\*\*Files: (\d+)\*\*: (.*?\.)(?: |$)', walkthrough, flags=re.M)
    assert m, walkthrough.splitlines()[0]
    return int(m.group(1)), code_spans(m.group(2))


def steps(walkthrough: str) -> str:
    """The numbered steps of a walkthrough."""
    return '\n'.join(re.findall(r'^\d\. .*?(?=^\d\. |^\n)', walkthrough, flags=re.S | re.M))


@pytest.mark.parametrize('walkthrough', WALKTHROUGHS, ids=lambda w: w.split('(')[0].split(': ')[1].strip())
def test_a_walkthroughs_file_count_is_its_list_and_its_steps_touch_no_other(walkthrough):
    count, files = files_line(walkthrough)
    assert count == len(files) == len(set(files))
    new = new_files()
    for f in files:
        assert exists(f) != (package_path(f) in new), f  # a listed file exists, a new one does not yet
    listed = {package_path(f) for f in files}
    named = {package_path(p) for p in py_paths(steps(walkthrough))}
    assert {p for p in named if '/' in p} <= listed
    assert {p for p in named if '/' not in p} <= {Path(f).name for f in listed}


def test_the_walkthroughs_are_read():
    assert len(WALKTHROUGHS) == 5
    assert files_line(WALKTHROUGHS[1]) == (2, ['timm_pkmixer/layers/gather_cuda.py', 'timm_pkmixer/layers/gather.py'])
    assert 'timm_pkmixer/launch/executors.py' in steps(WALKTHROUGHS[0])


NUMBERS = {'two': 2, 'three': 3, 'four': 4, 'five': 5, 'six': 6, 'seven': 7, 'eight': 8, 'nine': 9, 'ten': 10,
           'eleven': 11, 'twelve': 12}


def test_the_files_touched_before_a_walkthrough_are_as_many_as_it_says():
    """A "Files touched before …: … N modules." paragraph names N modules."""
    paragraphs = re.findall(r'^Files touched before.*?(?=\n\n|\Z)', DOC, flags=re.S | re.M)
    counted = [(p, NUMBERS[m.group(1)]) for p in paragraphs
               if (m := re.search(r'\b(\w+) modules\.', p)) and m.group(1) in NUMBERS]
    assert counted  # the permutation kinds' walkthrough states one
    for paragraph, n in counted:
        assert len(set(py_paths(paragraph))) == n, paragraph


# --------------------------------------------------------------------------------------------- the other docs

def test_every_error_the_docs_name_is_the_packages_and_raised():
    """An exception class a document names in code (`ReplicaCheckMissingError`) is defined in the package and
    raised somewhere in it (or a builtin)."""
    import builtins
    docs = [ROOT / 'README.md', ROOT / 'train_recipes' / 'README.md', *sorted((ROOT / 'docs').glob('*.md'))]
    named = {m for d in docs for m in re.findall(r'`(?:[\w.]+\.)?(\w+Error)`', d.read_text(encoding='utf-8'))}
    assert 'ReplicaCheckMissingError' in named
    sources = [(PACKAGE / m).read_text(encoding='utf-8') for m in MODULES]
    defined = {n.name for s in sources for n in ast.walk(ast.parse(s)) if isinstance(n, ast.ClassDef)}
    raised = {name for s in sources for name in re.findall(r'raise (\w+Error)\b', s)}
    unknown = sorted(n for n in named if n not in defined and not hasattr(builtins, n))
    never_raised = sorted(n for n in named & defined if n not in raised and not any(
        re.search(rf'class \w+\({n}\b', s) for s in sources))  # a base class is raised through its subclasses
    assert (unknown, never_raised) == ([], [])


def test_training_md_states_the_replica_checks_default_timeout():
    from timm_pkmixer.distributed.replicas import DEFAULT_TIMEOUT_S
    text = ' '.join((ROOT / 'docs' / 'training.md').read_text(encoding='utf-8').split())
    assert f'`ReplicaCheckTimeoutError` after `timeout` ({DEFAULT_TIMEOUT_S:g} s)' in text
