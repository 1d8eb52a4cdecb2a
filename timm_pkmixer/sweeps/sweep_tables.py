"""The paper's sweeps as data: for each figure, its points' settings and the training it states, with sources.

Each :class:`Figure` is one figure's sweep (Hayase & Karakida, ICML 2024, App. C and D). Every value carries its
source: a section or caption, or ``ours: why`` where the paper is silent. A figure has

* ``kind``: which planner builds its points (:data:`timm_pkmixer.sweeps.sweep_planners.PLANNERS`), with ``params``;
* ``expects``: train.py keys the paper states for it and the base recipe should already hold (the sweep reports a
  base recipe that differs; the packaged recipes are tested to agree);
* ``overrides``: train.py keys the figure changes from its base recipe's training (set in every point's recipe);
* ``model``: how the points are built (for ``--explain``; the numbers are in :attr:`Figure.params`);
* ``seeds``: the number of seeds the paper trains per point;
* ``disagreements``: where the paper's text and its tables or captions say different things: every reading with
  its source, the first one used unless another is picked (``readings={KEY: NAME}``, ``--reading KEY=NAME``);
* ``claims``: what the paper says the figure shows, as :class:`~timm_pkmixer.sweeps.claims.Claim` data that
  ``pkmixer sweep`` writes into the sweep's record before anything runs and ``pkmixer report`` judges (a figure of
  no test-error claim, as Fig. 2 (a)'s CKA, has none).

A packaged recipe names the figures it is the base of on ``# figure: KEY`` lines; `pkmixer sweep` picks the one of
the requested experiment (or the one given). :data:`EXPERIMENTS` is the one list of the experiments (the sweep's
and the report's).
"""
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from .claims import Claim

__all__ = ['EXPERIMENTS', 'Setting', 'Reading', 'Disagreement', 'Figure', 'FIGURES', 'IMAGENET_SWEEP_OMEGA',
           'IMAGENET_SWEEP_PATCHES', 'CIFAR_SWEEP_PAIRS', 'DEPTHS', 'SW_MLP_DENSITIES', 'MLP_MIXER_DIMS',
           'FIGS2_OMEGA', 'FIG4_DIMS', 'FIG4_TOKENS', 'FIGS1_DENSITIES', 'FIG2_DENSITIES', 'FIGS6_DIMS',
           'GAMMA_OMEGA', 'GAMMA_WIDTH', 'PATCHES_32', 'PATCHES_90', 'SKIP_LAYER', 'SW_INPUT_LAYER', 'SW_BLOCK',
           'SW_BLOCK_C1', 'MODEL_ROWS']

# the paper's experiments: what `pkmixer sweep` generates and `pkmixer report` names (one list, read by both):
# `density` is Fig. 2's SW-MLPs of density p at a Mixer's width, `seeds` the base recipe's model alone (with its RP
# twin for a Mixer) over seeds, as Fig. 2(d)'s shallow MLPs
EXPERIMENTS = ('width', 'depth', 'rp-block', 'gamma', 'patch', 'density', 'seeds')
IMAGENET_SWEEP_OMEGA = 290217984  # γ(768²·196 + 768·196²)/2 with γ = 4: Mixer-B/16's Ω (C.5)
IMAGENET_SWEEP_PATCHES = (7, 8, 14, 16, 28, 32)  # C.5
# C.4 (i): the (C, S) pairs of the S-Mixer sweeps, as printed in the paper.
CIFAR_SWEEP_PAIRS: Dict[int, Tuple[Tuple[int, int], ...]] = {
    2 ** 18: ((16, 173), (32, 113), (48, 83), (83, 48), (113, 32), (173, 16)),
    2 ** 21: ((16, 504), (32, 346), (64, 226), (226, 64), (346, 32), (504, 16)),
    2 ** 27: ((128, 1386), (256, 904), (904, 256), (1386, 128)),
}
DEPTHS = (4, 8, 12, 16, 20)                         # C.6, Fig. 7
SW_MLP_DENSITIES = (0.9, 0.7, 0.5, 0.3, 0.1)       # C.4 (ii): 1 - p = 0.1 … 0.9; D.2: p = 0.1 … 0.9
MLP_MIXER_DIMS = (16, 32, 48, 64, 83, 113, 173)     # D.2, Fig. S.2
FIGS2_OMEGA = 2 ** 20  # D.2's C are C.4's symmetric pairs at Ω = 2^20, γ = 4: (16, 173), (32, 113), (48, 83), (64, 64)
FIG4_DIMS = (4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 64)          # C.2
FIG4_TOKENS = (360, 252, 203, 173, 152, 136, 124, 113, 104, 96, 89, 83, 64)  # C.2, as printed
FIGS1_DENSITIES = tuple(2. ** -n for n in range(9))  # ours: Fig. S.1 (left) gives no p grid; C.1's 2^-n, n ≤ 8
FIG2_DENSITIES = tuple(2. ** -n for n in range(11))  # C.1: SW-MLPs of density 2^-n, n = 0 … 10
FIGS6_DIMS = (16, 32, 64, 114, 173)                 # Fig. S.6 caption
GAMMA_OMEGA, GAMMA_WIDTH = 2 ** 20, 4096            # Fig. S.3: m = 4096 (caption); Ω ours
PATCHES_32 = (1, 2, 4, 8, 16, 32)                   # D.6, CIFAR
PATCHES_90 = (1, 3, 6, 10, 18, 30)                  # D.6, STL-10 at 90 px


