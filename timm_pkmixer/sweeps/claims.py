"""Claims declared before the runs: what a sweep exists to show, as data.

A :class:`Claim` says which arms (groups of runs, the report's points) it compares, how, and which way the paper
says the comparison goes. ``pkmixer sweep`` writes the claims of the figure it sweeps
(:attr:`~timm_pkmixer.sweeps.sweep_tables.Figure.claims`) and any the user declares (``--claim JSON``) into the
sweep's ``sweep.json`` before anything runs; ``pkmixer report`` judges them
(:mod:`timm_pkmixer.reports.verdicts`). The kinds, on the arms' final test error (``metric``: ``top1_err``, or the
final ``eval_loss``):

* ``direction``: arm ``a`` − arm ``b``; ``expect`` ``lower`` (a's error below b's) or ``higher``;
* ``level``: a and b equal within ±``margin`` (points of error), by an equivalence test;
* ``match_or_beat``: a below b, or level with it within ±``margin``;
* ``contrast``: Σ wᵢ·errᵢ over ``terms`` (each ``{"weight": w, "arm": {…}}``); ``expect`` ``negative`` or
  ``positive``;
* ``lowest_at``: the shape "lowest at a point": err(``at``) − the mean of the errors at the ``factor``'s smallest
  and largest values (a contrast; ``expect`` is ``negative``). ``at`` is a value of the factor, or ``balanced``: the
  arm(s) whose C is nearest S (|log(C/S)| least; two equally near are averaged);
* ``trend``: the least-squares slope of the error over the numeric ``factor`` (``scale`` ``log2``: per doubling, or
  ``linear``), every run a point; ``expect`` ``falls``, ``rises`` or ``none`` (measured, not judged). With ``gap``
  (``{"a": {…}, "b": {…}}``) it is the slope of the gap a − b (the factor × arm interaction).

An arm is a selector ``{feature: value}`` over the report's columns (:data:`FEATURES`); a string value may be a
shell pattern (``RN*``: the first block random). ``select`` keeps only the arms it matches; ``within`` makes one
comparison per value of the features it names (RP against normal at each depth); with one ``within`` feature,
``at`` (``largest``, ``smallest`` or a value) judges one of them and lists the others as measured. Every claim has a
``name``, the paper's words (``says``) and where it says them (``source``).
"""
import fnmatch
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import InvalidArgumentError

__all__ = ['FEATURES', 'NUMERIC_FEATURES', 'KINDS', 'METRICS', 'DEFAULT_MARGIN', 'Claim', 'parse_claim',
           'claims_from_records', 'matches']

FEATURES = ('point', 'model', 'family', 'num_blocks', 'num_tokens', 'embed_dim', 'width', 'permutation', 'density',
            'omega', 'gamma', 'patch_size')
NUMERIC_FEATURES = ('num_blocks', 'num_tokens', 'embed_dim', 'width', 'density', 'omega', 'gamma', 'patch_size')
KINDS = ('direction', 'level', 'match_or_beat', 'contrast', 'lowest_at', 'trend')
METRICS = ('top1_err', 'eval_loss')
DEFAULT_MARGIN = 0.5     # points of top-1 error: two arms are level when their difference lies within ± this
_EXPECT = {'direction': ('lower', 'higher'), 'level': (None,), 'match_or_beat': (None,),
           'contrast': ('negative', 'positive'), 'lowest_at': ('negative',), 'trend': ('falls', 'rises', 'none')}
_NEEDS = {'direction': ('a', 'b'), 'level': ('a', 'b'), 'match_or_beat': ('a', 'b'), 'contrast': ('terms',),
          'lowest_at': ('factor', 'at'), 'trend': ('factor',)}
_KEYS = ('name', 'kind', 'says', 'source', 'a', 'b', 'terms', 'factor', 'at', 'scale', 'gap', 'expect', 'select',
         'within', 'margin', 'metric')
