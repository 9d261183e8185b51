"""3D Gaussians initialised from a coloured point cloud, as 3DGS initialises them from SfM points (Kerbl et al.,
SIGGRAPH 2023, ``GaussianModel.create_from_pcd``).

Per point: the centre is the point; the SH DC term is ``(rgb − 0.5) / C0`` (C0 = 1/(2√π), the degree-0 basis);
the higher SH coefficients are zero; the scale is isotropic, the root of the mean squared distance to the three
nearest other points (clamped below at 1e-7, 3DGS's ``distCUDA2``), stored as a log; the rotation is the identity
quaternion; the opacity is 0.1, stored as a logit.
"""
from __future__ import annotations

import numpy as np

from vispe.gaussians.ply import GaussianCloud

__all__ = ['SH_C0', 'gaussians_from_points', 'rgb_to_sh', 'sh_to_rgb']

SH_C0 = 0.28209479177387814


def rgb_to_sh(rgb: np.ndarray) -> np.ndarray:
    """Colours in [0, 1] -> SH DC coefficients (3DGS's ``RGB2SH``)."""
    return (np.asarray(rgb, dtype=np.float64) - 0.5) / SH_C0


def sh_to_rgb(sh_dc: np.ndarray) -> np.ndarray:
    """SH DC coefficients -> the colour seen from every direction (before 3DGS's clamp at 0)."""
    return np.asarray(sh_dc, dtype=np.float64) * SH_C0 + 0.5


def gaussians_from_points(xyz: np.ndarray, rgb: np.ndarray, sh_degree: int = 3, opacity: float = 0.1,
                          neighbours: int = 3) -> GaussianCloud:
    """3DGS's initial Gaussians of a coloured point cloud.

    Args:
        xyz: (N, 3) points, N ≥ ``neighbours`` + 1.
        rgb: (N, 3) colours in [0, 1].
        sh_degree: the SH degree of the stored coefficients (3 in 3DGS: 45 zero ``f_rest``).
        opacity: the initial opacity in (0, 1) (0.1).
        neighbours: the nearest points the scale averages over (3).
    """
    from vispe.geometry.point_cloud import knn

    xyz = np.asarray(xyz, dtype=np.float32)
    rgb = np.asarray(rgb, dtype=np.float32)
    if xyz.ndim != 2 or xyz.shape[1] != 3 or rgb.shape != xyz.shape:
        raise ValueError(f'gaussians_from_points: xyz {xyz.shape} and rgb {rgb.shape} must both be (N, 3).')
    if len(xyz) <= neighbours:
        raise ValueError(f'gaussians_from_points: {len(xyz)} point(s); the scale of a Gaussian averages the distance '
                         f'to its {neighbours} nearest others, so give at least {neighbours + 1} points.')
    if not 0 < opacity < 1:
        raise ValueError(f'gaussians_from_points: opacity {opacity} is not in (0, 1); it is stored as a logit.')
    if rgb.min() < 0 or rgb.max() > 1:
        raise ValueError(f'gaussians_from_points: colours span [{rgb.min():g}, {rgb.max():g}]; give them in [0, 1] '
                         f'(divide 8-bit colours by 255).')
    _, distances = knn(xyz, xyz, neighbours + 1)
    mean_sq = np.maximum(np.square(distances.numpy()[:, 1:].astype(np.float64)).mean(1), 1e-7)
    count, rest = len(xyz), (sh_degree + 1) ** 2 - 1
    rotation = np.zeros((count, 4), np.float32)
    rotation[:, 0] = 1
    return GaussianCloud(xyz=xyz, normals=np.zeros((count, 3)), f_dc=rgb_to_sh(rgb),
                         f_rest=np.zeros((count, 3, rest)), opacity=np.full(count, np.log(opacity / (1 - opacity))),
                         scale=np.repeat(np.log(np.sqrt(mean_sq))[:, None], 3, axis=1), rotation=rotation)
