"""Object queries drawn from the image tokens: two-stage query selection for camera-query detectors.

PETR's queries are learnable 3D reference points with no content; from scratch on a small budget they stay blind to
the image (every sample gets the same boxes) long before cross-attention learns to find an object. Two-stage DETRs
(Deformable DETR's two-stage variant, Zhu et al. ICLR 2021; DINO's query selection, Zhang et al. ICLR 2023) start
the decoder from the encoder's best-scored tokens instead. Here the score is the centre heatmap's
(:class:`~vispe.models.petr.centre_heatmap.CentreHeatmapHead`): its local maxima (3 × 3 in each view, the largest
class logit) are ranked and the top Q tokens become the queries. A query's content is ``LayerNorm(Linear(m + p))``
of its token's memory m and key embedding p, and its reference point (in [0, 1] of the encoding's position range,
where PETR's learnable points live) is ``sigmoid(MLP(content))``. A query whose token holds (within one cell, in
its view) the projected centre of a ground-truth box is that box's proposal: ``loss_proposal`` is the L1 distance in
metres between its reference (as the detector's ``pc_range`` reads it) and the box centre, averaged over such
queries, as two-stage DETRs supervise their proposals; it makes the Hungarian matching pair each box with the query
drawn from it early, so that class and box targets stop moving between queries. The geometry a query starts from
is what the encoding put into its token's key: a camera ray (PETR), a 3D point (3DPPE), or only the camera and
pixel (the multi-view sine), so the encodings still differ where they should, on an unseen rig. The choice of tokens
passes no gradient; the content and reference do.

Shapes: memory, key_embed (B, N, d); heatmap logits (B·V, K, h, w) with N = V·h·w; valid (B, N) or None
-> content (B, Q, d), reference (B, Q, 3), token index (B, Q); the proposal loss of references (B, Q, 3) and token
indices (B, Q) against boxes (G_b, 7) per sample -> a scalar.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from vispe.geometry import Cameras
from vispe.geometry.device_constants import device_constant
from vispe.models.petr.centre_heatmap import MIN_DEPTH, gather_tokens, padded_boxes

NOT_A_PEAK = 1.0e4
INVALID = 2.0e4


def heatmap_peak_index(logits: torch.Tensor, batch: int, count: int, valid: torch.Tensor | None = None) -> torch.Tensor:
    """(B, count) indices of each sample's tokens ranked by heatmap score, local maxima (3 × 3 within a view) first,
    then the other cells, padded cells last; logits (B·V, K, h, w), valid (B, V·h·w). Detached."""
    score = logits.detach().amax(1)
    peak = score.eq(F.max_pool2d(score[:, None], 3, stride=1, padding=1)[:, 0])
    ranked = (score - NOT_A_PEAK * (~peak).float()).reshape(batch, -1)
    if not 1 <= count <= ranked.shape[1]:
        raise ValueError(f'cannot draw {count} queries from {ranked.shape[1]} tokens; choose num_queries <= '
                         f'{ranked.shape[1]} (the cameras\' feature cells) or larger images.')
    if valid is not None:
        ranked = ranked - INVALID * (~valid).float()
    return ranked.topk(count, dim=1).indices


class TokenQueries(nn.Module):
    """Queries from the heatmap's best tokens (see the module docstring).

    Args:
        embed_dim: d.
        num_queries: Q.
        proposal_weight: factor on ``loss_proposal``.
    """

    def __init__(self, embed_dim: int, num_queries: int, proposal_weight: float = 0.25) -> None:
        super().__init__()
        if not math.isfinite(proposal_weight) or proposal_weight < 0:
            raise ValueError(f'token_queries proposal_weight must be a finite number >= 0; got {proposal_weight!r}.')
        self.num_queries = num_queries
        self.proposal_weight = proposal_weight
        self.content = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.LayerNorm(embed_dim))
        self.reference = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.ReLU(inplace=True),
                                       nn.Linear(embed_dim, 3))

    def forward(self, memory: torch.Tensor, key_embed: torch.Tensor, heatmap: torch.Tensor,
                valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        index = heatmap_peak_index(heatmap, memory.shape[0], self.num_queries, valid)
        content = self.content(gather_tokens(memory + key_embed, index))
        return content, self.reference(content).sigmoid(), index


def proposal_targets(index: torch.Tensor, cameras: Cameras, boxes: list[torch.Tensor], feat_size: Sequence[int],
                     stride: int, reach: int = 1) -> torch.Tensor:
    """(B, Q) int64: for each query's token (index (B, Q) into the V·h·w cells), the box of its sample whose centre
    projects (in front of the camera) within ``reach`` cells of it in the same view, the nearest such box; -1 where
    none does."""
    batch = index.shape[0]
    height, width = feat_size
    padded, real = padded_boxes(boxes, index.device)
    if padded.shape[1] == 0:
        return torch.full_like(index, -1)
    pixels, depth = cameras.project(padded[..., :3])                                     # (B, V, G, 2), (B, V, G)
    cells = torch.floor(pixels / stride)
    view, cell = index // (height * width), index % (height * width)
    row, col = cell // width, cell % width
    rows = torch.arange(batch, device=index.device)[:, None]
    box_cells, box_depth = cells[rows, view], depth[rows, view]                  # (B, Q, G, 2), (B, Q, G)
    distance = torch.maximum((box_cells[..., 0] - col[..., None]).abs(), (box_cells[..., 1] - row[..., None]).abs())
    near = (box_depth > MIN_DEPTH) & real[:, None] & (distance <= reach)
    nearest = distance.masked_fill(~near, float('inf')).argmin(-1)
    return torch.where(near.any(-1), nearest, torch.full_like(nearest, -1))


def proposal_loss(reference: torch.Tensor, index: torch.Tensor, cameras: Cameras, boxes: list[torch.Tensor],
                  feat_size: Sequence[int], stride: int, pc_range: Sequence[float]) -> torch.Tensor:
    """Mean L1 distance in metres between the references (B, Q, 3) in [0, 1] of ``pc_range`` of the queries that
    are some box's proposal (:func:`proposal_targets`) and those boxes' centres; 0 (with a gradient path) when no
    query is."""
    assigned = proposal_targets(index, cameras, boxes, feat_size, stride)
    low = device_constant(pc_range[:3], reference)
    extent = device_constant(pc_range[3:], reference) - low
    errors = [((reference[sample][assigned[sample] >= 0] * extent + low)
               - sample_boxes[assigned[sample][assigned[sample] >= 0], :3].float()).abs().sum(-1)
              for sample, sample_boxes in enumerate(boxes)]
    errors = torch.cat(errors)
    return errors.mean() if len(errors) else reference.sum() * 0.0
