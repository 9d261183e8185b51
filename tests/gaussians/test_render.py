"""vispe's 3DGS rasterizer: the SH basis by hand and orthonormal, a Gaussian's footprint by the EWA equations, its
centre rendered at the pixel its camera projects it to, and the vectorised compositing equal to a pixel-by-pixel
loop of gsplat's kernel (thresholds, the 0.999 clamp, the exclusive stop at T ≤ 1e-4) for any chunking."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vispe.extras import MissingExtraError
from vispe.gaussians.cameras import PinholeCamera
from vispe.gaussians.rasterize import (ALPHA_MAX, ALPHA_THRESHOLD, EPS2D, TRANSMITTANCE_MIN, composite,
                                       project_gaussians)
from vispe.gaussians.render import GaussianScene, render
from vispe.gaussians.spherical_harmonics import Y0, Y1, Y2, Y3, sh_basis, sh_colors


def test_sh_basis_by_hand() -> None:
    up, right = torch.tensor([[0.0, 0.0, 1.0]]), torch.tensor([[1.0, 0.0, 0.0]])
    # along z only the zonal functions are non-zero: Y0, Y1·z, Y2[1]·2z², Y3[3]·2z³
    torch.testing.assert_close(sh_basis(up, 3)[0], torch.tensor(
        [Y0, 0, Y1, 0, 0, 0, 2 * Y2[1], 0, 0, 0, 0, 0, 2 * Y3[3], 0, 0, 0]))
    # along x: −Y1·x, Y2[1]·(−1), Y2[2]·1, −Y3[3]·3x²z = 0, −Y3[2]·x(−1), −Y3[0]·x³
    torch.testing.assert_close(sh_basis(right, 3)[0], torch.tensor(
        [Y0, 0, 0, -Y1, 0, 0, -Y2[1], 0, Y2[2], 0, 0, 0, 0, Y3[2], 0, -Y3[0]]))


def test_sh_basis_is_orthonormal_on_the_sphere() -> None:
    count = 200_000                                            # a Fibonacci sphere: near-uniform directions
    index = torch.arange(count, dtype=torch.float64) + 0.5
    z = 1 - 2 * index / count
    angle = math.pi * (1 + 5 ** 0.5) * index
    directions = torch.stack([(1 - z ** 2).sqrt() * angle.cos(), (1 - z ** 2).sqrt() * angle.sin(), z], -1)
    basis = sh_basis(directions, 3)
    gram = 4 * math.pi * basis.T @ basis / count
    torch.testing.assert_close(gram, torch.eye(16, dtype=torch.float64), atol=1e-4, rtol=0)


def test_sh_colour_is_the_dc_colour_plus_a_half_clamped_at_zero() -> None:
    sh = torch.zeros(2, 4, 3)
    sh[0, 0] = torch.tensor([1.0, -1.0, 0.0]) / Y0
    sh[1, 0] = 0.2 / Y0
    sh[1, 3, 0] = 1.0                                         # the −Y1·x term, seen along +x: −Y1 in red
    colours = sh_colors(sh, torch.tensor([[1.0, 0, 0], [1.0, 0, 0]]), torch.zeros(3))
    torch.testing.assert_close(colours, torch.tensor([[1.5, 0.0, 0.5], [0.7 - Y1, 0.7, 0.7]]))


def camera(width: int = 13, height: int = 9, focal: float = 10.0) -> PinholeCamera:
    return PinholeCamera('test', np.eye(4), np.array([[focal, 0, (width - 1) / 2], [0, focal, (height - 1) / 2],
                                                      [0, 0, 1]]), width, height)


def one_gaussian(centre, scale: float, opacity: float, colour=(1.0, 1.0, 1.0)) -> GaussianScene:
    sh = torch.zeros(1, 1, 3)
    sh[0, 0] = (torch.tensor(colour) - 0.5) / Y0
    return GaussianScene(torch.tensor([centre], dtype=torch.float32), torch.tensor([[1.0, 0, 0, 0]]),
                         torch.full((1, 3), scale), torch.tensor([opacity]), sh)


def test_an_isotropic_gaussian_has_the_ewa_footprint() -> None:
    # on the optical axis at depth 2, scale 0.1, focal 10: Σ' = (10·0.1/2)² + 0.3 = 0.55 px², centred on pixel (4, 6)
    _, alpha = render(one_gaussian((0.0, 0.0, 2.0), 0.1, 0.8), camera())
    variance = 0.25 + EPS2D
    assert alpha[4, 6].item() == pytest.approx(0.8)
    assert alpha[4, 7].item() == pytest.approx(0.8 * math.exp(-0.5 / variance), rel=1e-5)
    assert alpha[5, 7].item() == pytest.approx(0.8 * math.exp(-1.0 / variance), rel=1e-5)
    # beyond the α ≥ 1/255 ellipse nothing is drawn: 0.8·exp(−9/(2·0.55)) < 1/255
    assert alpha[4, 9].item() == 0.0 and alpha[7, 6].item() == 0.0
    assert alpha.sum().item() == pytest.approx(sum(
        0.8 * math.exp(-(dx * dx + dy * dy) / (2 * variance)) for dx in range(-6, 7) for dy in range(-4, 5)
        if 0.8 * math.exp(-(dx * dx + dy * dy) / (2 * variance)) >= ALPHA_THRESHOLD), rel=1e-5)


def test_a_centre_renders_at_the_pixel_its_camera_projects_it_to() -> None:
    moved = camera(31, 23, focal=20.0).moved('turned', offset=(0.3, -0.2, 0.1), yaw_degrees=12.0).scaled(2.0)
    column, row, depth = 40, 17, 3.0                          # the point seen at the centre of pixel (17, 40)
    ray = np.linalg.solve(moved.intrinsics, [column, row, 1.0])
    point = moved.world_to_camera[:3, :3].T @ (depth * ray - moved.world_to_camera[:3, 3])
    _, alpha = render(one_gaussian(tuple(point), 0.01, 0.9), moved)
    assert divmod(int(alpha.argmax()), moved.width) == (row, column)
    assert alpha[row, column].item() == pytest.approx(0.9, rel=1e-4)


def reference_projection(means, quaternions, scales, opacities, world_to_camera, intrinsics, width, height) -> dict:
    """Per Gaussian in float64 from the EWA equations: scipy's rotation of the quaternion, the Jacobian of the pinhole
    by autograd at the field-of-view-clamped centre; gsplat's culls and opacity-aware box."""
    from scipy.spatial.transform import Rotation

    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    limits_x = (-(cx / fx + 0.3 * width / (2 * fx)), (width - cx) / fx + 0.3 * width / (2 * fx))
    limits_y = (-(cy / fy + 0.3 * height / (2 * fy)), (height - cy) / fy + 0.3 * height / (2 * fy))
    pinhole = lambda point: torch.stack([fx * point[0] / point[2], fy * point[1] / point[2]])   # noqa: E731
    kept = {}
    for index, (mean, quaternion, scale, opacity) in enumerate(zip(means, quaternions, scales, opacities)):
        centre = world_to_camera[:3, :3] @ mean + world_to_camera[:3, 3]
        if not 0.01 <= centre[2] <= 1e10 or opacity < 1 / 255:
            continue
        rotation = Rotation.from_quat(np.roll(quaternion, -1)).as_matrix() @ np.diag(scale)    # scalar-last order
        covariance = world_to_camera[:3, :3] @ rotation @ rotation.T @ world_to_camera[:3, :3].T
        clamped = centre.copy()
        clamped[0] = centre[2] * np.clip(centre[0] / centre[2], *limits_x)
        clamped[1] = centre[2] * np.clip(centre[1] / centre[2], *limits_y)
        jacobian = torch.autograd.functional.jacobian(pinhole, torch.from_numpy(clamped)).numpy()
        covariance2d = jacobian @ covariance @ jacobian.T + 0.3 * np.eye(2)
        extend = min(3.33, math.sqrt(2 * math.log(255 * opacity)))
        radii = np.ceil(extend * np.sqrt(np.diag(covariance2d)))
        projected = pinhole(torch.from_numpy(centre)).numpy() + [cx, cy]
        if np.linalg.det(covariance2d) <= 0 or (projected + radii <= 0).any() or \
                (projected - radii >= [width, height]).any():
            continue
        inverse = np.linalg.inv(covariance2d)
        kept[index] = (projected, inverse[[0, 0, 1], [0, 1, 1]], centre[2], radii)
    return kept


