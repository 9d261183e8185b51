"""The Gaussian codec and its tools refuse or warn where compression would not give back the scene: options out of
range, knn above the number of Gaussians, steps that collapse every attribute, quaternions quantised to zero,
float16 overflow, a centre grid stretched by an outlier, a model larger than the scene, headers of another codec,
files that are no bitstream; each message names the value and the fix."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from vispe.engine.arguments import InvalidArgument
from vispe.gaussians import GaussianCloud, write_gaussians_ply
from vispe.gaussians.bitstream import BitstreamError, pack, unpack
from vispe.gaussians.checks import QuantisationWarning
from vispe.gaussians.codec import CodecConfig, compress, decompress

from ..gaussians.test_codec import varied_cloud
from ..helpers import load_tool

TINY = dict(steps=2, batch=64, tri_channels=2, tri_resolution=4, hidden=8)


def replaced(cloud: GaussianCloud, **values: np.ndarray) -> GaussianCloud:
    return GaussianCloud(**{**cloud.__dict__, **values})


@pytest.mark.parametrize('option,value,expected', [
    ('step_scale', 0, 'step_scale 0 is not a finite number above 0; give e.g. 0.5, 1 or 2'),
    ('step_scale', -2.0, 'step_scale -2.0 is not a finite number above 0'),
    ('step_scale', float('nan'), 'step_scale nan is not a finite number above 0'),
    ('step_scale', float('inf'), 'step_scale inf is not a finite number above 0'),
    ('step_scale', '1', "step_scale '1' is not a finite number above 0"),
    ('step_scale', True, 'step_scale True is not a finite number'),
    ('lr', 0.0, r'lr 0.0 is not a finite number above 0; give e.g. 5e-3'),
    ('lr', float('nan'), 'lr nan is not a finite number'),
    ('steps', -1, 'steps -1 is not a whole number of at least 0; give e.g. 3000'),
    ('steps', 2.5, 'steps 2.5 is not a whole number'),
    ('batch', 0, 'batch 0 is not a whole number of at least 1; give e.g. 4096'),
    ('knn', 0, 'knn 0 is not a whole number of at least 1; give e.g. 4'),
    ('tri_resolution', 1, r'tri_resolution 1 is not a whole number of at least 2; give e.g. 2 \(or None to size'),
    ('tri_channels', 0, 'tri_channels 0 is not a whole number of at least 1'),
    ('hidden', -3, 'hidden -3 is not a whole number of at least 1'),
    ('seed', 0.5, 'seed 0.5 is not a whole number'),
    ('codec', 'zip', "Unknown codec 'zip'; choose one of float16, factorized, triplane"),
])
def test_out_of_range_options_are_refused(option: str, value: object, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        CodecConfig(**{option: value})


def test_knn_above_the_number_of_gaussians_is_refused_by_the_library() -> None:
    with pytest.raises(ValueError, match=r'knn 8 exceeds the 5 Gaussian\(s\) of the scene.*give knn of at most 5'):
        compress(varied_cloud(count=5), CodecConfig(knn=8, **TINY))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', QuantisationWarning)          # a model larger than five Gaussians
        assert len(decompress(compress(varied_cloud(count=5), CodecConfig(knn=5, **TINY)))) == 5
    assert len(decompress(compress(varied_cloud(count=5), CodecConfig(codec='factorized', knn=8)))) == 5


@pytest.mark.parametrize('codec', ['factorized', 'triplane'])
def test_a_step_scale_that_collapses_every_attribute_is_refused(codec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import vispe.gaussians.codec as codec_module
    monkeypatch.setattr(codec_module, '_train', lambda *args: pytest.fail('trained although refused'))
    with pytest.raises(ValueError, match=r'step scale 1e\+06 quantises every attribute to a single value \(f_dc '
                                         r'spans [\d.]+ at step 2e\+04.*the file would hold the centres only.*Give a '
                                         r'step scale below [\d.]+ \(1 is the default\)'):
        compress(varied_cloud(count=100), CodecConfig(codec=codec, step_scale=1e6, **TINY))


def test_a_group_collapsed_by_its_step_warns_with_its_span() -> None:
    cloud = varied_cloud(count=100)
    opacity = np.linspace(-2.2, -2.19, 100)                      # spans 0.01, under half the 0.05 step
    with pytest.warns(QuantisationWarning, match=r'step scale 1 quantises opacity to a single value \(opacity spans '
                                                 r'0.01 at step 0.05\).*step scale below 0.2'):
        data = compress(replaced(cloud, opacity=opacity), CodecConfig(codec='factorized'))
    assert np.ptp(decompress(data).opacity) == 0


@pytest.mark.parametrize('codec', ['factorized', 'triplane'])
def test_quaternions_quantised_to_zero_are_refused(codec: str) -> None:
    cloud = varied_cloud(count=60)
    rotation = cloud.rotation.copy()
    rotation[9] = [0.001, 0.001, 0, 0]                           # a valid, tiny quaternion: under half a step
    with pytest.raises(ValueError, match=r'1 quaternion\(s\) decode to zero under the rotation step 0.01 \(step '
                                         r'scale 1.*Gaussian 9, \[0.001.*normalise the quaternions first'):
        compress(replaced(cloud, rotation=rotation), CodecConfig(codec=codec, **TINY))


def test_float16_refuses_values_it_cannot_hold() -> None:
    cloud = varied_cloud(count=30)
    xyz = cloud.xyz.copy()
    xyz[4, 2] = 1e5
    with pytest.raises(ValueError, match=r'float16 codec cannot hold 1 Gaussian\(s\) \(first: Gaussian 4, z = '
                                         r'100000; float16 reaches ±65504\): use the factorized or triplane'):
        compress(replaced(cloud, xyz=xyz), CodecConfig(codec='float16'))
    rotation = cloud.rotation.copy()
    rotation[2] = [1e-9, 0, 0, 0]
    with pytest.raises(ValueError, match=r'decode to zero under float16 \(first: Gaussian 2'):
        compress(replaced(cloud, rotation=rotation), CodecConfig(codec='float16'))


@pytest.mark.parametrize('distance', [1e3, 1e6])
def test_one_far_outlier_warns_naming_the_grid_step(distance: float) -> None:
    cloud = varied_cloud(count=300)
    xyz = cloud.xyz.copy()
    xyz[17] = distance
    with pytest.warns(QuantisationWarning, match=r"centres' 16-bit grid has a step of [\d.e+]+ scene units.*1 "
                                                 r'Gaussian\(s\) lie far outside the rest.*index 17.*without them the '
                                                 r'box is [\d.]+ across, a step of [\d.e-]+: drop or crop'):
        compress(replaced(cloud, xyz=xyz), CodecConfig(codec='factorized'))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        compress(cloud, CodecConfig(codec='factorized'))


def test_a_scene_too_large_for_the_grid_warns_without_outliers() -> None:
    cloud = varied_cloud(count=200)
    with pytest.warns(QuantisationWarning, match='too large for one 16-bit grid at this Gaussian size: split it'):
        compress(replaced(cloud, xyz=cloud.xyz * 1e5), CodecConfig(codec='factorized'))


def test_a_context_model_larger_than_the_scene_warns() -> None:
    with pytest.warns(QuantisationWarning, match=r'context model \(tri_channels 2, tri_resolution 64, hidden 8\) '
                                                 r'stores \d+ bytes, more than the 20 Gaussians.*leave the sizes'):
        compress(varied_cloud(count=20), CodecConfig(**dict(TINY, tri_resolution=64)))


@pytest.mark.parametrize('codec', ['float16', 'factorized'])
def test_a_header_of_another_codec_names_it_and_the_fix(codec: str) -> None:
    header, sections = unpack(compress(varied_cloud(count=40), CodecConfig(codec=codec)))
    for found in ('zstd-gs', None, 3):
        data = pack(dict(header, codec=found), sections)
        with pytest.raises(BitstreamError, match=f'scene.vgs was written with codec {found!r}; this vispe decodes '
                                                 'float16, factorized, triplane: decode it with the program'):
            decompress(data, 'scene.vgs')


def test_files_that_are_no_bitstream_are_named(tmp_path: Path) -> None:
    with pytest.raises(BitstreamError, match=r'scene.ply is not a vispe Gaussian bitstream.*starts like a .ply: '
                                             r'compress it first'):
        decompress(b'ply\nformat binary_little_endian 1.0\n', 'scene.ply')
    with pytest.raises(BitstreamError, match=r"notes.vgs is not a vispe Gaussian bitstream \(no VGS1/VGS2 magic, "
                                             r"found b'hell'\)"):
        decompress(b'hello', 'notes.vgs')
    with pytest.raises(BitstreamError, match='empty.vgs is cut short: 0 bytes'):
        decompress(b'', 'empty.vgs')
    with pytest.raises(BitstreamError, match='short.vgs is cut short: 2 bytes, not even its magic'):
        decompress(b'VG', 'short.vgs')


def test_a_consistent_crc_over_inconsistent_content_is_a_named_error() -> None:
    header, sections = unpack(compress(varied_cloud(count=40), CodecConfig(codec='factorized')))
    for edit in (dict(count=41), dict(rest='x'), dict(ranges=[]), dict(low=None)):
        with pytest.raises(BitstreamError, match='scene.vgs passes its CRC-32 but does not decode.*compress the '
                                                 '.ply again'):
            decompress(pack(dict(header, **edit), sections), 'scene.vgs')
    with pytest.raises(BitstreamError, match='passes its CRC-32 but does not decode'):
        decompress(pack(header, dict(sections, stats=sections['stats'][:-4])), 'scene.vgs')


def test_the_tools_refuse_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    compress_tool, decompress_tool = load_tool('gaussians/compress'), load_tool('gaussians/decompress')
    from_points = load_tool('gaussians/from_points')
    ply = write_gaussians_ply(tmp_path / 'scene.ply', varied_cloud(count=30))
    out = tmp_path / 'scene.vgs'
    for option, value in (('--step-scale', 'nan'), ('--step-scale', 'inf'), ('--step-scale', '-1'),
                          ('--key-file', str(tmp_path / 'missing.key')), ('--steps', '-1')):
        with pytest.raises(SystemExit):
            compress_tool.main([str(ply), str(out), option, value])
        error = capsys.readouterr().err
        assert option in error and value in error, error
    (tmp_path / 'empty.key').write_bytes(b'')
    with pytest.raises(SystemExit):
        decompress_tool.main([str(ply), str(tmp_path / 'again.ply'), '--key-file', str(tmp_path / 'empty.key')])
    assert 'empty.key: is empty; write the key into it, e.g. head -c 32 /dev/urandom' in capsys.readouterr().err
    with pytest.raises(InvalidArgument, match=r'--knn 31: exceeds the 30 Gaussian\(s\) of .*scene.ply; give at '
                                              r'most 30'):
        compress_tool.main([str(ply), str(out), '--knn', '31', '--steps', '1'])
    for option, value in (('--voxel-size', 'nan'), ('--voxel-size', '0'), ('--sample', '-1')):
        with pytest.raises(SystemExit):
            from_points.main(['stereo-motorcycle', str(tmp_path / 'points.ply'), option, value])
        assert option in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / 'points.ply').exists()
