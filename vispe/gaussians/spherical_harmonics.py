"""View-dependent colour of 3D Gaussians: the real spherical-harmonic basis up to degree 3 as 3DGS evaluates it
(Kerbl et al., SIGGRAPH 2023, ``eval_sh``; gsplat's ``spherical_harmonics`` has the same basis and order).

colour = Σ_k Y_k(d) · c_k + 0.5, clamped below at 0, for the unit direction d from the camera centre to the
Gaussian and the (K, 3) coefficients c of a Gaussian, K = (degree + 1)²: c_0 is the stored ``f_dc`` and c_1.. the
``f_rest`` coefficients of each channel.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ['sh_basis', 'sh_coefficients', 'sh_colors']

Y0 = 0.28209479177387814
Y1 = 0.4886025119029199
Y2 = (1.0925484305920792, 0.31539156525252005, 0.5462742152960396)
Y3 = (0.5900435899266435, 2.890611442640554, 0.4570457994644658, 0.3731763325901154, 1.445305721320277)


def sh_basis(directions: torch.Tensor, degree: int) -> torch.Tensor:
    """The (..., (degree + 1)²) basis values at unit ``directions`` (..., 3), 3DGS's order and signs."""
    if degree not in range(4):
        raise ValueError(f'SH degree {degree} is not one of 0..3, the degrees 3DGS stores')
    x, y, z = directions.unbind(-1)
    basis = [torch.full_like(x, Y0)]
    if degree >= 1:
        basis += [-Y1 * y, Y1 * z, -Y1 * x]
    if degree >= 2:
        xx, yy, zz = x * x, y * y, z * z
        basis += [Y2[0] * x * y, -Y2[0] * y * z, Y2[1] * (2 * zz - xx - yy), -Y2[0] * x * z, Y2[2] * (xx - yy)]
    if degree >= 3:
        basis += [-Y3[0] * y * (3 * xx - yy), Y3[1] * x * y * z, -Y3[2] * y * (4 * zz - xx - yy),
                  Y3[3] * z * (2 * zz - 3 * xx - 3 * yy), -Y3[2] * x * (4 * zz - xx - yy), Y3[4] * z * (xx - yy),
                  -Y3[0] * x * (xx - 3 * yy)]
    return torch.stack(basis, -1)


def sh_coefficients(f_dc: torch.Tensor, f_rest: torch.Tensor) -> torch.Tensor:
    """(N, K, 3) coefficients from a 3DGS file's (N, 3) ``f_dc`` and channel-major (N, 3, K − 1) ``f_rest``."""
    return torch.cat([f_dc[:, None, :], f_rest.transpose(1, 2)], 1)


def sh_colors(coefficients: torch.Tensor, means: torch.Tensor, camera_centre: torch.Tensor) -> torch.Tensor:
    """(N, 3) colours of Gaussians at ``means`` (N, 3) seen from ``camera_centre`` (3,): the basis at the
    normalised view direction times (N, K, 3) ``coefficients``, + 0.5, clamped below at 0."""
    count = coefficients.shape[1]
    degree = round(count ** 0.5) - 1
    if (degree + 1) ** 2 != count:
        raise ValueError(f'{count} SH coefficients per channel are no degree: K = (degree + 1)² (1, 4, 9 or 16)')
    basis = sh_basis(F.normalize(means - camera_centre, dim=-1), degree)
    return ((basis[..., None] * coefficients).sum(1) + 0.5).clamp_min(0.0)
