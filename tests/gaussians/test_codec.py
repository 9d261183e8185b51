"""The Gaussian codecs: decompress(compress(x)) reproduces the quantised attributes (within half a step of the
input), bit-exactly again in a fresh process with another thread count; corrupt, cut-short and foreign files are
named errors; the Gaussian bit estimate equals its closed form."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vispe.gaussians import GaussianCloud, write_gaussians_ply
from vispe.gaussians.bitstream import BitstreamError, pack, unpack
from vispe.gaussians.codec import BASE_STEPS, CodecConfig, compress, decompress, model_size
from vispe.gaussians.entropy import gaussian_bits
from vispe.gaussians.layout import AttributeGroups, encode_positions, quantize_positions

from ..conftest import REPO_ROOT


def varied_cloud(count: int = 600, seed: int = 0) -> GaussianCloud:
    """Gaussians on a noisy sphere whose colour, scale and opacity follow position (so a context can predict them)."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(count, 3))
    xyz = direction / np.linalg.norm(direction, axis=1, keepdims=True) * (2 + 0.05 * rng.normal(size=(count, 1)))
    colour = 0.5 + 0.4 * np.tanh(xyz)
    return GaussianCloud(xyz=xyz + 1.5, normals=np.zeros((count, 3)), f_dc=(colour - 0.5) / 0.2821,
                         f_rest=0.1 * rng.normal(size=(count, 3, 3)) * xyz[:, :1, None],
                         opacity=xyz[:, 2] + 0.1 * rng.normal(size=count),
                         scale=np.log(0.05 + 0.02 * np.abs(xyz)) + 0.01 * rng.normal(size=(count, 3)),
                         rotation=np.concatenate([np.ones((count, 1)), 0.1 * rng.normal(size=(count, 3))], axis=1))


def morton_sorted_attributes(cloud: GaussianCloud) -> np.ndarray:
    groups = AttributeGroups(cloud.f_rest.shape[2])
    grid = quantize_positions(cloud.xyz, cloud.xyz.min(0), cloud.xyz.max(0))
    return groups.matrix(cloud)[encode_positions(grid)[0]]


def test_gaussian_bits_match_the_reference_entropy_model() -> None:
    golden = torch.load(REPO_ROOT / 'tests' / 'data' / 'tcgs_entropy_parity.pt', weights_only=True)
    x, mean = golden['x'].clone().requires_grad_(True), golden['mean'].clone().requires_grad_(True)
    bits = gaussian_bits(x, mean, golden['scale'], golden['step'])
    torch.testing.assert_close(bits.detach(), golden['bits'], atol=1e-5, rtol=1e-5)
    bits.sum().backward()
    torch.testing.assert_close(mean.grad, golden['grad_mean'], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(x.grad, golden['grad_x'], atol=1e-4, rtol=1e-4)


def test_gaussian_bits_equal_the_closed_form() -> None:
    x, mean, scale, step = torch.tensor([0.3, -2.0]), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.5]), 0.25
    phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    expected = [-math.log2(phi((0.3 + 0.125) / 1.0) - phi((0.3 - 0.125) / 1.0)),
                -math.log2(max(phi((-2.0 + 0.125 - 1) / 0.5) - phi((-2.0 - 0.125 - 1) / 0.5), 1e-6))]
    assert gaussian_bits(x, mean, scale, step).tolist() == pytest.approx(expected, rel=1e-5)
    assert gaussian_bits(torch.tensor([100.0]), torch.tensor([0.0]), torch.tensor([1.0]), 1.0).item() == \
        pytest.approx(-math.log2(1e-6))


@pytest.mark.parametrize('codec', ['factorized', 'triplane'])
def test_round_trip_within_half_a_step(codec: str) -> None:
    cloud = varied_cloud()
    config = CodecConfig(codec=codec, steps=60, batch=256, tri_channels=4, tri_resolution=8, hidden=16)
    data = compress(cloud, config)
    decoded = decompress(data)
    groups = AttributeGroups(3)
    original, again = morton_sorted_attributes(cloud), groups.matrix(decoded)
    for name, part in groups.slices().items():
        # the tri-plane codec's learned step factor reaches up to 2x the base step
        bound = BASE_STEPS[name] * (1 if codec == 'factorized' else 2) / 2 + 1e-6
        assert np.abs(again[:, part] - original[:, part]).max() <= bound, name
    assert np.abs(np.sort(decoded.xyz, 0) - np.sort(cloud.xyz, 0)).max() < 5.0 / 65535
    assert decompress(data).as_rows().tobytes() == decoded.as_rows().tobytes()
    if codec == 'triplane':
        assert config.stats['bits_history'][-1] < config.stats['bits_history'][0]


