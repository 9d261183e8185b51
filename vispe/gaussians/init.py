"""3D Gaussians initialised from a coloured point cloud, as 3DGS initialises them from SfM points (Kerbl et al.,
SIGGRAPH 2023, ``GaussianModel.create_from_pcd``).

Per point: the centre is the point; the SH DC term is ``(rgb − 0.5) / C0`` (C0 = 1/(2√π), the degree-0 basis);
the higher SH coefficients are zero; the scale is isotropic, the root of the mean squared distance to the three
nearest other points (clamped below at 1e-7, 3DGS's ``distCUDA2``), stored as a log; the rotation is the identity
quaternion; the opacity is 0.1, stored as a logit.
"""
from __future__ import annotations

import numpy as np
import torch

from vispe.gaussians.ply import GaussianCloud

__all__ = ['SH_C0', 'SH_C1', 'fit_to_neighbours', 'gaussians_from_points', 'rgb_to_sh', 'rotation_to_quaternion',
           'sh_to_rgb']

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
    _check_finite_points(xyz, rgb, 'gaussians_from_points')
    if sh_degree not in range(4):
        raise ValueError(f'gaussians_from_points: sh_degree {sh_degree!r} is not one 3DGS renders; give 0, 1, 2 or 3.')
    _check_neighbours(neighbours, 1, 'gaussians_from_points', 'the scale averages over them; 3DGS uses 3')
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


SH_C1 = 0.4886025119029199


def _check_neighbours(neighbours: object, minimum: int, caller: str, why: str) -> None:
    """Refuse a neighbour count that is no whole number of at least ``minimum``."""
    if isinstance(neighbours, bool) or not isinstance(neighbours, (int, np.integer)) or neighbours < minimum:
        raise ValueError(f'{caller}: neighbours {neighbours!r} is not a whole number of at least {minimum} ({why}).')


def _check_finite_points(xyz: np.ndarray, rgb: np.ndarray, caller: str) -> None:
    """Refuse NaN or infinite coordinates or colours, naming the first such point and its value."""
    for name, values in (('xyz', xyz), ('rgb', rgb)):
        bad = np.nonzero(~np.isfinite(values).all(1))[0]
        if len(bad):
            raise ValueError(f'{caller}: {name} of {len(bad)} point(s) is NaN or infinite (first: point {bad[0]}, '
                             f'{values[bad[0]].tolist()}); drop those points first '
                             f'(e.g. keep = np.isfinite(xyz).all(1) & np.isfinite(rgb).all(1)).')


def rotation_to_quaternion(rotation: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotation matrices -> (N, 4) unit quaternions (w, x, y, z) with w ≥ 0 (kornia's conversion)."""
    from kornia.geometry.conversions import rotation_matrix_to_quaternion

    quaternion = rotation_matrix_to_quaternion(torch.from_numpy(np.asarray(rotation, np.float64)), eps=0.0).numpy()
    return quaternion * np.where(quaternion[:, :1] < 0, -1.0, 1.0)


def fit_to_neighbours(cloud: GaussianCloud, rgb: np.ndarray, neighbours: int = 16) -> GaussianCloud:
    """Gaussians whose every attribute varies, each fitted to its ``neighbours`` nearest points (least squares):

    - rotation and log-scales: the principal axes and standard deviations of the neighbours' offsets (an
      anisotropic Gaussian covering its neighbourhood; scales at least 1e-4 of the scene's extent);
    - opacity: the local density, sigmoid⁻¹ of (median neighbour distance of the cloud / this point's) in
      [0.05, 0.95];
    - f_dc: the mean colour of the neighbourhood; f_rest's degree-1 coefficients: the colour gradient over the
      neighbourhood (ridge least squares, λ = a tenth of the mean offset variance), as the change over the
      largest scale along each axis through SH's linear basis functions (Y₁ ∝ −y, z, −x), clipped to ±1;
      higher degrees stay zero.
    """
    from vispe.geometry.point_cloud import knn

    if cloud.sh_degree < 1:
        raise ValueError('fit_to_neighbours writes degree-1 SH coefficients: give a cloud of SH degree 1 or more.')
    rgb = np.asarray(rgb, np.float32)
    if rgb.shape != (len(cloud), 3):
        raise ValueError(f'fit_to_neighbours: rgb has shape {rgb.shape}; give one colour per Gaussian, '
                         f'({len(cloud)}, 3), in the order of the cloud.')
    _check_finite_points(cloud.xyz, rgb, 'fit_to_neighbours')
    _check_neighbours(neighbours, 4, 'fit_to_neighbours', 'a principal-axis fit and a colour gradient need at '
                      'least 4 points; 16 by default')
    xyz = cloud.xyz.astype(np.float64)
    index, distances = knn(cloud.xyz, cloud.xyz, min(neighbours, len(xyz)))
    index, distances = index.numpy(), distances.numpy()
    offsets = xyz[index] - xyz[:, None]                                          # (N, K, 3)
    covariance = np.einsum('nki,nkj->nij', offsets, offsets) / index.shape[1]
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    eigenvectors[np.linalg.det(eigenvectors) < 0, :, 0] *= -1                   # proper rotations
    extent = float(np.ptp(xyz, axis=0).max())
    if extent == 0:
        raise ValueError(f'fit_to_neighbours: all {len(xyz)} centres are the same point {xyz[0].tolist()}; a '
                         f'neighbourhood fit needs points that spread out (give distinct points).')
    scale = np.log(np.maximum(np.sqrt(np.maximum(eigenvalues, 0)), 1e-4 * extent))
    spacing = distances[:, 1:].mean(1)
    density = np.clip(np.median(spacing) / np.maximum(spacing, 1e-12), 0.05, 0.95)
    colours = np.asarray(rgb, np.float64)[index]                                 # (N, K, 3)
    centred = offsets - offsets.mean(1, keepdims=True)
    gram = np.einsum('nki,nkj->nij', centred, centred)
    gram += (0.1 * np.trace(gram, axis1=1, axis2=2) / 3 + 1e-12)[:, None, None] * np.eye(3)    # ridge
    gradient = np.linalg.solve(gram, np.einsum('nki,nkc->nic', centred, colours - colours.mean(1, keepdims=True)))
    change = np.clip(gradient * np.exp(scale.max(1))[:, None, None] / SH_C1, -1, 1)   # (N, axis, channel)
    f_rest = cloud.f_rest.copy()
    f_rest[:, :, 0], f_rest[:, :, 1], f_rest[:, :, 2] = -change[:, 1], change[:, 2], -change[:, 0]
    return GaussianCloud(xyz=cloud.xyz, normals=cloud.normals, f_dc=rgb_to_sh(colours.mean(1)), f_rest=f_rest,
                         opacity=np.log(density / (1 - density)), scale=scale,
                         rotation=rotation_to_quaternion(eigenvectors))
