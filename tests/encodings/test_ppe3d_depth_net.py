"""3DPPE's hybrid depth module: CameraAwareDepthNet, the hybrid depth, per-cell depth targets and the depth losses."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from vispe.encodings.ppe3d.depth_loss import depth_losses, distribution_focal_loss, sparse_depth_targets
from vispe.encodings.ppe3d.depth_net import (CameraAwareDepthNet, DeformConv2dPack, categorical_depth, fuse_depth,
                                         uniform_depth_bins)

B, V, C, MID, CTX, H, W = 2, 6, 16, 16, 8, 6, 10


def _cameras(batch: int = B, views: int = V) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmented-image intrinsics (B, V, 3, 3) and current-frame extrinsics (B, V, 4, 4)."""
    intrinsics = torch.tensor([[600.0, 0.0, 400.0], [0.0, 600.0, 160.0], [0.0, 0.0, 1.0]]).repeat(batch, views, 1, 1)
    intrinsics[..., :2, :] += 20 * torch.randn(batch, views, 2, 3)
    extrinsics = torch.eye(4).repeat(batch, views, 1, 1)
    extrinsics[..., :3, 3] = torch.randn(batch, views, 3)
    return intrinsics, extrinsics


def _net(**kwargs) -> CameraAwareDepthNet:
    return CameraAwareDepthNet(C, MID, CTX, **kwargs)


def _reference_keys(with_dcn: bool = True, with_context_encoder: bool = False) -> set[str]:
    """State-dict keys of 3DPPE's CameraAwareDepthNet (with_depth_correction, with_pgd), read off its modules."""
    bn = ('weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked')
    keys = {f'{name}.{p}' for name in ('reduce_conv.bn', 'bn1', 'bn2', 'depth_prob_conv.1', 'depth_direct_conv.1',
                                       'depth_stem.3.bn1', 'depth_stem.3.global_avg_pool.2') for p in bn}
    keys |= {'reduce_conv.conv.weight', 'fuse_lambda', 'depth_prob_conv.0.weight', 'depth_prob_conv.2.weight',
             'depth_prob_conv.2.bias', 'depth_direct_conv.0.weight', 'depth_direct_conv.3.weight',
             'depth_direct_conv.3.bias', 'depth_stem.3.conv1.weight', 'depth_stem.3.global_avg_pool.1.weight'}
    keys |= {f'{mlp}.{fc}.{p}' for mlp in ('context_mlp', 'depth_mlp') for fc in ('fc1', 'fc2')
             for p in ('weight', 'bias')}
    keys |= {f'{se}.{conv}.{p}' for se in ('context_se', 'depth_se') for conv in ('conv_reduce', 'conv_expand')
             for p in ('weight', 'bias')}
    blocks = {f'depth_stem.{i}' for i in range(3)}
    context_out = 'context_conv'
    if with_context_encoder:
        blocks |= {f'context_conv.{i}' for i in range(3)}
        context_out = 'context_conv.3'
    keys |= {f'{context_out}.weight', f'{context_out}.bias'}
    for block in blocks:
        keys |= {f'{block}.conv1.weight', f'{block}.conv2.weight'} | {f'{block}.{n}.{p}' for n in ('bn1', 'bn2')
                                                                      for p in bn}
    for i in range(1, 5):
        keys |= {f'depth_stem.3.aspp{i}.atrous_conv.weight'} | {f'depth_stem.3.aspp{i}.bn.{p}' for p in bn}
    if with_dcn:
        keys |= {f'{head}.0.conv_offset.{p}' for head in ('depth_prob_conv', 'depth_direct_conv')
                 for p in ('weight', 'bias')}
    return keys


def test_alpha_starts_at_sigmoid_1e_minus_4() -> None:
    net = _net(with_dcn=False)
    assert net.fuse_lambda.shape == ()
    assert net.fuse_lambda.item() == pytest.approx(1e-4)
    assert net.alpha.item() == pytest.approx(0.500025, abs=1e-7)


def test_bins_are_uniform_with_both_ends() -> None:
    bins = uniform_depth_bins(16, 1.0, 61.2)
    assert bins[0].item() == 1.0 and bins[-1].item() == pytest.approx(61.2, abs=1e-5)
    assert torch.allclose(bins.diff(), torch.full((15,), 60.2 / 15))
    assert torch.equal(_net(with_dcn=False).bins, bins)
    assert 'bins' not in _net(with_dcn=False).state_dict()