@dataclass(frozen=True)
class Setting:
    """One setting of a figure: its name (a train.py key for training settings), value and source."""
    name: str
    value: Any
    source: str


@dataclass(frozen=True)
class Reading:
    """One reading of a passage the paper states twice, differently: what it says, where, and what it changes in
    the sweep (train.py keys, the figure's params, the Mixers' or the SW-MLPs' model arguments)."""
    name: str
    says: str
    source: str
    overrides: Tuple[Setting, ...] = ()
    params: Dict[str, Any] = field(default_factory=dict)
    model_kwargs: Dict[str, Any] = field(default_factory=dict)
    sw_kwargs: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Disagreement:
    """A setting the paper's text and its table or caption give differently; ``readings[0]`` is used by default."""
    key: str
    what: str
    readings: Tuple[Reading, ...]
    why: str  # why the default reading is the default

    def reading(self, name: Optional[str]) -> Reading:
        return self.readings[0] if name is None else next(r for r in self.readings if r.name == name)


@dataclass(frozen=True)
class Figure:
    key: str
    title: str
    experiment: str
    kind: str
    seeds: Setting
    expects: Tuple[Setting, ...] = ()
    overrides: Tuple[Setting, ...] = ()
    model: Tuple[Setting, ...] = ()
    params: Dict[str, Any] = field(default_factory=dict)
    disagreements: Tuple[Disagreement, ...] = ()
    claims: Tuple[Claim, ...] = ()


def _s(name: str, value: Any, source: str) -> Setting:
    return Setting(name, value, source)


# A.2.4, for every sweep that varies S (width, gamma): the skip layer in every point, S = S0 included.
SKIP_LAYER = _s('skip layer', 'in every point (skip_layer=True), S = S0 included',
                'A.2.4: "we use the skip layer even if S = S0 in the experiments that we sweep S … the same setting '
                'for the MLP-Mixer as for the S-Mixer"')
SW_INPUT_LAYER = _s('SW-MLP input layer', 'a masked linear layer of density p from the S0·C per-patch features to '
                    'width m (an identity when S0·C = m)',
                    'ours: the paper does not say how the per-patch features reach width m (C.4 (ii): "the same '
                    'per-patch FC structure" as the Mixers, then "vectorized")')

# C.4: "Unless otherwise specified, these settings were used throughout the whole study on CIFAR-10, CIFAR-100, and
# STL-10."
C4_TRAINING = (
    _s('opt', 'nesterov', 'C.4: Nesterov SGD'), _s('momentum', 0.9, 'C.4'), _s('batch_size', 128, 'C.4'),
    _s('epochs', 200, 'C.4'), _s('lr', 0.02, 'C.4'), _s('sched', 'cosine', 'C.4: cosine annealing'),
    _s('img_size', 32, 'C.4: images resized to 32×32×3'), _s('hflip', 0.5, 'C.4: random horizontal flip'),
    _s('color_jitter', 0.0, 'C.4: random crop and horizontal flip only (train.py\'s default jitters colour by '
                            '0.4)'))


def _c4(**changed: Optional[Setting]) -> Tuple[Setting, ...]:
    """C.4's training with some settings replaced by the figure's own (None: dropped)."""
    out = tuple(changed.pop(s.name, s) for s in C4_TRAINING) + tuple(changed.values())
    return tuple(s for s in out if s is not None)


# The SW-MLP's MLP block (γ given): eq. S.17 has an activation outside the second masked layer; C.1 builds the
# Fig. 2/4 SW-MLP by replacing the Mixer's (I_C ⊗ W1), (I_C ⊗ W2), … by M ⊙ A, i.e. the Mixer's block
# x + W2 φ(W1 LN(x)) with no outer φ. SwMlp's `outer_act` (True: eq. S.17).
SW_BLOCK = Disagreement(
    'sw-block', "the SW-MLP's MLP block: is there an activation after its second masked layer?",
    (Reading('eq-s17', 'x + φ((M2 ⊙ W2) φ((M1 ⊙ W1) LN(x))): an outer φ', 'A.2.5, eq. S.17'),
     Reading('c1', "x + (M2 ⊙ W2) φ((M1 ⊙ W1) LN(x)): the Mixer's block with its factors replaced by M ⊙ A, no "
                   'outer φ', 'C.1: "replaces the components within the MLP-Mixer … with the form M ⊙ A"',
             sw_kwargs=dict(outer_act=False))),
    'ours: eq. S.17 is the SW-MLP\'s definition (A.2.5)')
# Fig. 2 follows C.1, the section that defines it: the same two readings, C.1's first
SW_BLOCK_C1 = Disagreement(SW_BLOCK.key, SW_BLOCK.what, SW_BLOCK.readings[::-1],
                           'C.1 is the section that defines Fig. 2 and builds its SW-MLPs from the Mixer\'s factors')


def _hard_aug(table_row: str, base: str, base_source: str, autoaugment: str) -> Disagreement:
    """Table S.2's blank "hard aug." cell of `table_row`: read as blank, the recipe trains with `base` (its own
    augmentation, from `base_source`); read as a lost mark, AutoAugment is set (`autoaugment` says what that does to
    `base`)."""
    return Disagreement(
        'hard-aug', 'Table S.2\'s "hard aug." column: its cells are blank in the text',
        (Reading('blank', f'no hard augmentation: {base}', f'Table S.2 ({table_row} row: blank), {base_source}'),
         Reading('autoaugment', "a mark lost from the cell: AutoAugment (timm's policy 'original'), the "
                                f"augmentation D.7 adds \"to mitigate overfitting\", {autoaugment}",
                 f'Table S.2 ("hard aug." column, {table_row}), D.7',
                 overrides=(_s('aa', 'original', 'Table S.2 "hard aug." read as AutoAugment (D.7)'),))),
        'ours: the cell as printed')