def test_factorized_decoding_reproduces_the_quantised_attributes_exactly() -> None:
    cloud = varied_cloud()
    decoded = decompress(compress(cloud, CodecConfig(codec='factorized', step_scale=0.5)))
    groups = AttributeGroups(3)
    steps = np.concatenate([np.full(size, BASE_STEPS[name] * 0.5) for name, size in groups.sizes.items()])
    expected = (np.rint(morton_sorted_attributes(cloud).astype(np.float64) / steps) * steps).astype(np.float32)
    assert np.array_equal(groups.matrix(decoded), expected)


def test_float16_baseline_round_trip() -> None:
    cloud = varied_cloud()
    decoded = decompress(compress(cloud, CodecConfig(codec='float16')))
    assert np.allclose(decoded.as_rows(), cloud.as_rows(), atol=2e-3, rtol=1e-3)


@pytest.mark.slow
def test_decoding_in_a_fresh_process_with_other_threads_is_bit_exact(tmp_path: Path) -> None:
    cloud = varied_cloud(count=2000)
    torch.set_num_threads(1)
    data = compress(cloud, CodecConfig(codec='triplane', steps=40, batch=512, tri_channels=4, tri_resolution=16))
    (tmp_path / 'scene.vgs').write_bytes(data)
    expected = decompress(data).as_rows()
    script = ('import sys, numpy as np, torch; from vispe.gaussians.codec import decompress; '
              'rows = decompress(open(sys.argv[1], "rb").read()).as_rows(); np.save(sys.argv[2], rows)')
    env = dict(os.environ, OMP_NUM_THREADS='2', MKL_NUM_THREADS='2')
    subprocess.run([sys.executable, '-c', script, str(tmp_path / 'scene.vgs'), str(tmp_path / 'rows.npy')],
                   check=True, cwd=REPO_ROOT, env=env)
    assert np.load(tmp_path / 'rows.npy').tobytes() == expected.tobytes()


def test_corrupt_cut_and_foreign_bitstreams_are_named() -> None:
    data = compress(varied_cloud(count=200), CodecConfig(codec='factorized'))
    flipped = bytearray(data)
    flipped[-10] ^= 0x40
    with pytest.raises(BitstreamError, match='CRC-32'):
        decompress(bytes(flipped), 'scene.vgs')
    with pytest.raises(BitstreamError, match='cut short'):
        decompress(data[:-7], 'scene.vgs')
    with pytest.raises(BitstreamError, match='not a vispe Gaussian bitstream'):
        decompress(b'ply\nformat binary_little_endian 1.0\n', 'scene.ply')
    header, sections = unpack(data)
    with pytest.raises(BitstreamError, match='other coding parameters'):
        decompress(pack(dict(header, parameter_hash='0' * 32), sections), 'scene.vgs')
    with pytest.raises(BitstreamError, match='damaged header'):
        decompress(data[:8] + b'#' + data[9:], 'scene.vgs')
    with pytest.raises(BitstreamError, match='CRC-32'):
        decompress(data.replace(b'"codec": "factorized"', b'"codec": "factorizee"'), 'scene.vgs')
    with pytest.raises(ValueError, match='no Gaussians'):
        compress(GaussianCloud(**{name: np.zeros((0,) + shape) for name, shape in dict(
            xyz=(3,), normals=(3,), f_dc=(3,), f_rest=(3, 0), opacity=(), scale=(3,), rotation=(4,)).items()}))
    assert json.loads(data[8:8 + int.from_bytes(data[4:8], 'little')])['codec'] == 'factorized'
    assert write_gaussians_ply  # the CLI tests write real files


def test_the_context_model_size_follows_the_scene() -> None:
    # at 12 bits per Gaussian: the largest model for the 343k-Gaussian RGB-D scene, the smallest for a lidar sweep
    large, small = model_size(CodecConfig(), 343_274, 59, 5), model_size(CodecConfig(), 13_941, 59, 5)
    assert (large.tri_channels, large.tri_resolution, large.hidden) == (16, 32, 128)
    assert (small.tri_channels, small.tri_resolution, small.hidden) == (4, 16, 32)
    assert model_size(CodecConfig(tri_resolution=64), 13_941, 59, 5).tri_resolution == 64
    header = unpack(compress(varied_cloud(count=300), CodecConfig(steps=2)))[0]
    assert (header['config']['tri_channels'], header['config']['hidden']) == (4, 32)
