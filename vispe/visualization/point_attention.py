"""Where one object query of a point-cloud detector looks: its cross-attention over the point tokens, per decoder
layer, with the box that layer predicts (V-DETR, Shen et al. ICLR 2024: 3DV-RPE makes a query attend to the points
near its box's vertices; 3DETR-style absolute encodings and NoPE need not).

The decoder's memory is the backbone's M sampled point tokens (``VDETR``: PointNet++ set abstraction), so a
query's row of cross-attention probabilities (B, heads, Q, M) is one weight per token and head, summing to 1 over
the tokens. The figure has one row per decoder layer and, per head shown, a 3D view and a top view: the scene's
points in grey, the tokens coloured by the weight the query gives them, the ground-truth boxes in green and the
box the query predicts at that layer in red.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from vispe.geometry.boxes import box_corners
from vispe.models.vdetr.detector import VDETR
from vispe.visualization.capture import capture_cross_attention
from vispe.visualization.multiview import BOX_EDGES, save_figure

__all__ = ['PointQueryAttention', 'draw_point_attention', 'point_query_attention']

SCENE_POINTS_SHOWN = 6000  # grey scene points drawn at most per panel


@dataclass
class PointQueryAttention:
    """One query's cross-attention and predictions for one scene.

    Attributes:
        query: the query index; ``chosen`` when it was picked as the highest-scoring one.
        label, score: its best object class (index) and probability at the last decoder layer.
        boxes: per kept decoder layer (0-based) the (7,) box the query predicts there, in metres.
        tokens: (M, 3) the point tokens' xyz (the keys of the cross-attention).
        maps: per kept decoder layer its (heads, M) attention over the tokens.
    """

    query: int
    chosen: bool
    label: int
    score: float
    boxes: dict[int, torch.Tensor]
    tokens: torch.Tensor
    maps: dict[int, torch.Tensor]


class _PredictSets(nn.Module):
    """Runs ``detector.predict_sets`` and keeps its outputs, so one capturing pass gives attention and boxes."""

    def __init__(self, detector: VDETR) -> None:
        super().__init__()
        self.detector = detector
        self.outputs: dict[str, Any] = {}

    def forward(self, points: torch.Tensor) -> None:
        self.outputs = self.detector.predict_sets(points)


@torch.no_grad()
def point_query_attention(model: VDETR, points: torch.Tensor, layers: Sequence[int],
                          query: int | None = None) -> PointQueryAttention:
    """Run the detector on one scene with its decoder's cross-attention captured.

    Args:
        model: a VDETR in eval mode.
        points: (1, N, 3 + C) the scene's points (PointScenes' ``inputs['points']``, batched).
        layers: decoder layers to keep (negative from the end).
        query: the object query; None picks the one whose best object class is most probable.
    """
    if points.ndim != 3 or points.shape[0] != 1:
        raise ValueError(f'point_query_attention draws one scene: points (1, N, 3 + C); got {tuple(points.shape)}.')
    runner = _PredictSets(model)
    probs = capture_cross_attention(runner, points)
    outputs = runner.outputs
    class_probs = outputs['logits'][-1, 0].float().softmax(-1)[:, :-1]
    chosen = query is None
    query = int(class_probs.amax(-1).argmax()) if chosen else query
    num_layers = len(probs)
    kept = sorted({layer % num_layers for layer in layers})
    return PointQueryAttention(
        query=query, chosen=chosen, label=int(class_probs[query].argmax()), score=float(class_probs[query].max()),
        boxes={layer: outputs['boxes'][layer, 0, query].float() for layer in kept},
        tokens=outputs['xyz'][0].float(), maps={layer: probs[layer][0, :, query].float() for layer in kept})


def _box_lines(axis: Any, box: torch.Tensor, color: str, linewidth: float, top: bool) -> None:
    corners = box_corners(box.reshape(1, 7))[0].numpy()
    for a, b in BOX_EDGES:
        if top:
            axis.plot(corners[[a, b], 0], corners[[a, b], 1], color=color, linewidth=linewidth)
        else:
            axis.plot(corners[[a, b], 0], corners[[a, b], 1], corners[[a, b], 2], color=color, linewidth=linewidth)


def draw_point_attention(found: PointQueryAttention, scene_points: torch.Tensor, gt_boxes: torch.Tensor,
                         heads: str | list[int], title: str, out: Path) -> None:
    """The figure (module docstring): rows are ``found``'s layers; per head (``'mean'``, ``'all'`` or indices) a
    3D view and a top view, one colour scale per row. Written atomically as PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    num_heads = next(iter(found.maps.values())).shape[0]
    columns = (['mean'] if heads == 'mean' else list(range(num_heads)) if heads == 'all' else list(heads))
    layers = sorted(found.maps)
    figure = plt.figure(figsize=(7.6 * len(columns), 3.6 * len(layers)), dpi=110)
    xyz = scene_points[:, :3].float().numpy()
    shown = xyz[np.random.default_rng(0).permutation(len(xyz))[:SCENE_POINTS_SHOWN]]
    tokens = found.tokens.numpy()
    for row, layer in enumerate(layers):
        weights = found.maps[layer]
        per_column = [weights.mean(0) if column == 'mean' else weights[column] for column in columns]
        vmax = max(float(w.max()) for w in per_column)
        for index, (column, weight) in enumerate(zip(columns, per_column)):
            order = np.argsort(weight.numpy())  # the most attended tokens drawn last, on top
            for view in range(2):
                top = view == 1
                panel = row * 2 * len(columns) + 2 * index + view + 1
                axis = figure.add_subplot(len(layers), 2 * len(columns), panel, projection=None if top else '3d')
                if top:
                    axis.scatter(shown[:, 0], shown[:, 1], s=0.3, c='0.8', linewidths=0)
                    points = axis.scatter(tokens[order, 0], tokens[order, 1], s=6, c=weight.numpy()[order],
                                          cmap='magma_r', vmin=0, vmax=vmax, linewidths=0)
                    axis.set_aspect('equal')
                else:
                    axis.scatter(shown[:, 0], shown[:, 1], shown[:, 2], s=0.2, c='0.8', linewidths=0)
                    points = axis.scatter(tokens[order, 0], tokens[order, 1], tokens[order, 2], s=5,
                                          c=weight.numpy()[order], cmap='magma_r', vmin=0, vmax=vmax, linewidths=0)
                    axis.view_init(elev=35, azim=-60)
                    axis.set_box_aspect(np.ptp(xyz, axis=0))
                for box in gt_boxes.float():
                    _box_lines(axis, box, 'tab:green', 0.6, top)
                _box_lines(axis, found.boxes[layer], 'red', 1.4, top)
                axis.tick_params(labelsize=6)
                head = 'mean of heads' if column == 'mean' else f'head {column}'
                axis.set_title(f'layer {layer}, {head} ({"top" if top else "3D"} view; max {vmax:.3f})', fontsize=8)
            figure.colorbar(points, ax=axis, fraction=0.03)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    save_figure(figure, out)
    plt.close(figure)
