"""Table S.3 (`timm_pkmixer.analysis.cost`, `pkmixer analyze cost`): counts against hand formulas, the memory
accounting of RP vs normal Mixers and the SW-MLP, the alternation of timed steps, and the command."""
import csv

import pytest
import torch
import torch.nn as nn

from timm_pkmixer.analysis.cost import (
    COST_SIZES,
    CostSize,
    build_cost_model,
    cost_markdown,
    cost_model_args,
    count_costs,
    table_s3,
    time_steps,
)
from timm_pkmixer.cli import main
from timm_pkmixer.errors import InvalidArgumentError
from timm_pkmixer.layers import MaskedLinear
from timm_pkmixer.layers.permutation import FixedPermutation

# S = S0 = (8/2)² = 16, C0 = 3·2² = 12: no skip layer, and the SW-MLP's m = S·C = S0·C needs no input layer
TINY = CostSize('tiny', num_tokens=16, embed_dim=12, num_blocks=2, gamma=2.0, img_size=8, patch_size=2,
                num_classes=5, data='test')
S, C, L, G, K, S0, C0 = 16, 12, 2, 2, 5, 16, 12
M, H = S * C, G * S * C  # SW-MLP width and hidden width
B = 3


def mixer_params():
    stem = C * C0 + C
    token = (G * S * S + G * S) + (S * G * S + S)
    channel = (G * C * C + G * C) + (C * G * C + C)
    block = 2 * C + token + 2 * C + channel
    return stem + L * block + 2 * C + C * K + K


def sw_mlp_params():
    stem = C * C0 + C
    block = 2 * M + (H * M + H) + (M * H + M)
    return stem + L * block + 2 * M + M * K + K


def mixer_flops():
    """(forward, forward + backward) FLOPs of a batch B: 2·MACs of every matmul and convolution. The backward
    of a linear layer is two matmuls of its size (input and weight gradients), of the stem only the weight's."""
    conv = 2 * B * S0 * C * C0
    linear = 2 * B * (L * 2 * S * C * (G * S + G * C) + C * K)
    return conv + linear, 2 * conv + 3 * linear


def sw_mlp_flops():
    conv = 2 * B * S0 * C * C0
    linear = 2 * B * (L * 2 * H * M + M * K)
    return conv + linear, 2 * conv + 3 * linear


@pytest.mark.parametrize('device', ['meta', 'cpu'])
@pytest.mark.parametrize('model, params, flops', [
    ('rp_mixer', mixer_params(), mixer_flops()),
    ('mlp_mixer', mixer_params(), mixer_flops()),
    ('sw_mlp', sw_mlp_params(), sw_mlp_flops()),
])
def test_counts_match_hand_formulas(device, model, params, flops):
    cost = count_costs(build_cost_model(TINY, model, device), B, (3, 8, 8))
    assert cost.params == params
    assert cost.param_bytes == 4 * params
    assert (cost.forward_flops, cost.train_flops) == flops


def test_rp_adds_exactly_its_permutation_buffers():
    """Same parameters as the normal Mixer; the RP Mixer's buffers are 2 J (in, out) per mixing, 2 mixings per
    block, each an int32 index and its int32 inverse of m = S·C entries plus one int64 digest; the normal Mixer
    (transpose, identity) has none. Saved tensors and FLOPs are equal."""
    rp, normal = (build_cost_model(TINY, name, 'cpu') for name in ('rp_mixer', 'mlp_mixer'))
    cost_rp, cost_normal = (count_costs(m, B, (3, 8, 8)) for m in (rp, normal))
    assert cost_rp.param_bytes == cost_normal.param_bytes
    assert cost_normal.buffer_bytes == 0
    perms = [m for m in rp.modules() if isinstance(m, FixedPermutation)]
    assert len(perms) == 4 * L
    assert cost_rp.buffer_bytes == 4 * L * (2 * M * 4 + 8)
    assert cost_rp.buffer_bytes == sum(p.index.nbytes + p.inverse.nbytes + p.digest.nbytes for p in perms)
    assert cost_rp.saved_bytes == cost_normal.saved_bytes > 0
    assert cost_rp.train_flops == cost_normal.train_flops
    assert cost_rp.train_state_bytes - cost_normal.train_state_bytes == cost_rp.buffer_bytes


