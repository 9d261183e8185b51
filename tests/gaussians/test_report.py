"""The Gaussian report: empirical entropy and attribute PSNR by hand, and a report row of a real bitstream (its size
the file's, the coded bits per section, PSNR finite where the codec loses and ∞ where it keeps a group exactly)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.gaussians import write_gaussians_ply
from vispe.gaussians.bitstream import unpack, write_bitstream
from vispe.gaussians.codec import CodecConfig, compress
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
