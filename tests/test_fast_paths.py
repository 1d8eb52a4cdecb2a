"""The performance paths compute exactly what the reference does: derivation, int32 buffers, the compiled op;
an empty batch through every gather backend."""
import numpy as np
import pytest
import timm
import torch

import timm_pkmixer.layers.gather as gather_lib
import timm_pkmixer.layers.permutation as perm_lib
from timm_pkmixer.layers import FixedPermutation, derive_permutation, make_pk_mlp, permutation_digest
from timm_pkmixer.layers.gather import permute, use_gather_backend
from timm_pkmixer.layers.structure import hashed_uniform_keys

from conftest import randomize_


@pytest.mark.parametrize('num', [1, 2, 3, 1000, 65537, 200704])
@pytest.mark.parametrize('seed,key', [(0, 'blocks.0.mlp_tokens.perm_in'), (7, 'blocks.23.mlp_channels.perm_out')])
def test_fast_derivation_is_the_stable_argsort_of_the_keys(num, seed, key):
    keys = hashed_uniform_keys(num, seed, key)
    assert len(np.unique(keys)) == num  # the keys are distinct, so any sort gives the stable order
    ref = np.argsort(keys, kind='stable').astype(np.int64)
    got = derive_permutation(num, seed, key)
    assert got.dtype == np.int64 and np.array_equal(got, ref)


def test_buffers_are_int32_and_the_state_dict_is_unchanged():
    perm = FixedPermutation(4096, (64, 64), seed=3, key='blocks.1.mlp_tokens.perm_in')
    ref = derive_permutation(4096, 3, 'blocks.1.mlp_tokens.perm_in')
    assert perm.index.dtype == perm.inverse.dtype == torch.int32
    assert np.array_equal(perm.index.numpy(), ref)
    assert torch.equal(perm.index[perm.inverse.long()].long(), torch.arange(4096))
    sd = perm.state_dict()
    assert list(sd) == ['digest'] and sd['digest'].dtype == torch.int64
    assert int(sd['digest']) == permutation_digest(ref)  # the digest is still that of the int64 permutation
    assert perm_lib.index_dtype(2 ** 31) == torch.int64 and perm_lib.index_dtype(2 ** 31 - 1) == torch.int32


def test_rp_model_buffers_int32_and_half_the_memory():
    model = timm.create_model('s_mixer_rp_s64c64_32')
    perms = [m for m in model.modules() if isinstance(m, FixedPermutation)]
    nbytes = sum(b.numel() * b.element_size() for p in perms for b in (p.index, p.inverse))
    assert nbytes == sum(p.num for p in perms) * 2 * 4


def test_permute_op_forward_backward_and_double_backward():
    perm = FixedPermutation(60, (5, 12), seed=1, key='p')
    x = torch.randn(3, 60, dtype=torch.float64, requires_grad=True)
    y = gather_lib._permute_op(x, perm.index, perm.inverse, [60])
    torch.testing.assert_close(y, x[:, perm.index.long()], rtol=0, atol=0)
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    torch.testing.assert_close(gx, g[:, perm.inverse.long()], rtol=0, atol=0)
    assert torch.autograd.gradcheck(lambda t: gather_lib._permute_op(t, perm.index, perm.inverse, [60]), (x,))
    assert torch.autograd.gradgradcheck(lambda t: gather_lib._permute_op(t, perm.index, perm.inverse, [60]), (x,))
    torch.library.opcheck(gather_lib._permute_op, (x.detach(), perm.index, perm.inverse, [60]))


