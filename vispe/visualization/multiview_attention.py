"""Where one object query of a PETR-style detector looks: its cross-attention over the cells of every camera, per
decoder layer, with the 3D box it predicts (PETR, Liu et al. ECCV 2022; 3DPPE, Shu et al. ICCV 2023).

The decoder's memory is the V cameras' h × w feature cells, view-major then row-major (PETRDetector), so a
query's row of cross-attention probabilities (B, heads, Q, V·h·w) reshapes to (heads, V, h, w); over all cameras
it sums to 1 per head (padded cells get 0).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from vispe.geometry import Cameras
from vispe.models.petr.box_coder import decode_boxes
from vispe.models.petr.detector import PETRDetector
from vispe.visualization.capture import capture_cross_attention


@dataclass
class QueryAttention:
    """One query's cross-attention and prediction for one sample.

    Attributes:
        query: the query index; ``chosen`` when it was picked as the highest-scoring one.
        label, score: its best class (index) and sigmoid score at the last decoder layer.
        box: (7,) its last layer's box (x, y, z, l, w, h, yaw) in the scene frame.
        anchor: (3,) its reference point in metres of the detector's ``pc_range`` (where its centre starts).
        reference: (3,) the same point in metres of the encoding's ``position_range`` (the 3D position its query
            embedding encodes, in the keys' frame), or None for an encoding without a range (MultiViewSine).
        maps: per decoder layer (0-based) its (heads, V, h, w) attention over the cameras' cells.
        feat_size: (h, w); cameras: those of the sample (B = 1).
    """

    query: int
    chosen: bool
    label: int
    score: float
    box: torch.Tensor
    anchor: torch.Tensor
    reference: torch.Tensor | None
    maps: dict[int, torch.Tensor]
    feat_size: tuple[int, int]
    cameras: Cameras

    def camera_shares(self, layer: int) -> torch.Tensor:
        """(heads, V) the attention mass each camera gets."""
        return self.maps[layer].flatten(2).sum(-1)


def camera_maps(probs: torch.Tensor, query: int, views: int, feat_size: Sequence[int], sample: int = 0) -> torch.Tensor:
    """A query's cross-attention (B, heads, Q, V·h·w) -> (heads, V, h, w) of one sample."""
    height, width = feat_size
    if probs.shape[-1] != views * height * width:
        raise ValueError(f'the attention has {probs.shape[-1]} keys, not V·h·w = {views}·{height}·{width}: the '
                         f'memory must be the cameras\' feature cells (PETRDetector).')
    return probs[sample, :, query].reshape(probs.shape[1], views, height, width)


def best_query(logits: torch.Tensor) -> int:
    """The query with the highest sigmoid class score of (Q, K) logits."""
    return int(logits.float().sigmoid().amax(-1).argmax())


def range_to_metres(point: torch.Tensor, value_range: Sequence[float]) -> torch.Tensor:
    """(..., 3) in [0, 1] of ``(xmin, ymin, zmin, xmax, ymax, zmax)`` -> metres."""
    low = torch.tensor(value_range[:3], dtype=torch.float32)
    high = torch.tensor(value_range[3:], dtype=torch.float32)
    return low + point.float() * (high - low)


class _PredictSets(nn.Module):
    """Runs ``detector.predict_sets`` and keeps its outputs, so one capturing pass gives the attention and the sets."""

    def __init__(self, detector: PETRDetector) -> None:
        super().__init__()
        self.detector = detector
        self.outputs: dict[str, Any] = {}

    def forward(self, inputs: torch.Tensor, masks: torch.Tensor | None, data_samples: list) -> None:
        self.outputs = self.detector.predict_sets(inputs, masks, data_samples)


@torch.no_grad()
def query_attention(model: PETRDetector, batch: Mapping[str, Any], layers: Sequence[int],
                    query: int | None = None) -> QueryAttention:
    """Run the detector on a batch of one sample with the decoder's cross-attention captured.

    Args:
        model: a PETRDetector in eval mode.
        batch: ``dict(inputs (1, V, 3, H, W), masks, data_samples)`` (multiview_collate).
        layers: decoder layers to keep (negative from the end).
        query: the object query; None picks the highest-scoring one.
    """
    inputs, masks, samples = batch['inputs'], batch.get('masks'), batch['data_samples']
    if inputs.shape[0] != 1:
        raise ValueError(f'query_attention draws one sample; got a batch of {inputs.shape[0]}.')
    runner = _PredictSets(model)
    probs = capture_cross_attention(runner, inputs, masks=masks, data_samples=samples)
    outputs = runner.outputs
    logits, code, pos = outputs['logits'][:, 0], outputs['code'][:, 0], outputs['pos']
    chosen = query is None
    query = best_query(logits[-1]) if chosen else query
    scores = logits[-1, query].float().sigmoid()
    num_layers = len(probs)
    kept = sorted({layer % num_layers for layer in layers})
    reference_unit = outputs['reference'][0, query].detach()
    position_range = getattr(model.encoding, 'position_range', None)
    return QueryAttention(
        query=query, chosen=chosen, label=int(scores.argmax()), score=float(scores.max()),
        box=decode_boxes(code[-1, query].float()), anchor=range_to_metres(reference_unit, model.pc_range),
        reference=None if position_range is None else range_to_metres(reference_unit, position_range),
        maps={layer: camera_maps(probs[layer], query, pos.num_views, pos.grid_size) for layer in kept},
        feat_size=tuple(pos.grid_size), cameras=pos.camera.cameras)
