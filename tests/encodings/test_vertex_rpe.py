"""VertexRPE (V-DETR's 3DV-RPE): vertex order, the log compression, the reference's table read, invariances, and
the SDPA path of the attention module."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.attention import Attention
from vispe.encodings import VertexRPE, vertex_corners
from vispe.encodings.vertex_rpe import log_normalize
from vispe.geometry import Positions, SceneGeometry, box_corners


def scene(batch: int = 2, queries: int = 5, points: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Boxes (B, Q, 7) with random yaws and points (B, P, 3) in a 4 × 4 × 2 m room."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.rand(batch, queries, 3, generator=generator) * torch.tensor([4.0, 4.0, 2.0])
    sizes = 0.3 + 1.2 * torch.rand(batch, queries, 3, generator=generator)
    yaws = (torch.rand(batch, queries, 1, generator=generator) * 2 - 1) * math.pi
    xyz = torch.rand(batch, points, 3, generator=generator) * torch.tensor([4.0, 4.0, 2.0])
    return torch.cat([centres, sizes, yaws], -1), xyz


def bias_of(encoding: VertexRPE, boxes: torch.Tensor, xyz: torch.Tensor, layer: int = 0) -> torch.Tensor:
    pos_q = Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes))
    pos_k = Positions(coords=xyz)
    return encoding.logits_bias(torch.zeros(1), None, pos_q, pos_k, layer)


def test_vertex_order_is_the_references() -> None:
    box = torch.tensor([1.0, 2.0, 3.0, 4.0, 2.0, 1.0, 0.0])
    expected = torch.tensor([[3, 3, 2.5], [3, 1, 2.5], [-1, 1, 2.5], [-1, 3, 2.5],
                             [3, 3, 3.5], [3, 1, 3.5], [-1, 1, 3.5], [-1, 3, 3.5]])
    assert torch.equal(vertex_corners(box), expected)
    yawed = torch.tensor([0.0, 0.0, 0.0, 4.0, 2.0, 1.0, math.pi / 2])
    assert torch.allclose(vertex_corners(yawed)[0], torch.tensor([-1.0, 2.0, -0.5]), atol=1e-6)
    same_points = torch.cdist(vertex_corners(yawed), box_corners(yawed)).min(-1).values
    assert same_points.max() < 1e-6


def test_log_compression_golden_values() -> None:
    offsets = torch.tensor([0.0, 3.48, -8.0, 1 / 512])
    expected = [0.0, math.log2(512 * 3.48 + 1) / 12, -math.log2(4097) / 12, 1 / 12]
    assert torch.allclose(log_normalize(offsets, 512.0, 4.0), torch.tensor(expected))
    assert abs(expected[1] - 0.9) < 1e-3 and abs(expected[2] + 1.0) < 1e-4


def node_u(index: torch.Tensor, size: int = 10) -> torch.Tensor:
    """The compressed offset at which grid_sample (align_corners=False) reads table node ``index``."""
    return (2 * index.float() + 1) / size - 1


def test_table_at_its_nodes_equals_the_direct_mlps_and_fades_beyond() -> None:
    torch.manual_seed(0)
    encoding = VertexRPE(num_heads=3, depth=2)
    table = encoding.tables(1)
    u = node_u(torch.randint(0, 10, (2, 4, 6, 3)))
    for vertex in (0, 5):
        from_table = encoding.vertex_bias(u, 1, vertex, table)
        direct = encoding.vertex_bias(u, 1, vertex, None)
        assert from_table.shape == (2, 3, 4, 6)
        assert torch.allclose(from_table, direct, atol=1e-5)
    outside = torch.full((1, 1, 1, 3), 1.1)
    assert encoding.vertex_bias(outside, 1, 0, table).abs().max() == 0


def test_table_is_read_at_the_reversed_coordinate() -> None:
    """An MLP that sees only its first input (x): the table read varies with the offset's z, not its x."""
    encoding = VertexRPE(num_heads=1, hidden_dim=1)
    mlps = encoding.layers[0]
    with torch.no_grad():
        mlps.fc1_weight.zero_()
        mlps.fc1_weight[:, 0, 0] = 1.0
        mlps.fc1_bias.fill_(4.0)
        mlps.fc2_weight.fill_(1.0)
    table = encoding.tables(0)
    k = torch.tensor(7)
    along_z = torch.stack([torch.tensor(0.05), torch.tensor(0.05), node_u(k)]).view(1, 1, 1, 3)
    along_x = torch.stack([node_u(k), torch.tensor(0.05), torch.tensor(0.05)]).view(1, 1, 1, 3)
    node_x = -4 + 8 * 7 / 9  # MLP input at node 7 of linspace(-4, 4, 10)
    assert math.isclose(encoding.vertex_bias(along_z, 0, 2, table).item(), node_x + 4, rel_tol=1e-5)
    assert not math.isclose(encoding.vertex_bias(along_x, 0, 2, table).item(), node_x + 4, rel_tol=1e-2)


