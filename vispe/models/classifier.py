"""An image classifier for mmengine's Runner: any backbone that returns logits, cross-entropy loss."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel

from vispe.registry import MODELS


@MODELS.register_module()
class ImageClassifier(BaseModel):
    """Wraps a classification backbone (e.g. ``dict(type='TimmViT', ...)``) for mmengine.

    ``forward(inputs, label, mode)``: 'loss' -> ``{'loss': cross-entropy}``; 'predict' -> one dict per
    image with ``scores`` (num_classes,) and ``label``; 'tensor' -> logits (B, num_classes).

    Args:
        backbone: config (or module) of a network mapping images (B, C, H, W) to logits.
        label_smoothing: cross-entropy label smoothing.
    """

    def __init__(self, backbone: dict | torch.nn.Module, label_smoothing: float = 0.0,
                 data_preprocessor: dict | None = None, init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        self.backbone = MODELS.build(backbone) if isinstance(backbone, dict) else backbone
        self.label_smoothing = label_smoothing

    def forward(self, inputs: torch.Tensor, label: torch.Tensor | None = None,
                mode: str = 'tensor') -> Any:
        logits = self.backbone(inputs)
        if mode == 'tensor':
            return logits
        if mode == 'loss':
            if label is None:
                raise ValueError("mode='loss' needs labels: the dataset items must carry 'label'.")
            return {'loss': F.cross_entropy(logits, label, label_smoothing=self.label_smoothing)}
        if mode == 'predict':
            scores = logits.float().softmax(-1)
            labels = label if label is not None else [None] * len(scores)
            return [dict(scores=score, label=None if target is None else int(target))
                    for score, target in zip(scores, labels)]
        raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
