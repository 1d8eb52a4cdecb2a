"""The PK layer is exactly the effective MLP of eq. 19: y = J2 (I ⊗ W) J1 x, with φ in between."""
import pytest
import torch
import torch.nn.functional as F

from timm_pkmixer.layers import FixedPermutation, Transpose, make_pk_mlp


def perm_matrix(module, num: int) -> torch.Tensor:
    """Dense m×m matrix P of a permutation module acting on flat vectors: flat(out) = P flat(in)."""
    eye = torch.eye(num, dtype=torch.float64)
    if isinstance(module, FixedPermutation):
        return eye[module.index]
    return eye  # identity


def transpose_matrix(rows: int, cols: int) -> torch.Tensor:
    """Commutation matrix for a row-major (rows, cols) → (cols, rows) transpose."""
    idx = torch.arange(rows * cols).reshape(rows, cols).t().reshape(-1)
    return torch.eye(rows * cols, dtype=torch.float64)[idx]


def dense_block(linear: torch.nn.Linear, n1: int):
    """(I_{n1} ⊗ W) and the matching bias 1_{n1} ⊗ b, built explicitly."""
    w = linear.weight.double()
    big = torch.kron(torch.eye(n1, dtype=torch.float64), w)
    bias = linear.bias.double().repeat(n1)
    return big, bias


def effective_forward(layer, x: torch.Tensor, mixing: str, s_in: int, s_out: int, c: int) -> torch.Tensor:
    """Evaluate the PK layer through explicit dense m×m matrices (flat row-major layout)."""
    b = x.shape[0]
    n1 = c if mixing == 'token' else s_in
    if isinstance(layer.perm_in, Transpose):
        p_in, p_out = transpose_matrix(s_in, c), transpose_matrix(c, s_out)
    else:
        p_in, p_out = perm_matrix(layer.perm_in, s_in * c), perm_matrix(layer.perm_out, s_out * c)
    w1, b1 = dense_block(layer.fc1, n1)
    h = F.gelu(x.reshape(b, -1) @ p_in.t() @ w1.t() + b1)
    if layer.fc2 is not None:
        w2, b2 = dense_block(layer.fc2, n1)
        h = h @ w2.t() + b2
    return (h @ p_out.t()).reshape(b, s_out, c)


CASES = [
    # mixing, S_in, S_out, C, hidden, permutation
    ('token', 6, 6, 5, 12, 'random'),
    ('token', 6, 6, 5, None, 'random'),
    ('channel', 6, 6, 5, 20, 'random'),
    ('channel', 6, 6, 5, None, 'random'),
    ('token', 7, 4, 3, 8, 'random'),    # first block S0 -> S
    ('token', 6, 6, 5, 12, 'normal'),
    ('channel', 6, 6, 5, 20, 'normal'),
    ('token', 7, 4, 3, None, 'normal'),
]


@pytest.mark.parametrize('mixing,s_in,s_out,c,hidden,permutation', CASES)
def test_pk_layer_equals_explicit_effective_mlp(mixing, s_in, s_out, c, hidden, permutation):
    layer = make_pk_mlp(mixing, s_in, s_out, c, hidden, permutation, seed=3, key='t').double()
    x = torch.randn(4, s_in, c, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    assert y.shape == (4, s_out, c)

    x_ref = x.detach().clone().requires_grad_(True)
    y_ref = effective_forward(layer, x_ref, mixing, s_in, s_out, c)
    torch.testing.assert_close(y, y_ref, rtol=1e-12, atol=1e-12)

    # gradients with respect to input and weights agree with the dense effective MLP
    g = torch.randn_like(y)
    params = [p for p in layer.parameters()]
    grads = torch.autograd.grad(y, [x] + params, g)
    grads_ref = torch.autograd.grad(effective_forward(layer, x_ref, mixing, s_in, s_out, c), [x_ref] + params, g)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_normal_token_mixing_is_the_commutation_pair():
    """The normal token PK layer uses J1 = J_c and J2 = J_cᵀ (S.10-S.11), as plain transposes."""
    layer = make_pk_mlp('token', 5, 5, 3, None, 'normal')
    assert isinstance(layer.perm_in, Transpose) and isinstance(layer.perm_out, Transpose)
    jc = transpose_matrix(5, 3)
    torch.testing.assert_close(transpose_matrix(3, 5), jc.t())
    assert not any(isinstance(m, FixedPermutation) for m in layer.modules())
    assert list(layer.buffers()) == []


def test_random_layers_use_no_dense_matrix():
    """No buffer or parameter of an RP layer is m×m: permutations are length-m index vectors."""
    s, c = 64, 48
    layer = make_pk_mlp('token', s, s, c, 4 * s, 'random', key='x')
    m = s * c
    for t in list(layer.parameters()) + list(layer.buffers()):
        assert t.numel() < m * 8, t.shape


def test_bad_arguments():
    with pytest.raises(ValueError, match='mixing'):
        make_pk_mlp('spatial', 4, 4, 4, None, 'normal')
    with pytest.raises(ValueError, match='permutation'):
        make_pk_mlp('token', 4, 4, 4, None, 'shuffled')
    with pytest.raises(ValueError, match='channel mixing keeps'):
        make_pk_mlp('channel', 4, 5, 4, None, 'normal')
