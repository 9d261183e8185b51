"""3DPPE's camera-aware hybrid depth module (Shu et al., ICCV 2023; drilistbox/3DPPE ``CameraAwareDepthNet``).

Image features of every view, ``(N, C, h, w)`` with N = B·V, become

- depth logits ``(N, D, h, w)`` over D uniform bins ``b_i = start + i·(stop − start)/(D − 1)``, both ends
  included (16 bins from 1 to 61.2 m: 1, 5.013, …, 61.2);
- a direct ("PGD-style") depth ``(N, 1, h, w)`` in metres, unbounded;
- context features ``(N, C_ctx, h, w)``, which replace the image features as keys and values;
- the categorical depth ``Σ_i softmax(logits)_i · b_i`` and the hybrid depth
  ``d̂ = σ(λ)·direct + (1 − σ(λ))·categorical`` ``(N, 1, h, w)``, λ (``fuse_lambda``) learnable from 1e-4.

Camera awareness is SE gating from the cameras, as the reference feeds it:

- depth branch: ``BatchNorm1d(6)`` of ``K[:2, :]`` (row-major: fx, s, cx, 0, fy, cy), K the 3×3 intrinsics of
  the *augmented* image in pixels (``Cameras.intrinsics``);
- context branch: ``BatchNorm1d(18)`` of ``K[:2, :]`` then ``E[:3, :]`` (12 values, row-major), E the 4×4
  ``lidar2cam @ A⁻¹`` of the current (scene-augmented) frame (``Cameras.extrinsics``).

No other normalisation: the batch norm alone scales the raw pixel and metre values.

Module and parameter names follow the reference, so a released 3DPPE checkpoint's
``pts_bbox_head.depth_net.*`` keys load one to one (``fuse_lambda`` included; the head's ``project`` buffer
holds the bins, which here are a non-persistent buffer ``bins``). The reference's mmcv ``DCN`` (DCNv1,
``DeformConv2dPack``: no modulation mask, conv groups 4, one offset group) runs on
``torchvision.ops.deform_conv2d`` with the same offset layout; ``with_dcn=False`` uses a plain grouped 3×3
convolution of the same weight shape for CPU-size models.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from timm.layers import Mlp
from timm.models.resnet import BasicBlock
from torch import nn
from torchvision.ops import deform_conv2d

from vispe.geometry.checks import check_depth_range

__all__ = ['ASPP', 'CameraAwareDepthNet', 'DeformConv2dPack', 'DepthNetOutput', 'SELayer', 'categorical_depth',
           'fuse_depth', 'uniform_depth_bins']

HEAD_GROUPS = 4  # conv groups of the reference's 3×3 head convolutions (mmcv DCN, groups=4)


def uniform_depth_bins(num: int, start: float = 1.0, stop: float = 61.2,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """(num,) float32 bins ``start + i·(stop − start)/(num − 1)``, i = 0..num−1: both ends included.

    These are 3DPPE's categorical-depth bins (``PETRDepthHeadV2.project``), not PETR's UD bins
    (:func:`vispe.geometry.depth_bins`, which stop one step short of ``stop``).
    """
    num = check_depth_range('uniform_depth_bins', num, start, stop, min_num=2)
    index = torch.arange(num, device=device, dtype=torch.float64)
    return (start + index * (stop - start) / (num - 1)).float()


def categorical_depth(logits: torch.Tensor, bins: torch.Tensor) -> torch.Tensor:
    """Expected depth ``Σ_i softmax(logits)_i · b_i`` (3DPPE's ``integral``): (N, D, h, w) -> (N, 1, h, w) float32."""
    if logits.ndim != 4 or logits.shape[1] != bins.numel():
        raise ValueError(f'logits must have shape (N, D={bins.numel()}, h, w), got {tuple(logits.shape)}')
    probs = logits.float().permute(0, 2, 3, 1).softmax(dim=-1)
    return F.linear(probs, bins.float()).unsqueeze(1)


def fuse_depth(direct: torch.Tensor, categorical: torch.Tensor, fuse_lambda: torch.Tensor) -> torch.Tensor:
    """Hybrid depth ``σ(λ)·direct + (1 − σ(λ))·categorical``; inputs of one shape, λ a scalar tensor."""
    if direct.shape != categorical.shape:
        raise ValueError(f'direct and categorical depth must have one shape, got {tuple(direct.shape)} and '
                         f'{tuple(categorical.shape)}')
    alpha = torch.sigmoid(fuse_lambda.float())
    return alpha * direct.float() + (1 - alpha) * categorical.float()


class DepthNetOutput(NamedTuple):
    """Outputs of :class:`CameraAwareDepthNet` for N = B·V images of an h×w feature map."""

    logits: torch.Tensor  # (N, D, h, w) depth-bin logits, before softmax
    direct: torch.Tensor | None  # (N, 1, h, w) direct depth in metres; None without the direct head
    context: torch.Tensor  # (N, C_ctx, h, w) context features
    categorical: torch.Tensor  # (N, 1, h, w) float32 Σ softmax·bins
    depth: torch.Tensor  # (N, 1, h, w) float32 hybrid depth (the categorical depth without the direct head)


class ConvModule(nn.Module):
    """3×3 convolution (no bias), BatchNorm, ReLU: mmcv ``ConvModule`` key names ``conv``, ``bn``."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.activate = nn.ReLU(inplace=True)
        nn.init.kaiming_normal_(self.conv.weight, mode='fan_out', nonlinearity='relu')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activate(self.bn(self.conv(x)))


class SELayer(nn.Module):
    """Squeeze-and-excitation gate from an external vector: ``x · σ(expand(ReLU(reduce(x_se))))``.

    ``x`` (N, C, h, w), ``x_se`` (N, C, 1, 1) (the camera MLP's output).
    """

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv_reduce = nn.Conv2d(channels, channels, 1)
        self.act1 = nn.ReLU()
        self.conv_expand = nn.Conv2d(channels, channels, 1)
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor, x_se: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.conv_expand(self.act1(self.conv_reduce(x_se))))


class _ASPPBranch(nn.Module):
    """One atrous branch: conv (no bias), BatchNorm, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int) -> None:
        super().__init__()
        padding = 0 if kernel_size == 1 else dilation
        self.atrous_conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=padding, dilation=dilation,
                                     bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.atrous_conv(x)))


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling (DeepLabv3) as in the 3DPPE / BEVDepth depth nets.

    Branches: 1×1, 3×3 at dilations 6, 12, 18, and image pooling; concatenated (5·C), 1×1 conv, BatchNorm,
    ReLU, dropout. (N, C_in, h, w) -> (N, C, h, w).
    """

    def __init__(self, in_channels: int, mid_channels: int = 256, dropout: float = 0.5) -> None:
        super().__init__()
        self.aspp1 = _ASPPBranch(in_channels, mid_channels, 1, 1)
        self.aspp2 = _ASPPBranch(in_channels, mid_channels, 3, 6)
        self.aspp3 = _ASPPBranch(in_channels, mid_channels, 3, 12)
        self.aspp4 = _ASPPBranch(in_channels, mid_channels, 3, 18)
        self.global_avg_pool = nn.Sequential(
            nn.AdaptiveAvgPool2d((1, 1)),
            nn.Conv2d(in_channels, mid_channels, 1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(),
        )
        self.conv1 = nn.Conv2d(5 * mid_channels, mid_channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.global_avg_pool(x).expand(-1, -1, *x.shape[-2:])
        branches = [self.aspp1(x), self.aspp2(x), self.aspp3(x), self.aspp4(x), pooled]
        return self.dropout(self.relu(self.bn1(self.conv1(torch.cat(branches, dim=1)))))


class DeformConv2dPack(nn.Module):
    """Deformable convolution v1 with its own offset convolution (mmcv ``DeformConv2dPack``, config type 'DCN').

    ``weight`` (C_out, C_in/groups, k, k), no bias; ``conv_offset`` predicts 2·k² offsets per pixel in mmcv's
    and torchvision's layout (dy, dx per kernel tap, row-major taps), zero-initialised, so the layer starts as
    a plain grouped convolution. Stride 1, 'same' padding.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, groups: int = 1) -> None:
        super().__init__()
        if in_channels % groups or out_channels % groups:
            raise ValueError(f'DeformConv2dPack: channels ({in_channels} -> {out_channels}) must be divisible by '
                             f'groups={groups}')
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.empty(out_channels, in_channels // groups, kernel_size, kernel_size))
        nn.init.kaiming_uniform_(self.weight, nonlinearity='relu')
        self.conv_offset = nn.Conv2d(in_channels, 2 * kernel_size * kernel_size, kernel_size, padding=self.padding)
        nn.init.zeros_(self.conv_offset.weight)
        nn.init.zeros_(self.conv_offset.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offset = self.conv_offset(x)
        return deform_conv2d(x, offset.to(x.dtype), self.weight.to(x.dtype), padding=(self.padding, self.padding))


def _head_conv(channels: int, with_dcn: bool) -> nn.Module:
    """The reference's 3×3 head convolution: DCN (groups 4) or a plain grouped conv of the same weight shape."""
    if with_dcn:
        return DeformConv2dPack(channels, channels, 3, groups=HEAD_GROUPS)
    return nn.Conv2d(channels, channels, 3, padding=1, groups=HEAD_GROUPS, bias=False)


class CameraAwareDepthNet(nn.Module):
    """3DPPE's camera-aware depth net with depth correction and a direct (PGD) depth head.

    Layers (reference key names): ``reduce_conv`` (3×3 conv–BN–ReLU, C -> C_mid); ``bn1`` BatchNorm1d(18),
    ``context_mlp`` (18 -> C_mid -> C_mid), ``context_se``, ``context_conv`` (1×1 to C_ctx, or three
    BasicBlocks and the 1×1 with ``with_context_encoder``); ``bn2`` BatchNorm1d(6), ``depth_mlp``,
    ``depth_se``; ``depth_stem`` (three BasicBlocks and ASPP); ``depth_prob_conv`` (3×3 DCN, BN, 1×1 to D);
    ``depth_direct_conv`` (3×3 DCN, BN, ReLU, 1×1 to 1) and ``fuse_lambda`` (with ``with_pgd``).

    Args:
        in_channels: C of the image features.
        mid_channels: C_mid, a multiple of 4 (the head convolutions have 4 groups).
        context_channels: C_ctx of the context output.
        depth_bins: D (the reference's ``depth_channels``; 16 in 3DPPE's main config).
        depth_start, depth_stop: first and last bin, metres (``depth_start`` and ``position_range[3]``).
        with_depth_correction: the BasicBlock stem and 3×3 heads; False gives the reference's plain 1×1 depth
            head on the gated features (the direct head keeps its 3×3 conv).
        with_aspp: end the stem with ASPP (reference: always, with depth correction).
        with_dcn: deformable 3×3 head convs (reference); False uses plain 3×3 convs.
        with_pgd: the direct depth head and the learnable mix λ (reference ``with_pgd``).
        with_context_encoder: three BasicBlocks before the context 1×1 conv.
        aspp_dropout: dropout after ASPP (0.5 in the reference).

    Forward: ``features`` (N, C, h, w), ``intrinsics`` (..., 3, 3) and ``extrinsics`` (..., 3 or 4, 4) whose
    leading dims hold N matrices (e.g. (B, V) or (B·V,)), in the order of the features. Returns
    :class:`DepthNetOutput`.
    """

    def __init__(self, in_channels: int, mid_channels: int, context_channels: int, depth_bins: int = 16,
                 depth_start: float = 1.0, depth_stop: float = 61.2, with_depth_correction: bool = True,
                 with_aspp: bool = True, with_dcn: bool = True, with_pgd: bool = True,
                 with_context_encoder: bool = False, aspp_dropout: float = 0.5) -> None:
        super().__init__()
        if mid_channels % HEAD_GROUPS:
            raise ValueError(f'CameraAwareDepthNet: mid_channels={mid_channels} must be a multiple of '
                             f'{HEAD_GROUPS} (the head convolutions have {HEAD_GROUPS} groups)')
        self.in_channels, self.mid_channels, self.context_channels = in_channels, mid_channels, context_channels
        self.depth_channels = depth_bins
        self.depth_start, self.depth_stop = float(depth_start), float(depth_stop)
        self.with_pgd = with_pgd
        self.register_buffer('bins', uniform_depth_bins(depth_bins, depth_start, depth_stop), persistent=False)

        self.reduce_conv = ConvModule(in_channels, mid_channels)
        self.bn1 = nn.BatchNorm1d(18)
        self.context_mlp = Mlp(18, mid_channels, mid_channels, act_layer=nn.ReLU)
        self.context_se = SELayer(mid_channels)
        context_out = nn.Conv2d(mid_channels, context_channels, 1)
        if with_context_encoder:
            self.context_conv = nn.Sequential(*[BasicBlock(mid_channels, mid_channels) for _ in range(3)],
                                              context_out)
        else:
            self.context_conv = context_out

        self.bn2 = nn.BatchNorm1d(6)
        self.depth_mlp = Mlp(6, mid_channels, mid_channels, act_layer=nn.ReLU)
        self.depth_se = SELayer(mid_channels)
        if with_depth_correction:
            stem = [BasicBlock(mid_channels, mid_channels) for _ in range(3)]
            if with_aspp:
                stem.append(ASPP(mid_channels, mid_channels, aspp_dropout))
            self.depth_stem = nn.Sequential(*stem)
            self.depth_prob_conv = nn.Sequential(_head_conv(mid_channels, with_dcn), nn.BatchNorm2d(mid_channels),
                                                 nn.Conv2d(mid_channels, depth_bins, 1))
        else:
            self.depth_stem = nn.Identity()
            self.depth_prob_conv = nn.Conv2d(mid_channels, depth_bins, 1)

        if with_pgd:
            self.fuse_lambda = nn.Parameter(torch.tensor(1e-4))
            self.depth_direct_conv = nn.Sequential(_head_conv(mid_channels, with_dcn), nn.BatchNorm2d(mid_channels),
                                                   nn.ReLU(), nn.Conv2d(mid_channels, 1, 1))

    @property
    def alpha(self) -> torch.Tensor:
        """σ(λ), the weight of the direct depth in the hybrid depth (0.500025 at initialisation)."""
        if not self.with_pgd:
            raise RuntimeError('CameraAwareDepthNet has no direct depth head and no mix: build it with '
                               'with_pgd=True')
        return torch.sigmoid(self.fuse_lambda)

    def _camera_rows(self, matrices: torch.Tensor, name: str, shapes: tuple[tuple[int, int], ...], keep: int,
                     count: int) -> torch.Tensor:
        """The top ``keep`` rows of ``count`` camera matrices (..., r, c), row-major: (count, keep·c)."""
        if matrices.ndim < 3 or tuple(matrices.shape[-2:]) not in shapes:
            allowed = ' or '.join(f'(..., {r}, {c})' for r, c in shapes)
            raise ValueError(f'CameraAwareDepthNet: {name} must have shape {allowed}, got {tuple(matrices.shape)}')
        if math.prod(matrices.shape[:-2]) != count:
            raise ValueError(f'CameraAwareDepthNet: {name} holds {math.prod(matrices.shape[:-2])} matrices for '
                             f'{count} feature maps; pass one per view, in the order of the features (B·V)')
        return matrices[..., :keep, :].reshape(count, -1).to(self.bn1.weight.dtype)

    def forward(self, features: torch.Tensor, intrinsics: torch.Tensor, extrinsics: torch.Tensor) -> DepthNetOutput:
        if features.ndim != 4 or features.shape[1] != self.in_channels:
            raise ValueError(f'CameraAwareDepthNet: features must have shape (B·V, {self.in_channels}, h, w), got '
                             f'{tuple(features.shape)}')
        count = features.shape[0]
        k_rows = self._camera_rows(intrinsics, 'intrinsics', ((3, 3),), 2, count)
        e_rows = self._camera_rows(extrinsics, 'extrinsics', ((3, 4), (4, 4)), 3, count)

        x = self.reduce_conv(features)
        context_gate = self.context_mlp(self.bn1(torch.cat([k_rows, e_rows], dim=-1)))[..., None, None]
        context = self.context_conv(self.context_se(x, context_gate.to(x.dtype)))
        depth_gate = self.depth_mlp(self.bn2(k_rows))[..., None, None]
        stem = self.depth_stem(self.depth_se(x, depth_gate.to(x.dtype)))
        logits = self.depth_prob_conv(stem)
        categorical = categorical_depth(logits, self.bins)
        if not self.with_pgd:
            return DepthNetOutput(logits, None, context, categorical, categorical)
        direct = self.depth_direct_conv(stem)
        return DepthNetOutput(logits, direct, context, categorical, fuse_depth(direct, categorical, self.fuse_lambda))
