"""Fixed permutations: valid, independent, reproducible everywhere, gathered both ways, validated on load."""
import numpy as np
import pytest
import timm
import torch

from timm_pkmixer.errors import CheckpointMismatchError
from timm_pkmixer.layers import FixedPermutation, check_permutation, derive_permutation, permutation_digest
from timm_pkmixer.layers.gather import _gather_into, _index_select_into, _Permute

from conftest import RP, run_python


def test_derived_permutation_is_a_permutation():
    for m in (1, 2, 17, 4096, 150528):
        p = derive_permutation(m, seed=0, key='k')
        assert p.dtype == np.int64
        assert np.array_equal(np.sort(p), np.arange(m))


def test_golden_values_pin_the_stream():
    """The stream is integer arithmetic only: these values must never change with torch/numpy versions."""
    assert derive_permutation(10, seed=0, key='blocks.0.mlp_tokens.perm_in').tolist() == GOLDEN_10
    assert permutation_digest(derive_permutation(150528, seed=0, key='blocks.0.mlp_tokens.perm_in')) == GOLDEN_DIGEST


# Checked against a pure-Python (int arithmetic) SplitMix64 + blake2b implementation.
GOLDEN_10 = [9, 6, 3, 1, 7, 0, 2, 4, 5, 8]
GOLDEN_DIGEST = -1888539673728287958


def test_seed_and_key_give_independent_permutations():
    m = 4096
    a = derive_permutation(m, 0, 'a')
    assert np.array_equal(a, derive_permutation(m, 0, 'a'))
    b, c = derive_permutation(m, 1, 'a'), derive_permutation(m, 0, 'b')
    for other in (b, c):
        # two independent uniform permutations agree in ~1 position on average
        assert (a == other).sum() < 10
    # uniformity sanity: position of element 0 over many keys is spread over the range
    pos = [int(np.argmax(derive_permutation(64, 0, f'k{i}') == 0)) for i in range(640)]
    counts = np.bincount(pos, minlength=64)
    assert counts.max() < 30 and (counts > 0).sum() > 50


def test_permutation_identical_in_another_process():
    code = ('from timm_pkmixer.layers import derive_permutation, permutation_digest; '
            'print(permutation_digest(derive_permutation(150528, 7, "blocks.3.mlp_channels.perm_out")))')
    out = run_python(code).stdout.strip()
    assert int(out) == permutation_digest(derive_permutation(150528, 7, 'blocks.3.mlp_channels.perm_out'))


def test_gather_forward_and_inverse_gather_backward():
    perm = FixedPermutation(60, (5, 12), seed=1, key='p').double()
    x = torch.randn(3, 6, 10, dtype=torch.float64, requires_grad=True)
    y = perm(x)
    assert y.shape == (3, 5, 12)
    torch.testing.assert_close(y.reshape(3, -1), x.reshape(3, -1)[:, perm.index], rtol=0, atol=0)
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    # backward is the inverse gather: gx[flat i] = g[flat inverse[i]]
    torch.testing.assert_close(gx.reshape(3, -1), g.reshape(3, -1)[:, perm.inverse], rtol=0, atol=0)
    assert torch.equal(perm.index[perm.inverse], torch.arange(60))
    # and it is differentiable twice (gradcheck on the custom Function with both eager kernels)
    xs = torch.randn(2, 60, dtype=torch.float64, requires_grad=True)
    for kernel in (_index_select_into, _gather_into):
        def apply(t, kernel=kernel):
            return _Permute.apply(t, perm.index, perm.inverse, (5, 12), kernel)
        assert torch.autograd.gradcheck(apply, (xs,)) and torch.autograd.gradgradcheck(apply, (xs,))


def test_a_shaped_input_is_flattened_inside_the_gather_with_no_view_node():
    """The layer hands its (B, n1, n2) input to the gather as it is: the autograd graph goes from the permutation's
    node straight to the input (no ViewBackward for a reshape per call), and the gradient comes back in the input's
    shape, also for a non-contiguous input."""
    perm = FixedPermutation(60, (5, 12), seed=3, key='shaped')
    base = torch.randn(3, 10, 6, dtype=torch.float64, requires_grad=True)
    for x in (base, base.transpose(1, 2)):  # contiguous (3, 10, 6) and a non-contiguous (3, 6, 10) view
        y = perm(x)
        assert type(y.grad_fn).__name__ == '_PermuteBackward'
        (parent, _), = [f for f in y.grad_fn.next_functions if f[0] is not None]
        assert type(parent).__name__ == ('AccumulateGrad' if x is base else 'TransposeBackward0')
        torch.testing.assert_close(y.reshape(3, -1), x.reshape(3, -1)[:, perm.index], rtol=0, atol=0)
        g = torch.randn_like(y)
        (gx,) = torch.autograd.grad(y, x, g)
        assert gx.shape == x.shape
        torch.testing.assert_close(gx.reshape(3, -1), g.reshape(3, -1)[:, perm.inverse], rtol=0, atol=0)


