"""3D Gaussian splatting's forward rasterization in PyTorch (Kerbl et al., SIGGRAPH 2023), exact to gsplat 1.5's
``rasterization(..., rasterize_mode='classic')`` on the CPU or any device: the reference vispe's rendered-quality
report runs where gsplat's CUDA kernels cannot, and that ``tests/cuda`` compares with gsplat.

Projection (EWA splatting), per Gaussian with centre μ, unit quaternion q, scales s, opacity o:
Σ = R(q) diag(s²) R(q)ᵀ, moved to the camera by the world-to-camera rotation W: Σ_c = W Σ Wᵀ; the Jacobian of the
pinhole at the camera-frame centre (x, y, z), with x/z and y/z clamped to 1.3× the half field of view, gives
Σ' = J Σ_c Jᵀ + 0.3·I (the low-pass dilation). Culled: z outside [0.01, 1e10], det Σ' ≤ 0, o < 1/255. The
Gaussian covers the axis-aligned box of its α ≥ 1/255 ellipse, half-sizes ⌈e·√Σ'_xx⌉ and ⌈e·√Σ'_yy⌉,
e = min(3.33, √(2 ln(255·o))) (gsplat's opacity-aware bound).

Compositing, per pixel with centre p (pixel (i, j) at (j + 0.5, i + 0.5) in gsplat's convention), the Gaussians in
increasing camera depth: α = min(0.999, o·exp(−½ dᵀ Σ'⁻¹ d)), d = p − μ', skipped when α < 1/255; colour
C = Σ_i T_i α_i c_i with T_i = Π_{j<i} (1 − α_j), and the pixel stops before the Gaussian that would bring T to
1e-4 or below. The returned alpha is 1 − T; a background b adds T·b.

Vectorised over (Gaussian, pixel) pairs inside each Gaussian's box, in depth-ordered chunks of at most
``pair_budget`` pairs: the transmittance inside a chunk is a segmented cumulative sum of log(1 − α) per pixel,
carried across chunks with each pixel's T and whether it has stopped.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ['ALPHA_MAX', 'ALPHA_THRESHOLD', 'EPS2D', 'FAR_PLANE', 'NEAR_PLANE', 'TRANSMITTANCE_MIN',
           'ProjectedGaussians', 'composite', 'project_gaussians', 'quaternion_to_rotation']

ALPHA_THRESHOLD = 1.0 / 255.0
ALPHA_MAX = 0.999
TRANSMITTANCE_MIN = 1e-4
EPS2D = 0.3
NEAR_PLANE = 0.01
FAR_PLANE = 1e10
FOV_MARGIN = 0.3
MAX_EXTEND = 3.33


@dataclass
class ProjectedGaussians:
    """The V Gaussians a camera sees, projected.

    Attributes:
        ids: (V,) their indices in the scene.
        means2d: (V, 2) projected centres in pixels (gsplat's convention: pixel (i, j) spans [j, j + 1) × [i, i + 1)).
        conics: (V, 3) the upper triangle (a, b, c) of Σ'⁻¹.
        depths: (V,) camera-frame z.
        radii: (V, 2) the half-sizes of the box in pixels (x, y).
        opacities: (V,) opacities in (0, 1].
    """

    ids: torch.Tensor
    means2d: torch.Tensor
    conics: torch.Tensor
    depths: torch.Tensor
    radii: torch.Tensor
    opacities: torch.Tensor


def quaternion_to_rotation(quaternions: torch.Tensor) -> torch.Tensor:
    """(N, 3, 3) rotations of (N, 4) quaternions (w, x, y, z), normalised first."""
    w, x, y, z = (quaternions / quaternions.norm(dim=-1, keepdim=True)).unbind(-1)
    return torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
                        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1).view(-1, 3, 3)


def project_gaussians(means: torch.Tensor, quaternions: torch.Tensor, scales: torch.Tensor, opacities: torch.Tensor,
                      world_to_camera: torch.Tensor, intrinsics: torch.Tensor, width: int,
                      height: int) -> ProjectedGaussians:
    """Project N Gaussians (``means`` (N, 3), ``quaternions`` (N, 4) w-first, ``scales`` (N, 3) linear,
    ``opacities`` (N,) in (0, 1]) into a pinhole camera (``world_to_camera`` (4, 4), ``intrinsics`` (3, 3) in gsplat's
    pixel convention) of ``width`` × ``height`` pixels; the culled ones are left out."""
    rotation, translation = world_to_camera[:3, :3], world_to_camera[:3, 3]
    centres = means @ rotation.T + translation
    x, y, z = centres.unbind(-1)
    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    shape = quaternion_to_rotation(quaternions) * scales[:, None, :]
    covariances = rotation @ (shape @ shape.transpose(1, 2)) @ rotation.T
    tan_x, tan_y = 0.5 * width / fx, 0.5 * height / fy
    clamped_x = z * torch.clamp(x / z, -(cx / fx + FOV_MARGIN * tan_x), (width - cx) / fx + FOV_MARGIN * tan_x)
    clamped_y = z * torch.clamp(y / z, -(cy / fy + FOV_MARGIN * tan_y), (height - cy) / fy + FOV_MARGIN * tan_y)
    zeros = torch.zeros_like(z)
    jacobian = torch.stack([fx / z, zeros, -fx * clamped_x / z ** 2,
                            zeros, fy / z, -fy * clamped_y / z ** 2], -1).view(-1, 2, 3)
    covariances2d = jacobian @ covariances @ jacobian.transpose(1, 2)
    a, b, c = covariances2d[:, 0, 0] + EPS2D, covariances2d[:, 0, 1], covariances2d[:, 1, 1] + EPS2D
    determinant = a * c - b * b
    means2d = torch.stack([fx * x / z + cx, fy * y / z + cy], -1)
    seen = (z >= NEAR_PLANE) & (z <= FAR_PLANE) & (determinant > 0) & (opacities >= ALPHA_THRESHOLD)
    extend = torch.sqrt(2.0 * torch.log(opacities.clamp_min(ALPHA_THRESHOLD) / ALPHA_THRESHOLD)).clamp_max(MAX_EXTEND)
    radii = torch.stack([torch.ceil(extend * a.clamp_min(0).sqrt()), torch.ceil(extend * c.clamp_min(0).sqrt())], -1)
    seen &= (means2d[:, 0] + radii[:, 0] > 0) & (means2d[:, 0] - radii[:, 0] < width) \
        & (means2d[:, 1] + radii[:, 1] > 0) & (means2d[:, 1] - radii[:, 1] < height) & (radii > 0).any(-1)
    ids = seen.nonzero().squeeze(1)
    conics = torch.stack([c, -b, a], -1)[ids] / determinant[ids, None]
    return ProjectedGaussians(ids, means2d[ids], conics, z[ids], radii[ids], opacities[ids])


def _chunks(pair_counts: torch.Tensor, pair_budget: int) -> list[tuple[int, int]]:
    """Consecutive [start, end) ranges of Gaussians whose pairs start in the same window of ``pair_budget`` pairs
    (at most ``pair_budget`` plus the last Gaussian's pairs each)."""
    starts = torch.cumsum(pair_counts, 0) - pair_counts
    sizes = torch.unique_consecutive(torch.div(starts, pair_budget, rounding_mode='floor'),
                                     return_counts=True)[1].tolist()
    ends = torch.tensor(sizes).cumsum(0).tolist()
    return list(zip([0] + ends[:-1], ends))


def composite(projected: ProjectedGaussians, colors: torch.Tensor, width: int, height: int,
              background: torch.Tensor | None = None, pair_budget: int = 1 << 22) -> tuple[torch.Tensor, torch.Tensor]:
    """Alpha-composite projected Gaussians with (V, C) ``colors`` front to back: the (height, width, C) image and
    the (height, width) alpha; ``background`` (C,) fills the transmittance left."""
    device, channels = colors.device, colors.shape[1]
    order = torch.sort(projected.depths, stable=True).indices
    means2d, conics = projected.means2d[order], projected.conics[order]
    radii, opacities, colors = projected.radii[order], projected.opacities[order], colors[order]
    left = torch.ceil(means2d[:, 0] - radii[:, 0] - 0.5).clamp_min(0).long()
    right = torch.floor(means2d[:, 0] + radii[:, 0] - 0.5).clamp_max(width - 1).long()
    top = torch.ceil(means2d[:, 1] - radii[:, 1] - 0.5).clamp_min(0).long()
    bottom = torch.floor(means2d[:, 1] + radii[:, 1] - 0.5).clamp_max(height - 1).long()
    box_width = (right - left + 1).clamp_min(0)
    pair_counts = box_width * (bottom - top + 1).clamp_min(0)
    log_transmittance = torch.zeros(height * width, dtype=torch.float64, device=device)
    stopped = torch.zeros(height * width, dtype=torch.bool, device=device)
    image = torch.zeros(height * width, channels, dtype=torch.float64, device=device)
    log_floor = math.log(TRANSMITTANCE_MIN)
    for start, end in _chunks(pair_counts, pair_budget):
        counts = pair_counts[start:end]
        gaussian = torch.repeat_interleave(torch.arange(start, end, device=device), counts)
        if not len(gaussian):
            continue
        offset = torch.arange(len(gaussian), device=device) - (torch.cumsum(counts, 0) - counts)[gaussian - start]
        column = left[gaussian] + offset % box_width[gaussian]
        row = top[gaussian] + torch.div(offset, box_width[gaussian], rounding_mode='floor')
        pixel = row * width + column
        pixel, sort = torch.sort(pixel, stable=True)                # pixel-major, depth order kept inside a pixel
        gaussian = gaussian[sort]
        dx = means2d[gaussian, 0] - (column[sort] + 0.5).to(means2d.dtype)
        dy = means2d[gaussian, 1] - (row[sort] + 0.5).to(means2d.dtype)
        conic = conics[gaussian]
        sigma = 0.5 * (conic[:, 0] * dx * dx + conic[:, 2] * dy * dy) + conic[:, 1] * dx * dy
        alpha = torch.clamp_max(opacities[gaussian] * torch.exp(-sigma), ALPHA_MAX)
        alpha = torch.where((sigma < 0) | (alpha < ALPHA_THRESHOLD) | stopped[pixel], 0.0, alpha).double()
        log_keep = torch.log1p(-alpha)
        running = torch.cumsum(log_keep, 0) - log_keep                     # exclusive, over the whole chunk
        first = torch.ones_like(pixel, dtype=torch.bool)
        first[1:] = pixel[1:] != pixel[:-1]
        segment = torch.cumsum(first.long(), 0) - 1
        log_before = log_transmittance[pixel] + running - running[first][segment]
        contributes = (alpha > 0) & (log_before + log_keep > log_floor)
        weight = torch.where(contributes, torch.exp(log_before) * alpha, 0.0)
        image.index_add_(0, pixel, weight[:, None] * colors[gaussian].double())
        log_transmittance.index_add_(0, pixel, torch.where(contributes, log_keep, 0.0))
        stopped[pixel[(alpha > 0) & ~contributes]] = True
    transmittance = torch.exp(log_transmittance)
    if background is not None:
        image += transmittance[:, None] * background.to(device, torch.float64)
    return (image.view(height, width, channels).to(colors.dtype),
            (1 - transmittance).view(height, width).to(colors.dtype))
