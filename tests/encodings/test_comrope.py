"""ComRoPE: block-wise rotation equals the dense matrix exponential; orthogonality; the RoPE equation."""
from __future__ import annotations

import pytest
import torch

from vispe.encodings import ComRoPE
from vispe.encodings.comrope import skew_eigenbasis
from vispe.geometry import Positions

VARIANTS = [('AP', 2), ('AP', 4), ('LD', 2), ('LD', 4), ('LD', 8)]


def build(variant: str, block_size: int, **kwargs) -> ComRoPE:
    return ComRoPE(head_dim=16, depth=2, num_heads=3, variant=variant, block_size=block_size, **kwargs)


def dense_rotation(encoding: ComRoPE, positions: torch.Tensor, layer: int) -> torch.Tensor:
    """exp of the full d×d generator Σ_a p_a A_a, built as the reference does: (heads, N, d, d)."""
    skew = encoding.skew()[layer]
    scalars = encoding.block_scalars(positions)[layer]
    generators = scalars[None, :, :, None, None] * skew[:, None]
    heads, tokens = generators.shape[:2]
    full = torch.stack([torch.block_diag(*generators[h, n]) for h in range(heads) for n in range(tokens)])
    return torch.linalg.matrix_exp(full).reshape(heads, tokens, 16, 16)


@pytest.mark.parametrize('variant, block_size', VARIANTS)
def test_blockwise_rotation_equals_dense_matrix_exp(variant, block_size) -> None:
    encoding = build(variant, block_size)
    pos = Positions((3, 4), num_prefix_tokens=1)
    q, k = torch.randn(2, 3, 13, 16), torch.randn(2, 3, 13, 16)
    for layer in range(2):
        rotated_q, rotated_k = encoding.rotate(q, k, pos, pos, layer)
        dense = dense_rotation(encoding, encoding.positions(pos), layer)
        assert (rotated_q - (dense @ q.unsqueeze(-1)).squeeze(-1)).abs().max() <= 1e-5
        assert (rotated_k - (dense @ k.unsqueeze(-1)).squeeze(-1)).abs().max() <= 1e-5


@pytest.mark.parametrize('variant, block_size', [('AP', 4), ('LD', 4), ('LD', 8)])
def test_eigenbasis_rotation_matches_matrix_exp_forward_and_backward(variant, block_size) -> None:
    """Even b > 2 rotates in the generators' shared eigenbasis; values and the gradients of the parameters and of
    q equal those through the per-token matrix exponential."""
    torch.manual_seed(0)
    encoding = build(variant, block_size).double()
    pos = Positions((3, 4), num_prefix_tokens=1)
    q = torch.randn(2, 3, 13, 16, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 3, 13, 16, dtype=torch.float64)
    table = encoding.build_table(pos)
    assert isinstance(table, tuple)
    results = []
    for rotation in (encoding.layer_rotation(table, 1), torch.linalg.matrix_exp(encoding.generators(pos))[1]):
        rotated = encoding.apply_rotation(q, rotation)
        grads = torch.autograd.grad((rotated * weights).sum(), [q, *encoding.parameters()], retain_graph=True)
        results.append((rotated, *grads))
    for eigen, reference in zip(*results):
        assert (eigen - reference).abs().max() <= 1e-5 * reference.abs().max()


def test_skew_eigenbasis_block_diagonalises_the_generators() -> None:
    torch.manual_seed(0)
    parameters = torch.randn(5, 6, 6, dtype=torch.float64)
    skew = parameters - parameters.transpose(-1, -2)
    basis, rates = skew_eigenbasis(skew)
    planes = torch.zeros(5, 6, 6, dtype=torch.float64)
    planes[:, [0, 2, 4], [1, 3, 5]] = rates
    planes[:, [1, 3, 5], [0, 2, 4]] = -rates
    assert (basis.transpose(-1, -2) @ basis - torch.eye(6, dtype=torch.float64)).abs().max() <= 1e-12
    assert (basis.transpose(-1, -2) @ skew @ basis - planes).abs().max() <= 1e-12 and bool((rates > 0).all())


