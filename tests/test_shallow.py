"""The shallow Monarch and Kronecker MLPs of Fig. 2(d): the layers equal their dense matrices, the models the
dense formula B_c B_2 ReLU(B_1 x); registration, description, meta-device building, checked loading, errors."""
import json

import pytest
import timm
import torch

from timm_pkmixer.catalog import list_pkmixer_models, summarize
from timm_pkmixer.errors import ArgumentTypeError, CheckpointMismatchError, InputShapeError, InvalidArgumentError
from timm_pkmixer.layers import BlockDiagonalLinear, KroneckerLinear, MonarchLinear
from timm_pkmixer.models import ShallowMlp

NAMES = ('shallow_monarch_28', 'shallow_kron_28', 'shallow_monarch_8', 'shallow_kron_8')


def transpose_permutation(b: int) -> torch.Tensor:
    """P as an explicit n × n permutation matrix: (P x)[i·b + j] = x[j·b + i] (read as b × b, transpose)."""
    n = b * b
    p = torch.zeros(n, n, dtype=torch.float64)
    for i in range(b):
        for j in range(b):
            p[i * b + j, j * b + i] = 1.
    return p


def block_diag(weight: torch.Tensor) -> torch.Tensor:
    """diag(W_1, …, W_k) written out entry by entry from the (k, out, in) blocks."""
    k, o, i = weight.shape
    dense = torch.zeros(k * o, k * i, dtype=weight.dtype)
    for blk in range(k):
        dense[blk * o:(blk + 1) * o, blk * i:(blk + 1) * i] = weight[blk]
    return dense


def monarch_dense(layer: MonarchLinear) -> torch.Tensor:
    p = transpose_permutation(layer.block)
    return p @ block_diag(layer.l.weight.detach()) @ p.t() @ block_diag(layer.r.weight.detach())


def kron_dense(layer: KroneckerLinear) -> torch.Tensor:
    return torch.kron(layer.v.weight.detach(), layer.w.weight.detach())


