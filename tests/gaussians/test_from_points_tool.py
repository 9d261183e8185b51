"""tools/gaussians/from_points.py: a coloured point-cloud file and the real RGB-D pair to 3DGS .ply files; bad
sources named."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.gaussians import read_gaussians_ply
from vispe.gaussians.cameras import read_cameras_json
from vispe.geometry.point_cloud import write_points


def test_coloured_cloud_and_the_real_pair_become_gaussians(tmp_path: Path, capsys) -> None:
    tool = load_tool('gaussians/from_points')
    rng = np.random.default_rng(0)
    cloud = write_points(tmp_path / 'cloud.ply', rng.random((200, 3)), colors=rng.random((200, 3)))
    assert tool.main([str(cloud), str(tmp_path / 'g.ply'), '--sh-degree', '1']) == 0
    gaussians = read_gaussians_ply(tmp_path / 'g.ply')
    assert len(gaussians) == 200 and gaussians.sh_degree == 1
    assert tool.main(['stereo-motorcycle', str(tmp_path / 'moto.ply'), '--voxel-size', '0.02',
                      '--cameras', str(tmp_path / 'moto.cameras.json')]) == 0
    moto = read_gaussians_ply(tmp_path / 'moto.ply')
    out = capsys.readouterr().out
    assert 5_000 < len(moto) < 100_000 and '(SH degree 3) from stereo-motorcycle' in out
    assert '3 held-out cameras (right, up, down)' in out
    assert [camera.name for camera in read_cameras_json(tmp_path / 'moto.cameras.json')] == ['right', 'up', 'down']
    assert (tmp_path / 'moto.ply').stat().st_mode & 0o044  # readable by others, as any file the user writes


def test_bad_sources_are_named(tmp_path: Path, capsys) -> None:
    tool = load_tool('gaussians/from_points')
    with pytest.raises(SystemExit):
        tool.main([str(tmp_path / 'nothing.ply'), str(tmp_path / 'g.ply')])
    assert 'is neither a file, a folder' in capsys.readouterr().err
    plain = write_points(tmp_path / 'plain.ply', np.random.default_rng(0).random((20, 3)))
    with pytest.raises(ValueError, match='has no colours'):
        tool.main([str(plain), str(tmp_path / 'g.ply')])
    with pytest.raises(SystemExit):
        tool.main([str(plain), str(tmp_path / 'g.ply'), '--cameras', str(tmp_path / 'c.json')])
    assert 'names no camera' in capsys.readouterr().err