# what the "hard aug." readings do to the recipes of Fig. 6 (a)-(c) (C.4's augmentation) and of Fig. 6 (d) (C.5's)
_HARD_AUG_C4 = ("C.4's random crop and horizontal flip only (no colour jitter: color_jitter 0)", 'C.4',
                'added to the crop and flip')
_HARD_AUG_C5 = ("C.5's augmentation as the recipe has it: RandAugment rand-m9-mstd0.5-inc1, mixup 0.8 / cutmix 1.0, "
                'random erasing 0.25', 'C.5',
                "in place of C.5's RandAugment (train.py takes one policy; mixup, cutmix and erasing stay)")


# ------------------------------------------------------------------ what the figures claim (the paper's words)
_RP, _NORMAL = {'permutation': 'random'}, {'permutation': 'normal'}
_WIDTH_FALLS = Claim(
    'error-falls-with-width', 'trend', factor='width', scale='log2', expect='falls', within=('family', 'permutation'),
    says='At a fixed Ω the test error falls as the effective width m = S·C grows (S-Mixers, normal and RP, and the '
         'SW-MLPs at their m)', source='Fig. 5, §4.1 (Hypothesis 4.1)')
_LOWEST_AT_C_EQUALS_S = Claim(
    'lowest-near-c-equals-s', 'lowest_at', factor='embed_dim', at='balanced', within=('permutation',),
    says='At a fixed Ω the test error is lowest near C = S, where the width m = S·C peaks (eq. 15): the arm nearest '
         'C = S below the mean of the two ends of the C range; normal and RP alike',
    source='Fig. 6, §4.2, eq. 15')
_NO_TREND_OVER_C = Claim(
    'no-trend-over-c', 'trend', factor='embed_dim', scale='log2', expect='none', within=('permutation',),
    says="C.4's pairs are symmetric ((C, S) and (S, C) share m): width alone predicts no trend of the error over C "
         '(measured, not judged)', source='eq. 14, eq. 15')
_FIG7_CLAIMS = (
    Claim('rp-matches-or-beats-normal-when-deep', 'match_or_beat', a=_RP, b=_NORMAL, within=('num_blocks',),
          at='largest', says='As depth grows the RP S-Mixer matches or beats the normal one (judged at the deepest L; '
                             'the others listed: RP trails at limited depth)', source='Fig. 7, §6, D.4'),
    Claim('rp-gap-shrinks-with-depth', 'trend', factor='num_blocks', gap=(_RP, _NORMAL), expect='falls',
          says='RP − normal error falls as the depth L grows (RP trails at limited depth, catches up deeper)',
          source='Fig. 7, §6 (remark on depth), D.4'))

_FIG5_MODEL = (
    _s('S-Mixer L', 8, 'C.4 (i): eight blocks'), _s('P', 4, 'C.4: per-patch FC, P = 4, S0 = 64'),
    _s('(C, S) pairs', 'CIFAR_SWEEP_PAIRS[Ω]', 'C.4 (i), as printed for Ω = 2^18, 2^21, 2^27'),
    _s('Ω', 2 ** 18, 'C.4 (i) lists 2^18, 2^21, 2^27: 2^18 unless omega is given (ours: the first)'), SKIP_LAYER)
_SW_ARM_FIG5 = (
    _s('SW-MLP L', 8, 'C.4 (ii): eight blocks'), _s('SW-MLP Ω', 2 ** 18, 'C.4 (ii): Ω = 2^18 (only)'),
    _s('SW-MLP 1 − p', '0.1, 0.3, 0.5, 0.7, 0.9', 'C.4 (ii): m = 540, 612, 724, 935, 1619 (eq. S.43)'),
    _s('SW-MLP block', 'x + φ((M ⊙ W) LN(x)), no hidden layer', 'C.4 (ii) compares S-Mixers: eq. S.16'),
    SW_INPUT_LAYER)
_C1_TRAINING = (
    _s('opt', 'adamw', 'C.1 (C.2: "the same training settings as in Figure 2 (a)")'), _s('batch_size', 128, 'C.1'),
    _s('epochs', 600, 'C.1'), _s('lr', 0.01, 'C.1'),
    _s('aa', 'original', 'C.1: auto-augmentation (ours: timm\'s AutoAugment policy "original")'),
    _s('sched', 'cosine', 'C.1: cosine annealing'), _s('img_size', 32, 'C.1: CIFAR-10'))

