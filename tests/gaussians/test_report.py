"""The Gaussian report: empirical entropy and attribute PSNR by hand, a report row of a real bitstream (its size
the file's, the coded bits per section, PSNR finite where the codec loses and ∞ where it keeps a group exactly),
and the rendered quality of decoded scenes against the source's renders."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.gaussians import write_gaussians_ply
from vispe.gaussians.bitstream import unpack, write_bitstream
from vispe.gaussians.cameras import PinholeCamera, write_cameras_json
from vispe.gaussians.codec import CodecConfig, compress
from vispe.gaussians.render_quality import ReferenceViews
from vispe.gaussians.report import attribute_psnr, bitstream_report, empirical_entropy

from .test_codec import varied_cloud


def test_entropy_and_psnr_by_hand() -> None:
    # symbols 0, 0, 1, 1 (H = 1 bit) and a constant column (0 bits)
    values = np.array([[0.0, 5.0], [0.04, 5.0], [1.0, 5.0], [0.96, 5.0]])
    assert empirical_entropy(values, step=1.0) == pytest.approx(1.0)
    source = np.array([[0.0, 1.0], [1.0, 1.0]])
    # the varying column has range 1 and errors 0.1 -> MSE 0.01 -> 20 dB; the constant column is left out
    assert attribute_psnr(source, source + [[0.1, 3.0], [-0.1, 3.0]]) == pytest.approx(20.0)
    assert attribute_psnr(source, source) == math.inf and math.isnan(attribute_psnr(source[:, 1:], source[:, 1:]))


def test_report_rows_of_real_bitstreams(tmp_path: Path, capsys) -> None:
    cloud = varied_cloud()
    ply = write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    paths = []
    for codec in ('float16', 'factorized'):
        paths.append(write_bitstream(tmp_path / f'{codec}.vgs', compress(cloud, CodecConfig(codec=codec))))
    row = bitstream_report(cloud, paths[1])
    assert row['bytes'] == paths[1].stat().st_size and row['bits_per_gaussian'] == pytest.approx(8 * row['bytes'] / 600)
    assert row['groups']['f_dc']['coded_bits'] == pytest.approx(8 * len(unpack(paths[1].read_bytes())[1]['group_f_dc'])
                                                                / 600)
    assert 30 < row['groups']['f_dc']['psnr'] < 80 and 0 < row['groups']['scale']['entropy_bits']
    assert row['encode_seconds'] >= 0 and 60 < row['centres_psnr'] < 120
    tool = load_tool('gaussians/report')
    assert tool.main([str(ply), *map(str, paths), '--out', str(tmp_path / 'report')]) == 0
    assert 'factorized.vgs | factorized | 1.0' in capsys.readouterr().out
    assert all((tmp_path / f'report{suffix}').stat().st_size > 100 for suffix in ('.json', '.csv', '.png'))


def test_rendered_quality_of_decoded_scenes(tmp_path: Path, capsys) -> None:
    cloud = varied_cloud()
    ply = write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    look = PinholeCamera('front', np.eye(4), np.array([[40.0, 0, 23.5], [0, 40, 17.5], [0, 0, 1]]), 48, 36)
    cameras = [look.moved('front', offset=(1.5, 1.5, -6.0)), look.moved('side', offset=(1.5, 1.5, -6.0),
                                                                      yaw_degrees=10)]
    write_cameras_json(tmp_path / 'cameras.json', cameras)
    views = ReferenceViews.of(cloud, cameras)
    assert all(image.amax() > 0.3 for image in views.images)                   # the scene is in view
    coarse, fine = (write_bitstream(tmp_path / f'f{scale}.vgs', compress(cloud, CodecConfig(codec='factorized',
                                                                                        step_scale=scale)))
                    for scale in (4.0, 0.25))
    rows = [bitstream_report(cloud, path, views=views) for path in (coarse, fine)]
    assert 15 < rows[0]['render_psnr'] < rows[1]['render_psnr'] and rows[0]['render_ssim'] < rows[1]['render_ssim'] <= 1
    assert len(rows[0]['render_psnr_views']) == 2
    assert views.quality(cloud)['render_psnr'] == math.inf                      # the source renders as itself
    tool = load_tool('gaussians/report')
    assert tool.main([str(ply), str(coarse), '--cameras', str(tmp_path / 'cameras.json'), '--render-scale', '0.5',
                      '--device', 'cpu', '--out', str(tmp_path / 'report')]) == 0
    assert 'render PSNR | render SSIM' in capsys.readouterr().out
    record = json.loads((tmp_path / 'report.json').read_text())
    assert record['render']['renderer'].startswith('vispe torch rasterizer') and record['render']['scale'] == 0.5
    assert record['date'] and 'commit' in record                                 # the docs' provenance line
    assert [view['width'] for view in record['render']['views']] == [24, 24] and record['rows'][0]['render_psnr'] > 15


@pytest.mark.parametrize('options, message', [
    (['--render-scale', '0.5'], '--render-scale 0.5: only applies to rendering, which needs --cameras'),
    (['--cameras', 'CAMERAS', '--renderer', 'gsplat', '--device', 'cpu'], 'gsplat rasterizes on CUDA only'),
    (['--cameras', 'CAMERAS', '--device', 'tpu9'], '--device tpu9: is no torch device'),
])
def test_render_options_that_cannot_run_are_named(tmp_path: Path, capsys, options: list[str], message: str) -> None:
    cloud = varied_cloud(50)
    ply = write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    bitstream = write_bitstream(tmp_path / 'f.vgs', compress(cloud, CodecConfig(codec='float16')))
    cameras = write_cameras_json(tmp_path / 'cameras.json', [PinholeCamera('c', np.eye(4), np.eye(3), 8, 8)])
    options = [str(cameras) if option == 'CAMERAS' else option for option in options]
    with pytest.raises(SystemExit):
        load_tool('gaussians/report').main([str(ply), str(bitstream), *options])
    assert message in capsys.readouterr().err
