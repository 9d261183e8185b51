"""tools/vis_positions.py: the 3D points of PETR / 3DPPE / no-3D-PE encodings for a rendered sample land on their
feature cells when projected with the dataset's cameras; the tool draws them and refuses what it cannot draw."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from PIL import Image

pytest.importorskip('open3d', reason='the tiny mv-scenes set is ray-cast with open3d')
pytest.importorskip('nuscenes', reason='mv-scenes takes its scene names from nuscenes-devkit')

from tests.conftest import REPO_ROOT  # noqa: E402
from tests.helpers import load_tool  # noqa: E402
from tests.datasets.mv_scenes_fixture import TINY_CONFIG  # noqa: E402
from vispe.datasets.mv_scenes import convert  # noqa: E402
from vispe.engine.arguments import InvalidArgument  # noqa: E402
from vispe.geometry import Cameras, frustum_pixels  # noqa: E402
from vispe.registry import MODELS  # noqa: E402
from vispe.visualization.encoding_points import encoding_points  # noqa: E402
from vispe.visualization.multiview_scene import load_sample  # noqa: E402

ENCODINGS = ('petr-lid', '3dppe', 'nope')
IMAGE_SIZE = (48, 80)  # 3 x 5 cells of stride 16 per camera
_CACHE: dict[str, 'TinyPETR'] = {}


@dataclass
class TinyPETR:
    """A rendered mv-scenes root of one sample per split, the PETR configs pointed at it, untrained checkpoints."""

    root: Path
    configs: dict[str, Path]
    checkpoints: dict[str, Path]

    def build(self, name: str) -> tuple[torch.nn.Module, Config]:
        cfg = Config.fromfile(str(self.configs[name]))
        torch.manual_seed(0)
        return MODELS.build(cfg.model).eval(), cfg


def tiny_petr(tmp_path_factory: pytest.TempPathFactory) -> TinyPETR:
    """Made once per test session (the attention tests share it)."""
    if 'tiny' not in _CACHE:
        base = tmp_path_factory.mktemp('vis3d')
        root = base / 'mv-scenes'
        convert(root, 1, 1, 1, config=replace(TINY_CONFIG, image_size=(36, 64)), progress=False)
        configs, checkpoints = {}, {}
        for name in ENCODINGS:
            cfg = Config.fromfile(str(REPO_ROOT / 'configs' / 'petr' / f'petr-r18_{name}_mv-scenes.py'))
            cfg.test_dataloader.dataset.update(data_root=str(root), image_size=IMAGE_SIZE)
            cfg.model.backbone.out_index = -2  # stride 16, the cells these tests count
            configs[name] = base / f'{name}.py'
            cfg.dump(str(configs[name]))
            torch.manual_seed(0)
            checkpoints[name] = base / f'{name}.pth'
            torch.save({'state_dict': MODELS.build(cfg.model).state_dict(), 'meta': {'epoch': 0}}, checkpoints[name])
        _CACHE['tiny'] = TinyPETR(root, configs, checkpoints)
    return _CACHE['tiny']


def assert_figure(path: Path, min_size: tuple[int, int] = (1000, 800)) -> None:
    """A PNG of at least ``min_size`` pixels with real content (many colours, not one flat tone)."""
    assert path.read_bytes()[:4] == b'\x89PNG'
    with Image.open(path) as image:
        assert image.size[0] >= min_size[0] and image.size[1] >= min_size[1], image.size
        pixels = np.asarray(image.convert('RGB'))
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 500 and pixels.std() > 20


@pytest.fixture(scope='module')
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPETR:
    return tiny_petr(tmp_path_factory)


def test_petr_frustum_points_land_on_their_cells_at_their_bins(tiny: TinyPETR) -> None:
    model, cfg = tiny.build('petr-lid')
    sample = load_sample(cfg.test_dataloader.dataset, 0)
    found = encoding_points(model, sample.batch, bin_step=3)
    assert found.kind == 'frustum' and found.points.shape == (6, 3, 5, 11, 3) and bool(found.valid.all())
    cameras = Cameras.from_data_samples(sample.batch['data_samples'])  # the dataset's cameras, built anew
    pixels, depth = cameras.project(found.points.reshape(1, 6, -1, 3))
    cells = frustum_pixels((3, 5), IMAGE_SIZE, 'corner')[None, :, :, None].expand(6, 3, 5, 11, 2)
    assert (pixels[0].view(6, 3, 5, 11, 2) - cells).norm(dim=-1).max() < 0.05
    bins = model.encoding.depths[::3]
    assert torch.allclose(depth[0].view(6, 3, 5, 11), bins.expand(6, 3, 5, 11), rtol=1e-4)
    assert found.reprojection_error() < 0.05


def test_3dppe_points_sit_at_the_lidar_or_predicted_depth_of_their_cells(tiny: TinyPETR) -> None:
    model, cfg = tiny.build('3dppe')
    sample = load_sample(cfg.test_dataloader.dataset, 0, with_depth=True)
    cameras = Cameras.from_data_samples(sample.batch['data_samples'])
    cells = frustum_pixels((3, 5), IMAGE_SIZE, 'corner')
    lidar = encoding_points(model, sample.batch, depth='gt')
    assert lidar.kind == 'depth' and lidar.points.shape == (6, 3, 5, 1, 3)
    assert 0 < int(lidar.valid.sum()) < lidar.valid.numel()  # the sky has no LiDAR return
    pixels, depth = cameras.project(lidar.points.reshape(1, 6, -1, 3))
    valid = lidar.valid.reshape(6, -1)
    error = (pixels[0].view(6, 3, 5, 2) - cells).norm(dim=-1).reshape(6, -1)
    assert error[valid].max() < 0.05
    # each cell's point is at the nearest LiDAR depth of the pixels it covers (within the stride's reach)
    image_depth = sample.data_sample['depth']
    for view, row, col in lidar.valid[..., 0].nonzero().tolist()[:10]:
        window = image_depth[view, max(0, row * 16 - 8):row * 16 + 8, max(0, col * 16 - 8):col * 16 + 8]
        assert torch.isclose(depth[0, view].view(3, 5)[row, col], window[window > 0].min(), rtol=1e-4)
    predicted = encoding_points(model, sample.batch, depth='predicted')
    assert bool(predicted.valid.all()) and predicted.reprojection_error() < 0.05
    assert float(predicted.depths.min()) >= 1.0 - 1e-4 and float(predicted.depths.max()) <= 30.0 + 1e-4


def test_tool_draws_each_encoding(tiny: TinyPETR, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tool = load_tool('vis_positions')
    runs = {'petr': [str(tiny.configs['petr-lid']), '--bins', '4'], 'nope': [str(tiny.configs['nope'])]}
    for name, argv in runs.items():
        assert tool.main([*argv, '--scene', '0', '--out', str(tmp_path / f'{name}.png')]) == 0
        assert_figure(tmp_path / f'{name}.png')
    printed = capsys.readouterr().out
    assert 'PETR frustum points at 8 of the 32 LID depth bins of each cell (one in 4): 720 points' in printed
    assert 'MultiViewSine: no 3D points' in printed
    assert not list(tmp_path.glob('.*.tmp'))


def test_tool_refuses_what_it_cannot_draw(tiny: TinyPETR, tmp_path: Path) -> None:
    tool = load_tool('vis_positions')
    out = str(tmp_path / 'refused.png')
    cases = [
        ([str(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py')],
         'has no camera encoding with 3D points; give a multi-view 3D detection config (configs/petr/'),
        ([str(tiny.configs['petr-lid']), '--data-root', str(tmp_path / 'none')],
         'write mv-scenes there with `vispe dataset multiview-scenes`'),
        ([str(tiny.configs['3dppe']), '--depth', 'predicted'], 'give a checkpoint, or --depth gt'),
        ([str(tiny.configs['petr-lid']), '--depth', 'gt'], 'only 3DPPE has per-cell depths'),
    ]
    for argv, message in cases:
        with pytest.raises(InvalidArgument) as refused:
            tool.main([*argv, '--out', out])
        assert message in str(refused.value), str(refused.value)
    with pytest.raises(InvalidArgument, match="--scene 1: split 'test-rig1' of .* has 1 samples; give an index "
                                              "from 0 to 0"):
        tool.main([str(tiny.configs['petr-lid']), '--scene', '1', '--out', out])
    assert not Path(out).exists()