def test_sw_mlp_masks_are_counted():
    """One bool mask per masked weight (1 byte per entry) and one int64 digest; the M ⊙ W products are saved for
    the backward, so the saved bytes hold at least one fp32 copy of every masked weight."""
    model = build_cost_model(TINY, 'sw_mlp', 'cpu')
    cost = count_costs(model, B, (3, 8, 8))
    masked = [m for m in model.modules() if isinstance(m, MaskedLinear)]
    assert len(masked) == 2 * L
    assert cost.buffer_bytes == 2 * L * (H * M + 8)
    assert cost.saved_bytes >= 4 * 2 * L * H * M
    assert cost.train_state_bytes == 4 * cost.param_bytes + cost.buffer_bytes + cost.saved_bytes


def test_sw_mlp_is_at_the_mixers_omega_and_width():
    """Caption of Table S.3: S, C, L, γ set for the three models: m = S·C, hidden γm, p = Ω/(γm²) (eq. 13-14)."""
    name, kwargs = cost_model_args(COST_SIZES['table-s3-small'], 'sw_mlp')
    omega = 2 * (48 * 64 ** 2 + 48 ** 2 * 64) / 2
    assert name == 'sw_mlp_o18_32'
    assert kwargs['width'] == 3072 and kwargs['gamma'] == 2.0 and kwargs['num_blocks'] == 3
    assert kwargs['density'] == pytest.approx(omega / (2 * 3072 ** 2))
    mixer = build_cost_model(COST_SIZES['table-s3-small'], 'mlp_mixer')
    sw = build_cost_model(COST_SIZES['table-s3-small'], 'sw_mlp')
    assert sw.describe().omega == pytest.approx(mixer.describe().omega) == omega


def test_large_sw_mlp_is_counted_on_meta_not_built():
    rows = table_s3([COST_SIZES['table-s3-large']], models=['sw_mlp'], batch_size=1, steps=0)
    (row,) = rows
    m, h = 256 * 588, 4 * 256 * 588
    assert row['params'] == 588 * 588 + 588 + 8 * (2 * m + 2 * h * m + h + m) + 2 * m + m * 1000 + 1000
    assert row['steps'] == 0 and row['time_ratio_vs_mlp_mixer'] == ''


class Recorder(nn.Module):
    def __init__(self, name, calls):
        super().__init__()
        self.name, self.calls, self.lin = name, calls, nn.Linear(2, 3)

    def forward(self, x):
        self.calls.append(self.name)
        return self.lin(x)


def test_time_steps_alternates_models_in_rotated_order(logged):
    calls = []
    models = {n: Recorder(n, calls) for n in 'abc'}
    times = time_steps(models, batch_size=4, input_size=(2,), num_classes=3, steps=2, warmup=1)
    lines = logged()
    assert calls == list('abc' 'bca' 'cab')
    assert {n: len(t) for n, t in times.items()} == {'a': 2, 'b': 2, 'c': 2}
    assert all(t > 0 for ts in times.values() for t in ts)
    assert len(lines) == 3 and lines[0].startswith('round 1/3 (warm-up)') and lines[2].startswith('round 3/3 (timed)')


def test_table_rows_give_ratios_to_the_mlp_mixer(monkeypatch, logged):
    rows = table_s3([TINY], models=['rp_mixer'], batch_size=4, steps=3, warmup=0)
    (row,) = rows  # the MLP-Mixer is timed as the reference but not listed
    lines = logged()  # a line per model of the table counted (the reference is counted unsaid) and per round timed
    assert lines[0] == (f'tiny rp_mixer: {row["params"]:,} parameters, {row["forward_flops_per_image"]:,} forward '
                        f'FLOPs per image (counted on the meta device)')
    assert [line.split(':')[0] for line in lines[1:]] == [f'round {r}/3 (timed)' for r in (1, 2, 3)]
    assert row['model'] == 'rp_mixer' and row['steps'] == 3 and row['device'] == 'cpu'
    assert row['time_ratio_q1'] <= row['time_ratio_vs_mlp_mixer'] <= row['time_ratio_q3']
    assert row['params'] == mixer_params() and row['forward_flops_per_image'] == mixer_flops()[0] // B
    text = cost_markdown(rows)
    assert text.count('\n') == 3 and '| RP MLP-Mixer |' in text and 'cpu, ' in text