@pytest.mark.parametrize('b', [1, 2, 3, 5])
def test_monarch_layer_is_p_l_pt_r(b):
    torch.manual_seed(b)
    layer = MonarchLinear(b * b).double()
    x = torch.randn(7, b * b, dtype=torch.float64)
    dense = monarch_dense(layer)
    torch.testing.assert_close(layer(x), x @ dense.t(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(layer.dense().detach(), dense, rtol=0, atol=0)
    # the factors hold the diagonal blocks only: 2·b³ weights, not n² = b⁴
    assert sum(q.numel() for q in layer.parameters()) == 2 * b ** 3
    if b > 1:  # L, R are block diagonal with b blocks, P L Pᵀ R is dense in general
        assert (block_diag(layer.r.weight.detach()) != 0).sum() == b ** 3 and bool((dense != 0).all())


def test_block_diagonal_linear_is_block_diag():
    torch.manual_seed(0)
    layer = BlockDiagonalLinear(3, 4, 2).double()
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(layer(x).reshape(5, 6), x.reshape(5, 12) @ block_diag(layer.weight.detach()).t(),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('in_shape,out_shape', [((4, 4), None), ((3, 5), (2, 6)), ((1, 7), (3, 1))])
def test_kronecker_layer_is_v_kron_w(in_shape, out_shape):
    torch.manual_seed(1)
    layer = KroneckerLinear(in_shape, out_shape).double()
    x = torch.randn(6, in_shape[0] * in_shape[1], dtype=torch.float64)
    dense = kron_dense(layer)
    assert dense.shape == (layer.out_features, layer.in_features)
    torch.testing.assert_close(layer(x), x @ dense.t(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(layer.dense().detach(), dense, rtol=0, atol=0)


def test_kronecker_is_monarch_with_shared_blocks():
    """§3.3: V ⊗ W is the Monarch matrix with L = I ⊗ V, R = I ⊗ W (row-major vec)."""
    torch.manual_seed(2)
    b = 4
    kron, monarch = KroneckerLinear(b).double(), MonarchLinear(b * b).double()
    with torch.no_grad():
        monarch.l.weight.copy_(kron.v.weight.expand(b, b, b))
        monarch.r.weight.copy_(kron.w.weight.expand(b, b, b))
    x = torch.randn(3, b * b, dtype=torch.float64)
    torch.testing.assert_close(monarch(x), kron(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('name', ['shallow_monarch_8', 'shallow_kron_8'])
def test_model_is_the_dense_formula(name):
    torch.manual_seed(3)
    model = timm.create_model(name).double().eval()
    with torch.no_grad():  # the head is zero at initialisation: give it values
        model.head.weight.normal_()
        model.head.bias.normal_()
    x = torch.randn(4, 1, 8, 8, dtype=torch.float64)
    dense = monarch_dense if 'monarch' in name else kron_dense
    b1, b2 = (dense(blk.fc) for blk in model.blocks)
    v = x.reshape(4, 64)
    expected = (b2 @ torch.relu(b1 @ v.t())).t() @ model.head.weight.detach().t() + model.head.bias.detach()
    torch.testing.assert_close(model(x), expected, rtol=1e-12, atol=1e-12)
    feats = model.forward_features(x)
    assert feats.shape == (4, 64, 1, 1)
    torch.testing.assert_close(feats[:, :, 0, 0], (b2 @ torch.relu(b1 @ v.t())).t(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('name', NAMES)
def test_registered_shapes_and_description(name):
    assert name in list_pkmixer_models()
    model = timm.create_model(name)
    side = 28 if name.endswith('28') else 8
    b, n = side, side * side
    monarch = 'monarch' in name
    assert model.pretrained_cfg['input_size'] == (1, side, side) and model.num_features == n
    assert model(torch.randn(2, 1, side, side)).shape == (2, 10)
    assert model(torch.randn(0, 1, side, side)).shape == (0, 10)
    per_layer = 2 * b ** 3 if monarch else 2 * b ** 2
    assert sum(q.numel() for q in model.parameters()) == 2 * per_layer + n * 10 + 10
    d = model.describe()
    assert d.family == ('Shallow Monarch' if monarch else 'Shallow Kronecker')
    assert (d.block_type, d.depth, d.width, d.num_tokens, d.dim) == (
        'monarch' if monarch else 'kronecker', 2, n, b, b)
    assert d.omega == b ** 3 and d.density == pytest.approx(1 / b) and d.gamma == 1
    assert d.omega == pytest.approx(d.density * d.gamma * d.width ** 2)  # eq. 13
    row = summarize(name).row()
    assert (row['family'], row['γ (tok/ch)'], row['m = S·C'], row['depth']) == (d.family, '1 (FC)', str(n), '2')
    assert summarize(name).params == sum(q.numel() for q in model.parameters())


def test_features_levels():
    model = timm.create_model('shallow_kron_8', features_only=True)
    assert model.feature_info.channels() == [64, 64, 64]
    x = torch.randn(2, 1, 8, 8)
    feats = model(x)
    assert [tuple(f.shape) for f in feats] == [(2, 64, 1, 1)] * 3
    torch.testing.assert_close(feats[0][:, :, 0, 0], x.flatten(1))  # level 0: the input vector
    full = timm.create_model('shallow_kron_8')
    full.load_state_dict(full.state_dict())
    final, inter = full.forward_intermediates(x, indices=[1])
    assert len(inter) == 1 and inter[0].shape == (2, 64, 1, 1) and final.shape == (2, 64, 1, 1)


@pytest.mark.parametrize('name', ['shallow_monarch_8', 'shallow_kron_8'])
def test_meta_to_empty_and_checked_loading(name):
    ref = timm.create_model(name)
    with torch.no_grad():
        ref.head.weight.normal_()
    model = timm.create_model(name, device='meta')
    model.to_empty(device='cpu')
    model.init_non_persistent_buffers()
    model.load_state_dict(ref.state_dict())
    x = torch.randn(3, 1, 8, 8)
    torch.testing.assert_close(model(x), ref(x), rtol=0, atol=0)
    other = 'shallow_kron_8' if 'monarch' in name else 'shallow_monarch_8'
    with pytest.raises(CheckpointMismatchError, match='checkpoint does not fit'):
        model.load_state_dict(timm.create_model(other).state_dict())


@pytest.mark.parametrize('name', ['shallow_monarch_28', 'shallow_kron_8'])
def test_model_args_rebuild_the_architecture(name):
    model = timm.create_model(name, num_classes=7)
    args = model.model_args
    plain = args.to_json()  # the record as config.json holds it
    assert json.loads(json.dumps(plain)) == plain and args['num_classes'] == 7 and args['act_layer'] == 'relu'
    rebuilt = type(model)(**args)
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == {k: v.shape for k, v in model.state_dict().items()}
    rebuilt.load_state_dict(model.state_dict())
    x = torch.randn(2, *model.pretrained_cfg['input_size'])
    torch.testing.assert_close(rebuilt(x), model(x), rtol=0, atol=0)
    # a class timm knows by a name is recorded by that name (the record of every model: models/_common.py)
    assert ShallowMlp(act_layer=timm.layers.get_act_layer('gelu'), img_size=4).model_args['act_layer'] == 'gelu'


def test_errors_name_the_argument():
    with pytest.raises(InvalidArgumentError, match=r'features=12 is not a perfect square.*nearest are 9 and 16'):
        MonarchLinear(12)
    with pytest.raises(InvalidArgumentError, match=r'in_chans·H·W=147 is not a perfect square'):
        timm.create_model('shallow_monarch_8', img_size=7, in_chans=3)
    kron = timm.create_model('shallow_kron_8', img_size=(3, 5))  # any image for V ⊗ W: V 3 × 3, W 5 × 5
    assert kron(torch.randn(1, 1, 3, 5)).shape == (1, 10) and kron.describe().width == 15
    with pytest.raises(InvalidArgumentError, match=r"structure must be one of \('monarch', 'kronecker'\)"):
        ShallowMlp(structure='dense')
    with pytest.raises(ArgumentTypeError, match='num_blocks must be an integer'):
        ShallowMlp(num_blocks=2.0)
    with pytest.raises(InvalidArgumentError, match="act_layer 'nope'"):
        ShallowMlp(act_layer='nope')
    with pytest.raises(InputShapeError, match=r'expected \(B, 1, 8, 8\)'):
        timm.create_model('shallow_monarch_8')(torch.randn(2, 1, 28, 28))


@pytest.mark.parametrize('structure', ['monarch', 'kron'])
def test_mnist_recipes_are_c1(structure):
    from timm_pkmixer.sweeps.recipes import load_recipe, resolve_recipe
    cfg = load_recipe(str(resolve_recipe(f'mnist/shallow_{structure}_28')))
    assert (cfg['model'], cfg['dataset'], cfg['in_chans'], cfg['img_size']) == (
        f'shallow_{structure}_28', 'torch/mnist', 1, 28)
    assert (cfg['opt'], cfg['epochs'], cfg['sched'], cfg['lr'], cfg['warmup_epochs']) == (
        'adamw', 200, 'cosine', 0.01, 0)
    text = resolve_recipe(f'mnist/shallow_{structure}_28').read_text()
    # Fig. 2(d)'s five seeds are the seeds experiment's, which the comment names (its default seeds tested with it)
    assert f'pkmixer sweep mnist/shallow_{structure}_28 --experiment seeds' in text
    from timm_pkmixer.sweeps.sweep_plan import plan_sweep
    assert plan_sweep(f'mnist/shallow_{structure}_28', 'seeds').seeds == [0, 1, 2, 3, 4]
