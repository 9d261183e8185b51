"""V-DETR's released detector from its backbone's voxels onwards (Shen et al., "V-DETR: DETR with Vertex Relative
Position Encoding for 3D Object Detection", ICLR 2024; V-DETR/V-DETR @ c2a1c45a), on vispe's decoder layers and
:class:`~vispe.encodings.VertexRPE`, so that the released ScanNet weights compute their authors' outputs
(``vispe convert vdetr``, :mod:`vispe.converters.vdetr`).

The released model is a sparse-convolution ResNet34 + FPN (MinkowskiEngine) whose output voxels are sampled to
``num_samples`` points by farthest-point sampling, then everything this module holds. vispe has no sparse
convolution, so :class:`VDETRHead` takes the backbone's voxels (centres in metres and features) as its input; the
rest of the released model is here, module by module:

- ``input_proj``: the released ``encoder_to_decoder_projection`` (1×1 convolution without bias, BatchNorm, ReLU).
- ``proposal_norm`` + ``proposal_mlp``: the decoder's first "light FFN" layer (pre-norm; the residual adds to the
  normalised tokens, as the reference's), then ``norm`` and ``heads[0]``: every point token predicts one objectness
  logit and a box around an anchor of ``anchor_size`` metres (V-DETR's ``hard_anchor``).
- The ``num_queries`` tokens of highest objectness (sigmoid) become the queries, with learned content
  ``query_embed`` (V-DETR's ``q_content='random'``).
- ``layers``: :class:`~vispe.models.vdetr.PointDecoderLayer` (pre-norm self-attention, multi-query cross-attention
  with the 3DV-RPE logit bias of ``encoding``, FFN); ``query_pos[l]`` embeds the current boxes' (centre, size) in
  metres for layer l (V-DETR's ``PositionEmbeddingLearned(6, d)``, one per layer).
- ``heads[l + 1]``: after layer l, ``norm`` then focal-loss class logits (K, no no-object class), a centre offset
  in units of the proposal's size and a log size ratio, relative to the query's proposal.

Boxes are axis-aligned, (x, y, z, l, w, h, 0) in metres in the depth frame (ScanNet's; the released model has one
heading bin, whose outputs the reference multiplies by 0).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from vispe.encodings import build_encoding, check_encoding_fits
from vispe.geometry import Positions, SceneGeometry
from vispe.geometry.point_sampling import farthest_point_sample
from vispe.models.detr.transformer import feed_forward
from vispe.models.vdetr.transformer import HOST, PointDecoderLayer
from vispe.registry import MODELS


class TokenBatchNorm(nn.BatchNorm1d):
    """BatchNorm over the channels of (B, N, C) tokens (a ``BatchNorm1d`` on (B, C, N), as after a 1×1 Conv1d)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(1, 2)).transpose(1, 2)


def norm_mlp(in_dim: int, hidden_dim: int, out_dim: int, dropout: float) -> nn.Sequential:
    """V-DETR's prediction head (3DETR's ``GenericMLP`` with ``bn1d``): two hidden layers of Linear without bias,
    BatchNorm, ReLU, Dropout, then Linear with bias. Indices 0, 1, 4, 5, 8 hold the parameters."""
    return nn.Sequential(nn.Linear(in_dim, hidden_dim, bias=False), TokenBatchNorm(hidden_dim), nn.ReLU(),
                         nn.Dropout(dropout), nn.Linear(hidden_dim, hidden_dim, bias=False), TokenBatchNorm(hidden_dim),
                         nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden_dim, out_dim))