def test_projection_equals_the_ewa_equations() -> None:
    generator = torch.Generator().manual_seed(1)
    count, width, height = 400, 40, 30
    means = torch.randn(count, 3, generator=generator) * torch.tensor([2.0, 1.5, 1.0]) + torch.tensor([0, 0, 2.0])
    quaternions, scales = torch.randn(count, 4, generator=generator), torch.rand(count, 3, generator=generator) * 0.2
    opacities = torch.rand(count, generator=generator)
    turned = camera(width, height, focal=30.0).moved('turned', offset=(0.1, -0.2, 0.3), yaw_degrees=17.0)
    world_to_camera = torch.as_tensor(turned.world_to_camera, dtype=torch.float32)
    intrinsics = torch.tensor([[30.0, 0, 20.3], [0, 31, 14.8], [0, 0, 1]])
    projected = project_gaussians(means, quaternions, scales + 0.005, opacities, world_to_camera, intrinsics,
                                  width, height)
    expected = reference_projection(*(value.double().numpy() for value in (
        means, quaternions, scales + 0.005, opacities, world_to_camera, intrinsics)), width, height)
    assert projected.ids.tolist() == sorted(expected) and 100 < len(expected) < count
    reference = [expected[index] for index in projected.ids.tolist()]
    np.testing.assert_allclose(projected.means2d.numpy(), [item[0] for item in reference], atol=1e-4)
    np.testing.assert_allclose(projected.conics.numpy(), [item[1] for item in reference], rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(projected.depths.numpy(), [item[2] for item in reference], rtol=1e-5)
    np.testing.assert_array_equal(projected.radii.numpy(), [item[3] for item in reference])
    # some of them lie outside the 1.3× field of view, where the clamp changes the Jacobian
    outside = (projected.means2d[:, 0] < -0.15 * width) | (projected.means2d[:, 0] > 1.15 * width)
    assert outside.any()


def kernel_loop(projected, colours: torch.Tensor, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """gsplat's rasterize_to_pixels kernel, one pixel and one Gaussian at a time (the test's reference): the image,
    the alpha and how many pixels stopped early."""
    stops = 0
    order = torch.sort(projected.depths, stable=True).indices.tolist()
    image, alpha_out = torch.zeros(height, width, 3, dtype=torch.float64), torch.zeros(height, width)
    for row in range(height):
        for column in range(width):
            transmittance, pixel = 1.0, torch.zeros(3, dtype=torch.float64)
            for g in order:
                dx = projected.means2d[g, 0].item() - (column + 0.5)
                dy = projected.means2d[g, 1].item() - (row + 0.5)
                a, b, c = projected.conics[g].tolist()
                sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy
                alpha = min(ALPHA_MAX, projected.opacities[g].item() * math.exp(-sigma))
                if sigma < 0 or alpha < ALPHA_THRESHOLD:
                    continue
                if transmittance * (1 - alpha) <= TRANSMITTANCE_MIN:
                    stops += 1
                    break
                pixel += transmittance * alpha * colours[g].double()
                transmittance *= 1 - alpha
            image[row, column], alpha_out[row, column] = pixel, 1 - transmittance
    return image.float(), alpha_out, stops


def random_scene(count: int, seed: int = 0) -> GaussianScene:
    generator = torch.Generator().manual_seed(seed)
    means = torch.randn(count, 3, generator=generator) * torch.tensor([0.6, 0.4, 0.5]) + torch.tensor([0, 0, 2.5])
    means[0, 2] = -1.0                                                            # behind the camera: culled
    opacities = torch.rand(count, generator=generator)
    opacities[1:7] = 1.0                                         # six large opaque ones end some pixels early
    means[1:7] = torch.tensor([[0.04 * k, 0.02 * k, 2.0 + 0.1 * k] for k in range(6)])
    opacities[7] = 0.002                                         # under 1/255: culled
    scales = torch.rand(count, 3, generator=generator) * 0.15 + 0.01
    scales[1:7] = 0.4
    return GaussianScene(means, torch.randn(count, 4, generator=generator), scales, opacities,
                         torch.randn(count, 4, 3, generator=generator) * 0.5)


@pytest.mark.parametrize('pair_budget', [1, 37, 1 << 22])
def test_compositing_equals_gsplats_kernel_pixel_by_pixel(pair_budget: int) -> None:
    scene, view = random_scene(40), camera(17, 11, focal=12.0)
    intrinsics = torch.as_tensor(view.intrinsics, dtype=torch.float32).clone()
    intrinsics[:2, 2] += 0.5
    projected = project_gaussians(scene.means, scene.quaternions, scene.scales, scene.opacities,
                                  torch.eye(4), intrinsics, view.width, view.height)
    assert 0 not in projected.ids.tolist() and 7 not in projected.ids.tolist() and len(projected.ids) > 25
    colours = sh_colors(scene.sh[projected.ids], scene.means[projected.ids], torch.zeros(3))
    image, alpha = composite(projected, colours, view.width, view.height, pair_budget=pair_budget)
    expected_image, expected_alpha, stops = kernel_loop(projected, colours, view.width, view.height)
    assert stops >= 5
    torch.testing.assert_close(image, expected_image, atol=2e-5, rtol=0)
    torch.testing.assert_close(alpha, expected_alpha, atol=2e-5, rtol=0)


def test_the_stop_is_exclusive_and_the_background_fills_what_is_left() -> None:
    # two opaque Gaussians on the axis: α clamps to 0.999; the second would leave T = 1e-6 ≤ 1e-4, so it is not drawn
    scene = GaussianScene(torch.tensor([[0.0, 0, 2], [0.0, 0, 3]]), torch.tensor([[1.0, 0, 0, 0]] * 2),
                          torch.full((2, 3), 0.3), torch.ones(2), torch.zeros(2, 1, 3))
    scene.sh[0, 0, 0] = 0.5 / Y0                                               # red in front, grey behind
    image, alpha = render(scene, camera(), background=torch.tensor([0.0, 0.0, 1.0]))
    assert alpha[4, 6].item() == pytest.approx(0.999)
    torch.testing.assert_close(image[4, 6], torch.tensor([0.999, 0.999 * 0.5, 0.999 * 0.5 + 0.001]))


def test_gsplat_renders_on_cuda_only_and_names_its_extra() -> None:
    scene = one_gaussian((0.0, 0.0, 2.0), 0.1, 0.8)
    try:
        import gsplat  # noqa: F401
    except ImportError:
        with pytest.raises(MissingExtraError, match=r'vispe\[render\]'):
            render(scene, camera(), renderer='gsplat')
    else:
        with pytest.raises(ValueError, match='CUDA only'):
            render(scene, camera(), renderer='gsplat')
    with pytest.raises(ValueError, match='not one of'):
        render(scene, camera(), renderer='opengl')