@pytest.mark.parametrize('backend', ['index_select', 'gather', 'tuned', 'opaque'])
def test_eager_permute_paths_agree(backend):
    perm = FixedPermutation(64, (8, 8), seed=2, key='q')
    x = torch.randn(4, 64, requires_grad=True)
    ref = x.detach()[:, perm.index.long()]
    with use_gather_backend(backend, 'cpu', modes=('eager',)):
        y = permute(x, perm.index, perm.inverse, [64])
        torch.testing.assert_close(y, ref, rtol=0, atol=0)  # autograd function
        assert y._base is None  # a fresh tensor, not a view (FSDP2 warns about views)
        g = torch.randn(4, 64)
        torch.testing.assert_close(torch.autograd.grad(y, x, g)[0], g[:, perm.inverse.long()], rtol=0, atol=0)
        with torch.no_grad():
            torch.testing.assert_close(permute(x, perm.index, perm.inverse, [64]), ref, rtol=0, atol=0)
        # a backend takes x in its layer's shape, contiguous or not: (4, 8, 8) as a transposed view, out (8, 8)
        shaped = torch.randn(4, 8, 8, requires_grad=True)
        xt = shaped.transpose(1, 2)
        y = permute(xt, perm.index, perm.inverse, [8, 8])
        assert y.shape == (4, 8, 8) and y.is_contiguous() and y._base is None
        torch.testing.assert_close(y.reshape(4, 64), xt.detach().reshape(4, 64)[:, perm.index.long()], rtol=0, atol=0)
        g = torch.randn(4, 8, 8)
        (gx,) = torch.autograd.grad(y, xt, g)
        assert gx.shape == xt.shape
        torch.testing.assert_close(gx.reshape(4, 64), g.reshape(4, 64)[:, perm.inverse.long()], rtol=0, atol=0)


def _graph_targets(fn, *args) -> set:
    """Targets of the nodes of the graph(s) dynamo hands to the backend."""
    targets = set()

    def backend(gm, example_inputs):
        targets.update(n.target for n in gm.graph.nodes if n.op == 'call_function')
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    torch._dynamo.reset()
    return targets


def test_compiled_cpu_graph_calls_the_opaque_permute_op():
    layer = make_pk_mlp('channel', 6, 6, 5, None, 'random', seed=3, key='t')
    x = torch.randn(2, 6, 5, requires_grad=True)
    assert torch.ops.timm_pkmixer.permute.default in _graph_targets(layer, x)
    with use_gather_backend('index_select', 'cpu', modes=('compile',)):
        # inductor may fuse the gather: the graph holds the plain gather, not the op
        assert torch.ops.timm_pkmixer.permute.default not in _graph_targets(layer, x)


def test_compiled_with_fused_gathers_matches_eager():
    """The alternative the benchmark measures (inductor fuses the gathers) computes the same function."""
    torch._dynamo.reset()
    model = randomize_(timm.create_model('s_mixer_rp_s64c64_32', num_blocks=1))
    x = torch.randn(4, 3, 32, 32)
    try:
        with use_gather_backend('index_select', 'cpu', modes=('compile',)):
            y = torch.compile(model, fullgraph=True)(x)
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-5)


def test_permutation_with_residual_is_residual_plus_permutation():
    perm = FixedPermutation(60, (5, 12), seed=1, key='p').double()
    x = torch.randn(3, 6, 10, dtype=torch.float64, requires_grad=True)
    r = torch.randn(3, 5, 12, dtype=torch.float64, requires_grad=True)
    y = perm(x, r)
    x2, r2 = x.detach().clone().requires_grad_(True), r.detach().clone().requires_grad_(True)
    ref = r2 + perm(x2)
    torch.testing.assert_close(y, ref, rtol=0, atol=0)
    g = torch.randn_like(y)
    for a, b in zip(torch.autograd.grad(y, (x, r), g), torch.autograd.grad(ref, (x2, r2), g)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # another dtype (e.g. an fp32 residual with a bf16 branch under autocast) is added out of place, promoted
    r32 = torch.randn(3, 5, 12)
    out = perm(x.detach().bfloat16(), r32)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, r32 + perm(x.detach().bfloat16()), rtol=0, atol=0)


@pytest.mark.parametrize('permutation', ['random', 'normal'])
@pytest.mark.parametrize('hidden', [12, None])
def test_pk_mlp_with_residual_is_residual_plus_forward(permutation, hidden):
    layer = make_pk_mlp('token', 6, 6, 5, hidden, permutation, seed=3, key='t').double()
    x = torch.randn(4, 6, 5, dtype=torch.float64)
    r = torch.randn(4, 6, 5, dtype=torch.float64)
    torch.testing.assert_close(layer(x, r), r + layer(x), rtol=0, atol=0)


@pytest.mark.parametrize('name,kw', [('s_mixer_rp_s64c64_32', dict(num_blocks=2)),
                                     ('rp_mixer_ss_w_32', dict(num_blocks=1, num_tokens=40)),
                                     ('s_mixer_s64c64_32', dict(num_blocks=2))])