_FIGURES = [
    Figure('fig4', 'Fig. 4 (left): MLP-Mixer and SW-MLP against γm at Ω = 2^19', 'width', 'dims',
           seeds=_s('seeds', 4, 'C.2: four random seeds'), expects=_C1_TRAINING,
           model=(_s('MLP-Mixer L', 3, 'C.1'), _s('γ', 2, 'C.1, C.2'), _s('P', 4, 'C.1'),
                  _s('Ω', 2 ** 19, 'C.2'), _s('C', ', '.join(map(str, FIG4_DIMS)), 'C.2'),
                  _s('S', ', '.join(map(str, FIG4_TOKENS)), 'C.2 (eq. 14, nearest integer)'), SKIP_LAYER,
                  _s('permutation', 'normal', 'C.2: Fig. 4 (left) has MLP-Mixers and SW-MLPs, no RP Mixers '
                                              '(permutations random normal adds them)'),
                  _s('AdamW momentum', 0.9, 'C.1: β1 = 0.9, timm\'s AdamW default'),
                  _s('SW-MLP blocks', 6, 'C.1: the SW-MLP replaces the 3 token and 3 channel MLPs: 6 blocks, '
                                         'the Mixer\'s depth counted per mixing'),
                  _s('SW-MLP points', 'one per Mixer: m = S·C, γ = 2, Ω = 2^19, p = Ω/(γm²)',
                     'C.2: "the same values on Ω, γ and C, S as the Figure 4 (left)"; eq. 13'),
                  _s('SW-MLP per-patch FC', 'C channels, as its Mixer', 'C.4 (ii): "the same per-patch FC '
                                                                        'structure"'),
                  SW_INPUT_LAYER),
           params=dict(dims=FIG4_DIMS, omega=2 ** 19, gamma=2.0, num_blocks=3, patch_size=4,
                       permutations=('normal',), sw_mlp=dict(paired=True, num_blocks=6),
                       refuses=dict(omega='C.2 prints its S for Ω = 2^19', gamma='C.1 and C.2 set γ = 2')),
           disagreements=(SW_BLOCK,),
           claims=(Claim('error-falls-with-width', 'trend', factor='width', scale='log2', expect='falls',
                         within=('family',),
                         says='At a fixed Ω the test error falls as the width grows, for MLP-Mixers and SW-MLPs alike '
                              '(Fig. 4 left plots it against γm)',
                         source='Fig. 4 (left), §4.3'),)),
    Figure('fig5', 'Fig. 5: S-Mixers and SW-MLPs against m at fixed Ω', 'width', 'pairs',
           seeds=_s('seeds', 3, 'C.4: three trials'), expects=C4_TRAINING, model=_FIG5_MODEL + _SW_ARM_FIG5,
           params=dict(omega=2 ** 18, num_blocks=8,
                       sw_mlp=dict(num_blocks=8, omega=2 ** 18, gamma=1.0, densities=SW_MLP_DENSITIES)),
           claims=(_WIDTH_FALLS,)),
]

_FIG6_OMEGA = Disagreement(
    'omega', "Ω of Fig. 6's CIFAR sweeps",
    (Reading('table', 'Ω = 2^21', 'Table S.2'),
     Reading('text', 'Ω = 2^18, "the same pairs (S, C) … as Sec. C.4"', 'C.5 text', params=dict(omega=2 ** 18))),
    'ours: the table is per data set, the text one sentence for all three')
_FIG6_CIFAR10_TRAINING = Disagreement(
    'training', "Fig. 6's CIFAR-10 optimiser, learning rate, batch and epochs",
    (Reading('table', 'AdamW, lr 0.02, batch 1024, 2000 epochs', 'Table S.2'),
     Reading('text', 'lr 0.1, 200 epochs; the optimiser and batch of C.4 (Nesterov SGD, momentum 0.9, batch 128)',
             'C.5 text ("initial learning rate to 0.1. On CIFAR-10, we trained models 200 epochs"), C.4',
             overrides=(_s('opt', 'nesterov', 'C.5 text: C.4\'s Nesterov SGD'), _s('momentum', 0.9, 'C.4'),
                        _s('lr', 0.1, 'C.5 text'), _s('batch_size', 128, 'C.4'), _s('epochs', 200, 'C.5 text'),
                        _s('weight_decay', 2e-5, 'ours: the SGD recipes\' (train.py\'s default)')))),
    'ours: the table is per data set')
for _ds, (_omega, _opt, _lr, _batch, _epochs, _seeds, _dis) in {
        'cifar10': (2 ** 21, 'adamw', 0.02, 1024, 2000, 5, (_FIG6_OMEGA, _FIG6_CIFAR10_TRAINING)),
        'cifar100': (2 ** 21, 'nesterov', 0.1, 128, 600, 5, (_FIG6_OMEGA,)),
        'stl10': (2 ** 18, 'nesterov', 0.1, 128, 2000, 3, ())}.items():
    _FIGURES.append(Figure(
        f'fig6-{_ds}', f'Fig. 6 ({_ds}): S-Mixers against C at fixed Ω, L = 12 (Table S.2)', 'width', 'pairs',
        seeds=_s('seeds', _seeds, 'C.5: five trials on CIFAR, three on STL-10'),
        expects=_c4(opt=_s('opt', _opt, 'Table S.2 ("SGD": ours, C.4\'s Nesterov SGD)' if _opt != 'adamw'
                           else 'Table S.2'),
                    momentum=None if _opt == 'adamw' else _s('momentum', 0.9, 'C.4'), lr=_s('lr', _lr, 'Table S.2'),
                    batch_size=_s('batch_size', _batch, 'Table S.2'), epochs=_s('epochs', _epochs, 'Table S.2')),
        model=(_s('S-Mixer L', 12, 'Table S.2'), _s('Ω', _omega, 'Table S.2'),
               _s('(C, S) pairs', 'CIFAR_SWEEP_PAIRS[Ω]', 'C.5: "the same pairs (S, C) … as Sec. C.4"'),
               _s('P', 4, 'C.4'), SKIP_LAYER, _s('SW-MLP arm', 'none', 'Fig. 6 has none')),
        params=dict(omega=_omega, num_blocks=12, sw_mlp=None),
        disagreements=_dis + (_hard_aug({'cifar10': 'CIFAR10', 'cifar100': 'CIFAR100', 'stl10': 'STL10'}[_ds],
                                        *_HARD_AUG_C4),),
        claims=(_LOWEST_AT_C_EQUALS_S, _NO_TREND_OVER_C)))
