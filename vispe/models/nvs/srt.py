"""A small SRT-style novel-view synthesis model (Sajjadi et al., CVPR 2022; GTA's testbed, Miyato et al., ICLR 2024)
with any camera encoding.

A shared CNN turns each input view into a grid of tokens (stride 8); a transformer encoder runs over the tokens of
all input views; a ray decoder cross-attends from each target ray to those tokens and an MLP predicts its colour
(L2 loss). The decoder's queries are one learned vector per ray, so everything a ray knows of where it is comes
from the encoding: GTA (SE(3) of the cameras and SO(2) of the pixels in every attention, queries included), the
camera rays' embedding (:class:`~vispe.encodings.CameraRays`, added to the input tokens and to the queries), or
nothing (NoPE: every ray of a view gets the same colour, the floor of the comparison).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import nn

from vispe.attention import Attention
from vispe.encodings import PositionEncoding, build_encoding, check_encoding_fits, register_host
from vispe.geometry import CameraGeometry, Cameras, Positions
from vispe.models.detr.transformer import feed_forward
from vispe.models.multiview_encoder import MultiViewEncoder
from vispe.registry import MODELS

__all__ = ['NovelViewTransformer', 'RayDecoderLayer', 'view_cnn']

HOST = register_host('NovelViewTransformer', provides=('grid', 'cameras'),
                     where='vispe.models.nvs.NovelViewTransformer (configs/nvs: encoding); target rays as pixel coords')


def view_cnn(channels: tuple[int, ...], embed_dim: int) -> nn.Sequential:
    """Conv 3×3 (3 -> channels[0]), ReLU, then one stride-2 conv 3×3 + ReLU per further width (stride 8 for four
    widths), then a 1×1 conv to the token width."""
    layers: list[nn.Module] = [nn.Conv2d(3, channels[0], 3, padding=1), nn.ReLU(inplace=True)]
    for in_channels, out_channels in zip(channels[:-1], channels[1:]):
        layers += [nn.Conv2d(in_channels, out_channels, 3, stride=2, padding=1), nn.ReLU(inplace=True)]
    layers.append(nn.Conv2d(channels[-1], embed_dim, 1))
    return nn.Sequential(*layers)


class RayDecoderLayer(nn.Module):
    """Pre-norm cross-attention from rays to scene tokens (the encoding's hooks between the rays' and the tokens'
    positions) and FFN; rays do not attend to one another, as SRT's decoder."""

    def __init__(self, embed_dim: int, num_heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.attn = Attention(embed_dim, num_heads=num_heads, qkv_bias=True)
        self.norm_q, self.norm_k, self.norm2 = (nn.LayerNorm(embed_dim) for _ in range(3))
        self.mlp = feed_forward(embed_dim, mlp_dim, 0.0)

    def forward(self, rays: torch.Tensor, tokens: torch.Tensor, pos_rays: Positions, pos_tokens: Positions,
                encoding: PositionEncoding, layer_idx: int) -> torch.Tensor:
        rays = rays + self.attn(self.norm_q(rays), pos_rays, encoding, layer_idx, memory=self.norm_k(tokens),
                                pos_k=pos_tokens)
        return rays + self.mlp(self.norm2(rays))


@MODELS.register_module()
class NovelViewTransformer(BaseModel):
    """Renders target rays of a scene from its input views (see the module docstring).

    ``forward(inputs, data_samples, mode)``: inputs hold ``images`` (B, Vi, 3, H, W) in [0, 1], ``intrinsics``
    (B, Vi, 3, 3), ``extrinsics`` (B, Vi, 4, 4) (canonical world -> camera), ``target_intrinsics`` /
    ``target_extrinsics`` (B, Vt, ...), ``rays`` (B, Vt·R, 2) pixel (row, col) per target ray (view-major) and, for
    the loss and the metrics, ``rgb`` (B, Vt·R, 3) and ``objects`` (B, Vt·R). 'loss' -> ``{'loss': MSE}``; 'tensor'
    -> (B, Vt·R, 3) colours; 'predict' (every pixel of every target view) -> per scene dict(pred, target (Vt, 3, H,
    W), objects (Vt, H, W), scene_id).

    Args:
        encoding: the camera encoding (GTA, CameraRays, NoPE, ...), built with this model's facts.
        embed_dim, num_heads, encoder_depth, decoder_depth, mlp_dim: transformer sizes.
        cnn_channels: widths of the view CNN (len 4: stride 8).
    """

    def __init__(self, encoding: dict | str | PositionEncoding, embed_dim: int = 128, num_heads: int = 4,
                 encoder_depth: int = 4, decoder_depth: int = 2, mlp_dim: int = 256,
                 cnn_channels: tuple[int, ...] = (32, 64, 96, 128), data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.stride = 2 ** (len(cnn_channels) - 1)
        self.cnn = view_cnn(tuple(cnn_channels), embed_dim)
        self.encoder = MultiViewEncoder(embed_dim, encoder_depth, num_heads, mlp_dim)
        self.decoder = nn.ModuleList(RayDecoderLayer(embed_dim, num_heads, mlp_dim) for _ in range(decoder_depth))
        self.query = nn.Parameter(torch.zeros(embed_dim))
        nn.init.normal_(self.query, std=0.02)
        self.head = nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, mlp_dim), nn.ReLU(inplace=True),
                                  nn.Linear(mlp_dim, 3))
        self.encoding = build_encoding(encoding, embed_dim=embed_dim, num_heads=num_heads,
                                       head_dim=embed_dim // num_heads, depth=encoder_depth + decoder_depth)
        check_encoding_fits(self.encoding, HOST)

    def positions(self, inputs: Mapping[str, torch.Tensor]) -> tuple[Positions, Positions]:
        """The input views' token grid and the target rays, each with its cameras."""
        images = inputs['images']
        batch, views, _, height, width = images.shape
        if height % self.stride or width % self.stride:
            raise ValueError(f'NovelViewTransformer: the {height}x{width} views do not divide by the CNN stride '
                             f'{self.stride}; render the set at a multiple of {self.stride}.')
        size = (height, width)
        input_cameras = Cameras(inputs['intrinsics'], inputs['extrinsics'], size)
        target_cameras = Cameras(inputs['target_intrinsics'], inputs['target_extrinsics'], size)
        pos_tokens = Positions((height // self.stride, width // self.stride), num_views=views,
                               camera=CameraGeometry(input_cameras), device=images.device)
        pos_rays = Positions(coords=inputs['rays'].float(), num_views=target_cameras.num_views,
                             camera=CameraGeometry(target_cameras), device=images.device)
        return pos_tokens, pos_rays

    def render(self, inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """(B, Vt·R, 3) colours in [0, 1] of the target rays."""
        images = inputs['images']
        batch, views = images.shape[:2]
        pos_tokens, pos_rays = self.positions(inputs)
        tokens = self.cnn(images.flatten(0, 1)).flatten(2).transpose(1, 2).reshape(batch, -1, self.query.numel())
        hooks = self.encoding.active_hooks
        self.encoding.prepare(pos_tokens)
        self.encoding.prepare(pos_rays)
        if 'embed' in hooks:
            tokens = self.encoding.embed(tokens, pos_tokens)
        tokens = self.encoder(tokens, pos_tokens, self.encoding)
        rays = self.query.expand(batch, pos_rays.num_positions, -1)
        if 'embed' in hooks:
            rays = self.encoding.embed(rays, pos_rays)
        for index, layer in enumerate(self.decoder):
            rays = layer(rays, tokens, pos_rays, pos_tokens, self.encoding, len(self.encoder.layers) + index)
        return self.head(rays).sigmoid()

    def forward(self, inputs: Mapping[str, torch.Tensor], data_samples: list[Mapping[str, Any]] | None = None,
                mode: str = 'tensor') -> Any:
        if mode not in ('loss', 'predict', 'tensor'):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
        colours = self.render(inputs)
        if mode == 'tensor':
            return colours
        if mode == 'loss':
            return {'loss': F.mse_loss(colours.float(), inputs['rgb'].float())}
        batch, targets = inputs['target_extrinsics'].shape[:2]
        height, width = inputs['images'].shape[-2:]
        if colours.shape[1] != targets * height * width:
            raise ValueError(f"mode='predict' renders whole target views: {colours.shape[1]} rays are not the "
                             f'{targets}x{height}x{width} pixels of the targets; build the dataset with '
                             f'rays_per_view=None for evaluation.')
        pred = colours.float().reshape(batch, targets, height, width, 3).permute(0, 1, 4, 2, 3)
        target = inputs['rgb'].float().reshape(batch, targets, height, width, 3).permute(0, 1, 4, 2, 3)
        objects = inputs['objects'].reshape(batch, targets, height, width)
        return [dict(pred=pred[index], target=target[index], objects=objects[index],
                     scene_id=(data_samples[index].get('scene_id') if data_samples else None))
                for index in range(batch)]
