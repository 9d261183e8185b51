"""3D IoU of (x, y, z, l, w, h, yaw) boxes: Monte-Carlo volumes, hand cases, symmetry, yaw 0 / pi, bad inputs; the
rotated GIoU: hand cases, yaw 0, invariance to a turn of the scene, gradients."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.geometry.iou3d import axis_aligned_iou3d, rotated_giou3d, rotated_iou3d
from vispe.models.vdetr import aligned_giou3d


def _box(x=0.0, y=0.0, z=0.0, l=1.0, w=1.0, h=1.0, yaw=0.0) -> list[float]:
    return [x, y, z, l, w, h, yaw]


def _iou(function, box1: list[float], box2: list[float]) -> float:
    return float(function(torch.tensor([box1], dtype=torch.float64), torch.tensor([box2], dtype=torch.float64)))


def _random_pairs(num: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Box pairs that mostly overlap: the second centre within about one size of the first."""
    def boxes(centre: torch.Tensor) -> torch.Tensor:
        size = torch.rand(num, 3, generator=generator, dtype=torch.float64) * 2 + 0.2
        yaw = (torch.rand(num, 1, generator=generator, dtype=torch.float64) * 2 - 1) * math.pi
        return torch.cat([centre, size, yaw], -1)

    first = boxes(torch.randn(num, 3, generator=generator, dtype=torch.float64) * 5)
    second = boxes(first[:, :3] + torch.randn(num, 3, generator=generator, dtype=torch.float64) * 0.35)
    return first, second


def _inside(points: torch.Tensor, box: torch.Tensor) -> torch.Tensor:
    """Whether (P, 3) points lie in one (7,) box, in the box frame."""
    offset = points - box[:3]
    cos, sin = math.cos(box[6]), math.sin(box[6])
    along = cos * offset[:, 0] + sin * offset[:, 1]
    across = -sin * offset[:, 0] + cos * offset[:, 1]
    return (along.abs() <= box[3] / 2) & (across.abs() <= box[4] / 2) & (offset[:, 2].abs() <= box[5] / 2)


def _monte_carlo_iou(box1: torch.Tensor, box2: torch.Tensor, generator: torch.Generator,
                     num_points: int = 200_000) -> float:
    """|both| / |either| over points drawn uniformly in a cube around the two boxes."""
    reach = torch.stack([box1, box2])[:, 3:6].norm(dim=-1).max() / 2
    low = torch.minimum(box1[:3], box2[:3]) - reach
    high = torch.maximum(box1[:3], box2[:3]) + reach
    points = low + (high - low) * torch.rand(num_points, 3, generator=generator, dtype=torch.float64)
    in1, in2 = _inside(points, box1), _inside(points, box2)
    return float((in1 & in2).sum() / (in1 | in2).sum().clamp(min=1))


@pytest.mark.parametrize('rotated', [False, True])
def test_matches_monte_carlo_volumes(rotated: bool) -> None:
    """The diagonal of the pairwise matrix against a sampled estimate (standard error < 0.002 at 2e5 points)."""
    generator = torch.Generator().manual_seed(7)
    first, second = _random_pairs(24, generator)
    if not rotated:
        first[:, 6] = second[:, 6] = 0
    iou = (rotated_iou3d if rotated else axis_aligned_iou3d)(first, second)
    assert iou.shape == (24, 24) and iou.dtype == torch.float64
    estimate = torch.tensor([_monte_carlo_iou(a, b, generator) for a, b in zip(first, second)], dtype=torch.float64)
    assert (estimate > 0.05).sum() >= 12  # most pairs overlap: the comparison is not all zeros
    assert torch.allclose(iou.diagonal(), estimate, atol=0.01)


def test_axis_aligned_ignores_yaw() -> None:
    generator = torch.Generator().manual_seed(3)
    first, second = _random_pairs(10, generator)
    expected = axis_aligned_iou3d(first, second)
    first[:, 6], second[:, 6] = 1.0, -2.0
    assert torch.equal(axis_aligned_iou3d(first, second), expected)


@pytest.mark.parametrize('function', [axis_aligned_iou3d, rotated_iou3d])
def test_hand_cases(function) -> None:
    assert _iou(function, _box(), _box()) == pytest.approx(1.0)
    assert _iou(function, _box(), _box(x=0.5)) == pytest.approx(1 / 3)  # 0.5 / (1 + 1 - 0.5)
    assert _iou(function, _box(), _box(z=0.75)) == pytest.approx(0.25 / 1.75)
    assert _iou(function, _box(l=4, w=2, h=2), _box(x=0.5, y=-0.2, z=0.1)) == pytest.approx(1 / 16)  # containment
    assert _iou(function, _box(), _box(x=3)) == 0.0  # disjoint