def test_categorical_depth_of_one_hot_logits_is_the_bin() -> None:
    bins = uniform_depth_bins(16, 1.0, 61.2)
    index = torch.randint(0, 16, (3, 4, 5))
    logits = 1e4 * F.one_hot(index, 16).permute(0, 3, 1, 2).float()
    assert torch.allclose(categorical_depth(logits, bins), bins[index][:, None], atol=1e-5)
    uniform = categorical_depth(torch.zeros(1, 16, 1, 1), bins)
    assert uniform.item() == pytest.approx(31.1, abs=1e-4)


def test_fused_depth_formula() -> None:
    direct, categorical = torch.randn(2, 1, 3, 4) * 10, torch.rand(2, 1, 3, 4) * 60
    lam = torch.tensor(0.7)
    alpha = 1 / (1 + math.exp(-0.7))
    assert torch.allclose(fuse_depth(direct, categorical, lam), alpha * direct + (1 - alpha) * categorical)
    net = _net(with_dcn=False).eval()
    with torch.no_grad():
        net.fuse_lambda.fill_(-1.3)
        out = net(torch.randn(B * V, C, H, W), *_cameras())
    alpha = torch.sigmoid(torch.tensor(-1.3))
    expected = alpha * out.direct + (1 - alpha) * out.categorical
    assert torch.allclose(out.depth, expected, atol=1e-5)
    assert torch.allclose(out.categorical, categorical_depth(out.logits, net.bins))


