"""Rendered quality of a compressed scene, the metric TC-GS reports: the scene before compression is rendered
once from each camera, and a decoded scene's renders from the same cameras are scored against those (PSNR and
SSIM, vispe.gaussians.image_quality), so the figures measure what the codec lost, not how well the scene was
trained. Background black; every view clamped to [0, 1] and rounded to 8 bits, as 3DGS scores the PNGs it saved.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from vispe.gaussians.cameras import PinholeCamera
from vispe.gaussians.image_quality import psnr, ssim, to_8_bit
from vispe.gaussians.ply import GaussianCloud
from vispe.gaussians.render import GaussianScene, render, renderer_name

__all__ = ['ReferenceViews']


@dataclass
class ReferenceViews:
    """The uncompressed scene's renders (8-bit, kept on the CPU) from ``cameras`` with ``renderer`` on ``device``."""

    cameras: list[PinholeCamera]
    images: list[torch.Tensor]
    renderer: str
    device: torch.device

    @classmethod
    def of(cls, source: GaussianCloud, cameras: list[PinholeCamera], renderer: str = 'torch',
           device: torch.device | str = 'cpu') -> ReferenceViews:
        device = torch.device(device)
        scene = GaussianScene.from_cloud(source, device)
        images = [to_8_bit(render(scene, camera, renderer)[0]).cpu() for camera in cameras]
        return cls(list(cameras), images, renderer, device)

    def describe(self) -> dict:
        """What rendered, for a report's JSON."""
        return dict(renderer=renderer_name(self.renderer, self.device), background='black',
                    views=[dict(name=camera.name, width=camera.width, height=camera.height)
                           for camera in self.cameras])

    def quality(self, decoded: GaussianCloud) -> dict:
        """``render_psnr`` and ``render_ssim``, means over the views (3DGS's average of per-view values; ∞ if a view
        is reproduced exactly), and the per-view values, of ``decoded``'s renders against the reference renders."""
        scene = GaussianScene.from_cloud(decoded, self.device)
        psnrs, ssims = [], []
        for camera, reference in zip(self.cameras, self.images):
            image = to_8_bit(render(scene, camera, self.renderer)[0]).cpu()
            psnrs.append(psnr(image, reference))
            ssims.append(ssim(image, reference))
        return dict(render_psnr=sum(psnrs) / len(psnrs), render_ssim=sum(ssims) / len(ssims), render_psnr_views=psnrs,
                    render_ssim_views=ssims)