def test_rotated_hand_cases() -> None:
    # A unit square turned 45 deg against itself: a regular octagon of area 2 sqrt(2) - 2, IoU 1 / sqrt(2).
    assert _iou(rotated_iou3d, _box(), _box(yaw=math.pi / 4)) == pytest.approx(1 / math.sqrt(2))
    # A 2 x 1 box turned 90 deg: a 1 x 1 overlap of 2 + 2 - 1.
    assert _iou(rotated_iou3d, _box(l=2), _box(l=2, yaw=math.pi / 2)) == pytest.approx(1 / 3)
    # l along the heading: (l=2, w=1, yaw=90 deg) is (l=1, w=2, yaw=0); so are the opposite headings.
    assert _iou(rotated_iou3d, _box(l=2, yaw=math.pi / 2), _box(w=2)) == pytest.approx(1.0)
    assert _iou(rotated_iou3d, _box(l=2, yaw=0.3), _box(l=2, yaw=0.3 - math.pi)) == pytest.approx(1.0)
    # Containment of a turned box in a large one: the volume ratio.
    assert _iou(rotated_iou3d, _box(yaw=0.7), _box(l=5, w=5, h=2)) == pytest.approx(1 / 50)
    # Two identical boxes at a random yaw far from the origin.
    box = _box(x=123.4, y=-56.7, z=2, l=3.1, w=0.4, h=1.3, yaw=2.2)
    assert _iou(rotated_iou3d, box, box) == pytest.approx(1.0, abs=1e-9)
    assert float(rotated_iou3d(torch.tensor([box]), torch.tensor([box]))) == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
def test_touching_boxes_give_zero_without_nan(dtype: torch.dtype) -> None:
    diamond = math.sqrt(0.5)  # half-diagonal of a unit square turned 45 deg
    pairs = [(_box(), _box(x=1)),  # shared face
             (_box(), _box(x=1, y=1)),  # shared edge (a corner in BEV)
             (_box(), _box(z=1)),  # stacked
             (_box(), _box(x=0.5 + diamond, yaw=math.pi / 4))]  # a corner touching a face
    turned = [(_box(yaw=0.4), _box(x=math.cos(0.4), y=math.sin(0.4), yaw=0.4)),  # shared face, turned
              (_box(yaw=0.4), _box(x=math.sqrt(2) * math.cos(1.1854), y=math.sqrt(2) * math.sin(1.1854), yaw=0.4))]
    for function, cases in ((axis_aligned_iou3d, pairs), (rotated_iou3d, pairs + turned)):
        first = torch.tensor([pair[0] for pair in cases], dtype=dtype)
        second = torch.tensor([pair[1] for pair in cases], dtype=dtype)
        iou = function(first, second).diagonal()
        assert torch.isfinite(iou).all() and iou.abs().max() <= 1e-5, (function.__name__, iou)


def test_symmetry_and_empty_sets() -> None:
    generator = torch.Generator().manual_seed(11)
    first, second = _random_pairs(16, generator)
    for function in (axis_aligned_iou3d, rotated_iou3d):
        assert torch.allclose(function(first, second), function(second, first).T, atol=1e-12)
        assert function(first[:0], second).shape == (0, 16) and function(first, second[:0]).shape == (16, 0)


def test_rotated_equals_axis_aligned_at_yaw_multiples_of_pi() -> None:
    generator = torch.Generator().manual_seed(5)
    first, second = _random_pairs(20, generator)
    choices = torch.tensor([0.0, math.pi, -math.pi, 2 * math.pi], dtype=torch.float64)
    first[:, 6] = choices[torch.randint(4, (20,), generator=generator)]
    second[:, 6] = choices[torch.randint(4, (20,), generator=generator)]
    expected = axis_aligned_iou3d(first, second)
    assert (expected.diagonal() > 0).sum() >= 12
    assert torch.allclose(rotated_iou3d(first, second), expected, atol=1e-9)
    assert torch.allclose(rotated_iou3d(first.float(), second.float()), expected.float(), atol=1e-5)


def test_dtypes() -> None:
    boxes = torch.tensor([_box(), _box(x=0.5)])
    assert rotated_iou3d(boxes, boxes).dtype == torch.float32
    assert rotated_iou3d(boxes, boxes.double()).dtype == torch.float64
    assert axis_aligned_iou3d(boxes.half(), boxes.half()).dtype == torch.float32