_FIGURES += [
    Figure('fig6d', 'Fig. 6 (d): MLP-Mixers on ImageNet-1k against C at fixed Ω', 'width', 'imagenet',
           seeds=_s('seeds', 3, 'C.5: three trials'),
           expects=(_s('opt', 'adamw', 'C.5'), _s('epochs', 300, 'C.5'), _s('sched', 'cosine', 'C.5'),
                    _s('weight_decay', 0.05, 'C.5'), _s('warmup_epochs', 5, 'C.5'), _s('warmup_lr', 1e-6, 'C.5'),
                    _s('min_lr', 1e-5, 'C.5'), _s('smoothing', 0.1, 'C.5'), _s('mixup', 0.8, 'C.5'),
                    _s('cutmix', 1.0, 'C.5'), _s('reprob', 0.25, 'C.5'), _s('aa', 'rand-m9-mstd0.5-inc1', 'C.5')),
           model=(_s('L', 8, 'Table S.2'), _s('γ', 4, 'C.5'), _s('Ω', IMAGENET_SWEEP_OMEGA, 'C.5'),
                  _s('P', ', '.join(map(str, IMAGENET_SWEEP_PATCHES)), 'C.5'), _s('C', '3P²', 'C.5'),
                  _s('S', 'eq. S.44, nearest integer', 'C.5'), SKIP_LAYER),
           params=dict(), disagreements=(_hard_aug('ImageNet-1k', *_HARD_AUG_C5),),
           claims=(_LOWEST_AT_C_EQUALS_S,)),
]
for _ds in ('cifar10', 'cifar100'):
    _FIGURES.append(Figure(
        f'figS2-{_ds}', f'Fig. S.2 ({_ds}): MLP-Mixers and SW-MLPs with γ = 4 against m', 'width', 'dims',
        seeds=_s('seeds', 3, 'C.4 (D.2 gives none; C.4\'s settings hold "unless otherwise specified")'),
        expects=_c4(lr=_s('lr', 0.1, 'D.2')), overrides=(_s('lr', 0.1, 'D.2: initial learning rate 0.1'),),
        model=(_s('γ', 4, 'D.2'), _s('C', ', '.join(map(str, MLP_MIXER_DIMS)), 'D.2'),
               _s('Ω', FIGS2_OMEGA, 'D.2 lists 2^18 and 2^20; its C are C.4\'s symmetric pairs at 2^20, γ = 4 '
                                    '(16↔173, 32↔113, 48↔83, 64↔64): 2^20 unless omega is given'),
               _s('S', 'eq. 14 at (Ω, γ), nearest integer', 'D.2'),
               _s('MLP-Mixer L', 8, 'ours: D.2 gives none; C.4\'s eight blocks'), _s('P', 4, 'C.4'), SKIP_LAYER,
               _s('model', 'pk_mixer_ss_w_32 with the points\' S, C, γ, L', 'ours: the base recipe is C.4\'s '
                                                                         '(an S-Mixer); D.2 trains MLP-Mixers'),
               _s('SW-MLP p', '0.1, 0.3, 0.5, 0.7, 0.9', 'D.2'), _s('SW-MLP m', '√(Ω/(γp))', 'D.2'),
               _s('SW-MLP L', 8, 'ours: D.2 gives none; the Mixers\' (as C.4 (ii))'), SW_INPUT_LAYER),
        params=dict(dims=MLP_MIXER_DIMS, omega=FIGS2_OMEGA, gamma=4.0, num_blocks=8, patch_size=4,
                    model='pk_mixer_ss_w_32', sw_mlp=dict(num_blocks=8, densities=SW_MLP_DENSITIES)),
        disagreements=(SW_BLOCK,),
        claims=(Claim('error-falls-with-width', 'trend', factor='width', scale='log2', expect='falls',
                      within=('family',), says='With γ = 4 the test error falls as m grows, for MLP-Mixers and '
                                               'SW-MLPs alike', source='Fig. S.2, D.2'),)))
_D7_MODEL = (
    _s('MLP-Mixer γ', 4, 'D.7, Fig. S.7 caption'), _s('MLP-Mixer L', 8, 'ours: D.7 gives none; Fig. S.6\'s'),
    _s('P', 4, 'C.4'), SKIP_LAYER,
    _s('Ω', 2 ** 20, 'ours: D.7 gives none; at Ω/γ = 2^18 the MLP-Mixers have Fig. S.6\'s (C, S) (eq. 14 = eq. S.42 '
                     'at γ = 1, Ω = 2^18), and 2^20 is D.2\'s γ = 4 sweep'),
    _s('S', 'eq. 14 at (Ω, γ), nearest integer', 'eq. 14'),
    _s('model', 'pk_mixer_ss_w_32 with the points\' S, C, γ, L', 'D.7: "the model was switched from S-Mixer to '
                                                                'MLP-Mixer (γ = 4)"'),
    _s('data', 'the base recipe\'s', 'ours: D.7 names none (Fig. S.6: CIFAR-10)'),
    _s('SW-MLP arm', 'none', 'D.7 compares normal and RP Mixers'))
