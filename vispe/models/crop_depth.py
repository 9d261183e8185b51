"""A ViT that predicts metric depth of an image crop (KPE's depth task, Prakash et al. ECCV 2024, on a CPU scale):
the crop's patches through a vispe :class:`~vispe.models.vit.VisionTransformer` whose encoding may read where the crop
lies in its camera (``Positions.camera``: its crop boxes and the full image's cameras), then a linear
head per patch token to the log-depth of its p × p pixels (a pixel shuffle back to the crop).

Loss: mean |log d̂ − log d| over the pixels with known depth (d > 0), the scale-aware log-L1 of metric depth
(a crop's depth is ambiguous up to scale without where it lies in the camera; the loss keeps that ambiguity
costly).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import nn

from vispe.encodings import check_encoding_fits, register_host
from vispe.geometry import CameraGeometry, Cameras, Positions
from vispe.registry import MODELS

__all__ = ['CropDepthViT']

HOST = register_host('CropDepthViT', provides=('grid', 'cameras', 'crop_boxes'),
                     where='vispe.models.CropDepthViT (configs/crops: backbone.encoding)')


@MODELS.register_module()
class CropDepthViT(BaseModel):
    """Metric depth of image crops.

    ``forward(inputs, data_samples, mode)``: inputs hold ``image`` (B, 3, S, S) in [0, 1], ``crop_box`` (B, 4) (x0,
    y0, x1, y1) first and last pixel in the full image, ``intrinsics`` (B, 3, 3) of the full image, ``image_size``
    (B, 2) (H, W) of the full image (the same for the batch), or one (H, W) pair of ints for the batch (what a
    compiled or exported model takes: a tensor's values would be read back to the host), and, for the loss and the
    metric, ``depth`` (B, S, S) metres (0: unknown). 'loss' -> ``{'loss': log-L1}``; 'tensor' -> (B, S, S) depth;
    'predict' -> per crop dict(pred, target, offset_bin, image_id).

    Args:
        backbone: a vispe ViT config (``dict(type='TimmViT', ...)``) with ``num_classes=0``, or such a ViT built
            with ``extra_geometry=('cameras', 'crop_boxes')``; its encoding gets the crop boxes and the cameras of the
            full images.
        min_depth, max_depth: the range the prediction is clamped to (metres).
    """

    def __init__(self, backbone: dict | nn.Module, min_depth: float = 0.1, max_depth: float = 100.0,
                 data_preprocessor: dict | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        extra = tuple(name for name in HOST.provides if name != 'grid')
        self.backbone = MODELS.build({**backbone, 'extra_geometry': extra}) if isinstance(backbone, Mapping) else backbone
        check_encoding_fits(self.backbone.encoding, HOST)
        if not 0 < min_depth < max_depth:
            raise ValueError(f'CropDepthViT needs 0 < min_depth < max_depth; got {min_depth}, {max_depth}.')
        self.log_range = (float(torch.tensor(min_depth).log()), float(torch.tensor(max_depth).log()))
        self.patch = tuple(self.backbone.patch_embed.patch_size)
        if self.patch[0] != self.patch[1]:
            raise ValueError(f'CropDepthViT needs square patches for its pixel shuffle; got {self.patch}.')
        self.head = nn.Linear(self.backbone.embed_dim, self.patch[0] * self.patch[1])

    def positions(self, inputs: Mapping[str, torch.Tensor]) -> Positions:
        """The crop's patch grid with its crop box and the full image's camera (identity pose, one view)."""
        images, sizes = inputs['image'], inputs['image_size']
        grid = self.backbone.positions(images)
        if isinstance(sizes, torch.Tensor):
            if bool((sizes != sizes[0]).any()):
                raise ValueError(f'CropDepthViT: the crops of one batch come from full images of different sizes '
                                 f'{sorted({tuple(size.tolist()) for size in sizes})}; batch crops of one size '
                                 f'together.')
            sizes = sizes[0]
        batch = images.shape[0]
        pose = torch.eye(4, device=images.device).expand(batch, 1, 4, 4)
        cameras = Cameras(inputs['intrinsics'][:, None].float(), pose, tuple(sizes))
        return Positions(grid.grid_size, num_prefix_tokens=grid.num_prefix_tokens, patch_size=grid.patch_size,
                         device=images.device, camera=CameraGeometry(cameras, crop_boxes=inputs['crop_box'].float()))

    def log_depth(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, S, S) predicted log-depth."""
        images = inputs['image']
        pos = self.positions(inputs)
        x = self.backbone.embed_tokens(images, pos)
        for index in range(len(self.backbone.blocks)):
            x = self.backbone.run_block(index, x, pos)
        tokens = self.backbone.norm(x)[:, pos.num_prefix_tokens:]
        rows, cols = pos.grid_size
        values = self.head(tokens).transpose(1, 2).reshape(images.shape[0], -1, rows, cols)
        return F.pixel_shuffle(values, self.patch[0])[:, 0].clamp(*self.log_range)

    def forward(self, inputs: Mapping[str, torch.Tensor], data_samples: list[Mapping[str, Any]] | None = None,
                mode: str = 'tensor') -> Any:
        if mode not in ('loss', 'predict', 'tensor'):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
        log_depth = self.log_depth(inputs)
        if mode == 'tensor':
            return log_depth.exp()
        target = inputs['depth'].float()
        known = target > 0
        if mode == 'loss':
            if not bool(known.any()):
                return {'loss': log_depth.sum() * 0}
            return {'loss': (log_depth[known] - target[known].log()).abs().mean()}
        depth = log_depth.exp()
        return [dict(pred=depth[index], target=target[index], **(data_samples[index] if data_samples else {}))
                for index in range(depth.shape[0])]