@pytest.mark.parametrize('kwargs, message', [
    (dict(batch_size=0), 'batch_size must be a positive integer, got 0'),
    (dict(batch_size=5000), 'batch_size must be at most 4096, got 5000'),
    (dict(steps=-1), 'steps must be a non-negative integer, got -1'),
    (dict(steps=1001), 'steps must be at most 1000, got 1001'),
    (dict(models=['dense']), "models must be one of ('rp_mixer', 'mlp_mixer', 'sw_mlp'), got 'dense'"),
    (dict(models=[]), 'models is empty'),
    (dict(sizes=['huge']), "sizes must be one of ('table-s3-large', 'table-s3-small'), got 'huge'"),
])
def test_table_s3_refuses_bad_arguments(kwargs, message):
    kwargs = dict(dict(sizes=[TINY], steps=0), **kwargs)
    with pytest.raises(InvalidArgumentError) as e:
        table_s3(**kwargs)
    assert str(e.value).startswith(message)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_cost_writes_csv_and_markdown(capsys, tmp_path):
    code, out, err = run_cli(capsys, 'analyze', 'cost', '--models', 'rp_mixer', 'mlp_mixer', '--steps', '2',
                             '--warmup', '0', '--batch-size', '4', '--threads', '1', '--out-dir', str(tmp_path))
    assert code == 0, err
    assert 'round 2/2 (timed)' in err and '1 thread (as requested))' in out
    with open(tmp_path / 'table_s3.csv') as f:
        rows = list(csv.DictReader(f))
    assert [(r['model'], r['params'], r['buffer_bytes']) for r in rows] == [
        ('rp_mixer', '81322', str(12 * (2 * 3072 * 4 + 8))), ('mlp_mixer', '81322', '0')]
    assert rows[1]['time_ratio_vs_mlp_mixer'] == '1' and rows[0]['threads'] == '1'
    assert (tmp_path / 'table_s3.md').read_text().count('| table-s3-small') == 2
    assert 'table-s3-small rp_mixer: 81,322 parameters' in out
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize('argv, message', [
    (['--steps', '-1'], 'argument --steps: --steps must be a non-negative integer, got -1'),
    (['--steps', '2000'], 'argument --steps: --steps must be at most 1000, got 2000'),
    (['--batch-size', '0'], 'argument --batch-size: --batch-size must be a positive integer, got 0'),
    (['--size', 'huge'], "argument --size: --size must be one of table-s3-large, table-s3-small, got 'huge'"),
    (['--models', 'vit'], "argument --models: --models must be one of rp_mixer, mlp_mixer, sw_mlp, got 'vit'"),
    (['--device', 'cuda:0'], '--device cuda:0: CUDA is not available'),
    (['--device', 'nonsense'], "--device 'nonsense' is not a torch device"),
    (['--threads', '0'], 'argument --threads: the value must be a positive integer, got 0'),
])
def test_cli_cost_refuses_bad_options(capsys, tmp_path, argv, message):
    if torch.cuda.is_available() and argv[-1].startswith('cuda'):
        pytest.skip('CUDA is available here')
    code, _, err = run_cli(capsys, 'analyze', 'cost', *argv, '--out-dir', str(tmp_path / 'x'))
    assert code == 2 and message in err and 'Traceback' not in err


def test_cuda_peak_counts_this_model_alone(monkeypatch):
    """The CUDA peak of one model's step while others are resident: the rise above what was allocated before the
    step, plus this model's parameters, buffers, AdamW moments and the batch (fake allocator counters: no GPU)."""
    from timm_pkmixer.analysis import cost
    monkeypatch.setattr(torch.cuda, 'synchronize', lambda device=None: None)
    monkeypatch.setattr(torch.cuda, 'reset_peak_memory_stats', lambda device=None: None)
    monkeypatch.setattr(torch.cuda, 'memory_allocated', lambda device=None: 10_000)
    monkeypatch.setattr(torch.cuda, 'max_memory_allocated', lambda device=None: 10_700)
    model = nn.Linear(3, 2)  # 8 parameters, fp32
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(4, 3), torch.zeros(4, dtype=torch.long)
    cost._train_step(model, opt, x, y)
    moments = sum(t.nbytes for state in opt.state.values() for t in state.values())
    assert moments == 2 * 8 * 4 + 2 * 4  # exp_avg, exp_avg_sq (fp32) and a 0-d fp32 step per parameter tensor
    assert cost._cuda_peak(model, opt, x, y) == 700 + 8 * 4 + moments + x.nbytes + y.nbytes
