"""An image classifier for mmengine's Runner: any backbone that returns logits, cross-entropy loss."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel, initialize
from timm.data import Mixup

from vispe.models.entry_checks import CheckedDataPreprocessor, entry_checks
from vispe.registry import MODELS


@MODELS.register_module()
class ImageClassifier(BaseModel):
    """Wraps a classification backbone (e.g. ``dict(type='TimmViT', ...)``) for mmengine.

    ``forward(inputs, label, mode)``: 'loss' -> ``{'loss': ...}``; 'predict' -> one dict per image with
    ``scores`` (num_classes,) softmax, ``logits`` and ``label``; 'tensor' -> logits (B, num_classes). With
    ``loss='bce'`` the labels may be multi-label answers (B, num_classes) of 0 and 1 (the Three Cell Experiment).

    Args:
        backbone: config (or module) of a network mapping images (B, C, H, W) to logits.
        label_smoothing: label smoothing of hard targets.
        loss: 'ce' (softmax cross-entropy) or 'bce' (binary cross-entropy on one-hot or mixed targets).
        batch_augment: timm ``Mixup`` arguments (mixup/cutmix on training batches), e.g.
            ``dict(mixup_alpha=0.8, cutmix_alpha=1.0, num_classes=1000)``.
        head_bias_init: constant for the classifier bias (LookHere: −6.9 ≈ log(1/1000) with BCE); the
            output layer's bias of a two-layer head.
        encoding_losses: weights of the encoding's own training regularisers by name (its ``loss_terms``, e.g.
            SeqPE's ``dict(contrastive=0.1, distillation=0.1)``), logged and summed as ``loss_<name>``.
    """

    def __init__(self, backbone: dict | torch.nn.Module, label_smoothing: float = 0.0, loss: str = 'ce',
                 batch_augment: dict | None = None, head_bias_init: float | None = None,
                 encoding_losses: dict[str, float] | None = None, data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or entry_checks(), init_cfg=init_cfg)
        if loss not in ('ce', 'bce'):
            raise ValueError(f"loss must be 'ce' or 'bce'; got {loss!r}.")
        self.backbone = MODELS.build(backbone) if isinstance(backbone, dict) else backbone
        if isinstance(self.data_preprocessor, CheckedDataPreprocessor):
            self.data_preprocessor.nonfinite_inputs = getattr(self.backbone, 'nonfinite_inputs', 'raise')
        self.label_smoothing = label_smoothing
        self.loss = loss
        self.mixup = Mixup(**batch_augment) if batch_augment else None
        self.encoding_losses = self.check_encoding_losses(dict(encoding_losses or {}))
        if head_bias_init is not None:
            head = self.backbone.get_classifier()
            # a two-layer head (create_vit's head_hidden_dim): the bias of its output layer, as LookHere's
            torch.nn.init.constant_(getattr(head, 'fc2', head).bias, head_bias_init)

    def init_weights(self) -> None:
        """Keep the weights the model was built with; apply ``init_cfg`` if one is given.

        The backbone is initialised when it is built: timm's ViT init (or pretrained weights), then each
        encoding's own init as its paper has it, then ``head_bias_init``. mmengine's Runner calls
        ``init_weights()`` before training, and mmengine's default would call timm's
        ``VisionTransformer.init_weights`` again, which re-draws every ``nn.Linear`` in the model, the
        encodings' too (FourierFeatures' W_r got std 0.02 whatever its gamma), re-draws pretrained weights and
        zeroes the head bias.
        """
        if self.init_cfg:
            initialize(self, self.init_cfg)
        self._is_init = True

    @staticmethod
    def check_labels(label: torch.Tensor, batch_size: int, num_classes: int) -> None:
        """Hard labels are integers in [0, num_classes), one per image (cross-entropy would fail deep inside
        torch, or on a GPU with a device assert); soft targets are (B, num_classes) floats."""
        if label.ndim != 1 or label.is_floating_point() or len(label) != batch_size:
            if label.ndim == 2 and label.is_floating_point() and tuple(label.shape) == (batch_size, num_classes):
                return
            raise ValueError(f'Labels must be (B,) class indices or (B, {num_classes}) soft targets for a batch of '
                             f'{batch_size} images; got {tuple(label.shape)} {label.dtype}.')
        bad = (label < 0) | (label >= num_classes)
        if bool(bad.any()):
            index = int(bad.nonzero()[0])
            raise ValueError(f'Image {index} of the batch has label {int(label[index])}, outside 0..{num_classes - 1} '
                             f'(num_classes={num_classes}): fix the dataset, or build the model with more classes.')

    def check_encoding_losses(self, weights: dict[str, float]) -> dict[str, float]:
        """The weights, refused unless the backbone's encoding has every named regulariser and each weight is a
        finite number >= 0."""
        if not weights:
            return weights
        encoding = getattr(self.backbone, 'encoding', None)
        available = tuple(getattr(encoding, 'loss_terms', ()))
        unknown = sorted(set(weights) - set(available))
        if unknown:
            owner = type(encoding).__name__ if encoding is not None else 'This backbone'
            raise ValueError(f'encoding_losses names {unknown}, which {owner} does not compute; its regularisers: '
                             f'{", ".join(available) or "none"}.')
        for name, weight in weights.items():
            if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0 \
                    or weight == float('inf'):
                raise ValueError(f'encoding_losses[{name!r}] must be a finite weight >= 0; got {weight!r}.')
        return {name: float(weight) for name, weight in weights.items()}

    def with_encoding_losses(self, losses: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``losses`` and the weighted regularisers of the encoding, computed after this step's forward."""
        if self.encoding_losses:
            terms = self.backbone.encoding.training_losses(tuple(self.encoding_losses))
            losses.update({f'loss_{name}': weight * terms[name] for name, weight in self.encoding_losses.items()})
        return losses

    @staticmethod
    def plain_label(target: torch.Tensor | None) -> int | torch.Tensor | None:
        """A prediction's label: the class index of a hard label, the (num_classes,) answers of a multi-label one
        (:class:`~vispe.datasets.ThreeCells`)."""
        if target is None:
            return None
        return int(target) if target.ndim == 0 else target

    def loss_value(self, logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        """Cross-entropy (hard or soft targets) or binary cross-entropy (DeiT-III, LookHere)."""
        if self.loss == 'bce':
            if label.ndim == 1:
                label = F.one_hot(label, logits.shape[-1]).to(logits.dtype)
                label = label * (1 - self.label_smoothing) + self.label_smoothing / logits.shape[-1]
            return F.binary_cross_entropy_with_logits(logits, label)
        if label.ndim == 2:
            return torch.sum(-label * F.log_softmax(logits, dim=-1), dim=-1).mean()
        return F.cross_entropy(logits, label, label_smoothing=self.label_smoothing)

    def forward(self, inputs: torch.Tensor, label: torch.Tensor | None = None,
                mode: str = 'tensor') -> Any:
        if mode == 'loss':
            if label is None:
                raise ValueError("mode='loss' needs labels: the dataset items must carry 'label'.")
            if self.mixup is not None:
                self.check_labels(label, len(inputs), self.mixup.num_classes)
                inputs, label = self.mixup(inputs, label)
                return self.with_encoding_losses({'loss': self.loss_value(self.backbone(inputs), label)})
            logits = self.backbone(inputs)
            self.check_labels(label, len(inputs), logits.shape[-1])
            return self.with_encoding_losses({'loss': self.loss_value(logits, label)})
        logits = self.backbone(inputs)
        if mode == 'tensor':
            return logits
        if mode == 'predict':
            scores = logits.float().softmax(-1)
            labels = label if label is not None else [None] * len(scores)
            return [dict(scores=score, logits=row, label=self.plain_label(target))
                    for score, row, target in zip(scores, logits.float(), labels)]
        raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