@pytest.mark.parametrize('options', [dict(block_size=4, init_std=0.0), dict(block_size=3)],
                         ids=['degenerate', 'odd'])
def test_degenerate_or_odd_blocks_use_matrix_exp(options) -> None:
    """Zero generators (init_std=0) have no eigenbasis, odd blocks none of even size: both take the matrix
    exponential per token; zero generators are the identity."""
    encoding = ComRoPE(head_dim=12, depth=1, num_heads=2, variant='LD', **options)
    pos = Positions((2, 3), num_prefix_tokens=1)
    table = encoding.build_table(pos)
    assert isinstance(table, torch.Tensor) and table.shape[-2:] == (options['block_size'],) * 2
    q = torch.randn(1, 2, 7, 12)
    rotated, _ = encoding.rotate(q, q, pos, pos, 0)
    if options.get('init_std') == 0.0:
        assert torch.equal(rotated, q)
    else:
        assert (rotated.norm(dim=-1) - q.norm(dim=-1)).abs().max() <= 1e-5


@pytest.mark.parametrize('variant, block_size', VARIANTS)
def test_rotation_is_orthogonal_and_satisfies_the_rope_equation(variant, block_size) -> None:
    encoding = build(variant, block_size).double()
    x, y = torch.rand(5, 2, dtype=torch.float64), torch.rand(5, 2, dtype=torch.float64)
    rx, ry, ryx = (dense_rotation(encoding, p, 1) for p in (x, y, y - x))
    eye = torch.eye(16, dtype=torch.float64)
    assert (rx.transpose(-1, -2) @ rx - eye).abs().max() <= 1e-10
    assert (rx.transpose(-1, -2) @ ry - ryx).abs().max() <= 1e-10


def test_positions_are_normalised_and_the_cls_token_sits_at_the_centre() -> None:
    encoding = build('AP', 2)
    positions = encoding.positions(Positions((2, 4), num_prefix_tokens=1))
    assert torch.allclose(positions[0], torch.tensor([0.5, 0.5]))
    assert torch.allclose(positions[1], torch.tensor([0.25, 0.125]))
    assert torch.allclose(positions[-1], torch.tensor([0.75, 0.875]))
    q = torch.randn(1, 3, 9, 16)
    pos = Positions((2, 4), num_prefix_tokens=1)
    rotated, _ = encoding.rotate(q, q, pos, pos, 0)
    assert not torch.allclose(rotated[:, :, 0], q[:, :, 0])


def test_ap_blocks_alternate_row_and_column() -> None:
    encoding = build('AP', 2)
    positions = torch.tensor([[0.3, 0.7]])
    assert torch.equal(encoding.block_scalars(positions)[0, 0], torch.tensor([0.3, 0.7] * 4))


def test_ld_multipliers_are_shared_across_heads_and_per_layer() -> None:
    encoding = build('LD', 4)
    assert encoding.multiplier.shape == (2, 2, 4) and encoding.freqs.shape == (2, 3, 4, 4, 4)
    assert encoding.no_weight_decay() == {'freqs', 'multiplier'}


def test_perturbation_only_while_training_and_within_half_a_patch() -> None:
    encoding = build('AP', 2, perturbation=1.0)
    pos = Positions((4, 4))
    exact = encoding.eval().positions(pos)
    jittered = encoding.train().positions(pos)
    shift = (jittered - exact) * 4
    assert shift.abs().max() <= 0.5 + 1e-6 and shift.abs().max() > 0
    assert torch.equal(encoding.eval().positions(pos), exact)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="variant must be one of"):
        build('XY', 2)
    with pytest.raises(ValueError, match='divisible by 32'):
        ComRoPE(head_dim=48, depth=1, num_heads=1, variant='AP', block_size=16)
