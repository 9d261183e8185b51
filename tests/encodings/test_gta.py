"""GTA's defining properties: a common rigid change of every camera changes nothing, SO(2) logits depend only on
coordinate offsets, identity cameras without SO(2) are plain attention, and transform -> SDPA -> inverse equals
the explicit per-pair formula."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from vispe.attention import Attention
from vispe.encodings import GTA
from vispe.encodings.gta import so2_angles
from vispe.geometry import CameraGeometry, Cameras, Positions

IMAGE = (32, 48)


def rigid(count: int, generator: torch.Generator, translation: float = 2.0) -> torch.Tensor:
    """(count, 4, 4) random rotations (det +1) with random translations."""
    q, r = torch.linalg.qr(torch.randn(count, 3, 3, generator=generator, dtype=torch.float64))
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))[:, None, :]
    q[torch.linalg.det(q) < 0, :, 0] *= -1
    matrices = torch.eye(4, dtype=torch.float64).repeat(count, 1, 1)
    matrices[:, :3, :3] = q
    matrices[:, :3, 3] = torch.randn(count, 3, generator=generator, dtype=torch.float64) * translation
    return matrices


def cameras(extrinsics: torch.Tensor) -> Cameras:
    batch, views = extrinsics.shape[:2]
    intrinsics = torch.tensor([[40., 0, 24], [0, 40., 16], [0, 0, 1]]).expand(batch, views, 3, 3)
    return Cameras(intrinsics=intrinsics, lidar2cam=extrinsics.float(), image_size=IMAGE)


def views(extrinsics: torch.Tensor, grid: tuple[int, int] = (3, 4), prefix: int = 0) -> Positions:
    return Positions(grid_size=grid, num_views=extrinsics.shape[1], num_prefix_tokens=prefix, camera=CameraGeometry(cameras(extrinsics)))


def gta_attention(encoding: GTA, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pos_q: Positions,
                  pos_k: Positions, layer: int = 0) -> torch.Tensor:
    q, k = encoding.rotate(q, k, pos_q, pos_k, layer)
    if 'transform_v' in encoding.active_hooks:
        v = encoding.transform_v(v, pos_k, layer)
    out = F.scaled_dot_product_attention(q, k, v)
    return encoding.transform_out(out, pos_q, layer) if 'transform_out' in encoding.active_hooks else out


def qkv(generator: torch.Generator, nq: int, nk: int, heads: int = 2, dim: int = 32,
        batch: int = 2) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn(batch, heads, n, dim, generator=generator) for n in (nq, nk, nk))


def test_default_channel_split_is_the_clevr_tr_one() -> None:
    encoding = GTA(head_dim=64, depth=2).to('cpu')   # a bug once shadowed nn.Module._apply and broke .to()
    assert (encoding.triv_dim, encoding.se3_dim, encoding.so2_freqs) == (0, 32, 8)
    assert torch.equal(encoding.trans_coeff.detach(), torch.full((2,), 0.01))


def test_so2_angles_golden_values() -> None:
    """θ for pair p = 2f + a is 2π·m_a·2^(f+1−F)·c_a (F = 2: frequencies 1/2, 1)."""
    angles = so2_angles(torch.tensor([0.25, 0.5]), num_freqs=2, max_freq=(1.0, 2.0))
    expected = 2 * math.pi * torch.tensor([0.5 * 0.25, 2 * 0.5 * 0.5, 1 * 0.25, 2 * 1 * 0.5])
    assert torch.allclose(angles, expected)


def test_output_unchanged_under_a_common_rigid_change_of_the_scene_frame() -> None:
    generator = torch.Generator().manual_seed(0)
    extrinsics = rigid(2 * 3, generator).view(2, 3, 4, 4)
    change = rigid(1, generator)[0]
    encoding = GTA(head_dim=32, depth=1, se3_dim=16, so2_freqs=2, trans_coeff=0.3)
    q, k, v = qkv(generator, 36, 36)
    before = gta_attention(encoding, q, k, v, views(extrinsics), views(extrinsics))
    moved = views(extrinsics @ change)
    after = gta_attention(encoding, q, k, v, moved, moved)
    assert not torch.allclose(before, gta_attention(encoding, q, k, v, views(extrinsics.flip(1)),
                                                    views(extrinsics.flip(1))), atol=1e-3)
    assert torch.allclose(before, after, atol=2e-5)


def test_so2_logits_depend_only_on_the_coordinate_offset() -> None:
    generator = torch.Generator().manual_seed(1)
    identity = torch.eye(4).expand(2, 1, 4, 4)
    encoding = GTA(head_dim=16, depth=1, se3_dim=0, so2_freqs=4, max_freq=(1.0, 3.0))
    pixels = torch.rand(2, 10, 2, generator=generator) * torch.tensor(IMAGE)

    def logits(coords: torch.Tensor) -> torch.Tensor:
        pos = Positions(coords=coords, camera=CameraGeometry(cameras(identity)))
        q, k, _ = qkv(generator.manual_seed(5), 10, 10, dim=16)
        q, k = encoding.rotate(q, k, pos, pos, 0)
        return q @ k.transpose(-1, -2)

    assert torch.allclose(logits(pixels), logits(pixels + torch.tensor([7.5, -11.0])), atol=1e-5)
    assert not torch.allclose(logits(pixels), logits(pixels * 1.2), atol=1e-3)


def test_identity_cameras_without_so2_is_plain_attention() -> None:
    generator = torch.Generator().manual_seed(2)
    identity = torch.eye(4).expand(2, 2, 4, 4)
    encoding = GTA(head_dim=32, depth=1, so2_freqs=0, trans_coeff=0.7)
    q, k, v = qkv(generator, 24, 24)
    pos = views(identity)
    assert torch.allclose(gta_attention(encoding, q, k, v, pos, pos), F.scaled_dot_product_attention(q, k, v),
                          atol=1e-6)


def relative_transform(encoding: GTA, extrinsics_q: torch.Tensor, angles_q: torch.Tensor,
                       extrinsics_k: torch.Tensor, angles_k: torch.Tensor) -> torch.Tensor:
    """Dense (B, Nq, Nk, d, d) block-diagonal ρ(g_q g_k⁻¹): identity | blocks of s(E_q E_k⁻¹) | R(θ_k − θ_q), where
    s· scales the translation column, s(M) = D M D⁻¹ with D = diag(1, 1, 1, 1/s)."""
    scale = torch.diag(torch.tensor([1.0, 1.0, 1.0, 1.0 / encoding.trans_coeff[0].item()], dtype=torch.float64))
    relative = scale @ extrinsics_q[:, :, None] @ torch.linalg.inv(extrinsics_k)[:, None] @ scale.inverse()
    delta = (angles_k[:, None] - angles_q[:, :, None]).double()
    batch, nq, nk = delta.shape[:3]
    dense = torch.zeros(batch, nq, nk, encoding.head_dim, encoding.head_dim, dtype=torch.float64)
    t, s = encoding.triv_dim, encoding.se3_dim
    dense[..., range(t), range(t)] = 1.0
    for block in range(s // 4):
        start = t + 4 * block
        dense[..., start:start + 4, start:start + 4] = relative
    for pair in range(2 * encoding.so2_freqs):
        start = t + s + 2 * pair
        cos, sin = delta[..., pair].cos(), delta[..., pair].sin()
        dense[..., start, start], dense[..., start, start + 1] = cos, -sin
        dense[..., start + 1, start], dense[..., start + 1, start + 1] = sin, cos
    return dense


def test_transform_sdpa_inverse_equals_the_explicit_formula() -> None:
    """out_i = Σ_j softmax_j(q_iᵀ ρ_ij k_j / √d) ρ_ij v_j with ρ_ij = ρ(g_i g_j⁻¹), in cross-attention from
    rays of one target view to the tokens of two input views."""
    generator = torch.Generator().manual_seed(3)
    encoding = GTA(head_dim=24, depth=1, se3_dim=8, so2_freqs=3, trans_coeff=0.5)
    inputs, target = rigid(2 * 2, generator).view(2, 2, 4, 4), rigid(2, generator).view(2, 1, 4, 4)
    pixels = torch.randint(0, IMAGE[0], (2, 5, 2), generator=generator).float()
    pos_k, pos_q = views(inputs, grid=(2, 3)), Positions(coords=pixels, camera=CameraGeometry(cameras(target)))
    q, k, v = qkv(generator, 5, 12, dim=24)
    got = gta_attention(encoding, q, k, v, pos_q, pos_k)

    view_of_key = torch.arange(2).repeat_interleave(6)
    angles_k = so2_angles(encoding.image_coords(pos_k), 3).expand(2, -1, -1)
    angles_q = so2_angles(pixels / torch.tensor(IMAGE), 3)
    rho = relative_transform(encoding, target[:, [0] * 5], angles_q, inputs[:, view_of_key], angles_k)
    logits = torch.einsum('bhid,bijde,bhje->bhij', q.double(), rho, k.double()) / math.sqrt(24)
    expected = torch.einsum('bhij,bijde,bhje->bhid', logits.softmax(-1), rho, v.double())
    assert torch.allclose(got.double(), expected, atol=1e-5)


def test_qk_variant_transforms_queries_and_keys_only() -> None:
    generator = torch.Generator().manual_seed(4)
    extrinsics = rigid(2 * 2, generator).view(2, 2, 4, 4)
    full, rotary = GTA(head_dim=32, depth=1), GTA(head_dim=32, depth=1, on='qk')
    assert {'transform_v', 'transform_out'} <= full.active_hooks
    assert not {'transform_v', 'transform_out'} & rotary.active_hooks
    q, k, v = qkv(generator, 24, 24)
    pos = views(extrinsics)
    q_rot, k_rot = full.rotate(q, k, pos, pos, 0)
    expected = F.scaled_dot_product_attention(q_rot, k_rot, v)
    assert torch.allclose(gta_attention(rotary, q, k, v, pos, pos), expected, atol=1e-6)
    assert not torch.allclose(gta_attention(full, q, k, v, pos, pos), expected, atol=1e-3)


def test_prefix_tokens_pass_unchanged_and_the_attention_module_runs_it_with_sdpa() -> None:
    generator = torch.Generator().manual_seed(5)
    extrinsics = rigid(2 * 2, generator).view(2, 2, 4, 4)
    pos = views(extrinsics, prefix=1)
    encoding = GTA(head_dim=16, depth=2)
    q, k, _ = qkv(generator, 25, 25, dim=16)
    q_rot, k_rot = encoding.rotate(q, k, pos, pos, 1)
    assert torch.equal(q_rot[:, :, 0], q[:, :, 0]) and torch.equal(k_rot[:, :, 0], k[:, :, 0])

    attention = Attention(dim=32, num_heads=2).eval()
    x = torch.randn(2, 25, 32, generator=generator)
    fused = attention(x, pos, encoding, layer_idx=1)
    attention.fused_attn = False
    assert torch.allclose(fused, attention(x, pos, encoding, layer_idx=1), atol=1e-5)


def test_translation_scale_is_learned_per_layer() -> None:
    generator = torch.Generator().manual_seed(6)
    extrinsics = rigid(2 * 2, generator).view(2, 2, 4, 4)
    encoding = GTA(head_dim=16, depth=2)
    q, k, v = qkv(generator, 24, 24, dim=16)
    gta_attention(encoding, q, k, v, views(extrinsics), views(extrinsics), layer=1).square().sum().backward()
    grad = encoding.trans_coeff.grad
    assert grad[0] == 0 and grad[1] != 0
    assert encoding.no_weight_decay() == {'trans_coeff'}


def test_bad_input_names_the_fix() -> None:
    with pytest.raises(ValueError, match='exceed head_dim'):
        GTA(head_dim=32, depth=1, se3_dim=24, so2_freqs=4)
    with pytest.raises(ValueError, match='multiple of 4'):
        GTA(head_dim=32, depth=1, se3_dim=6)
    encoding = GTA(head_dim=16, depth=1)
    q, k, _ = qkv(torch.Generator().manual_seed(7), 12, 12, dim=16)
    with pytest.raises(ValueError, match='needs the cameras of image tokens'):
        encoding.rotate(q, k, Positions(grid_size=(3, 4)), Positions(grid_size=(3, 4)), 0)
    with pytest.raises(IndexError, match='depth >= 2'):
        pos = views(torch.eye(4).expand(2, 1, 4, 4))
        encoding.rotate(q, k, pos, pos, 1)
    rays = Positions(coords=torch.zeros(2, 5, 2), num_views=2, camera=CameraGeometry(cameras(torch.eye(4).expand(2, 2, 4, 4))))
    with pytest.raises(ValueError, match='equal size'):
        encoding.rotate(q[:, :, :5], k, rays, views(torch.eye(4).expand(2, 1, 4, 4)), 0)


@pytest.mark.parametrize('split', [dict(head_dim=64), dict(head_dim=40, se3_dim=12, so2_freqs=3),
                                   dict(head_dim=48, se3_dim=24, so2_freqs=0), dict(head_dim=32, se3_dim=0)])
@pytest.mark.parametrize('prefix', [0, 2])
def test_inference_path_equals_the_differentiable_one(split: dict, prefix: int) -> None:
    """Without autograd the transforms write into one preallocated tensor (out= products); with it they concatenate
    differentiable parts: the two give the same numbers for every channel split, with and without prefix tokens,
    on the strided q, k, v of a fused qkv projection and on attention's output."""
    generator = torch.Generator().manual_seed(8)
    extrinsics = rigid(2 * 3, generator).view(2, 3, 4, 4)
    pos = views(extrinsics, prefix=prefix)
    encoding = GTA(depth=2, trans_coeff=0.4, **split)
    heads, dim = 3, split['head_dim']
    fused = torch.randn(2, prefix + 36, 3, heads, dim, generator=generator)
    q, k, v = fused.permute(2, 0, 3, 1, 4).unbind(0)
    results = {}
    for recording in (False, True):
        inputs = [t.clone().requires_grad_() if recording else t for t in (q, k, v)]
        q_out, k_out = encoding.rotate(inputs[0], inputs[1], pos, pos, 1)
        results[recording] = (q_out, k_out, encoding.transform_v(inputs[2], pos, 1),
                              encoding.transform_out(inputs[0], pos, 1))
    for fast, differentiable in zip(results[False], results[True]):
        assert torch.allclose(fast, differentiable, atol=1e-6)
        assert fast.transpose(1, 2).is_contiguous() and differentiable.transpose(1, 2).is_contiguous()
    assert torch.equal(results[False][0][:, :, :prefix], q[:, :, :prefix])
