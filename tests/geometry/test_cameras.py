"""Cameras: derived matrices, project/unproject, batching from data samples, precision and input checks."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vispe.geometry import Cameras, SceneTransform, box_corners, depth_bins, frustum_points, transform_boxes

from .rigs import IMAGE_SIZE, cam2lidar, cameras, rig, samples


def test_matrices_compose_and_invert() -> None:
    cams = cameras(1, 2)
    k, ext = rig(2)
    viewpad = torch.eye(4, dtype=torch.float64).repeat(6, 1, 1)
    viewpad[:, :3, :3] = k
    assert torch.allclose(cams.lidar2img[1].double(), viewpad @ ext, rtol=1e-5, atol=1e-4)
    eye = torch.eye(4).expand(2, 6, 4, 4)
    assert torch.allclose(cams.img2lidar.double() @ cams.lidar2img.double(), eye.double(), atol=1e-5)
    assert torch.allclose(cams.cam2lidar @ cams.lidar2cam, eye, atol=1e-5)
    assert torch.equal(cams.img2lidar[..., 3, :], eye[..., 3, :])
    assert cams.num_samples == 2 and cams.num_views == 6 and cams.image_size == IMAGE_SIZE


def test_project_known_point_and_round_trip() -> None:
    k = torch.tensor([[[[500.0, 0.0, 400.0], [0.0, 500.0, 160.0], [0.0, 0.0, 1.0]]]])
    cams = Cameras(k, torch.linalg.inv(cam2lidar(0.0, 0.0, (0.0, 0.0, 0.0))).float()[None, None], IMAGE_SIZE)
    # 10 m ahead, 1 m left, 0.5 m up: right of image centre is -y, up is -v.
    uv, depth = cams.project(torch.tensor([[[10.0, 1.0, 0.5]]]))
    assert torch.allclose(uv, torch.tensor([[[[350.0, 135.0]]]])) and torch.allclose(depth, torch.tensor(10.0))
    cams = cameras(3, 4)
    points = torch.randn(2, 100, 3) * 10 + torch.tensor([0.0, 0.0, 1.0])
    uv, depth = cams.project(points)
    assert uv.shape == (2, 6, 100, 2) and depth.shape == (2, 6, 100)
    front = depth > 0.1
    back = cams.unproject(uv, depth)
    assert (back - points[:, None])[front].abs().max() < 1e-3


def test_from_data_samples_formats() -> None:
    data = samples(1, 2)
    four = np.tile(np.eye(4), (6, 1, 1))
    four[:, :3, :3] = data[1].pop('intrinsics')
    data[1]['cam2img'] = four
    data[1]['img_shape'] = [(320, 800, 3)] * 6  # per view, (H, W, C) as mmdet3d 0.x
    data[0]['pad_shape'], data[0]['img_shape'] = (320, 800), (300, 790)
    cams = Cameras.from_data_samples(data)
    assert torch.allclose(cams.intrinsics[1].double(), rig(2)[0], atol=1e-4)
    assert cams.image_size == (320, 800)
    scene = SceneTransform.rotation(0.5).matrix[0]
    data[0]['scene_transform'] = scene.numpy()  # a sample whose scene was already rotated
    moved = Cameras.from_data_samples(data)
    points = torch.randn(2, 30, 3) * 10
    assert torch.allclose(moved.project(SceneTransform(torch.stack([scene, torch.eye(4).double()])).apply_points(
        points))[0], cams.project(points)[0], atol=1e-2, rtol=1e-4)
    data[1]['cam2img'][0, 0, 3] = 0.5
    with pytest.raises(ValueError, match=r'sample 1: the 4×4 cam2img is not viewpad\(K\).*fold the extra translation'):
        Cameras.from_data_samples(data)


def test_from_data_samples_refuses_mixed_batches() -> None:
    data = samples(1, 2)
    data[1]['intrinsics'], data[1]['lidar2cam'] = data[1]['intrinsics'][:5], data[1]['lidar2cam'][:5]
    with pytest.raises(ValueError, match='sample 1 has 5 cameras but sample 0 has 6; a batch needs the same views'):
        Cameras.from_data_samples(data)
    data = samples(1, 2)
    data[1]['img_shape'] = (450, 800)
    with pytest.raises(ValueError, match=r'sample 1 has image size \(450, 800\) but sample 0 has \(320, 800\).*pad'):
        Cameras.from_data_samples(data)
    with pytest.raises(ValueError, match='needs keys "intrinsics"'):
        Cameras.from_data_samples([{'lidar2cam': np.eye(4)[None]}])


def _bad(**changes) -> dict:
    k, ext = rig(1)
    sample = {'intrinsics': k, 'lidar2cam': ext, 'img_shape': IMAGE_SIZE}
    for key, (index, value) in changes.items():
        sample[key] = sample[key].clone()
        sample[key][index] = value
    return sample


@pytest.mark.parametrize('change, message', [
    (dict(intrinsics=((2, 0, 0), 0.0)), r'intrinsics of sample 0, view 2 are singular.*non-zero focal lengths'),
    (dict(intrinsics=((3, 1, 2), math.nan)), r'intrinsics of sample 0, view 3 has non-finite entries.*fix the calib'),
    (dict(intrinsics=((0, 2, 2), 2.0)), r'intrinsics\[0, 0\] has last row \[0.0, 0.0, 2.0\], expected \(0, 0, 1\)'),
    (dict(lidar2cam=((4, 0, 0), 1.3)), r'lidar2cam of sample 0, view 4 is not rigid.*re-orthonormalise R.*scene_tr'),
    (dict(lidar2cam=((1, 3, 0), 0.5)), r'lidar2cam\[0, 1\] has last row .*expected \(0, 0, 0, 1\).*transpose'),
    (dict(lidar2cam=((5, 2), -rig(1)[1][5, 2])), r'view 5 is not rigid.*det -1 '),  # a mirrored camera
])
def test_construction_refuses_bad_matrices(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Cameras.from_data_samples([_bad(**change)])


def test_construction_refuses_wrong_shapes() -> None:
    k, ext = rig(1)
    with pytest.raises(ValueError, match=r'intrinsics must have shape \(B, V, 3, 3\).*got \(6, 3, 3\)'):
        Cameras(k, ext[None], IMAGE_SIZE)
    with pytest.raises(ValueError, match=r'lidar2cam must have shape \(B, V, 4, 4\) = \(1, 6, 4, 4\).*\(1, 5, 4, 4\)'):
        Cameras(k[None], ext[None, :5], IMAGE_SIZE)
    with pytest.raises(TypeError, match='must be a torch.Tensor.*from_data_samples'):
        Cameras(k.numpy()[None], ext[None], IMAGE_SIZE)


def test_check_images_and_point_shapes() -> None:
    cams = cameras(1, 2)
    cams.check_images(torch.zeros(2, 6, 3, *IMAGE_SIZE))
    with pytest.raises(ValueError, match=r'images have B=2 samples × V=5 views but the cameras have B=2 × V=6.*'
                                         r'from_data_samples.*index_views'):
        cams.check_images(torch.zeros(2, 5, 3, *IMAGE_SIZE))
    with pytest.raises(ValueError, match=r'images have B=1 samples'):
        cams.check_images(torch.zeros(1, 6, 3, *IMAGE_SIZE))
    with pytest.raises(ValueError, match=r'\(B, V, C, H, W\), got \(12, 3, 320, 800\)'):
        cams.check_images(torch.zeros(12, 3, *IMAGE_SIZE))
    with pytest.raises(ValueError, match=r'images are \(160, 400\).*expect \(320, 800\).*resize_cameras'):
        cams.check_images(torch.zeros(2, 6, 3, 160, 400))
    with pytest.raises(ValueError, match=r'points must have shape \(B, V, N, 3\) = \(2, 6, N, 3\) or \(B, N, 3\)'):
        cams.project(torch.zeros(100, 3))
    with pytest.raises(ValueError, match=r'pixels must have shape \(B, V, N, 2\)'):
        cams.unproject(torch.zeros(2, 6, 10, 3), torch.ones(2, 6, 10))
    with pytest.raises(ValueError, match=r'depth must have shape \(B, V, N\) = \(2, 6, 10\)'):
        cams.unproject(torch.zeros(2, 6, 10, 2), torch.ones(2, 6, 10, 1))


def test_index_views_and_to() -> None:
    cams = cameras(1, 2)
    front = cams.index_views([0, 3])
    assert front.num_views == 2 and torch.equal(front.lidar2img, cams.lidar2img[:, [0, 3]])
    assert torch.equal(cams.index_views(4).intrinsics, cams.intrinsics[:, 4:5])
    moved = cams.to('cpu')
    assert torch.equal(moved.img2lidar, cams.img2lidar)


def test_bf16_autocast_keeps_float32_and_values() -> None:
    cams = cameras(1, 2)
    points = torch.randn(2, 50, 3) * 20
    boxes = torch.cat([torch.randn(2, 5, 3) * 10, torch.rand(2, 5, 3) + 1, torch.randn(2, 5, 1)], -1)
    scene = SceneTransform.rotation(torch.tensor([0.3, -1.0])).then(SceneTransform.scaling(torch.tensor([1.05, 0.95])))
    depths = depth_bins(8, 1.0, 61.2)

    def run(c: Cameras) -> list[torch.Tensor]:
        uv, depth = c.project(points)
        moved = scene.apply_cameras(c)
        return [uv, depth, c.unproject(uv, depth), frustum_points(c, (4, 10), depths), c.lidar2img, c.img2lidar,
                moved.lidar2img, moved.project(scene.apply_points(points))[0], scene.apply_points(points),
                transform_boxes(boxes, scene.matrix.float()), box_corners(boxes)]

    expected = run(cameras(1, 2))
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
        got = run(cams)
    for e, g in zip(expected, got):
        assert g.dtype == torch.float32 and torch.equal(e, g)


def test_fingerprint_is_equal_for_equal_rigs_only() -> None:
    assert cameras(0, 1).fingerprint == cameras(0, 1).fingerprint
    assert cameras(0, 1).fingerprint != cameras(1, 0).fingerprint
    assert cameras(0).fingerprint != cameras(0, 0).fingerprint
    intrinsics, lidar2cam = rig(0)
    nudged = intrinsics.clone()
    nudged[2, 0, 2] += 1e-9  # below float32 resolution at 400 px: the float64 calibration still tells them apart
    base = Cameras(intrinsics[None], lidar2cam[None], IMAGE_SIZE)
    assert base.fingerprint != Cameras(nudged[None], lidar2cam[None], IMAGE_SIZE).fingerprint
    wider = (IMAGE_SIZE[0], IMAGE_SIZE[1] + 32)
    assert base.fingerprint != Cameras(intrinsics[None], lidar2cam[None], wider).fingerprint
    moved = Cameras(intrinsics[None], lidar2cam[None], IMAGE_SIZE,
                    scene_transform=SceneTransform.translation((0.5, 0.0, 0.0)).matrix)
    assert base.fingerprint != moved.fingerprint


def test_traced_closed_form_inverses_equal_the_eager_ones() -> None:
    """The inverses the cameras use while a model is traced (ONNX has no matrix inverse) give the eager values:
    the adjugate 3×3 inverse and the affine inverse against torch.linalg.inv, the rigid inverse against kornia."""
    from kornia.geometry.conversions import axis_angle_to_rotation_matrix
    from kornia.geometry.linalg import inverse_transformation

    from vispe.geometry.cameras import affine_inverse, inverse_3x3, rigid_inverse
    generator = torch.Generator().manual_seed(0)
    square = torch.randn(5, 3, 3, generator=generator, dtype=torch.float64) + 3 * torch.eye(3, dtype=torch.float64)
    assert torch.allclose(inverse_3x3(square), torch.linalg.inv(square), atol=1e-12)
    affine = torch.eye(4, dtype=torch.float64).repeat(5, 1, 1)
    affine[:, :3, :3], affine[:, :3, 3] = square, torch.randn(5, 3, generator=generator, dtype=torch.float64)
    assert torch.allclose(affine_inverse(affine).double(), torch.linalg.inv(affine), atol=1e-10)
    rigid = torch.eye(4).repeat(5, 1, 1)
    rigid[:, :3, :3] = axis_angle_to_rotation_matrix(torch.randn(5, 3, generator=generator))
    rigid[:, :3, 3] = torch.randn(5, 3, generator=generator)
    assert torch.allclose(rigid_inverse(rigid), inverse_transformation(rigid), atol=1e-6)
    assert torch.allclose(rigid_inverse(rigid) @ rigid, torch.eye(4).expand(5, 4, 4), atol=1e-5)
