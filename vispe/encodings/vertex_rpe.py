"""3DV-RPE: V-DETR's 3D vertex relative position encoding of object queries against point tokens.

Shen et al., "V-DETR: DETR with Vertex Relative Position Encoding for 3D Object Detection", ICLR 2024;
the maths follows the authors' code (V-DETR/V-DETR, ``GlobalShareCrossAttention``), including the parts a
released checkpoint depends on: the eight per-vertex MLPs are read through a 10³ table with
``F.grid_sample`` (bilinear, ``align_corners=False``, zero padding), whose axes are the reverse of the
offset's (the value read at offset (x, y, z) is the MLP's at (z, y, x)).
"""
from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, model_facts
from vispe.geometry import Positions, check_boxes, pad_prefix
from vispe.geometry.device_constants import device_constant
from vispe.registry import ENCODINGS

# (8, 3) signs of the (l/2, w/2, h/2) offsets of V-DETR's box vertices in the box frame (x along the heading,
# y left, z up): the bottom face (0-3) then the top face (4-7), each +x+y, +x-y, -x-y, -x+y. Vertex i owns MLP i.
VERTEX_SIGN_ROWS = (
    (1, 1, -1), (1, -1, -1), (-1, -1, -1), (-1, 1, -1),
    (1, 1, 1), (1, -1, 1), (-1, -1, 1), (-1, 1, 1),
)
VERTEX_SIGNS = torch.tensor(VERTEX_SIGN_ROWS, dtype=torch.float32)


def vertex_corners(boxes: torch.Tensor) -> torch.Tensor:
    """The 8 vertices of (..., 7) boxes (x, y, z, l, w, h, yaw; yaw counter-clockwise about +z) in V-DETR's
    order (:data:`VERTEX_SIGNS`): (..., 8, 3)."""
    boxes = check_boxes(boxes)
    offsets = device_constant(VERTEX_SIGNS, boxes) * boxes[..., None, 3:6] / 2
    cos, sin = torch.cos(boxes[..., 6:7]), torch.sin(boxes[..., 6:7])
    x = cos * offsets[..., 0] - sin * offsets[..., 1]
    y = sin * offsets[..., 0] + cos * offsets[..., 1]
    return torch.stack([x, y, offsets[..., 2]], -1) + boxes[..., None, :3]


def log_normalize(offsets: torch.Tensor, log_scale: float, max_value: float) -> torch.Tensor:
    """V-DETR's compression of offsets in metres: ``sign(Δ)·log2(log_scale·|Δ| + 1) / 3 / max_value``
    (log2 8 = 3), so that |Δ| = 8 m maps to 1 with the defaults (512, 4)."""
    return torch.sign(offsets) * torch.log2(log_scale * offsets.abs() + 1.0) / (3.0 * max_value)


class VertexMLPs(nn.Module):
    """The eight per-vertex MLPs of one layer, ``Linear(3 → hidden) → ReLU → Linear(hidden → heads, no bias)``,
    stored stacked so that all eight run as one batched product.

    Parameters: ``fc1_weight`` (8, hidden, 3), ``fc1_bias`` (8, hidden), ``fc2_weight`` (8, heads, hidden); the
    initialisation is torch's ``nn.Linear`` default, as the reference's.
    """

    def __init__(self, hidden_dim: int, num_heads: int) -> None:
        super().__init__()
        self.fc1_weight = nn.Parameter(torch.empty(8, hidden_dim, 3))
        self.fc1_bias = nn.Parameter(torch.empty(8, hidden_dim))
        self.fc2_weight = nn.Parameter(torch.empty(8, num_heads, hidden_dim))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for weight, bias in ((self.fc1_weight, self.fc1_bias), (self.fc2_weight, None)):
            bound = 1 / math.sqrt(weight.shape[-1])
            nn.init.uniform_(weight, -bound, bound)
            if bias is not None:
                nn.init.uniform_(bias, -bound, bound)

    def forward(self, x: torch.Tensor, vertex: int | None = None) -> torch.Tensor:
        """x (8, ..., 3) -> (8, ..., heads), MLP i on x[i]; or, with ``vertex``, x (..., 3) -> (..., heads)."""
        w1, b1, w2 = self.fc1_weight, self.fc1_bias, self.fc2_weight
        if vertex is not None:
            return F.linear(F.relu(F.linear(x, w1[vertex], b1[vertex])), w2[vertex])
        shape = x.shape
        flat = x.reshape(8, -1, 3)
        hidden = F.relu(torch.baddbmm(b1[:, None], flat, w1.transpose(1, 2)))
        return torch.bmm(hidden, w2.transpose(1, 2)).reshape(*shape[:-1], w2.shape[1])


