"""PETRv2's query denoising: the noised copies, the group mask, and a detector whose matching queries are blind to
the copies (their outputs equal those of the same detector without denoising)."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models.petr import PETRDetector, QueryDenoising, make_denoising_queries
from vispe.models.petr.box_coder import encode_boxes
from vispe.models.petr.denoising import denoising_losses, denoising_mask

from .two_camera_batch import BOXES, LABELS, PC_RANGE, batch


def test_mask_isolates_groups_and_hides_them_from_the_matching_queries() -> None:
    allowed = denoising_mask(groups=3, group_size=2, num_queries=4, device=torch.device('cpu'))
    expected = torch.zeros(10, 10, dtype=torch.bool)
    for group in range(3):
        expected[2 * group:2 * group + 2, 2 * group:2 * group + 2] = True
    expected[:, 6:] = True
    assert torch.equal(allowed, expected)


def test_copies_are_noised_within_half_a_box_and_labelled_by_their_noise() -> None:
    config = QueryDenoising(groups=50, noise_scale=1.0, split=0.75)
    torch.manual_seed(0)
    queries = make_denoising_queries(config, BOXES, LABELS, num_classes=5, num_queries=7, pc_range=PC_RANGE,
                                     code_size=8)
    assert queries.reference.shape == (2, 50 * 2, 3)
    assert queries.self_attn_mask.shape == (107, 107)
    assert len(queries.labels) == 50 * 3
    # every (sample, slot) is used once; sample 1's second slot in each group stays padding at 0
    pairs = set(zip(queries.batch_index.tolist(), queries.slot_index.tolist()))
    assert len(pairs) == 150 and (1, 1) not in pairs
    assert torch.equal(queries.reference[1, 1::2], torch.zeros(50, 3))
    low, high = torch.tensor(PC_RANGE[:3]), torch.tensor(PC_RANGE[3:])
    centres = queries.reference[queries.batch_index, queries.slot_index] * (high - low) + low
    truth = torch.cat(BOXES).repeat(50, 1)
    offset = (centres - truth[:, :3]) / (truth[:, 3:6] / 2)
    assert bool((offset.abs() <= 1 + 1e-5).all())
    background = offset.norm(dim=-1) > 0.75
    assert 0 < int(background.sum()) < 150
    assert torch.equal(queries.labels == 5, background)
    assert torch.equal(queries.labels[~background], torch.cat(LABELS).repeat(50)[~background])
    assert torch.equal(queries.target_code, encode_boxes(torch.cat(BOXES), 8).repeat(50, 1))


def test_no_boxes_no_copies_and_bad_settings_are_refused() -> None:
    empty = [torch.zeros(0, 7)]
    assert make_denoising_queries(QueryDenoising(), empty, [torch.zeros(0, dtype=torch.int64)], 5, 7, PC_RANGE,
                                  8) is None
    with pytest.raises(ValueError, match='groups'):
        QueryDenoising(groups=0)
    with pytest.raises(ValueError, match='split'):
        QueryDenoising(split=0.0)


def test_losses_follow_the_reference_normalisers() -> None:
    """Perfect boxes: the box loss is 0 whatever the yaw channels; the class loss is the focal sum over the copies
    divided by copies·π/6·split³, times the class weight."""
    config = QueryDenoising(groups=2, split=0.75, weight=1.0)
    torch.manual_seed(1)
    queries = make_denoising_queries(config, BOXES, LABELS, 5, 7, PC_RANGE, 8)
    code = torch.zeros(1, 2, queries.num_slots, 8)
    code[0, queries.batch_index, queries.slot_index] = queries.target_code
    code[..., 6:8] += 3.0
    logits = torch.zeros(1, 2, queries.num_slots, 5)
    losses = denoising_losses(config, queries, logits, code, torch.ones(8), cls_weight=2.0, bbox_weight=0.25)
    assert float(losses['dn_loss_bbox']) == 0.0
    positives = int((queries.labels < 5).sum())
    per_logit = {True: 0.25 * 0.25 * math.log(2), False: 0.75 * 0.25 * math.log(2)}  # alpha (1-p)^2 -log p at p=1/2
    total = positives * per_logit[True] + (len(queries.labels) * 5 - positives) * per_logit[False]
    expected = 2.0 * total / (len(queries.labels) * math.pi / 6 * 0.75 ** 3)
    assert float(losses['dn_loss_cls']) == pytest.approx(expected, rel=1e-5)


def small_detector(denoising: dict | None) -> PETRDetector:
    torch.manual_seed(0)
    return PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                        encoding=dict(type='PETR', depth_num=8, position_range=(-20.0, -20.0, -4.0, 20.0, 20.0, 4.0)),
                        decoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0), num_queries=7, embed_dim=32,
                        code_size=8, pc_range=PC_RANGE, denoising=denoising)


def test_matching_queries_do_not_see_the_copies() -> None:
    images, samples = batch()
    plain, denoised = small_detector(None).eval(), small_detector(dict(groups=3)).eval()
    boxes, labels, _ = denoised.targets(samples, images.device)
    queries = make_denoising_queries(denoised.denoising, boxes, labels, 5, 7, PC_RANGE, 8)
    with torch.no_grad():
        reference = plain.predict_sets(images, None, samples)
        with_copies = denoised.predict_sets(images, None, samples, queries)
    slots = queries.num_slots
    assert with_copies['logits'].shape[2] == slots + 7
    torch.testing.assert_close(with_copies['logits'][:, :, slots:], reference['logits'], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(with_copies['code'][:, :, slots:], reference['code'], rtol=1e-5, atol=1e-5)


def test_denoising_adds_losses_in_training_only() -> None:
    images, samples = batch()
    model = small_detector(dict(groups=2)).train()
    losses = model(images, None, samples, mode='loss')
    assert {'dn_loss_cls', 'dn_loss_bbox', 'd0.dn_loss_cls', 'loss_cls', 'd0.loss_bbox'} <= set(losses)
    sum(losses.values()).backward()
    assert model.reference_points.weight.grad is not None
    model.eval()
    with torch.no_grad():
        assert model(images, None, samples, mode='tensor')['logits'].shape[2] == 7
