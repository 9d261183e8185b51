"""A V-DETR-style 3D detector on point clouds for mmengine's Runner, with any point encoding in its decoder."""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch
from mmengine.model import BaseModel
from torch import nn

from vispe.geometry import Positions, SceneGeometry
from vispe.models.box3d_targets import box3d_targets
from vispe.models.entry_checks import entry_checks
from vispe.models.inputs import value_checks_enabled
from vispe.models.vdetr.criterion import BoxSetCriterion
from vispe.models.vdetr.postprocess import check_test_cfg, detections
from vispe.models.vdetr.transformer import BoxRefinementDecoder, PointEncoderLayer, mlp
from vispe.models.vdetr.yaw_bins import check_num_yaw_bins, decode_yaw
from vispe.registry import MODELS


@MODELS.register_module()
class VDETR(BaseModel):
    """Point cloud → PointNet++ set abstraction → transformer encoder over the sampled points → proposals (every
    point token predicts objectness and a box; the ``num_queries`` most object-like become the queries, V-DETR's
    first-stage FFN) → decoder refining the boxes layer by layer with the point encoding in its cross-attention.

    The scene's extent (3DETR's ``point_cloud_dims``) is the minimum and maximum corner of the input points;
    absolute encodings normalise by it. Boxes are (x, y, z, l, w, h, yaw) in metres: axis-aligned (yaw 0, ScanNet's
    layout), or with ``num_yaw_bins`` rotated, the proposals and every decoder layer predicting the yaw in 3DETR's
    heading code (:mod:`~vispe.models.vdetr.yaw_bins`; SUN RGB-D's 12 bins).

    ``forward(inputs, data_samples, mode)``: inputs (B, N, 3 + C) points (xyz in metres, then C features) or
    ``dict(points=...)``; 'loss' -> the weighted losses (targets ``gt_boxes`` (G, 7), ``gt_labels`` (G,) per scene);
    'predict' -> per scene ``dict(boxes (D, 7), scores (D,), labels (D,))`` after 3DETR's post-processing
    (:func:`~vispe.models.vdetr.postprocess.detections`: per-class proposals, same-class NMS), plus ``scene_id``;
    'tensor' -> the raw outputs (logits (L, B, Q, K+1), boxes (L, B, Q, 7), the proposal stage's tensors).

    Args:
        num_classes: K object classes.
        backbone: the point backbone: :class:`~vispe.models.vdetr.PointSetAbstraction` arguments (one level, as
            3DETR; ``in_channels`` 3 with colour), or ``dict(type='PointNet2Backbone', levels=[...])`` (PointNet++'s
            hierarchy).
        embed_dim: transformer width d.
        encoder: depth, num_heads, mlp_dim, dropout of the encoder layers.
        decoder: :class:`~vispe.models.vdetr.BoxRefinementDecoder` arguments (``encoding=dict(type=...)``).
        num_queries: proposals kept as queries.
        loss: :class:`~vispe.models.vdetr.BoxSetCriterion` weights.
        test_cfg: post-processing (``per_class`` True, ``nms_iou`` 0.25, ``score_threshold`` 0.05: 3DETR's;
            ``rotated`` None: NMS by rotated IoU when a box has a non-zero yaw, see
            :mod:`~vispe.models.vdetr.postprocess`), checked when the model is built.
        num_yaw_bins: heading bins of rotated boxes (12 as 3DETR on SUN RGB-D); 0 (default): axis-aligned boxes,
            and scenes with yawed ground-truth boxes are refused.
    """

    def __init__(self, num_classes: int, backbone: dict | None = None, embed_dim: int = 256,
                 encoder: dict | None = None, decoder: dict | None = None, num_queries: int = 128,
                 loss: dict | None = None, test_cfg: dict | None = None, num_yaw_bins: int = 0,
                 data_preprocessor: dict | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or entry_checks(), init_cfg=init_cfg)
        self.backbone = MODELS.build(dict(dict(type='PointSetAbstraction'), **(backbone or {})))
        if num_queries > self.backbone.num_samples:
            raise ValueError(f'num_queries ({num_queries}) must be at most the point tokens the backbone keeps '
                             f'(num_samples={self.backbone.num_samples}).')
        defaults = dict(depth=3, num_heads=4, mlp_dim=128, dropout=0.1)
        unknown = sorted(set(encoder or {}) - set(defaults))
        if unknown:
            raise ValueError(f'VDETR encoder options are {sorted(defaults)}; got {unknown}.')
        encoder = {**defaults, **(encoder or {})}
        self.input_proj = nn.Linear(self.backbone.channels, embed_dim)
        self.encoder = nn.ModuleList(PointEncoderLayer(embed_dim, encoder['num_heads'], encoder['mlp_dim'],
                                                       encoder['dropout']) for _ in range(encoder['depth']))
        self.encoder_norm = nn.LayerNorm(embed_dim)
        check_num_yaw_bins(num_yaw_bins, 'VDETR')
        for name, options in (('decoder', decoder), ('loss', loss)):
            if 'num_yaw_bins' in (options or {}):
                raise ValueError(f'Give num_yaw_bins to VDETR itself (the proposals, decoder and loss share it), '
                                 f'not in its {name} options.')
        self.proposal_head = mlp(embed_dim, embed_dim, 7 + 2 * num_yaw_bins)
        self.decoder = BoxRefinementDecoder(embed_dim, num_classes, **(decoder or {}), num_yaw_bins=num_yaw_bins)
        self.num_classes = num_classes
        self.num_queries = num_queries
        self.num_yaw_bins = num_yaw_bins
        self.criterion = BoxSetCriterion(num_classes, **(loss or {}), num_yaw_bins=num_yaw_bins)
        self.test_cfg = check_test_cfg(test_cfg or {})

    def check_points(self, points: torch.Tensor) -> None:
        if not isinstance(points, torch.Tensor) or points.ndim != 3:
            shape = tuple(points.shape) if isinstance(points, torch.Tensor) else type(points).__name__
            raise ValueError(f'VDETR takes points (B, N, 3 + C); got {shape}.')
        if points.shape[1] < self.backbone.num_samples:
            raise ValueError(f'Each scene has {points.shape[1]} points but the backbone samples '
                             f'{self.backbone.num_samples}: give the dataset a larger num_points, or build the '
                             f'backbone with fewer num_samples.')
        if value_checks_enabled(points) and not torch.isfinite(points).all():
            raise ValueError('The point clouds hold NaN or infinite values: drop those points when reading the scan '
                             '(vispe.geometry.read_points(..., drop_nonfinite=True)).')

    def proposals(self, xyz: torch.Tensor, memory: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every token's objectness (B, M) and box (B, M, 7): its point + a centre offset, exp(log-size), the yaw
        of its heading code (``proposal_yaw_code`` (B, M, 2·K_yaw)) or 0."""
        raw = self.proposal_head(memory)
        sizes = raw[..., 4:7].clamp(-math.log(1e3), math.log(1e3)).exp()
        stage = dict(objectness=raw[..., 0])
        if self.num_yaw_bins:
            stage['proposal_yaw_code'] = raw[..., 7:]
            yaw = decode_yaw(*raw[..., 7:].chunk(2, dim=-1))[..., None]
        else:
            yaw = torch.zeros_like(sizes[..., :1])
        stage['all_proposals'] = torch.cat([xyz + raw[..., 1:4], sizes, yaw], dim=-1)
        return stage

    def predict_sets(self, points: torch.Tensor) -> dict[str, torch.Tensor]:
        self.check_points(points)
        xyz, features, _ = self.backbone(points)
        memory = self.input_proj(features)
        for layer in self.encoder:
            memory = layer(memory)
        memory = self.encoder_norm(memory)
        stage = self.proposals(xyz, memory)
        top = stage['objectness'].detach().topk(self.num_queries, dim=1).indices
        proposals = torch.gather(stage['all_proposals'], 1, top[..., None].expand(-1, -1, 7))
        tgt = torch.gather(memory, 1, top[..., None].expand(-1, -1, memory.shape[-1]))
        scene_xyz = points[..., :3].detach()
        bounds = torch.stack([scene_xyz.amin(1), scene_xyz.amax(1)], dim=1)
        pos_k = Positions(coords=xyz, scene=SceneGeometry(bounds=bounds), device=xyz.device)
        outputs = self.decoder(tgt, memory, pos_k, proposals)
        return dict(outputs, xyz=xyz, **stage)

    def targets(self, data_samples: list[Mapping[str, Any]], device: torch.device) -> list[dict[str, torch.Tensor]]:
        """Each scene's ``gt_boxes`` (G, 7) and ``gt_labels`` (G,) on ``device``, checked."""
        boxes, labels = box3d_targets(data_samples, device, self.num_classes, 'PointScenes')
        if not self.num_yaw_bins and any(value_checks_enabled(b) and bool((b[:, 6] != 0).any()) for b in boxes):
            raise ValueError('The ground-truth boxes have non-zero yaw but this VDETR predicts axis-aligned boxes '
                             '(num_yaw_bins=0): build it with num_yaw_bins=12 (3DETR\'s heading bins) for rotated '
                             'boxes, or train on an axis-aligned dataset.')
        return [dict(gt_boxes=scene_boxes, gt_labels=scene_labels) for scene_boxes, scene_labels in zip(boxes, labels)]

    def forward(self, inputs: torch.Tensor | Mapping[str, torch.Tensor],
                data_samples: list[Mapping[str, Any]] | None = None, mode: str = 'tensor') -> Any:
        if mode not in ('loss', 'predict', 'tensor'):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
        points = inputs['points'] if isinstance(inputs, Mapping) else inputs
        if mode == 'loss' and data_samples is None:
            raise ValueError("mode='loss' needs data_samples with gt_boxes and gt_labels per scene.")
        if data_samples is not None and len(data_samples) != len(points):
            raise ValueError(f'{len(data_samples)} data samples for a batch of {len(points)} scenes.')
        outputs = self.predict_sets(points)
        if mode == 'tensor':
            return outputs
        if mode == 'loss':
            return self.criterion(outputs, self.targets(data_samples, points.device))
        class_probs = outputs['logits'][-1].float().softmax(-1)[..., :-1]
        results = []
        for index in range(len(points)):
            result = detections(outputs['boxes'][-1, index].float(), class_probs[index], **self.test_cfg)
            if data_samples is not None and 'scene_id' in data_samples[index]:
                result['scene_id'] = data_samples[index]['scene_id']
            results.append(result)
        return results