_FIGURES += [
    Figure('figS1', 'Fig. S.1 (left): SW-MLP trainability against the sparsity 1 − p at Ω = 2^16', 'width', 'sw',
           seeds=_s('seeds', 5, 'Fig. S.1 caption: five trials for each p'), expects=C4_TRAINING,
           model=(_s('Ω', 2 ** 16, 'Fig. S.1 caption'),
                  _s('SW-MLP p', '2^-n, n = 0 … 8 (m = 256 … 4096)', 'ours: the caption gives no grid; C.1\'s 2^-n'),
                  _s('γ', 'none: FC blocks (eq. S.16), m = √(Ω/p)',
                     'ours: the caption sets γ "according to (Golubeva et al., 2021)" without a value; gamma gives '
                     'MLP blocks of hidden γm and m = √(Ω/(γp))'),
                  _s('SW-MLP L', 8, 'ours: D.1 gives none; C.4 (ii)\'s eight blocks'), _s('P', 4, 'C.4'),
                  _s('data', 'the base recipe\'s', 'ours: D.1 names none'), SW_INPUT_LAYER),
           params=dict(omega=2 ** 16, gamma=None, densities=FIGS1_DENSITIES, num_blocks=8, patch_size=4)),
    Figure('figS3', 'Fig. S.3: MLP-Mixers against γ at fixed m = 4096 (eq. S.46)', 'gamma', 'gamma',
           seeds=_s('seeds', 3, 'C.4 (D.3 gives none)'), expects=C4_TRAINING,
           model=(_s('m = S·C', GAMMA_WIDTH, 'Fig. S.3 caption'),
                  _s('Ω', GAMMA_OMEGA, 'ours: D.3 gives no Ω; at 2^20 and m = 4096 the largest γ (C = S = 64, '
                                       'eq. S.46) is 4, D.2\'s'),
                  _s('C', 'divisors of m in [m^¼, m^¾]', 'ours: "various γ in a realistic range" (D.3)'),
                  _s('γ', '2Ω/(m(C + m/C))', 'D.3, eq. S.46'),
                  _s('MLP-Mixer L', 8, 'ours: D.3 gives none; C.4\'s eight blocks'), _s('P', 4, 'C.4'), SKIP_LAYER),
           params=dict(omega=GAMMA_OMEGA, width=GAMMA_WIDTH, model='pk_mixer_ss_w_32',
                       model_kwargs=dict(num_blocks=8, patch_size=4))),
    Figure('figS6', 'Fig. S.6: test-loss curves of S-Mixers at C = 16 … 173 (D.7)', 'width', 'dims_fc',
           seeds=_s('seeds', 5, 'Fig. S.6 caption: five trials'),
           expects=_c4(lr=_s('lr', 0.1, 'Fig. S.6 caption'), epochs=_s('epochs', 600, 'Fig. S.6 caption')),
           overrides=(_s('lr', 0.1, 'Fig. S.6 caption'), _s('epochs', 600, 'Fig. S.6 caption')),
           model=(_s('S-Mixer L', 8, 'Fig. S.6 caption'), _s('C', ', '.join(map(str, FIGS6_DIMS)), 'Fig. S.6 caption'),
                  _s('S', 'eq. S.42 at Ω = 2^18, nearest integer (173, 113, 64, 32, 16)',
                     'ours: the caption gives C only; C.4\'s Ω = 2^18 gives its pairs'), SKIP_LAYER,
                  _s('SW-MLP arm', 'none', 'Fig. S.6 has none')),
           params=dict(dims=FIGS6_DIMS, omega=2 ** 18, num_blocks=8),
           disagreements=(Disagreement(
               'c114', 'the fourth C of Fig. S.6',
               (Reading('caption', 'C = 114 (S = 32)', 'Fig. S.6 caption'),
                Reading('pairs', "C = 113, C.4's pair (113, 32)", 'C.4 (i)',
                        params=dict(dims=(16, 32, 64, 113, 173)))),
               'ours: the caption is the figure\'s'),),
           claims=(Claim('rp-overfits-less-at-largest-c', 'direction', metric='eval_loss', a=_RP, b=_NORMAL,
                         expect='lower', within=('embed_dim',), at='largest',
                         says='RP prevents over-fitting: at the largest C the RP S-Mixer ends with the lower test loss '
                              '(the normal one over-fits "more than twice" as much)', source='Fig. S.6, D.7'),)),
    Figure('figS7', 'Fig. S.7: test/train-loss curves of MLP-Mixers (γ = 4) with AutoAugment (D.7)', 'width', 'dims',
           seeds=_s('seeds', 5, 'Fig. S.7 caption: five trials'),
           expects=_c4(lr=_s('lr', 0.1, 'Fig. S.7 caption'), batch_size=_s('batch_size', 256, 'Fig. S.7 caption'),
                       epochs=_s('epochs', 600, 'Fig. S.7 caption'),
                       aa=_s('aa', 'original', 'D.7: "additional augmentation (auto-augmentation)" (ours: timm\'s '
                                               'policy "original")')),
           overrides=(_s('lr', 0.1, 'Fig. S.7 caption'), _s('batch_size', 256, 'Fig. S.7 caption'),
                      _s('epochs', 600, 'Fig. S.7 caption'), _s('aa', 'original', 'D.7')),
           model=(_s('C', ', '.join(map(str, FIGS6_DIMS)), 'ours: the caption names C = 173 only; D.7 continues '
                                                          'Fig. S.6, whose C these are'),) + _D7_MODEL,
           params=dict(dims=FIGS6_DIMS, omega=2 ** 20, gamma=4.0, num_blocks=8, patch_size=4,
                       model='pk_mixer_ss_w_32', sw_mlp=None),
           claims=(Claim('rp-lower-test-loss-at-largest-c', 'direction', metric='eval_loss', a=_RP, b=_NORMAL,
                         expect='lower', within=('embed_dim',), at='largest',
                         says='With AutoAugment the RP Mixer still ends with the lower test loss at C = 173',
                         source='Fig. S.7, D.7'),)),
    Figure('figS8', 'Fig. S.8: curves of MLP-Mixers (γ = 4) at S = C = 64 with AdamW and AutoAugment (D.7)', 'width',
           'dims', seeds=_s('seeds', 5, 'Fig. S.8 caption: five trials'),
           expects=_c4(opt=_s('opt', 'adamw', 'D.7: "SGD was replaced with AdamW"'), momentum=None,
                       lr=_s('lr', 0.01, 'Fig. S.8 caption'), batch_size=_s('batch_size', 256, 'Fig. S.8 caption'),
                       epochs=_s('epochs', 600, 'Fig. S.8 caption'),
                       aa=_s('aa', 'original', 'Fig. S.8 caption: auto-augmentation (ours: policy "original")')),
           overrides=(_s('opt', 'adamw', 'D.7'), _s('lr', 0.01, 'Fig. S.8 caption'),
                      _s('batch_size', 256, 'Fig. S.8 caption'), _s('epochs', 600, 'Fig. S.8 caption'),
                      _s('aa', 'original', 'Fig. S.8 caption')),
           model=(_s('S = C', 64, 'Fig. S.8 caption (dims adds other C at the same Ω)'),) + _D7_MODEL,
           params=dict(dims=(64,), omega=2 ** 20, gamma=4.0, num_blocks=8, patch_size=4, model='pk_mixer_ss_w_32',
                       sw_mlp=None),
           claims=(Claim('rp-beats-normal', 'direction', a=_RP, b=_NORMAL, expect='lower',
                         says='With AdamW and AutoAugment at S = C = 64 the RP MLP-Mixer ends with the lower test '
                              'error (its test loss keeps falling where the normal one\'s plateaus: a late effect, '
                              '600 epochs)', source='Fig. S.8, D.7'),
                   Claim('rp-lower-test-loss', 'direction', metric='eval_loss', a=_RP, b=_NORMAL, expect='lower',
                         says='… and the lower test loss', source='Fig. S.8, D.7'))),
    Figure('fig7', 'Fig. 7: S-Mixers against depth L', 'depth', 'depth', seeds=_s('seeds', 3, 'C.6: three trials'),
           expects=C4_TRAINING,
           model=(_s('L', ', '.join(map(str, DEPTHS)), 'C.6'), _s('S = C', 128, 'C.6'), _s('P', 4, 'C.4')),
           params=dict(depths=DEPTHS), claims=_FIG7_CLAIMS),
    Figure('figS4', 'Fig. S.4: one RP block among normal ones', 'rp-block', 'rp-block',
           seeds=_s('seeds', 3, 'C.6 (D.5: "consistent with those described in Section C.6")'), expects=C4_TRAINING,
           model=(_s('points', 'all normal, all random, and each block alone random', 'D.5'),
                  _s('S = C', 128, 'Fig. S.4 caption'), _s('L', 8, "the registered S-Mixer's: the caption gives no L")),
           disagreements=(Disagreement(
               'geometry', "Fig. S.4's S = C and depth L",
               (Reading('caption', 'S = C = 128, L = 8 (the registered S-Mixer\'s: the caption gives no L)',
                        'Fig. S.4 caption'),
                Reading('text', 'S = C = 64, four blocks', 'D.5 text',
                        model_kwargs=dict(num_tokens=64, embed_dim=64, num_blocks=4))),
               'ours: the caption is the figure\'s'),),
           claims=(Claim('first-block-rp-trails', 'direction', a={'permutation': 'RN*'}, b=_NORMAL, expect='higher',
                         says='Where RP costs accuracy at limited depth, the cost is the first block\'s: the S-Mixer '
                              'whose first block alone is RP trails the normal one', source='Fig. S.4, D.5'),)),
    Figure('figS5-cifar', 'Fig. S.5 (CIFAR): S-Mixers against the patch size P', 'patch', 'patch',
           seeds=_s('seeds', 3, 'D.6: three trials (CIFAR)'),
           expects=_c4(lr=_s('lr', 0.1, 'D.6')), overrides=(_s('lr', 0.1, 'D.6'), _s('epochs', 200, 'D.6')),
           model=(_s('S = C', 64, 'D.6'), _s('L', 4, 'D.6: four blocks'),
                  _s('P', ', '.join(map(str, PATCHES_32)), 'D.6')),
           params=dict(patches=PATCHES_32, img_size=32)),
    Figure('figS5-stl10', 'Fig. S.5 (STL-10): S-Mixers against the patch size P at 90 px', 'patch', 'patch',
           seeds=_s('seeds', 5, 'D.6: five trials (STL-10)'),
           expects=_c4(lr=_s('lr', 0.1, 'D.6'), epochs=_s('epochs', 400, 'D.6'),
                       img_size=_s('img_size', 90, 'D.6: resized to 90×90×3')),
           overrides=(_s('lr', 0.1, 'D.6'), _s('epochs', 400, 'D.6'), _s('img_size', 90, 'D.6')),
           model=(_s('S = C', 64, 'D.6'), _s('L', 4, 'D.6: four blocks'),
                  _s('P', ', '.join(map(str, PATCHES_90)), 'D.6')),
           params=dict(patches=PATCHES_90, img_size=90)),
]
_C1_SHALLOW_TRAINING = (
    _s('opt', 'adamw', 'C.1: AdamW'), _s('epochs', 200, 'C.1'), _s('lr', 0.01, 'C.1: cosine annealing from 0.01'),
    _s('sched', 'cosine', 'C.1'))