@pytest.mark.parametrize('with_dcn', [True, False])
def test_shapes_and_reference_keys(with_dcn: bool) -> None:
    net = _net(with_dcn=with_dcn)
    intrinsics, extrinsics = _cameras()
    out = net(torch.randn(B * V, C, H, W), intrinsics, extrinsics)
    assert out.logits.shape == (B * V, 16, H, W)
    assert out.direct.shape == out.categorical.shape == out.depth.shape == (B * V, 1, H, W)
    assert out.context.shape == (B * V, CTX, H, W)
    flat = net(torch.randn(B * V, C, H, W), intrinsics.flatten(0, 1), extrinsics.flatten(0, 1)[:, :3])
    assert flat.logits.shape == (B * V, 16, H, W)
    state = net.state_dict()
    assert set(state) == _reference_keys(with_dcn)
    assert state['depth_prob_conv.0.weight'].shape == (MID, MID // 4, 3, 3)
    assert state['bn1.weight'].shape == (18,) and state['bn2.weight'].shape == (6,)
    assert state['depth_stem.3.conv1.weight'].shape == (MID, 5 * MID, 1, 1)
    if with_dcn:
        assert state['depth_prob_conv.0.conv_offset.weight'].shape == (18, MID, 3, 3)
    encoder = _net(with_dcn=with_dcn, with_context_encoder=True)
    assert set(encoder.state_dict()) == _reference_keys(with_dcn, with_context_encoder=True)


def test_without_direct_head_depth_is_categorical() -> None:
    net = _net(with_dcn=False, with_pgd=False, with_depth_correction=False)
    assert 'fuse_lambda' not in net.state_dict() and 'depth_prob_conv.weight' in net.state_dict()
    out = net(torch.randn(B * V, C, H, W), *_cameras())
    assert out.direct is None and torch.equal(out.depth, out.categorical)
    with pytest.raises(RuntimeError, match='with_pgd=True'):
        _ = net.alpha


def test_deform_conv_with_zero_offsets_is_grouped_conv() -> None:
    conv = DeformConv2dPack(8, 8, 3, groups=4)
    x = torch.randn(2, 8, 5, 7)
    assert torch.allclose(conv(x), F.conv2d(x, conv.weight, padding=1, groups=4), atol=1e-5)
    with torch.no_grad():
        conv.conv_offset.bias.fill_(0.5)
    assert not torch.allclose(conv(x), F.conv2d(x, conv.weight, padding=1, groups=4), atol=1e-3)
    # mmcv's offset layout (y0, x0, y1, x1, ...): channel 0 moves tap (0, 0) one row down, to (y, x − 1)
    single = DeformConv2dPack(1, 1, 3)
    image = torch.arange(25.0).view(1, 1, 5, 5)
    with torch.no_grad():
        single.weight.zero_()
        single.weight[0, 0, 0, 0] = 1.0
        single.conv_offset.bias[0] = 1.0
    assert torch.equal(single(image)[0, 0, :, 1:], image[0, 0, :, :-1])


def test_se_gates_depth_on_intrinsics_and_context_on_both() -> None:
    net = _net(with_dcn=False).eval()
    features = torch.randn(B * V, C, H, W)
    intrinsics, extrinsics = _cameras()
    with torch.no_grad():
        net.bn1.running_var.fill_(100.0)
        net.bn2.running_var.fill_(100.0)
        base = net(features, intrinsics, extrinsics)
        moved = net(features, intrinsics, extrinsics + 0.5)
        zoomed = net(features, intrinsics * torch.tensor([1.5, 1.5, 1.0])[:, None], extrinsics)
    assert torch.equal(base.logits, moved.logits) and torch.equal(base.direct, moved.direct)
    assert not torch.allclose(base.context, moved.context)
    assert not torch.allclose(base.logits, zoomed.logits) and not torch.allclose(base.context, zoomed.context)


def test_camera_count_must_match_features() -> None:
    intrinsics, extrinsics = _cameras()
    with pytest.raises(ValueError, match='12 feature maps'):
        _net(with_dcn=False)(torch.randn(B * V, C, H, W), intrinsics[:1], extrinsics)
    with pytest.raises(ValueError, match='extrinsics must have shape'):
        _net(with_dcn=False)(torch.randn(B * V, C, H, W), intrinsics, extrinsics[..., :3])


def test_sparse_depth_targets_golden() -> None:
    view0 = torch.tensor([[5.0, 0.0, 0.0, 70.0],
                          [0.0, 3.0, 0.0, 0.0],
                          [0.0, 0.0, 0.0, 0.0],
                          [4.0, 2.5, 0.5, 8.0]])
    view1 = torch.tensor([[0.0, 0.0, 61.2, 0.0],
                          [1.0, 0.0, 0.0, 0.0],
                          [0.0, 0.0, 0.0, 0.0],
                          [0.0, 0.0, 0.0, 0.0]])
    depth = torch.stack([view0, view1])[None]  # (1, 2, 4, 4)
    # blocks [2j, 2j + 2): nearest kept (3 over 5), zeros ignored, 70 >= stop dropped, nearest 0.5 < start drops
    # the cell (8 is not promoted), 1.0 = start kept, 61.2 = stop dropped (the reference keeps start <= d < stop)
    center = sparse_depth_targets(depth, 2, 1.0, 61.2, pixel='center')
    assert center.shape == (1, 2, 2, 2)
    assert torch.equal(center[0, 0], torch.tensor([[3.0, 0.0], [2.5, 0.0]]))
    assert torch.equal(center[0, 1], torch.tensor([[1.0, 0.0], [0.0, 0.0]]))
    # the reference's cells: pixel x -> round(x / 2) (ties up): cell 0 = {0}, cell 1 = {1, 2}, pixel 3 beyond
    corner = sparse_depth_targets(depth, 2, 1.0, 61.2)
    assert torch.equal(corner[0, 0], torch.tensor([[5.0, 0.0], [0.0, 3.0]]))
    assert torch.equal(corner[0, 1], torch.tensor([[0.0, 0.0], [1.0, 0.0]]))


@pytest.mark.parametrize('pixel', ['corner', 'center'])
def test_sparse_depth_targets_match_a_loop(pixel: str) -> None:
    stride, height, width = 4, 13, 18
    depth = torch.rand(2, 3, height, width) * 80 * (torch.rand(2, 3, height, width) < 0.2)
    target = sparse_depth_targets(depth, stride, 1.0, 61.2, pixel=pixel)
    assert target.shape == (2, 3, 4, 5)
    expected = torch.zeros_like(target)
    shift = stride // 2 if pixel == 'corner' else 0
    for index in torch.nonzero(depth):
        b, v, y, x = index.tolist()
        i, j = (y + shift) // stride, (x + shift) // stride
        if i < 4 and j < 5:
            current = expected[b, v, i, j].item()
            expected[b, v, i, j] = depth[b, v, y, x] if current == 0 else min(current, depth[b, v, y, x].item())
    expected[(expected < 1.0) | (expected >= 61.2)] = 0
    assert torch.equal(target, expected)
    dense = sparse_depth_targets(torch.full((1, 8, 8), 12.5), stride, pixel=pixel)
    assert torch.equal(dense, torch.full((1, 2, 2), 12.5))


def test_sparse_depth_targets_reject_nan() -> None:
    depth = torch.zeros(1, 2, 4, 4)
    depth[0, 1, 2, 3] = math.nan
    with pytest.raises(ValueError, match=r'NaN \(first at index \(0, 1, 2, 3\)\); write 0'):
        sparse_depth_targets(depth, 2)


def test_distribution_focal_loss_golden() -> None:
    logits = torch.tensor([[0.1, -0.2, 0.5, 1.0, 0.0]])
    lse = math.log(sum(math.exp(v) for v in (0.1, -0.2, 0.5, 1.0, 0.0)))
    # t = 2.3: 0.7·CE(bin 2) + 0.3·CE(bin 3) = 0.7·(lse − 0.5) + 0.3·(lse − 1.0) = 1.3366276...
    loss = distribution_focal_loss(logits, torch.tensor([2.3]))
    assert loss.item() == pytest.approx(0.7 * (lse - 0.5) + 0.3 * (lse - 1.0), abs=1e-6)
    assert loss.item() == pytest.approx(1.3366276, abs=1e-6)
    assert distribution_focal_loss(logits, torch.tensor([4.0])).item() == pytest.approx(lse - 0.0, abs=1e-6)
    assert distribution_focal_loss(logits, torch.tensor([0.0])).item() == pytest.approx(lse - 0.1, abs=1e-6)
    with pytest.raises(ValueError, match=r'target bins must lie in \[0, 4\]'):
        distribution_focal_loss(logits, torch.tensor([4.5]))


def test_depth_losses_by_hand() -> None:
    logits = torch.zeros(1, 5, 2, 2)
    logits[0, :, 0, 0] = torch.tensor([0.1, -0.2, 0.5, 1.0, 0.0])
    depth = torch.tensor([[[3.35, 2.0], [100.0, 7.0]]])  # (N, h, w)
    targets = torch.tensor([[[[3.3, 4.0], [0.0, 70.0]]]])  # (B, V, h, w): two valid cells
    losses = depth_losses(logits, depth, targets, depth_start=1.0, depth_stop=5.0)
    lse = math.log(sum(math.exp(v) for v in (0.1, -0.2, 0.5, 1.0, 0.0)))
    smooth_l1 = (0.5 * 0.05 ** 2 * 9 + (2.0 - 0.5 / 9)) / 2  # |3.35 − 3.3| < β, |2 − 4| > β
    dfl = (0.7 * (lse - 0.5) + 0.3 * (lse - 1.0) + math.log(5)) / 2  # bins 2.3 and 3.0 (bin size 1)
    assert losses['loss_depth_l1'].item() == pytest.approx(0.1 * smooth_l1, rel=1e-4)
    assert losses['loss_depth_dfl'].item() == pytest.approx(0.25 * dfl, rel=1e-5)


def test_depth_losses_without_valid_cells_are_zero_with_grad() -> None:
    logits = torch.randn(2, 16, 3, 4, requires_grad=True)
    depth = torch.randn(2, 1, 3, 4, requires_grad=True)
    losses = depth_losses(logits, depth, torch.zeros(1, 2, 3, 4))
    total = losses['loss_depth_l1'] + losses['loss_depth_dfl']
    assert total.item() == 0.0 and total.requires_grad
    total.backward()
    assert torch.count_nonzero(logits.grad) == 0 and torch.count_nonzero(depth.grad) == 0


def test_depth_losses_reject_nan_and_bad_shapes() -> None:
    targets = torch.full((1, 2, 3, 4), 10.0)
    targets[0, 0, 1, 1] = math.nan
    with pytest.raises(ValueError, match='depth targets has NaN.*write 0'):
        depth_losses(torch.randn(2, 16, 3, 4), torch.randn(2, 1, 3, 4), targets)
    with pytest.raises(ValueError, match='sparse_depth_targets at the stride'):
        depth_losses(torch.randn(2, 16, 3, 4), torch.randn(2, 1, 3, 4), torch.zeros(1, 2, 6, 8))


@pytest.mark.parametrize('with_dcn', [True, False])
def test_gradients_reach_every_parameter(with_dcn: bool) -> None:
    net = _net(with_dcn=with_dcn)
    out = net(torch.randn(B * V, C, H, W), *_cameras())
    pixels = torch.rand(B, V, H * 4, W * 4) * 70 * (torch.rand(B, V, H * 4, W * 4) < 0.3)
    targets = sparse_depth_targets(pixels, 4)
    assert (targets > 0).sum() > 20
    losses = depth_losses(out.logits, out.depth, targets)
    (losses['loss_depth_l1'] + losses['loss_depth_dfl'] + out.context.square().mean()).backward()
    for name, param in net.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name
    assert net.fuse_lambda.grad.abs().item() > 0
    assert net.depth_direct_conv[3].weight.grad.abs().sum() > 0 and net.depth_prob_conv[2].weight.grad.abs().sum() > 0