class BoxHeads(nn.Module):
    """One stage's heads: ``cls`` (class logits), ``center`` (3), ``size`` (3), each :func:`norm_mlp`."""

    def __init__(self, embed_dim: int, num_logits: int, dropout: float) -> None:
        super().__init__()
        self.cls = norm_mlp(embed_dim, embed_dim, num_logits, dropout)
        self.center = norm_mlp(embed_dim, embed_dim, 3, dropout)
        self.size = norm_mlp(embed_dim, embed_dim, 3, dropout)

    def forward(self, hidden: torch.Tensor, centres: torch.Tensor,
                sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Class logits and (B, N, 7) boxes relative to the reference ``centres`` and ``sizes`` (B, N, 3):
        centre + Δc·size, size·exp(Δs), yaw 0."""
        new_centres = self.center(hidden) * sizes + centres
        new_sizes = self.size(hidden).exp() * sizes
        return self.cls(hidden), torch.cat([new_centres, new_sizes, torch.zeros_like(new_sizes[..., :1])], dim=-1)


@MODELS.register_module()
class VDETRHead(nn.Module):
    """V-DETR from its sparse backbone's output voxels to the boxes of every decoder layer (module docstring).

    Args:
        in_channels: channels of the backbone's voxel features (the released ``enc_dim``, 256).
        num_classes: K object classes (18 on ScanNet).
        embed_dim: decoder width d (``dec_dim``, 256).
        depth: decoder layers (``dec_nlayers`` − 1, 8).
        num_heads: attention heads (``dec_nhead``, 4); keys and values have one head shared by all.
        mlp_dim: FFN width of the decoder layers and of the proposal FFN (``dec_ffn_dim``, 256).
        num_queries: proposals kept as queries (``nqueries``, 1024).
        num_samples: points kept by farthest-point sampling of the voxels (``preenc_npoints``, 4096); None: the
            input is already sampled.
        anchor_size: the proposals' prior box edge in metres (1.0: V-DETR's ``hard_anchor``).
        proposal_logits: logits of the first stage's classifier (1: V-DETR's ``is_bilable``).
        dropout: of the decoder layers (``dec_dropout``, 0.1); head_dropout: of the heads (``mlp_dropout``, 0.3).
        encoding: the cross-attention's encoding (V-DETR's ``dict(type='VertexRPE')``, built with depth and heads).

    ``forward(xyz (B, N, 3), features (B, N, C))`` -> dict(``xyz`` (B, M, 3) sampled points, ``sample_index`` (B, M),
    ``proposal_logits`` (B, M, proposal_logits), ``proposal_boxes`` (B, M, 7), ``query_index`` (B, Q) the chosen
    proposals, ``logits`` (depth, B, Q, K) focal class logits (probability = sigmoid), ``boxes`` (depth, B, Q, 7)).
    """

    def __init__(self, in_channels: int = 256, num_classes: int = 18, embed_dim: int = 256, depth: int = 8,
                 num_heads: int = 4, mlp_dim: int = 256, num_queries: int = 1024, num_samples: int | None = 4096,
                 anchor_size: float = 1.0, proposal_logits: int = 1, dropout: float = 0.1, head_dropout: float = 0.3,
                 encoding: Any = 'VertexRPE') -> None:
        super().__init__()
        if num_samples is not None and num_samples < 1:
            raise ValueError(f'VDETRHead num_samples must be at least 1 (or None: the input is sampled); '
                             f'got {num_samples}.')
        if anchor_size <= 0:
            raise ValueError(f'VDETRHead anchor_size is the prior box edge in metres, positive; got {anchor_size}.')
        self.input_proj = nn.Sequential(nn.Linear(in_channels, embed_dim, bias=False), TokenBatchNorm(embed_dim),
                                        nn.ReLU())
        self.proposal_norm = nn.LayerNorm(embed_dim)
        self.proposal_mlp = feed_forward(embed_dim, mlp_dim, dropout)
        self.norm = nn.LayerNorm(embed_dim)
        self.heads = nn.ModuleList([BoxHeads(embed_dim, proposal_logits, head_dropout)]
                                   + [BoxHeads(embed_dim, num_classes, head_dropout) for _ in range(depth)])
        self.query_embed = nn.Embedding(num_queries, embed_dim)
        self.query_pos = nn.ModuleList(nn.Sequential(nn.Linear(6, embed_dim), TokenBatchNorm(embed_dim), nn.ReLU(),
                                                     nn.Linear(embed_dim, embed_dim)) for _ in range(depth))
        self.layers = nn.ModuleList(PointDecoderLayer(embed_dim, num_heads, mlp_dim, dropout, num_kv_heads=1)
                                    for _ in range(depth))
        self.encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                       head_dim=embed_dim // num_heads, depth=depth, num_prefix_tokens=0)
        check_encoding_fits(self.encoding, HOST)
        if self.encoding.active_hooks - {'logits_bias'}:
            raise ValueError(f'VDETRHead applies a relative logit bias in its cross-attention (V-DETR\'s VertexRPE); '
                             f'{type(self.encoding).__name__} uses {sorted(self.encoding.active_hooks)}.')
        self.num_samples = num_samples
        self.num_queries = num_queries
        self.anchor_size = anchor_size

    def sample(self, xyz: torch.Tensor, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The voxels kept by farthest-point sampling (from voxel 0, as the reference's op): xyz, features, index."""
        if xyz.ndim != 3 or xyz.shape[-1] != 3 or features.shape[:2] != xyz.shape[:2]:
            raise ValueError(f'VDETRHead takes xyz (B, N, 3) and features (B, N, C) of the same voxels; got '
                             f'{tuple(xyz.shape)} and {tuple(features.shape)}.')
        if self.num_samples is None:
            index = torch.arange(xyz.shape[1], device=xyz.device).expand(xyz.shape[0], -1)
            return xyz, features, index
        index = farthest_point_sample(xyz.detach(), self.num_samples)
        return (torch.gather(xyz, 1, index[..., None].expand(-1, -1, 3)),
                torch.gather(features, 1, index[..., None].expand(-1, -1, features.shape[-1])), index)

    def forward(self, xyz: torch.Tensor, features: torch.Tensor) -> dict[str, torch.Tensor]:
        xyz, features, sample_index = self.sample(xyz, features)
        memory = self.input_proj(features)
        tokens = self.proposal_norm(memory)
        tokens = tokens + self.proposal_mlp(tokens)
        anchors = torch.full_like(xyz, self.anchor_size)
        proposal_logits, proposal_boxes = self.heads[0](self.norm(tokens), xyz, anchors)
        objectness = proposal_logits.detach().sigmoid().amax(-1)
        if objectness.shape[1] >= self.num_queries:
            query_index = objectness.topk(self.num_queries, dim=1).indices
        else:
            query_index = torch.arange(objectness.shape[1], device=xyz.device).expand(objectness.shape[0], -1)
        proposals = torch.gather(proposal_boxes.detach(), 1, query_index[..., None].expand(-1, -1, 7))
        tgt = self.query_embed.weight[:query_index.shape[1]].expand(xyz.shape[0], -1, -1)
        pos_k = Positions(coords=xyz, scene=SceneGeometry(), device=xyz.device)
        boxes, all_logits, all_boxes = proposals, [], []
        for index, layer in enumerate(self.layers):
            pos_q = Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes, check_values=False),
                              device=xyz.device)
            query_pos = self.query_pos[index](boxes[..., :6])
            tgt = layer(tgt, memory, query_pos, None, pos_q, pos_k, self.encoding, index)
            logits, predicted = self.heads[index + 1](self.norm(tgt), proposals[..., :3], proposals[..., 3:6])
            all_logits.append(logits)
            all_boxes.append(predicted)
            boxes = predicted.detach()
        return dict(xyz=xyz, sample_index=sample_index, proposal_logits=proposal_logits,
                    proposal_boxes=proposal_boxes, query_index=query_index, logits=torch.stack(all_logits),
                    boxes=torch.stack(all_boxes))
