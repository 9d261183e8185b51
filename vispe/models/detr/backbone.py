"""A timm CNN as a detection backbone: one feature map and its stride."""
from __future__ import annotations

from typing import Any

import timm
import torch
from timm.layers import freeze_batch_norm_2d
from torch import nn

from vispe.registry import MODELS


@MODELS.register_module()
class TimmFeatures(nn.Module):
    """The feature map of one stage of a timm model (``features_only``), e.g. ResNet's C5 as in DETR.

    Args:
        model_name: a timm architecture (``resnet50``, ``resnet18``, ...).
        out_index: which feature level (timm's ``out_indices``; -1 = the last, stride 32).
        pretrained: load timm's weights (needs the hub or a local cache; DETR starts from ImageNet).
        frozen_bn: replace BatchNorm by frozen BatchNorm (DETR with a pretrained backbone).
        in_chans: input channels.
        model_kwargs: further arguments of ``timm.create_model`` (e.g. ``output_stride=16`` for DETR's DC5 models,
            whose last stage is dilated instead of strided; ``channels`` for a narrower ResNet).

    Attributes:
        channels, stride: of the returned map.
        in_chans: input channels (DETR checks its inputs against them).

    Shapes: (B, in_chans, H, W) -> (B, channels, ⌈H/stride⌉, ⌈W/stride⌉).
    """

    def __init__(self, model_name: str = 'resnet50', out_index: int = -1, pretrained: bool = False,
                 frozen_bn: bool = False, in_chans: int = 3, model_kwargs: dict[str, Any] | None = None) -> None:
        super().__init__()
        model_kwargs = dict(model_kwargs or {})
        probe = timm.create_model(model_name, pretrained=False, features_only=True, in_chans=in_chans, **model_kwargs)
        levels = len(probe.feature_info)
        index = out_index % levels
        self.body = timm.create_model(model_name, pretrained=pretrained, features_only=True,
                                      out_indices=(probe.feature_info.out_indices[index],), in_chans=in_chans,
                                      **model_kwargs)
        self.channels = self.body.feature_info.channels()[-1]
        self.stride = self.body.feature_info.reduction()[-1]
        self.in_chans = in_chans
        if frozen_bn:
            self.body = freeze_batch_norm_2d(self.body)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.body(images)[-1]
