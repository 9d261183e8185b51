"""Render 3DGS scenes from pinhole cameras: vispe's PyTorch rasterizer (``renderer='torch'``, any device,
vispe.gaussians.rasterize) or gsplat's CUDA kernels (``renderer='gsplat'``, ``pip install 'vispe[render]'``);
both compute gsplat 1.5's classic 3DGS forward, so they give the same images (tests/cuda compares them).

    scene = GaussianScene.from_cloud(read_gaussians_ply('scene.ply'))
    image, alpha = render(scene, read_cameras_json('cameras.json')[0])          # (H, W, 3), (H, W)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vispe.extras import import_extra
from vispe.gaussians.cameras import PinholeCamera
from vispe.gaussians.ply import GaussianCloud
from vispe.gaussians.rasterize import composite, project_gaussians
from vispe.gaussians.spherical_harmonics import sh_coefficients, sh_colors

__all__ = ['RENDERERS', 'GaussianScene', 'default_renderer', 'render', 'renderer_name']

RENDERERS = ('torch', 'gsplat')


@dataclass(frozen=True)
class GaussianScene:
    """N Gaussians in the activated parametrisation a rasterizer takes (float32 tensors on one device).

    Attributes:
        means: (N, 3) centres.
        quaternions: (N, 4) rotations (w, x, y, z), unnormalised.
        scales: (N, 3) scales (exp of the stored log-scales).
        opacities: (N,) opacities (sigmoid of the stored logits).
        sh: (N, K, 3) SH coefficients, K = (degree + 1)².
    """

    means: torch.Tensor
    quaternions: torch.Tensor
    scales: torch.Tensor
    opacities: torch.Tensor
    sh: torch.Tensor

    @classmethod
    def from_cloud(cls, cloud: GaussianCloud, device: torch.device | str = 'cpu') -> GaussianScene:
        """The scene of a 3DGS file's Gaussians (:func:`vispe.gaussians.read_gaussians_ply`)."""
        tensor = lambda values: torch.from_numpy(values).to(device)                         # noqa: E731
        return cls(tensor(cloud.xyz), tensor(cloud.rotation), tensor(cloud.scale).exp(),
                   torch.sigmoid(tensor(cloud.opacity)), sh_coefficients(tensor(cloud.f_dc), tensor(cloud.f_rest)))

    @property
    def sh_degree(self) -> int:
        return round(self.sh.shape[1] ** 0.5) - 1


def default_renderer(device: torch.device | str) -> str:
    """'gsplat' for a CUDA device where gsplat is installed, else 'torch'."""
    if torch.device(device).type == 'cuda':
        try:
            import gsplat  # noqa: F401
            return 'gsplat'
        except ImportError:
            pass
    return 'torch'


def renderer_name(renderer: str, device: torch.device | str) -> str:
    """What renders, in words, for reports: the rasterizer, its version and the device."""
    device = torch.device(device)
    where = torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'
    if renderer == 'gsplat':
        return f'gsplat {import_extra("gsplat", "rendering with gsplat").__version__} on {where}'
    return f'vispe torch rasterizer (gsplat 1.5 classic) on {where}'


def _gsplat_view(scene: GaussianScene, world_to_camera: torch.Tensor, intrinsics: torch.Tensor, width: int,
                 height: int, background: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    gsplat = import_extra('gsplat', 'rendering with gsplat')
    if scene.means.device.type != 'cuda':
        raise ValueError(f'gsplat rasterizes on CUDA only and the scene is on {scene.means.device}; move it '
                         f'(GaussianScene.from_cloud(cloud, "cuda")) or render with renderer="torch"')
    colors, alphas, _ = gsplat.rasterization(
        scene.means, scene.quaternions, scene.scales, scene.opacities, scene.sh, world_to_camera[None],
        intrinsics[None], width, height, sh_degree=scene.sh_degree, packed=True, rasterize_mode='classic',
        backgrounds=None if background is None else background[None])
    return colors[0], alphas[0, ..., 0]


def render(scene: GaussianScene, camera: PinholeCamera, renderer: str = 'torch',
           background: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The (H, W, 3) image (unclamped, as the rasterizer composites it) and (H, W) alpha of ``scene`` seen by
    ``camera``; ``background`` (3,) fills what the Gaussians leave (black when None)."""
    if renderer not in RENDERERS:
        raise ValueError(f'renderer {renderer!r} is not one of {RENDERERS}')
    device = scene.means.device
    world_to_camera = torch.as_tensor(camera.world_to_camera, dtype=torch.float32, device=device)
    intrinsics = torch.as_tensor(camera.intrinsics, dtype=torch.float32, device=device).clone()
    intrinsics[:2, 2] += 0.5                                  # vispe's pixel centres at integers -> gsplat's at +0.5
    if background is not None:
        background = background.to(device, torch.float32)
    if renderer == 'gsplat':
        return _gsplat_view(scene, world_to_camera, intrinsics, camera.width, camera.height, background)
    projected = project_gaussians(scene.means, scene.quaternions, scene.scales, scene.opacities, world_to_camera,
                                  intrinsics, camera.width, camera.height)
    centre = torch.as_tensor(camera.centre, dtype=torch.float32, device=device)
    colors = sh_colors(scene.sh[projected.ids], scene.means[projected.ids], centre)
    return composite(projected, colors, camera.width, camera.height, background)
