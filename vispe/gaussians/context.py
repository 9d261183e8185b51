"""TC-GS's position-sensitive context decoder: tri-plane features of a Gaussian and its K − 1 nearest neighbours
plus its position ("the Gaussian position prior") -> the mean, scale and quantisation step of each attribute.

Shapes: the centres of each Gaussian's K nearest (N, K, 3), the Gaussian itself first ->
mean (N, W), scale (N, W), step factor (N, G) in (0, 2) (the reference's ``1 + tanh``), for W attribute columns in
G groups.

Choices (the reference decodes Scaffold-GS anchors; vispe codes 3DGS Gaussians directly):
- The MLP works in units of each column's spread: mean = m_j + s_j·μ̃, scale = s_j·softplus(σ̃) (m, s the
  column's mean and standard deviation, stored in the bitstream), so columns as different as log-scales and SH
  coefficients train under one learning rate; the reference clamps a raw scale at 1e-9.
- The planes read coordinates relative to the centre of the scene's box (the box pushed out 1.2×, as the
  reference's ``updatebbox`` pushes its bounds away from 0), so a scene need not surround the origin.
- The position prior is the centre relative to the scene's centre over its half-extent (in [−1, 1]); the
  reference feeds raw coordinates, which depend on the scene's units.
- The planes are stored and read at full resolution; the reference's plane auto-encoder, whose reconstruction its
  decoder never reads, is left out.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vispe.encodings.triplane import sample_triplane, triplane_coords

__all__ = ['TriPlaneContext']


class TriPlaneContext(nn.Module):
    """Tri-plane context decoder of W attribute columns in G groups.

    Args:
        width: W, attribute columns.
        groups: G, groups with one adaptive quantisation step each.
        channels, resolution: the planes (3, C, R, R).
        knn: K, the Gaussian and its K − 1 nearest neighbours.
        hidden: the MLP's hidden width.
        column_mean, column_std: (W,) the statistics the outputs are expressed in.
    """

    def __init__(self, width: int, groups: int, channels: int = 16, resolution: int = 32, knn: int = 4,
                 hidden: int = 128, column_mean: torch.Tensor | None = None,
                 column_std: torch.Tensor | None = None) -> None:
        super().__init__()
        self.width, self.groups, self.knn = width, groups, knn
        self.planes = nn.Parameter(torch.empty(3, channels, resolution, resolution).uniform_(-0.01, 0.01))
        self.mlp = nn.Sequential(nn.Linear(knn * 3 * channels + 3, hidden), nn.ReLU(),
                                 nn.Linear(hidden, 2 * width + groups))
        self.register_buffer('column_mean', torch.zeros(width) if column_mean is None else column_mean.float())
        self.register_buffer('column_std', torch.ones(width) if column_std is None else column_std.float())

    def forward(self, neighbour_xyz: torch.Tensor, low: torch.Tensor,
                high: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """neighbour_xyz (N, K, 3) in the module's dtype, the scene box ``low``, ``high`` (3,)."""
        centre = (low + high) / 2
        uv = triplane_coords(neighbour_xyz - centre, low - centre, high - centre)          # (N, K, 3, 2)
        features = sample_triplane(self.planes, uv).flatten(1)                            # (N, K·3·C)
        prior = (neighbour_xyz[:, 0] - centre) / ((high - low) / 2).clamp_min(1e-9)
        out = self.mlp(torch.cat([features, prior], dim=1))
        mean_std, scale_raw, step_raw = out.split([self.width, self.width, self.groups], dim=1)
        mean = self.column_mean + self.column_std * mean_std
        scale = self.column_std * F.softplus(scale_raw)
        return mean, scale, 1 + torch.tanh(step_raw)
