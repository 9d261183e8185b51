"""GTA between tokens with a pose of their own (a detector's object queries at their reference points) and camera
tokens: the SE(3) part is the query-to-camera transform E_query · E_camera⁻¹, so attention is unchanged when the whole
scene moves rigidly, and it equals the explicit formula with the queries' SO(2) angles at 0."""
from __future__ import annotations

import math

import pytest
import torch

from tests.encodings.test_gta import gta_attention, qkv, relative_transform, rigid, views
from vispe.encodings import GTA
from vispe.encodings.gta import so2_angles
from vispe.geometry import Positions, SceneGeometry


def posed(poses: torch.Tensor) -> Positions:
    return Positions(num_positions=poses.shape[1], scene=SceneGeometry(poses=poses.float()))


def test_posed_queries_read_cameras_through_the_relative_transform() -> None:
    """out_i = Σ_j softmax_j(q_iᵀ ρ_ij k_j / √d) ρ_ij v_j with ρ_ij = ρ(E_i E_j⁻¹) and the query's SO(2) angle 0."""
    generator = torch.Generator().manual_seed(0)
    encoding = GTA(head_dim=24, depth=1, se3_dim=8, so2_freqs=3, trans_coeff=0.2)
    cams, queries = rigid(2 * 2, generator).view(2, 2, 4, 4), rigid(2 * 5, generator).view(2, 5, 4, 4)
    pos_k, pos_q = views(cams, grid=(2, 3)), posed(queries)
    q, k, v = qkv(generator, 5, 12, dim=24)
    got = gta_attention(encoding, q, k, v, pos_q, pos_k)

    view_of_key = torch.arange(2).repeat_interleave(6)
    angles_k = so2_angles(encoding.image_coords(pos_k), 3).expand(2, -1, -1)
    rho = relative_transform(encoding, queries, torch.zeros(2, 5, 6), cams[:, view_of_key], angles_k)
    logits = torch.einsum('bhid,bijde,bhje->bhij', q.double(), rho, k.double()) / math.sqrt(24)
    expected = torch.einsum('bhij,bijde,bhje->bhid', logits.softmax(-1), rho, v.double())
    assert torch.allclose(got.double(), expected, atol=1e-5)


def test_posed_cross_attention_is_unchanged_when_the_scene_moves_rigidly() -> None:
    generator = torch.Generator().manual_seed(1)
    encoding = GTA(head_dim=32, depth=1, se3_dim=16, so2_freqs=2, trans_coeff=0.3)
    cams, queries = rigid(2 * 3, generator).view(2, 3, 4, 4), rigid(2 * 7, generator).view(2, 7, 4, 4)
    change = rigid(1, generator)[0]
    q, k, v = qkv(generator, 7, 36)
    before = gta_attention(encoding, q, k, v, posed(queries), views(cams))
    after = gta_attention(encoding, q, k, v, posed(queries @ change), views(cams @ change))
    assert torch.allclose(before, after, atol=2e-5)
    moved_queries = queries.clone()
    moved_queries[:, :, :3, 3] += 1.5
    assert not torch.allclose(before, gta_attention(encoding, q, k, v, posed(moved_queries), views(cams)), atol=1e-3)


def test_gta_needs_cameras_or_poses() -> None:
    encoding = GTA(head_dim=16, depth=1)
    q = torch.randn(1, 2, 4, 16)
    with pytest.raises(ValueError, match=r'cameras of image tokens .* or a pose per token'):
        encoding.rotate(q, q, Positions(num_positions=4), Positions(num_positions=4), 0)


@pytest.mark.parametrize('change, problem', [
    (lambda p: p.__setitem__((0, 1, 0, 0), 2.0), 'is not rigid'),
    (lambda p: p.__setitem__((0, 1, 3, 0), 0.5), 'is not rigid'),
    (lambda p: p.__setitem__((0, 1, 0, 3), math.nan), 'has NaN or infinite'),
])
def test_poses_that_are_not_rigid_transforms_are_refused(change, problem) -> None:
    poses = torch.eye(4).repeat(1, 3, 1, 1)
    change(poses)
    with pytest.raises(ValueError, match=rf'SceneGeometry.poses: pose \(0, 1\) {problem}'):
        SceneGeometry(poses=poses)
    SceneGeometry(poses=poses, check_values=False)
    with pytest.raises(ValueError, match=r'must be \(B, 2, 4, 4\)'):
        Positions(num_positions=2, scene=SceneGeometry(poses=torch.eye(4).repeat(1, 3, 1, 1)))
