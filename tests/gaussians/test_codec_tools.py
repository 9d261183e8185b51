"""tools/gaussians/compress.py and decompress.py: a .ply through a .vgs file and back; the file is the coder's
output byte for byte; bad options and corrupt files are named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.gaussians import read_gaussians_ply, write_gaussians_ply
from vispe.gaussians.bitstream import BitstreamError, unpack

from .test_codec import morton_sorted_attributes, varied_cloud


def test_compress_then_decompress_through_files(tmp_path: Path, capsys) -> None:
    cloud = varied_cloud()
    write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    compress_tool, decompress_tool = load_tool('gaussians/compress'), load_tool('gaussians/decompress')
    assert compress_tool.main([str(tmp_path / 'scene.ply'), str(tmp_path / 'scene.vgs'), '--steps', '30',
                               '--batch', '128', '--tri-resolution', '8', '--tri-channels', '4']) == 0
    printed = capsys.readouterr().out
    size = (tmp_path / 'scene.vgs').stat().st_size
    assert f'600 Gaussians -> {tmp_path / "scene.vgs"}: {size} bytes' in printed
    header, sections = unpack((tmp_path / 'scene.vgs').read_bytes())
    assert all(len(sections[f'group_{name}']) % 4 == 0 for name in ('f_dc', 'f_rest', 'opacity', 'scale'))
    assert decompress_tool.main([str(tmp_path / 'scene.vgs'), str(tmp_path / 'again.ply')]) == 0
    again = read_gaussians_ply(tmp_path / 'again.ply')
    assert len(again) == 600 and again.sh_degree == 1
    assert np.abs(again.f_dc - morton_sorted_attributes(cloud)[:, :3]).max() <= 0.02 + 1e-6


def test_bad_options_and_corrupt_files_are_named(tmp_path: Path, capsys) -> None:
    compress_tool, decompress_tool = load_tool('gaussians/compress'), load_tool('gaussians/decompress')
    write_gaussians_ply(tmp_path / 'scene.ply', varied_cloud(count=100))
    with pytest.raises(SystemExit):
        compress_tool.main([str(tmp_path / 'scene.ply'), str(tmp_path / 'scene.vgs'), '--step-scale', '0'])
    assert '--step-scale' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compress_tool.main([str(tmp_path / 'scene.ply'), str(tmp_path / 'scene.bin')])
    capsys.readouterr()
    assert compress_tool.main([str(tmp_path / 'scene.ply'), str(tmp_path / 'scene.vgs'), '--codec', 'factorized']) == 0
    data = bytearray((tmp_path / 'scene.vgs').read_bytes())
    data[len(data) // 2] ^= 0x01
    (tmp_path / 'bad.vgs').write_bytes(bytes(data))
    with pytest.raises(BitstreamError, match='bad.vgs fails its CRC-32 check'):
        decompress_tool.main([str(tmp_path / 'bad.vgs'), str(tmp_path / 'out.ply')])
    assert not (tmp_path / 'out.ply').exists()
