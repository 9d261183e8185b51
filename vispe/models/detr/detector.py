"""DETR (Carion et al., ECCV 2020) for mmengine's Runner, with any vispe 2D encoding in its encoder."""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import nn
from torchvision.ops import box_convert

from vispe.geometry import Cameras
from vispe.models.detr.criterion import SetCriterion
from vispe.models.detr.matcher import HungarianMatcher
from vispe.models.detr.transformer import DETRDecoder, DETREncoder
from vispe.models.entry_checks import entry_checks
from vispe.models.inputs import check_image_batch, check_nonfinite_option, check_pixel_masks
from vispe.registry import MODELS


class BoxHead(nn.Sequential):
    """DETR's box MLP: Linear-ReLU ×(layers−1), Linear to (cx, cy, w, h), sigmoid."""

    def __init__(self, embed_dim: int, layers: int = 3) -> None:
        modules: list[nn.Module] = []
        for _ in range(layers - 1):
            modules += [nn.Linear(embed_dim, embed_dim), nn.ReLU(inplace=True)]
        super().__init__(*modules, nn.Linear(embed_dim, 4), nn.Sigmoid())


@MODELS.register_module()
class DETR(BaseModel):
    """Backbone → 1×1 projection → encoder (vispe attention + encoding) → decoder with learned object
    queries → class and box heads on every decoder layer.

    Batches are padded (``masks`` True on real pixels, each image in the top-left corner, as
    ``vispe.detr_collate`` makes them; DETR's original code uses True = padding); the mask is resized to
    the feature grid as in DETR, every encoding sees each image's real grid and padded cells are never
    attended to. The decoder's cross-attention has its own encoding (``decoder=dict(encoding=...)``, default
    DETR's sine embedding of the real grid on the memory keys); any 2D encoding reaches it (see
    :class:`~vispe.models.detr.DETRDecoder`).

    ``forward(inputs, masks, data_samples, mode)``: 'loss' -> weighted losses (with ``d{i}.`` auxiliary
    ones); 'predict' -> per image ``dict(image_id, boxes (Q, 4) xyxy in original pixels, scores (Q,),
    labels (Q,))`` (boxes stay normalised without data samples); 'tensor' -> ``dict(logits (L, B, Q, K+1),
    boxes (L, B, Q, 4))``.

    Args:
        backbone: config of a module returning one feature map, with ``channels`` and ``stride``
            (e.g. ``dict(type='TimmFeatures', model_name='resnet50')``).
        encoder: :class:`DETREncoder` arguments (``encoding=dict(type=...)``, depth, heads, ...).
        decoder: :class:`DETRDecoder` arguments (``encoding=`` for its cross-attention).
        num_classes: K object classes.
        num_queries: object queries (100 in DETR).
        embed_dim: transformer width d (256).
        image_size: training input size (px), which sets the encoder's reference grid.
        matcher, loss: weights (class 1, bbox 5, GIoU 2; no-object 0.1).
        aux_loss: losses on every decoder layer.
        nonfinite_inputs: what a batch with NaN or ±inf pixels does: 'raise' (ValueError), 'warn'
            (RuntimeWarning) or 'ignore' (no check). Also a plain attribute.

    Inputs and masks are checked before anything runs (:mod:`vispe.models.inputs`: rank, channels, sizes of
    at least one stride, dtype, non-finite pixels, the mask's dtype, shape and convention), and the targets
    before matching (:func:`~vispe.models.detr.targets.check_targets`).
    """

    def __init__(self, backbone: dict, num_classes: int, encoder: dict | None = None, decoder: dict | None = None,
                 num_queries: int = 100, embed_dim: int = 256, image_size: int | tuple[int, int] = 800,
                 class_weight: float = 1.0, bbox_weight: float = 5.0, giou_weight: float = 2.0,
                 eos_coef: float = 0.1, aux_loss: bool = True, nonfinite_inputs: str = 'raise',
                 data_preprocessor: dict | None = None,
                 init_cfg: dict | None = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor or entry_checks(nonfinite_inputs), init_cfg=init_cfg)
        self.nonfinite_inputs = check_nonfinite_option(nonfinite_inputs)
        self.backbone = MODELS.build(backbone)
        stride = self.backbone.stride
        height, width = (image_size, image_size) if isinstance(image_size, int) else image_size
        grid_size = (-(-height // stride), -(-width // stride))
        self.input_proj = nn.Conv2d(self.backbone.channels, embed_dim, kernel_size=1)
        self.encoder = DETREncoder(embed_dim=embed_dim, grid_size=grid_size, stride=stride, **(encoder or {}))
        self.decoder = DETRDecoder(embed_dim=embed_dim, grid_size=grid_size, stride=stride, **(decoder or {}))
        self.query_embed = nn.Embedding(num_queries, embed_dim)
        self.class_embed = nn.Linear(embed_dim, num_classes + 1)
        self.bbox_embed = BoxHead(embed_dim)
        self.num_classes = num_classes
        self.aux_loss = aux_loss
        self.criterion = SetCriterion(num_classes, HungarianMatcher(class_weight, bbox_weight, giou_weight),
                                      class_weight, bbox_weight, giou_weight, eos_coef)

    def feature_mask(self, masks: torch.Tensor | None, features: torch.Tensor) -> torch.Tensor | None:
        """The pixel mask (B, H, W) resized (nearest) to the feature grid, as DETR does."""
        if masks is None:
            return None
        return F.interpolate(masks[None].float(), size=features.shape[-2:])[0].bool()

    def check_inputs(self, inputs: torch.Tensor, masks: torch.Tensor | None) -> None:
        """Images (B, C, H, W) of at least one stride a side, on the backbone's device and of its dtype (or
        under autocast), finite (by ``nonfinite_inputs``), and their masks
        (:func:`~vispe.models.inputs.check_pixel_masks`)."""
        stride = self.backbone.stride
        check_image_batch(inputs, getattr(self.backbone, 'in_chans', None), next(self.backbone.parameters(), None),
                          self.nonfinite_inputs, min_side=stride,
                          min_side_reason=f'the backbone reduces by {stride}, so each side needs {stride} px for one '
                                          f'feature cell',
                          channels_fix=', or build the backbone with in_chans={channels}')
        check_pixel_masks(masks, inputs)

    def predict_sets(self, inputs: torch.Tensor, masks: torch.Tensor | None = None,
                     data_samples: list[dict[str, Any]] | None = None) -> dict[str, torch.Tensor]:
        """Class logits (L, B, Q, K+1) and boxes (L, B, Q, 4), normalised (cx, cy, w, h), of every decoder
        layer (only the last without ``aux_loss``). inputs (B, 3, H, W), masks (B, H, W) True on real pixels.
        Samples that carry cameras (``intrinsics``/``cam2img``, ``lidar2cam``, ``pad_shape``) put them into the
        positions every encoding sees (:meth:`vispe.geometry.Cameras.from_batch`)."""
        self.check_inputs(inputs, masks)
        cameras = Cameras.from_batch(data_samples, inputs.device)
        if cameras is not None:
            cameras.check_images(inputs.unsqueeze(1))
        features = self.backbone(inputs)
        valid_mask = self.feature_mask(masks, features)
        features = self.input_proj(features)
        pos = self.encoder.positions(features, valid_mask, cameras)
        memory = self.encoder(features, valid_mask, pos)
        query_pos = self.query_embed.weight[None].expand(len(inputs), -1, -1)
        key_mask = None if valid_mask is None else valid_mask.flatten(1)
        hidden = self.decoder(query_pos, memory, pos, key_mask)
        if not self.aux_loss:
            hidden = hidden[-1:]
        return dict(logits=self.class_embed(hidden), boxes=self.bbox_embed(hidden))

    @staticmethod
    def targets(data_samples: list[dict[str, Any]], device: torch.device) -> list[dict[str, Any]]:
        """Each sample's ``labels``, ``boxes`` (moved to ``device``) and ``image_id``; what is missing stays
        missing and non-tensors stay as they are, for the criterion's checks to report."""
        targets = []
        for index, sample in enumerate(data_samples):
            if not isinstance(sample, Mapping):
                raise TypeError(f'data_samples[{index}] must be a dict with labels and boxes (what CocoDetection '
                                f'gives); got {type(sample).__name__}.')
            targets.append({key: value.to(device) if isinstance(value, torch.Tensor) and key != 'image_id' else value
                            for key, value in sample.items() if key in ('labels', 'boxes', 'image_id')})
        return targets

    def postprocess(self, logits: torch.Tensor, boxes: torch.Tensor,
                    data_samples: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        """Scores and labels (best real class per query), boxes scaled to each original image."""
        scores, labels = logits.float().softmax(-1)[..., :-1].max(-1)
        results = []
        for index, (image_scores, image_labels, image_boxes) in enumerate(zip(scores, labels, boxes.float())):
            sample = data_samples[index] if data_samples is not None else {}
            height, width = (int(v) for v in sample.get('orig_size', (1, 1)))
            xyxy = box_convert(image_boxes, 'cxcywh', 'xyxy') * image_boxes.new_tensor([width, height, width, height])
            results.append(dict(image_id=sample.get('image_id'), boxes=xyxy, scores=image_scores, labels=image_labels))
        return results

    def forward(self, inputs: torch.Tensor, masks: torch.Tensor | None = None,
                data_samples: list[dict[str, Any]] | None = None, mode: str = 'tensor') -> Any:
        if mode not in ('loss', 'predict', 'tensor'):
            raise ValueError(f"mode must be 'loss', 'predict' or 'tensor'; got {mode!r}.")
        if mode == 'loss' and data_samples is None:
            raise ValueError("mode='loss' needs data_samples with 'labels' and 'boxes' per image.")
        if data_samples is not None and isinstance(inputs, torch.Tensor) and len(data_samples) != len(inputs):
            raise ValueError(f'{len(data_samples)} data samples for a batch of {len(inputs)} images: give one per '
                             f'image, in the order of the batch (vispe.detr_collate does).')
        outputs = self.predict_sets(inputs, masks, data_samples)
        if mode == 'tensor':
            return outputs
        if mode == 'loss':
            return self.criterion(outputs['logits'], outputs['boxes'], self.targets(data_samples, inputs.device))
        return self.postprocess(outputs['logits'][-1], outputs['boxes'][-1], data_samples)
