"""Gaussian scenes refuse what no renderer can draw where they enter (GaussianCloud, read_gaussians_ply,
gaussians_from_points, fit_to_neighbours): zero quaternions, NaN/inf attributes, overflowing log-scales, wrong
shapes, and warn about log-scales that look linear; each message names the attribute, the Gaussian and the fix."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from vispe.gaussians import GaussianCloud, read_gaussians_ply, write_gaussians_ply
from vispe.gaussians.init import fit_to_neighbours, gaussians_from_points
from vispe.gaussians.ply import ScaleConventionWarning

from ..gaussians.test_ply import write_raw


def attributes(count: int = 20, seed: int = 0) -> dict[str, np.ndarray]:
    """Valid constructor arguments of ``count`` Gaussians (SH degree 1) spread over a 10-unit box."""
    rng = np.random.default_rng(seed)
    return dict(xyz=10 * rng.random((count, 3)), normals=np.zeros((count, 3)), f_dc=rng.normal(size=(count, 3)),
                f_rest=rng.normal(size=(count, 3, 3)), opacity=rng.normal(size=count),
                scale=rng.normal(size=(count, 3)) - 4, rotation=rng.normal(size=(count, 4)))


def with_value(name: str, index: tuple, value: float, **overrides) -> dict[str, np.ndarray]:
    values = attributes(**overrides)
    values[name] = values[name].copy()
    values[name][index] = value
    return values


@pytest.mark.parametrize('rotation', [[0, 0, 0, 0], [0.0, -0.0, 0, 0], [1e-14, 0, 0, 0]])
def test_a_zero_quaternion_is_refused_with_its_index_and_the_fix(rotation: list[float]) -> None:
    values = attributes()
    values['rotation'][5] = rotation
    with pytest.raises(ValueError, match=r'rotation holds 1 zero quaternion.*index 5, value \[.*\].*unit '
                                         r'quaternions.*identity.*or drop those Gaussians'):
        GaussianCloud(**values)


def test_a_zero_quaternion_in_a_file_names_the_file(tmp_path: Path) -> None:
    cloud = GaussianCloud(**attributes())
    rows = cloud.as_rows()
    rows[3, -4:] = 0
    path = write_raw(tmp_path / 'zero_rot.ply', dict(zip(cloud.property_names(), rows.T)))
    with pytest.raises(ValueError, match='zero_rot.ply: rotation holds 1 zero quaternion.*index 3'):
        read_gaussians_ply(path)


def test_a_zero_quaternion_set_after_construction_is_refused_on_writing(tmp_path: Path) -> None:
    cloud = GaussianCloud(**attributes())
    cloud.rotation[2] = 0
    with pytest.raises(ValueError, match='zero quaternion.*index 2'):
        write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    assert not (tmp_path / 'scene.ply').exists()


@pytest.mark.parametrize('name,index', [('xyz', (4, 1)), ('f_dc', (4, 0)), ('f_rest', (4, 2, 1)), ('opacity', (4,)),
                                        ('scale', (4, 2)), ('rotation', (4, 3)), ('normals', (4, 0))])
@pytest.mark.parametrize('value', [np.nan, np.inf, -np.inf])
def test_non_finite_attributes_are_refused_with_index_and_value(name: str, index: tuple, value: float) -> None:
    with pytest.raises(ValueError, match=rf'{name} has .* in 1 Gaussian\(s\) \(first: index 4, value .*(nan|inf).*'
                                         r'remove those Gaussians or repair'):
        GaussianCloud(**with_value(name, index, value))


def test_values_beyond_float32_are_refused_as_infinite() -> None:
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match=r'opacity has NaN or infinite values.*index '
                                                                        r'0, value inf'):
        GaussianCloud(**with_value('opacity', (0,), 1e300))


@pytest.mark.parametrize('value', [89.0, 500.0])
def test_log_scales_whose_exp_overflows_are_refused(value: float) -> None:
    with pytest.raises(ValueError, match=r'log-scales above 88.7 in 1 Gaussian.*index 6.*store np.log of linear'):
        GaussianCloud(**with_value('scale', (6, 0), value))


def test_linear_scales_warn_and_log_scales_do_not(tmp_path: Path) -> None:
    values = attributes(count=200)
    values['scale'] = np.full((200, 3), 0.05)                         # linear 5 cm scales, read as e^0.05 = 1.05
    values['xyz'] = values['xyz'] / 5                                 # a 2-unit scene: centres ~0.34 apart
    with pytest.warns(ScaleConventionWarning, match=r'only log-scales >= 0 \(min 0.05\).*1.051 units wide.*look like '
                                                    r'linear scales: store np.log\(scales\)'):
        cloud = GaussianCloud(**values)
    with pytest.warns(ScaleConventionWarning, match='linear.ply: scale holds only log-scales'):
        read_gaussians_ply(write_gaussians_ply(tmp_path / 'linear.ply', cloud))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        GaussianCloud(**dict(values, scale=np.log(values['scale'])))
        GaussianCloud(**dict(values, xyz=values['xyz'] * 1000))      # Gaussians 1 unit wide in a 2000-unit scene
        GaussianCloud(**attributes(count=1))


@pytest.mark.parametrize('name,shape,expected', [
    ('xyz', (20,), r'xyz has shape \(20,\); give the centres as an \(N, 3\) array'),
    ('xyz', (20, 2), r'xyz has shape \(20, 2\); give the centres'),
    ('rotation', (20, 3), r'rotation has shape \(20, 3\), expected \(20, 4\)'),
    ('scale', (19, 3), r'scale has shape \(19, 3\), expected \(20, 3\) \(N = 20 Gaussians, from xyz\)'),
    ('opacity', (20, 1), r'opacity has shape \(20, 1\), expected \(20,\)'),
    ('f_rest', (20, 9), r'f_rest has shape \(20, 9\), expected \(20, 3, M\).*reshape it to \(N, 3, M\)'),
    ('f_rest', (20, 3, 5), r'15 f_rest values per Gaussian are no SH degree'),
])
def test_wrong_attribute_shapes_are_named(name: str, shape: tuple, expected: str) -> None:
    values = attributes()
    values[name] = np.zeros(shape)
    with pytest.raises(ValueError, match=expected):
        GaussianCloud(**values)


@pytest.mark.parametrize('value', ['abc', None, {'a': 1}])
def test_non_numeric_attributes_are_refused(value: object) -> None:
    with pytest.raises(TypeError, match=f'opacity of type {type(value).__name__} is not an array of numbers'):
        GaussianCloud(**dict(attributes(), opacity=value))


def test_initialisation_from_points_refuses_bad_points() -> None:
    rng = np.random.default_rng(0)
    xyz, rgb = rng.random((30, 3)), rng.random((30, 3))
    bad = xyz.copy()
    bad[7, 1] = np.nan
    with pytest.raises(ValueError, match=r'xyz of 1 point\(s\) is NaN or infinite \(first: point 7.*drop those'):
        gaussians_from_points(bad, rgb)
    colours = rgb.copy()
    colours[2] = np.inf
    with pytest.raises(ValueError, match=r'rgb of 1 point\(s\) is NaN or infinite \(first: point 2'):
        gaussians_from_points(xyz, colours)
    for degree in (4, -1, 1.5):
        with pytest.raises(ValueError, match=f'sh_degree {degree} is not one 3DGS renders; give 0, 1, 2 or 3'):
            gaussians_from_points(xyz, rgb, sh_degree=degree)
    for neighbours in (0, 2.5, True):
        with pytest.raises(ValueError, match=f'neighbours {neighbours} is not a whole number of at least 1'):
            gaussians_from_points(xyz, rgb, neighbours=neighbours)


def test_neighbourhood_fit_refuses_bad_inputs() -> None:
    rng = np.random.default_rng(0)
    xyz, rgb = rng.random((30, 3)), rng.random((30, 3))
    cloud = gaussians_from_points(xyz, rgb, sh_degree=1)
    with pytest.raises(ValueError, match=r'rgb has shape \(29, 3\); give one colour per Gaussian, \(30, 3\)'):
        fit_to_neighbours(cloud, rgb[:29])
    colours = rgb.copy()
    colours[0, 0] = np.nan
    with pytest.raises(ValueError, match='rgb of 1 point.*first: point 0'):
        fit_to_neighbours(cloud, colours)
    with pytest.raises(ValueError, match='neighbours 3 is not a whole number of at least 4'):
        fit_to_neighbours(cloud, rgb, neighbours=3)
    same = gaussians_from_points(np.ones((30, 3)), rgb, sh_degree=1)
    with pytest.raises(ValueError, match=r'all 30 centres are the same point \[1.0, 1.0, 1.0\].*distinct points'):
        fit_to_neighbours(same, rgb)