def test_residual_through_j2_is_bit_identical_to_the_plain_add(name, kw):
    """Blocks add the skip connection through J2 (written into a random J2's fresh output); with stochastic
    depth they add it after DropPath. Both give the same bits (DropPath at rate 0 is the identity)."""
    model = randomize_(timm.create_model(name, **kw))
    assert not any(blk.stochastic_depth for blk in model.blocks)
    assert all(blk.stochastic_depth for blk in timm.create_model(name, drop_path_rate=0.1, **kw).blocks)
    x = torch.randn(3, 3, 32, 32, requires_grad=True)
    params = [p for n, p in model.named_parameters() if not n.startswith('head')]
    outs, grads = [], []
    for plain in (False, True):
        for blk in model.blocks:
            blk.stochastic_depth = plain  # drop_path is nn.Identity: the plain residual + branch
        y = model.forward_features(x)
        outs.append(y)
        grads.append(torch.autograd.grad(y.square().sum(), [x] + params))
    assert torch.equal(outs[0], outs[1])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


@pytest.mark.parametrize('backend', ['index_select', 'gather', 'tuned', 'plain', 'opaque'])
def test_a_empty_batch_through_every_gather_backend(backend):
    index = torch.randperm(12)
    inverse = torch.argsort(index)
    x = torch.randn(0, 12, requires_grad=True)
    with use_gather_backend(backend):
        y = permute(x, index, inverse, [3, 4])
        assert y.shape == (0, 3, 4)
        y.sum().backward()
    assert x.grad.shape == (0, 12)


@pytest.mark.parametrize('backend', ['index_select', 'gather', 'tuned', 'plain', 'opaque'])
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('batch,contiguous', [(5, True), (5, False), (0, True)])
def test_every_backend_is_bit_identical_to_indexing(backend, dtype, batch, contiguous):
    """Forward x[:, index], backward g[:, inverse], double backward: the same bits through every backend, whatever
    the dtype, an empty batch or a non-contiguous input (a transposed one, as a Transpose before J1 would give)."""
    perm = FixedPermutation(96, (8, 12), seed=5, key='bits')
    index, inverse = perm.index.long(), perm.inverse.long()
    base = torch.randn(12, 8, batch, dtype=dtype) if not contiguous else torch.randn(batch, 8, 12, dtype=dtype)
    x = (base.permute(2, 1, 0) if not contiguous else base).requires_grad_(True)
    assert x.is_contiguous() == contiguous or batch == 0
    g = torch.randn(batch, 8, 12, dtype=dtype)
    with use_gather_backend(backend, 'cpu', modes=('eager',)):
        y = perm(x)
        assert y.shape == (batch, 8, 12) and (y._base is None or backend == 'plain')  # plain: a reshape
        assert torch.equal(y.reshape(batch, 96), x.detach().reshape(batch, 96)[:, index])
        (gx,) = torch.autograd.grad(y, x, g, create_graph=True)
        assert gx.shape == x.shape
        assert torch.equal(gx.reshape(batch, 96), g.reshape(batch, 96)[:, inverse])
        # double backward: d<gx, h>/dg = h[:, index], again a gather
        h = torch.randn_like(gx)
        g2 = g.clone().requires_grad_(True)
        (gx2,) = torch.autograd.grad(perm(x), x, g2, create_graph=True)
        (gg,) = torch.autograd.grad(gx2, g2, h)
        assert torch.equal(gg.reshape(batch, 96), h.reshape(batch, 96)[:, index])


@pytest.mark.parametrize('backend', ['index_select', 'gather', 'tuned', 'opaque'])
def test_every_backend_is_deterministic(backend):
    perm = FixedPermutation(4096, (64, 64), seed=6, key='det')
    x = torch.randn(32, 64, 64, requires_grad=True)
    g = torch.randn(32, 64, 64)
    with use_gather_backend(backend, 'cpu', modes=('eager',)):
        runs = [(perm(x), torch.autograd.grad(perm(x), x, g)[0]) for _ in range(3)]
    assert all(torch.equal(a, runs[0][0]) and torch.equal(b, runs[0][1]) for a, b in runs[1:])