_FIGURES += [
    Figure('fig2', 'Fig. 2 (a)-(c): an MLP-Mixer and SW-MLPs of density p at its width (CKA, C.1)', 'density',
           'density', seeds=_s('seeds', 3, 'C.1: three seeds (Fig. 2 (b), (c): one)'), expects=_C1_TRAINING,
           model=(_s('MLP-Mixer', 'the base recipe\'s: L = 3, γ = 2, P = 4, S = C = 64 or 32', 'C.1'),
                  _s('permutation', 'normal', 'C.1: the MLP-Mixer is compared (permutation random adds its RP twin)'),
                  _s('SW-MLP p', '2^-n, n = 0 … 10', 'C.1'),
                  _s('SW-MLP width', 'm = S·C, hidden γm, γ = 2, the Mixer\'s', 'C.1: the SW-MLP replaces the '
                                                                               "Mixer's factors by M ⊙ A"),
                  _s('SW-MLP blocks', 6, 'C.1: the Mixer\'s 3 token and 3 channel MLPs, each one SW-MLP block'),
                  _s('SW-MLP per-patch FC', 'C channels, as its Mixer', 'C.4 (ii): "the same per-patch FC '
                                                                        'structure"'),
                  SW_INPUT_LAYER),
           params=dict(densities=FIG2_DENSITIES, sw_blocks=6, permutations=('normal',)),
           disagreements=(SW_BLOCK_C1,)),
    Figure('fig2d', 'Fig. 2 (d): shallow Monarch and Kronecker MLPs (§3.3, C.1)', 'seeds', 'seeds',
           seeds=_s('seeds', 5, 'C.1: five seeds'), expects=_C1_SHALLOW_TRAINING,
           model=(_s('model', "the base recipe's (shallow_monarch_28 or shallow_kron_28: x ↦ B_c B_2 ReLU(B_1 x))",
                     '§3.3, Table S.1'),),
           claims=(Claim('kronecker-not-worse', 'match_or_beat', a={'model': 'shallow_kron_*'},
                         b={'model': 'shallow_monarch_*'},
                         says='Weight sharing does not compromise performance: the shallow Kronecker MLP is not worse '
                              'than the Monarch one (lower, or level within the margin)', source='§3.3, Fig. 2 (d)'),
                   Claim('comparable', 'level', a={'model': 'shallow_kron_*'}, b={'model': 'shallow_monarch_*'},
                         says='"perform comparably": the two level within the margin (the literal wording)',
                         source='§3.3'))),
]