Selector = Dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """One declared claim (see the module docstring for the kinds and their keys)."""
    name: str
    kind: str
    says: str
    source: str = 'declared by the user'
    a: Optional[Selector] = None
    b: Optional[Selector] = None
    terms: Optional[Tuple[Tuple[float, Selector], ...]] = None
    factor: Optional[str] = None
    at: Any = None
    scale: str = 'linear'
    gap: Optional[Tuple[Selector, Selector]] = None
    expect: Optional[str] = None
    select: Selector = field(default_factory=dict)
    within: Tuple[str, ...] = ()
    margin: float = DEFAULT_MARGIN
    metric: str = 'top1_err'

    def __post_init__(self) -> None:
        if self.kind == 'lowest_at' and self.expect is None:  # the shape's one direction
            object.__setattr__(self, 'expect', 'negative')

    def as_dict(self) -> Dict[str, Any]:
        """The claim as JSON data (what ``sweep.json`` holds; :func:`parse_claim` reads it back)."""
        d = asdict(self)
        if self.terms is not None:
            d['terms'] = [dict(weight=w, arm=dict(s)) for w, s in self.terms]
        if self.gap is not None:
            d['gap'] = dict(a=dict(self.gap[0]), b=dict(self.gap[1]))
        d['within'] = list(self.within)
        return {k: v for k, v in d.items() if v is not None and v != {} and v != []}

    @property
    def judged(self) -> bool:
        """False for a claim measured but not judged (a trend the paper predicts none of)."""
        return not (self.kind == 'trend' and self.expect == 'none')


def _bad(name: str, problem: str) -> InvalidArgumentError:
    return InvalidArgumentError(f'claim {name!r}: {problem}')


def _selector(name: str, key: str, value: Any) -> Selector:
    if not isinstance(value, Mapping) or not value:
        raise _bad(name, f'{key} must be a non-empty object of features ({", ".join(FEATURES)}), got {value!r}')
    out = {}
    for k, v in value.items():
        if k not in FEATURES:
            raise _bad(name, f'{key}: {k!r} is not a feature of an arm (one of {", ".join(FEATURES)})')
        if isinstance(v, bool) or not isinstance(v, (str, int, float)) or (isinstance(v, float) and
                                                                          not math.isfinite(v)):
            raise _bad(name, f'{key}.{k} must be a string or a finite number, got {v!r}')
        if k in NUMERIC_FEATURES and isinstance(v, str):
            raise _bad(name, f'{key}.{k} must be a number ({k} is numeric), got {v!r}')
        out[k] = v
    return out