@pytest.mark.parametrize('function', [axis_aligned_iou3d, rotated_iou3d])
def test_bad_inputs(function) -> None:
    good = torch.tensor([_box()])
    with pytest.raises(ValueError, match=r'boxes1 must be a tensor of shape \(N, 7\) = \(x, y, z, l, w, h, yaw\)'):
        function(torch.zeros(1, 9), good)
    with pytest.raises(ValueError, match=r'boxes2 must be .*\(N, 7\).*got \(2, 1, 7\).*reshape'):
        function(good, torch.zeros(2, 1, 7))
    with pytest.raises(ValueError, match=r'boxes1 .*got list'):
        function([_box()], good)
    with pytest.raises(ValueError, match=r'boxes2 rows \[1\] hold NaN or inf'):
        function(good, torch.tensor([_box(), _box(x=float('nan'))]))
    with pytest.raises(ValueError, match=r'boxes1 rows \[0\] have a size \(l, w, h\) <= 0; drop those boxes'):
        function(torch.tensor([_box(w=0)]), good)


def test_rotated_giou_by_hand() -> None:
    cube, turned = torch.tensor([_box()]), torch.tensor([_box(yaw=math.pi / 4)])
    # IoU of a unit square and itself turned by 45° is 1/sqrt(2) (octagon 2(sqrt(2) - 1) over the union); the
    # enclosing box in either square's frame is sqrt(2) x sqrt(2) = 2, of which the union leaves sqrt(2) - 1 empty.
    assert float(rotated_giou3d(cube, turned)) == pytest.approx(1 / math.sqrt(2) - (math.sqrt(2) - 1), abs=1e-6)
    # 3DETR's axis-aligned enclosing box would give a yawed box GIoU 0.5 with itself; here it is 1.
    assert float(rotated_giou3d(turned, turned)) == pytest.approx(1.0, abs=1e-6)
    far = torch.tensor([_box(x=3.0)])
    assert float(rotated_giou3d(cube, far)) == pytest.approx(-0.5, abs=1e-6)  # enclosing 4 x 1 x 1, union 2
    # Frames that disagree: a 4 x 1 box and a unit cube turned 45° at x = 3 do not overlap (union 5). In the long
    # box's frame the enclosing rectangle is (2 + 3 + sqrt(2)/2) x sqrt(2) = 5 sqrt(2) + 1; in the cube's about 19.3.
    long_box, diamond = torch.tensor([_box(l=4.0)]), torch.tensor([_box(x=3.0, yaw=math.pi / 4)])
    expected = -(5 * math.sqrt(2) - 4) / (5 * math.sqrt(2) + 1)
    assert float(rotated_giou3d(long_box, diamond)) == pytest.approx(expected, abs=1e-6)
    assert float(rotated_giou3d(diamond, long_box)) == pytest.approx(expected, abs=1e-6)


def test_rotated_giou_is_the_aligned_giou_at_yaw_zero_and_below_the_iou() -> None:
    first, second = _random_pairs(64, torch.Generator().manual_seed(3))
    aligned_first, aligned_second = first.clone(), second.clone()
    aligned_first[:, 6] = aligned_second[:, 6] = 0
    assert torch.allclose(rotated_giou3d(aligned_first, aligned_second),
                          aligned_giou3d(aligned_first, aligned_second), atol=1e-9)
    pairwise = rotated_giou3d(first[:8], second[:5], pairwise=True)
    assert pairwise.shape == (8, 5)
    assert torch.allclose(pairwise[torch.arange(5), torch.arange(5)], rotated_giou3d(first[:5], second[:5]))
    assert (pairwise <= rotated_iou3d(first[:8], second[:5]) + 1e-9).all() and (pairwise > -1).all()
    assert torch.allclose(rotated_giou3d(first, second), rotated_giou3d(second, first), atol=1e-12)


def test_rotated_giou_does_not_change_when_the_scene_turns() -> None:
    first, second = _random_pairs(32, torch.Generator().manual_seed(4))
    angle = 0.83
    rotation = torch.tensor([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]],
                            dtype=torch.float64)

    def turn(boxes: torch.Tensor) -> torch.Tensor:
        turned = boxes.clone()
        turned[:, :2] = boxes[:, :2] @ rotation.T
        turned[:, 6] = boxes[:, 6] + angle
        return turned

    assert torch.allclose(rotated_giou3d(turn(first), turn(second)), rotated_giou3d(first, second), atol=1e-9)


def test_rotated_giou_has_gradients() -> None:
    first, second = _random_pairs(6, torch.Generator().manual_seed(5))
    first = first.requires_grad_()
    assert torch.autograd.gradcheck(lambda boxes: rotated_giou3d(boxes, second), (first,))