def reference_vertex_mlps(state_dict: dict[str, torch.Tensor], prefix: str = '') -> dict[str, torch.Tensor]:
    """The weights of one layer's :class:`VertexMLPs` from V-DETR's keys (``{prefix}cpb_mlps.{i}.0.weight``,
    ``.0.bias``, ``.2.weight`` of its ``GlobalShareCrossAttention``, i = vertex): load the result into
    ``encoding.layers[l]``."""
    def stacked(suffix: str) -> torch.Tensor:
        keys = [f'{prefix}cpb_mlps.{vertex}.{suffix}' for vertex in range(8)]
        missing = [key for key in keys if key not in state_dict]
        if missing:
            raise KeyError(f'V-DETR vertex MLP weights missing: {missing[:2]}...; give the state dict of one '
                           f'GlobalShareCrossAttention and its key prefix.')
        return torch.stack([state_dict[key] for key in keys])
    return dict(fc1_weight=stacked('0.weight'), fc1_bias=stacked('0.bias'), fc2_weight=stacked('2.weight'))


@ENCODINGS.register_module()
class VertexRPE(PositionEncoding):
    """3DV-RPE: a per-head logit bias between each object query's box and each point token,
    ``R[h, q, j] = Σ_{i<8} MLP_i(f(v_{q,i} − p_j))[h]``, with v_{q,i} the query box's vertex i
    (:data:`VERTEX_SIGNS`), p_j the key point and f the log compression :func:`log_normalize`.

    With ``box_frame`` the offset is first rotated into the box's frame (V-DETR's ``angle_type='object_coords'``,
    its SUN RGB-D setting), so the bias is invariant to a rotation of the scene about +z; ScanNet's boxes are
    axis-aligned and the reference leaves offsets in the scene frame (the default).

    ``table_lookup=True`` (the reference, and what released checkpoints need) evaluates each MLP on the
    ``table_size``³ nodes of ``linspace(-max_value, max_value, table_size)`` once per layer and forward and reads
    it with trilinear ``grid_sample`` at the offset; the MLPs' cost is then independent of the number of queries
    and points. The read is the reference's: the table's axes are the reverse of the offset's, a node k sits at
    u = (2k+1)/n − 1 where the MLP saw −m + 2mk/(n−1), and the value fades to 0 beyond the outer nodes.
    ``table_lookup=False`` evaluates the MLPs directly at the point the table approximates, ``MLP_i(c·reverse(u))``
    with c = max_value·n/(n−1): equal at the nodes, exact between them (no interpolation) and without the fade.
    It costs a hidden layer per query, point and vertex: an option for small inputs and checks, not for training.

    Boxes come from the queries' positions (``pos_q.scene.boxes``, (B, Q, 7): x, y, z, l, w, h, yaw with yaw
    counter-clockwise about +z; the reference's heading turns clockwise, heading = −yaw), points from the keys'
    (``pos_k.coords``, (B, P, 3) in metres). One set of eight MLPs per layer, as each V-DETR decoder layer has its
    own. The bias is accumulated one vertex at a time, so no (B, Q, P, 8, heads) tensor is ever held.

    Args:
        num_heads: attention heads (the reference's 4), from the model.
        depth: decoder layers served (each has its own MLPs), from the model.
        hidden_dim: width of each MLP's hidden layer (the reference's ``rpe_dim``, 128).
        log_scale: the factor inside the logarithm (512).
        max_value: the compressed offset that maps to the table's edge (4; ``rpe_quant='bilinear_4_10'``).
        table_size: nodes per axis of the table (10).
        table_lookup: read the MLPs through the table (default) or evaluate them directly.
        box_frame: rotate offsets into each box's frame (rotated boxes).

    Shapes: logits_bias -> (B, heads, Nq, Nk), prefix rows and columns 0.
    """

    family: ClassVar[str] = 'bias'
    paper: ClassVar[str] = 'Shen et al., ICLR 2024 (V-DETR, 3DV-RPE)'
    requires: ClassVar[tuple[str, ...]] = ('points', 'boxes')
    examples: ClassVar[tuple[dict, ...]] = ({}, {'box_frame': True}, {'table_lookup': False})
    options: ClassVar[dict[str, Option]] = {
        **model_facts('num_heads', 'depth'),
        'hidden_dim': Option(int, ge=1, doc="The MLPs' hidden width (the reference's rpe_dim, 128); it shapes the "
                                            'parameters.'),
        'log_scale': Option(float, gt=0, doc='The factor inside log2(log_scale·|Δ| + 1) is positive (512 in '
                                             'V-DETR); the MLPs were trained on its scale.'),
        'max_value': Option(float, gt=0, doc="The compressed offset at the table's edge is positive (4 in V-DETR)."),
        'table_size': Option(int, ge=2, doc='Table nodes per axis, at least 2 (10 in V-DETR).'),
        'table_lookup': Option(bool, test_time=True, doc="Read the MLPs through V-DETR's table (True, the reference) "
                                                          'or evaluate them directly; no parameter changes, so it may '
                                                          'change after build.'),
        'box_frame': Option(bool, doc="Rotate offsets into each box's frame (V-DETR's 'object_coords', for rotated "
                                      'boxes); the MLPs learn in that frame.'),
    }

    def __init__(self, num_heads: int, depth: int = 1, hidden_dim: int = 128, log_scale: float = 512.0,
                 max_value: float = 4.0, table_size: int = 10, table_lookup: bool = True,
                 box_frame: bool = False) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.log_scale = log_scale
        self.max_value = max_value
        self.table_size = table_size
        self.table_lookup = table_lookup
        self.box_frame = box_frame
        self.layers = nn.ModuleList(VertexMLPs(hidden_dim, num_heads) for _ in range(depth))
        nodes = torch.linspace(-max_value, max_value, table_size)
        grid = torch.stack(torch.meshgrid(nodes, nodes, nodes, indexing='ij'), dim=-1)
        self.register_buffer('table_nodes', grid, persistent=False)

    def tables(self, layer_idx: int) -> torch.Tensor:
        """(8, heads, n, n, n): MLP_i at the node (x_a, y_b, z_c) stored at [i, :, a, b, c], which
        ``grid_sample`` reads as depth a, height b, width c, i.e. at the offset (z, y, x)."""
        nodes = self.table_nodes.expand(8, *self.table_nodes.shape)
        return self.layers[layer_idx](nodes).permute(0, 4, 1, 2, 3)

    def axis_offsets(self, boxes: torch.Tensor, points: torch.Tensor) -> tuple[list[list[torch.Tensor]],
                                                                              list[tuple[int, int, int]]]:
        """The compressed vertex − point offsets along each axis, each computed once: per axis a list of (B, Q, P)
        tensors, and per vertex the index of its x, y and z offsets in those lists.

        Along an axis the eight vertices take few distinct coordinates: in the box frame two per axis (±half the
        size, minus the point's box-frame coordinate, which is computed once); in the scene frame four for x and
        y (a yawed box's bottom face) and two for z. So 6 or 10 offset planes serve the 24 (vertex, axis) pairs.
        """
        if self.box_frame:
            yaw = boxes[..., 6:7]
            cos, sin = torch.cos(yaw), torch.sin(yaw)
            relative = points[:, None, :, :] - boxes[:, :, None, :3]
            local = [cos * relative[..., 0] + sin * relative[..., 1], cos * relative[..., 1] - sin * relative[..., 0],
                     relative[..., 2]]
            half = boxes[..., 3:6, None] / 2
            planes = [[log_normalize(sign * half[:, :, axis] - local[axis], self.log_scale, self.max_value)
                       for sign in (1, -1)] for axis in range(3)]
            index = [tuple(0 if sign > 0 else 1 for sign in signs) for signs in VERTEX_SIGN_ROWS]
            return planes, index
        vertices = vertex_corners(boxes)
        faces = ((0, 1, 2, 3), (0, 1, 2, 3), (0, 4))
        planes = [[log_normalize(vertices[:, :, vertex, axis, None] - points[:, None, :, axis], self.log_scale,
                                 self.max_value) for vertex in faces[axis]] for axis in range(3)]
        return planes, [(vertex % 4, vertex % 4, vertex // 4) for vertex in range(8)]

    def vertex_bias(self, u: torch.Tensor, layer_idx: int, vertex: int, table: torch.Tensor | None) -> torch.Tensor:
        """(B, heads, Q, P) bias of one vertex from its compressed offsets u (B, Q, P, 3)."""
        if table is not None:
            batch = u.shape[0]
            sampled = F.grid_sample(table[vertex].expand(batch, -1, -1, -1, -1), u[:, :, :, None, :].to(table.dtype),
                                    mode='bilinear', padding_mode='zeros', align_corners=False)
            return sampled[..., 0]
        scale = self.max_value * self.table_size / (self.table_size - 1)
        return self.layers[layer_idx](u.flip(-1) * scale, vertex).permute(0, 3, 1, 2)

    def check_positions(self, pos_q: Positions, pos_k: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """The queries' boxes (B, Q, 7) and the keys' points (B, P, 3), or an error naming what is missing."""
        pos_q.require('boxes', user="VertexRPE (on the queries: a decoder's object queries with their boxes)")
        pos_k.require('points', user='VertexRPE (on the keys: the point tokens with their xyz in metres)')
        boxes, points = pos_q.scene.boxes, pos_k.coords
        if points.ndim == 2:
            points = points.expand(boxes.shape[0], -1, -1)
        if points.shape[0] != boxes.shape[0]:
            raise ValueError(f'VertexRPE: {boxes.shape[0]} scenes of boxes but {points.shape[0]} of points.')
        return boxes, points

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor:
        if layer_idx >= len(self.layers):
            raise ValueError(f'VertexRPE was built for {len(self.layers)} layers (depth) and was called for layer '
                             f'{layer_idx}; build it with depth = the number of decoder layers.')
        boxes, points = self.check_positions(pos_q, pos_k)
        dtype = torch.promote_types(q.dtype, torch.float32)
        boxes, points = boxes.to(dtype), points.to(dtype)
        planes, index = self.axis_offsets(boxes, points)
        table = self.tables(layer_idx).to(dtype) if self.table_lookup else None
        bias = None
        for vertex, (ix, iy, iz) in enumerate(index):
            u = torch.stack([planes[0][ix], planes[1][iy], planes[2][iz]], dim=-1)
            term = self.vertex_bias(u, layer_idx, vertex, table)
            bias = term if bias is None else bias + term
        return pad_prefix(bias, pos_q.num_prefix_tokens, 0.0, pos_k.num_prefix_tokens)

    def extra_repr(self) -> str:
        return (f'heads={self.num_heads}, layers={len(self.layers)}, table_lookup={self.table_lookup}, '
                f'box_frame={self.box_frame}')