def test_invariant_to_a_common_translation() -> None:
    torch.manual_seed(0)
    encoding = VertexRPE(num_heads=4)
    boxes, xyz = scene()
    shift = torch.tensor([1.5, -2.0, 0.7])
    moved = boxes.clone()
    moved[..., :3] += shift
    assert torch.allclose(bias_of(encoding, boxes, xyz), bias_of(encoding, moved, xyz + shift), atol=2e-4)


def rotate_scene(boxes: torch.Tensor, xyz: torch.Tensor, angle: float) -> tuple[torch.Tensor, torch.Tensor]:
    rotation = torch.tensor([[math.cos(angle), -math.sin(angle), 0], [math.sin(angle), math.cos(angle), 0],
                             [0, 0, 1.0]])
    rotated = boxes.clone()
    rotated[..., :3] = boxes[..., :3] @ rotation.T
    rotated[..., 6] = boxes[..., 6] + angle
    return rotated, xyz @ rotation.T


def test_box_frame_is_invariant_to_a_rotation_about_z() -> None:
    torch.manual_seed(0)
    boxes, xyz = scene()
    turned_boxes, turned_xyz = rotate_scene(boxes, xyz, 0.7)
    in_box_frame = VertexRPE(num_heads=4, box_frame=True)
    assert torch.allclose(bias_of(in_box_frame, boxes, xyz), bias_of(in_box_frame, turned_boxes, turned_xyz),
                          atol=3e-4)
    in_scene_frame = VertexRPE(num_heads=4)
    in_scene_frame.load_state_dict(in_box_frame.state_dict())
    change = (bias_of(in_scene_frame, boxes, xyz) - bias_of(in_scene_frame, turned_boxes, turned_xyz)).abs().max()
    assert change > 0.1


def test_sdpa_with_shared_keys_equals_the_explicit_softmax() -> None:
    torch.manual_seed(0)
    boxes, xyz = scene(queries=6, points=30)
    encoding = VertexRPE(num_heads=4, depth=2)
    attention = Attention(32, num_heads=4, num_kv_heads=1).eval()
    queries, memory = torch.randn(2, 6, 32), torch.randn(2, 30, 32)
    pos_q, pos_k = Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes)), Positions(coords=xyz)
    fused = attention(queries, pos_q, encoding, 1, memory=memory, pos_k=pos_k)
    attention.capture_probs = True
    explicit = attention(queries, pos_q, encoding, 1, memory=memory, pos_k=pos_k)
    assert torch.allclose(fused, explicit, atol=1e-5)
    without = attention(queries, pos_q, None, 1, memory=memory, pos_k=pos_k)
    assert (without - explicit).abs().max() > 1e-3


def test_bias_is_differentiable_in_the_mlps_only() -> None:
    encoding = VertexRPE(num_heads=2)
    boxes, xyz = scene(batch=1, queries=3, points=8)
    bias_of(encoding, boxes, xyz).sum().backward()
    mlps = encoding.layers[0]
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in (mlps.fc1_weight, mlps.fc1_bias, mlps.fc2_weight))


def test_missing_geometry_and_layers_are_named() -> None:
    encoding = VertexRPE(num_heads=2, depth=1)
    boxes, xyz = scene(batch=1, queries=2, points=4)
    with pytest.raises(ValueError, match=r'VertexRPE \(on the queries: .*\) needs boxes in its positions'):
        encoding.logits_bias(None, None, Positions(coords=boxes[..., :3]), Positions(coords=xyz), 0)
    with pytest.raises(ValueError, match=r'VertexRPE \(on the keys: .*\) needs points in its positions, which carry grid'):
        encoding.logits_bias(None, None, Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes)),
                             Positions(coords=xyz[..., :2]), 0)
    with pytest.raises(ValueError, match='built for 1 layers'):
        bias_of(encoding, boxes, xyz, layer=1)
    with pytest.raises(ValueError, match='table_size'):
        VertexRPE(num_heads=2, table_size=1)


@pytest.mark.parametrize('box_frame', [False, True])
def test_bias_is_the_sum_over_vertices_of_the_table_at_each_offset(box_frame: bool) -> None:
    """The offsets computed once per axis equal the 24 (vertex, axis) offsets taken one by one."""
    torch.manual_seed(0)
    encoding = VertexRPE(num_heads=2, box_frame=box_frame)
    boxes, xyz = scene(queries=4, points=9)
    corners = vertex_corners(boxes)
    yaw = boxes[..., 6, None]
    expected = 0
    for vertex in range(8):
        delta = corners[:, :, vertex, None, :] - xyz[:, None]
        if box_frame:
            dx, dy = delta[..., 0], delta[..., 1]
            delta = torch.stack([torch.cos(yaw) * dx + torch.sin(yaw) * dy, torch.cos(yaw) * dy - torch.sin(yaw) * dx,
                                 delta[..., 2]], dim=-1)
        expected = expected + encoding.vertex_bias(log_normalize(delta, 512.0, 4.0), 0, vertex, encoding.tables(0))
    assert torch.allclose(bias_of(encoding, boxes, xyz), expected, atol=1e-5)