FIGURES: Dict[str, Figure] = {f.key: f for f in _FIGURES}

# What a figure's `model` rows state about the points built, so that a sweep shows the values it really builds: row
# name → (the points it describes: 'mixer' (the Mixers; every point when there is none) or 'sw' (the SW-MLPs), the
# fact of the built model it states (`sweep_plan._row_values`), the options, model arguments and reading params that
# change it). A row another name does not state is shown as the figure gives it.
MODEL_ROWS: Dict[str, Tuple[str, str, Tuple[str, ...]]] = {
    'L': ('mixer', 'L', ('depths', 'num_blocks')),
    'S-Mixer L': ('mixer', 'L', ('num_blocks',)),
    'MLP-Mixer L': ('mixer', 'L', ('num_blocks',)),
    'SW-MLP L': ('sw', 'L', ('num_blocks',)),
    'SW-MLP blocks': ('sw', 'L', ('num_blocks',)),
    'S = C': ('mixer', 'S = C', ('num_tokens', 'embed_dim', 'dims')),
    'S': ('mixer', 'S', ('num_tokens', 'dims', 'omega')),
    'C': ('mixer', 'C', ('embed_dim', 'dims')),
    '(C, S) pairs': ('mixer', '(C, S)', ('dims', 'omega', 'num_tokens', 'embed_dim')),
    'P': ('mixer', 'P', ('patch_size',)),
    'Ω': ('mixer', 'Ω', ('omega',)),
    'γ': ('mixer', 'γ', ('gamma', 'mlp_ratio')),
    'MLP-Mixer γ': ('mixer', 'γ', ('gamma', 'mlp_ratio')),
    'MLP-Mixer': ('mixer', 'geometry', ('num_blocks', 'num_tokens', 'embed_dim', 'gamma', 'mlp_ratio', 'patch_size')),
    'SW-MLP Ω': ('sw', 'Ω', ('omega',)),
    'SW-MLP 1 − p': ('sw', '1 − p', ('densities',)),
    'SW-MLP p': ('sw', 'p', ('densities',)),
    'SW-MLP m': ('sw', 'm', ('densities',)),
    'SW-MLP width': ('sw', 'm', ('num_tokens', 'embed_dim')),
}