def test_backward_uses_no_scatter():
    """The backward graph is a gather: no index_add / scatter / index_put kernels run."""
    perm = FixedPermutation(256, (16, 16), seed=0, key='p')
    x = torch.randn(4, 256, requires_grad=True)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        perm(x).sum().backward()
    names = {e.name for e in prof.events()}
    assert not any(k in n for n in names for k in ('index_add', 'scatter', 'index_put')), sorted(names)
    assert any('index_select' in n for n in names)


def test_check_permutation_errors():
    check_permutation(torch.tensor([2, 0, 1]), 3)
    with pytest.raises(ValueError, match='not a permutation of 0..2'):
        check_permutation(torch.tensor([0, 0, 1]), 3)
    with pytest.raises(ValueError, match='out of range'):
        check_permutation(torch.tensor([0, 1, 3]), 3)
    with pytest.raises(ValueError, match='out of range'):
        check_permutation(torch.tensor([0, -1, 1]), 3)
    with pytest.raises(ValueError, match='shape'):
        check_permutation(torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match='integer'):
        check_permutation(torch.tensor([0., 1., 2.]), 3)


def test_state_dict_stores_only_a_digest_and_validates_it():
    perm = FixedPermutation(100, (10, 10), seed=4, key='k')
    sd = perm.state_dict()
    assert list(sd) == ['digest'] and sd['digest'].numel() == 1
    FixedPermutation(100, (10, 10), seed=4, key='k').load_state_dict(sd)
    with pytest.raises(RuntimeError, match='another permutation seed'):
        FixedPermutation(100, (10, 10), seed=5, key='k').load_state_dict(sd)
    bad = {'digest': sd['digest'] + 1}
    with pytest.raises(RuntimeError, match='corrupted'):
        FixedPermutation(100, (10, 10), seed=4, key='k').load_state_dict(bad)


def test_explicit_permutation_in_state_dict_is_checked():
    perm = FixedPermutation(50, (5, 10), seed=0, key='k')
    good = dict(perm.state_dict(), index=perm.index.clone())
    perm.load_state_dict(good)
    broken = perm.index.clone()
    broken[3] = broken[4]
    with pytest.raises(RuntimeError, match='not a permutation of 0..49'):
        perm.load_state_dict(dict(perm.state_dict(), index=broken))
    other = torch.from_numpy(derive_permutation(50, 1, 'k'))
    with pytest.raises(RuntimeError, match='does not match this model'):
        perm.load_state_dict(dict(perm.state_dict(), index=other))


def test_meta_device_and_reinit():
    perm = FixedPermutation(30, (5, 6), seed=2, key='k', device='meta')
    assert perm.index.device.type == 'meta'
    perm.to_empty(device='cpu')
    perm.init_non_persistent_buffers()
    assert torch.equal(perm.index, torch.from_numpy(derive_permutation(30, 2, 'k')))
    assert int(perm.digest) == perm.expected_digest()


# -------------------------------------------------------------------------- checkpoints made with other permutations

def test_d_another_seed_names_the_seed_and_the_flag():
    sd = timm.create_model(RP, perm_seed=3).state_dict()
    with pytest.raises(CheckpointMismatchError, match=r'made with another permutation seed, perm_seed=3\. Build the '
                                                      r'model with perm_seed=3 \(timm scripts: --model-kwargs '
                                                      r'perm_seed=3\)'):
        timm.create_model(RP).load_state_dict(sd)


def test_d_digests_cast_to_a_float_dtype_are_refused():
    sd = {k: v.half() for k, v in timm.create_model(RP).state_dict().items()}
    with pytest.raises(CheckpointMismatchError, match=r'digest has dtype torch\.float16, not int64: the state dict was '
                                                      r'cast to another dtype'):
        timm.create_model(RP).load_state_dict(sd)


def test_a_composed_permutation_is_the_two_it_replaces():
    from timm_pkmixer.layers.gather import permute
    from timm_pkmixer.layers.permutation import compose
    a = FixedPermutation(60, (60,), seed=1, key='a')
    b = FixedPermutation(60, (5, 12), seed=1, key='b')
    index, inverse = compose(a.index, b.index), compose(b.inverse, a.inverse)
    assert index.dtype == a.index.dtype and torch.equal(index[inverse.long()].long(), torch.arange(60))
    x = torch.randn(3, 60, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    y, ref = permute(x, index, inverse, [5, 12]), b(a(x2))
    assert torch.equal(y, ref) and not torch.equal(y, b(x2))
    g = torch.randn(3, 5, 12)
    assert torch.equal(torch.autograd.grad(y, x, g)[0], torch.autograd.grad(ref, x2, g)[0])


def test_the_fixed_permutation_is_a_leaf_of_timms_fx_tracer_and_every_leaf_a_module_class():
    """timm's FX tracer keeps FixedPermutation whole (its gather is one node) and takes every registered leaf as a
    module class: a function registered there (as `compose` once was) breaks every FX trace of every model."""
    from timm.layers import get_notrace_modules, is_notrace_module

    import timm_pkmixer.layers.permutation as permutation
    assert is_notrace_module(permutation.FixedPermutation)
    assert not is_notrace_module(permutation.compose)
    assert all(isinstance(m, type) and issubclass(m, torch.nn.Module) for m in get_notrace_modules())