def _number(name: str, key: str, value: Any, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or \
            (positive and value <= 0):
        raise _bad(name, f'{key} must be a {"positive " if positive else ""}finite number, got {value!r}')
    return float(value)


def parse_claim(data: Any) -> Claim:
    """A :class:`Claim` from JSON data (a dict, or its JSON text), every key checked.

    Raises:
        InvalidArgumentError: not an object, an unknown key or kind, a missing or ill-formed key; the message names
            the claim and the key.
    """
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as e:
            raise InvalidArgumentError(f'a claim must be a JSON object ({e.msg} at column {e.colno}), got '
                                       f'{data[:80]!r}') from None
    if not isinstance(data, Mapping):
        raise InvalidArgumentError(f'a claim must be a JSON object with a name, a kind and what it says, got {data!r}')
    name = data.get('name')
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f'a claim needs a name (a non-empty string), got {name!r}')
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise _bad(name, f'unknown key{"s" if len(unknown) > 1 else ""} {", ".join(map(repr, unknown))} (a claim '
                         f'takes {", ".join(_KEYS)})')
    kind = data.get('kind')
    if kind not in KINDS:
        raise _bad(name, f'kind must be one of {", ".join(KINDS)}, got {kind!r}')
    missing = [k for k in ('says',) + _NEEDS[kind] if data.get(k) is None]
    if missing:
        raise _bad(name, f'a {kind} claim needs {" and ".join(missing)}')
    for key in ('says', 'source'):
        if key in data and (not isinstance(data[key], str) or not data[key].strip()):
            raise _bad(name, f'{key} must be a non-empty string, got {data[key]!r}')
    expect = data.get('expect', 'negative' if kind == 'lowest_at' else None)
    if expect not in _EXPECT[kind]:
        raise _bad(name, f'expect of a {kind} claim must be {" or ".join(map(str, _EXPECT[kind]))}, got {expect!r}')
    kw: Dict[str, Any] = dict(name=name, kind=kind, says=data['says'], expect=expect)
    if 'source' in data:
        kw['source'] = data['source']
    for key in ('a', 'b'):
        if data.get(key) is not None:
            kw[key] = _selector(name, key, data[key])
    if kind == 'contrast':
        terms = data['terms']
        if not isinstance(terms, list) or len(terms) < 2:
            raise _bad(name, f'terms must be a list of two or more {{"weight": w, "arm": {{…}}}}, got {terms!r}')
        parsed = []
        for i, t in enumerate(terms):
            if not isinstance(t, Mapping) or set(t) != {'weight', 'arm'}:
                raise _bad(name, f'terms[{i}] must be {{"weight": w, "arm": {{…}}}}, got {t!r}')
            parsed.append((_number(name, f'terms[{i}].weight', t['weight']), _selector(name, f'terms[{i}].arm',
                                                                                        t['arm'])))
        if all(w == 0 for w, _ in parsed):
            raise _bad(name, 'terms: every weight is 0')
        kw['terms'] = tuple(parsed)
    if data.get('factor') is not None:
        if data['factor'] not in NUMERIC_FEATURES:
            raise _bad(name, f'factor must be a numeric feature ({", ".join(NUMERIC_FEATURES)}), got '
                             f'{data["factor"]!r}')
        kw['factor'] = data['factor']
    if kind == 'lowest_at':
        at = data['at']
        kw['at'] = at if at == 'balanced' else _number(name, 'at', at)
    elif data.get('at') is not None:
        at, within = data['at'], data.get('within')
        if kind not in ('direction', 'level', 'match_or_beat') or not isinstance(within, list) or len(within) != 1:
            raise _bad(name, 'at, beside a lowest_at claim, picks the one comparison of a within claim (of one '
                             'feature) that is judged: a direction, level or match_or_beat claim with one within')
        kw['at'] = at if at in ('largest', 'smallest') else _number(name, 'at', at)
    scale = data.get('scale', 'linear')
    if scale not in ('linear', 'log2'):
        raise _bad(name, f'scale must be linear or log2, got {scale!r}')
    kw['scale'] = scale
    if data.get('gap') is not None:
        gap = data['gap']
        if kind != 'trend' or not isinstance(gap, Mapping) or set(gap) != {'a', 'b'}:
            raise _bad(name, f'gap belongs to a trend claim and is {{"a": {{…}}, "b": {{…}}}}, got {gap!r}')
        kw['gap'] = (_selector(name, 'gap.a', gap['a']), _selector(name, 'gap.b', gap['b']))
    if data.get('select') is not None:
        kw['select'] = _selector(name, 'select', data['select'])
    within = data.get('within', [])
    if not isinstance(within, list) or any(w not in FEATURES for w in within):
        raise _bad(name, f'within must be a list of features ({", ".join(FEATURES)}), got {within!r}')
    kw['within'] = tuple(within)
    if 'margin' in data:
        kw['margin'] = _number(name, 'margin', data['margin'], positive=True)
    metric = data.get('metric', 'top1_err')
    if metric not in METRICS:
        raise _bad(name, f'metric must be one of {", ".join(METRICS)}, got {metric!r}')
    kw['metric'] = metric
    return Claim(**kw)


def claims_from_records(sweeps: Sequence[Any]) -> List[Claim]:
    """The claims of a ``sweep.json``'s sweeps, in order, each name once (a claim declared by two sweeps of one folder
    alike is one claim; two different claims of one name are refused).

    Raises:
        InvalidArgumentError: a claim that does not parse, or two different claims of one name.
    """
    found: Dict[str, Claim] = {}
    for sweep in sweeps:
        for data in (sweep.get('claims') or []) if isinstance(sweep, Mapping) else []:
            claim = parse_claim(data)
            if claim.name in found and found[claim.name] != claim:
                raise _bad(claim.name, 'declared twice, differently, in one sweep folder')
            found[claim.name] = claim
    return list(found.values())


def matches(selector: Mapping[str, Any], features: Mapping[str, Any]) -> bool:
    """Whether an arm of `features` is one `selector` names (numbers equal to 1e-6; strings equal or matching a shell
    pattern, case-sensitive)."""
    for key, want in selector.items():
        have = features.get(key)
        if isinstance(want, str):
            if not isinstance(have, str) or not fnmatch.fnmatchcase(have, want):
                return False
        elif isinstance(have, bool) or not isinstance(have, (int, float)) or \
                not math.isclose(float(have), float(want), rel_tol=1e-6, abs_tol=1e-12):
            return False
    return True
