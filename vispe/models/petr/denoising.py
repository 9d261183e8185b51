"""PETRv2's query denoising: noised ground-truth centres as extra training queries that reconstruct their boxes.

PETRv2 (Liu et al., ICCV 2023) trains its decoder with DN-DETR's denoising queries (its ``PETRv2DNHead``): in
training, every ground-truth box is copied into ``groups`` groups; a copy's centre moves by
``noise_scale · u ⊙ (l, w, h) / 2`` with ``u`` uniform in [-1, 1]³ (axis-aligned, the yaw ignored, as the
reference), is normalised to [0, 1] over ``pc_range`` and clamped; a copy with ``‖u‖₂ > split`` is labelled
background. The copies are reference points placed before the matching queries; a self-attention mask keeps the
matching queries from seeing them and each group from seeing the others (a group sees the matching queries).
Each copy is supervised by its own box, without matching: a focal class loss divided by
``copies · π/6 · split³`` (the reference's expected positive count) and an L1 box loss over all copies with the
yaw channels at weight 0, divided by the number of copies; both times ``weight`` and the head's class/box weights,
on every decoder layer. Inference is unchanged.

Shapes: per sample boxes (G, 7) and labels (G,) -> reference (B, P, 3) with P = groups · max G, and a
(P + Q, P + Q) bool self-attention mask (True = may attend, :class:`vispe.attention.Attention`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torchvision.ops import sigmoid_focal_loss

from vispe.geometry import normalize_points
from vispe.models.petr.box_coder import encode_boxes

YAW_CHANNELS = slice(6, 8)


@dataclass(frozen=True)
class QueryDenoising:
    """PETRv2's denoising settings (its nuScenes configs: 10 groups, noise scale 1.0, split 0.75, weight 1.0).

    Args:
        groups: noised copies of every ground-truth box (PETRv2's ``scalar``).
        noise_scale: the centre moves by at most ``noise_scale`` half box sizes per axis.
        split: copies with ``‖u‖₂ > split`` are background (the positive rate).
        weight: factor on the denoising losses (``dn_weight``).
    """

    groups: int = 10
    noise_scale: float = 1.0
    split: float = 0.75
    weight: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.groups, bool) or not isinstance(self.groups, int) or self.groups < 1:
            raise ValueError(f'denoising groups must be an integer >= 1 (PETRv2: 10); got {self.groups!r}.')
        for name, low in (('noise_scale', 0.0), ('split', 0.0), ('weight', 0.0)):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) \
                    or value < low or (name == 'split' and value == 0):
                raise ValueError(f'denoising {name} must be a finite number {">" if name == "split" else ">="} '
                                 f'{low}; got {value!r}.')


@dataclass(frozen=True)
class DenoisingQueries:
    """The denoising queries of one batch.

    Attributes:
        reference: (B, P, 3) reference points in [0, 1] (padding slots at 0).
        self_attn_mask: (P + Q, P + Q) bool, True where a query may attend.
        batch_index, slot_index: (M,) the sample and slot of every real copy.
        labels: (M,) class of every copy, ``num_classes`` for background.
        target_code: (M, C) the encoded box of every copy's ground truth.
    """

    reference: torch.Tensor
    self_attn_mask: torch.Tensor
    batch_index: torch.Tensor
    slot_index: torch.Tensor
    labels: torch.Tensor
    target_code: torch.Tensor

    @property
    def num_slots(self) -> int:
        return self.reference.shape[1]


def denoising_mask(groups: int, group_size: int, num_queries: int, device: torch.device) -> torch.Tensor:
    """(P + Q, P + Q) bool, True = may attend: matching queries see only each other, a group sees itself and the
    matching queries."""
    pad = groups * group_size
    group = torch.arange(pad, device=device) // group_size
    allowed = torch.ones(pad + num_queries, pad + num_queries, dtype=torch.bool, device=device)
    allowed[pad:, :pad] = False
    allowed[:pad, :pad] = group[:, None] == group[None, :]
    return allowed


def make_denoising_queries(config: QueryDenoising, boxes: list[torch.Tensor], labels: list[torch.Tensor],
                           num_classes: int, num_queries: int, pc_range: tuple[float, ...], code_size: int,
                           velocities: list[torch.Tensor] | None = None) -> DenoisingQueries | None:
    """Noised copies of the batch's boxes (G_b, 7) with labels (G_b,) (see the module docstring); None when the
    batch has no box."""
    counts = [len(sample) for sample in labels]
    group_size = max(counts, default=0)
    if group_size == 0:
        return None
    device = boxes[0].device
    groups = config.groups
    all_boxes = torch.cat(boxes).float()
    per_sample = velocities if velocities is not None else [None] * len(boxes)
    codes = torch.cat([encode_boxes(sample.float(), code_size, velocity)
                       for sample, velocity in zip(boxes, per_sample)])
    sample_of_box = torch.cat([torch.full((count,), index, dtype=torch.int64, device=device)
                               for index, count in enumerate(counts)])
    slot_in_sample = torch.cat([torch.arange(count, device=device) for count in counts])

    noise = torch.rand(groups, len(all_boxes), 3, device=device) * 2 - 1
    centres = all_boxes[:, :3] + noise * all_boxes[:, 3:6] / 2 * config.noise_scale
    centres = normalize_points(centres, pc_range).clamp(0.0, 1.0)
    copy_labels = torch.cat(labels).to(device=device, dtype=torch.int64).repeat(groups, 1)
    copy_labels = copy_labels.masked_fill(noise.norm(dim=-1) > config.split, num_classes)

    group_offset = (torch.arange(groups, device=device) * group_size)[:, None]
    batch_index = sample_of_box.repeat(groups)
    slot_index = (slot_in_sample[None] + group_offset).flatten()
    reference = torch.zeros(len(counts), groups * group_size, 3, device=device)
    reference[batch_index, slot_index] = centres.flatten(0, 1)
    return DenoisingQueries(reference, denoising_mask(groups, group_size, num_queries, device), batch_index,
                            slot_index, copy_labels.flatten(), codes.repeat(groups, 1))


def denoising_losses(config: QueryDenoising, queries: DenoisingQueries, logits: torch.Tensor, code: torch.Tensor,
                     code_weights: torch.Tensor, cls_weight: float, bbox_weight: float, alpha: float = 0.25,
                     gamma: float = 2.0) -> dict[str, torch.Tensor]:
    """Losses of the denoising slots on every layer: logits (L, B, P, K), code (L, B, P, C) with centres in metres
    -> ``dn_loss_cls``, ``dn_loss_bbox`` (last layer) and ``d{i}.dn_loss_*``."""
    copies = len(queries.labels)
    num_classes = logits.shape[-1]
    targets = torch.zeros(copies, num_classes + 1, device=logits.device)
    targets[torch.arange(copies, device=logits.device), queries.labels] = 1.0
    targets = targets[:, :num_classes]
    cls_normaliser = max(copies * math.pi / 6 * config.split ** 3, 1.0)
    weights = code_weights.clone()
    weights[YAW_CHANNELS] = 0.0
    target_code = queries.target_code.float()
    finite = torch.isfinite(target_code).all(-1)
    losses: dict[str, torch.Tensor] = {}
    last = len(logits) - 1
    for layer, (layer_logits, layer_code) in enumerate(zip(logits, code)):
        prefix = '' if layer == last else f'd{layer}.'
        picked_logits = layer_logits[queries.batch_index, queries.slot_index].float()
        picked_code = layer_code[queries.batch_index, queries.slot_index].float()
        loss_cls = sigmoid_focal_loss(picked_logits, targets, alpha, gamma, reduction='sum') / cls_normaliser
        loss_bbox = ((picked_code[finite] - target_code[finite]).abs() * weights).sum() / max(copies, 1)
        losses[f'{prefix}dn_loss_cls'] = config.weight * cls_weight * loss_cls
        losses[f'{prefix}dn_loss_bbox'] = config.weight * bbox_weight * loss_bbox
    return losses
