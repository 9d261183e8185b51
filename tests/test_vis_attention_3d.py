"""tools/vis_attention.py on a PETR detector: a query's cross-attention over all cameras' cells sums to 1 per head
(masked views get none), its box is the detector's own prediction, boxes are clipped at the camera's near plane,
and the tool draws the figure or refuses bad options with the fix."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vispe.engine.arguments import InvalidArgument
from vispe.geometry import Cameras
from vispe.visualization.multiview import NEAR_PLANE, box_segments
from vispe.visualization.multiview_attention import query_attention
from vispe.visualization.multiview_scene import MultiViewSample, load_sample

from .test_vis_positions import TinyPETR, assert_figure, load_tool, tiny_petr


@pytest.fixture(scope='module')
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPETR:
    return tiny_petr(tmp_path_factory)


@pytest.fixture(scope='module')
def petr(tiny: TinyPETR) -> tuple[torch.nn.Module, MultiViewSample]:
    """An untrained PETR-LID detector and test sample 0."""
    model, cfg = tiny.build('petr-lid')
    return model, load_sample(cfg.test_dataloader.dataset, 0)


def test_query_attention_sums_to_one_over_all_cameras_and_skips_masked_views(petr) -> None:
    model, sample = petr
    found = query_attention(model, sample.batch, layers=[0, -1], query=5)
    assert sorted(found.maps) == [0, 2] and found.query == 5 and not found.chosen
    for maps in found.maps.values():
        assert maps.shape == (4, 6, 3, 5)
        assert torch.allclose(maps.sum((1, 2, 3)), torch.ones(4), atol=1e-5)
    masked = dict(sample.batch, masks=sample.batch['masks'].clone())
    masked['masks'][0, 2] = False
    dropped = query_attention(model, masked, layers=[-1], query=5)
    assert float(dropped.maps[2][:, 2].abs().max()) == 0.0
    assert torch.allclose(dropped.maps[2].sum((1, 2, 3)), torch.ones(4), atol=1e-5)


def test_the_highest_scoring_query_is_the_detectors_top_prediction(petr) -> None:
    model, sample = petr
    found = query_attention(model, sample.batch, layers=[-1])
    with torch.no_grad():
        top = model(**sample.batch, mode='predict')[0]
        reference = model.predict_sets(sample.batch['inputs'], sample.batch['masks'],
                                       sample.batch['data_samples'])['reference'][0, found.query]
    assert found.chosen and found.label == int(top['labels_3d'][0])
    assert found.score == pytest.approx(float(top['scores'][0]), abs=1e-6)
    assert torch.allclose(found.box, top['boxes_3d'][0], atol=1e-5)
    low, high = torch.tensor(model.pc_range[:3]), torch.tensor(model.pc_range[3:])
    assert torch.allclose(found.anchor, low + reference * (high - low))


def test_box_edges_are_clipped_at_the_near_plane() -> None:
    # one camera looking along +x: camera (x, y, z) = (-y, -z, x) of the scene; f = 50, principal point (32, 18)
    intrinsics = torch.tensor([[[[50.0, 0, 32], [0, 50, 18], [0, 0, 1]]]])
    lidar2cam = torch.tensor([[[[0.0, -1, 0, 0], [0, 0, -1, 0], [1, 0, 0, 0], [0, 0, 0, 1]]]])
    cameras = Cameras(intrinsics, lidar2cam, (36, 64))
    ahead = box_segments(cameras, 0, torch.tensor([[10.0, 1, 0, 4, 2, 2, 0]]))[0]
    assert ahead.shape == (12, 2, 2)
    assert torch.allclose(torch.tensor(ahead[0, 0]), torch.tensor([32 - 50 * 2 / 12, 18 - 50 * 1 / 12]), atol=1e-4)
    straddling = box_segments(cameras, 0, torch.tensor([[0.0, 1, 0, 4, 2, 2, 0]]))[0]
    assert straddling.shape == (8, 2, 2)  # the front face and the 4 edges cut at x = near; the rear face is behind
    cut = straddling[4:, 1]  # the clipped ends of edges 0-4, 1-5, 2-6, 3-7: (y, z) = (2, 1), (0, 1), (0, -1), (2, -1)
    expected = [[32 - 50 * y / NEAR_PLANE, 18 - 50 * z / NEAR_PLANE] for y, z in ((2, 1), (0, 1), (0, -1), (2, -1))]
    assert torch.allclose(torch.tensor(cut), torch.tensor(expected), rtol=1e-4)
    assert box_segments(cameras, 0, torch.tensor([[-10.0, 0, 0, 4, 2, 2, 0]]))[0].shape == (0, 2, 2)


def test_tool_draws_a_query_over_six_cameras(tiny: TinyPETR, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tool = load_tool('vis_attention')
    out = tmp_path / 'attention.png'
    assert tool.main([str(tiny.configs['petr-lid']), str(tiny.checkpoints['petr-lid']), '--scene', '0',
                      '--layers', '-1', '--heads', '1', '3', '--out', str(out)]) == 0
    assert_figure(out, (1200, 900))
    printed = capsys.readouterr().out
    assert 'decoder query' in printed and '(the highest-scoring query)' in printed


def test_tool_refuses_bad_options_for_a_petr_config(tiny: TinyPETR, tmp_path: Path) -> None:
    tool = load_tool('vis_attention')
    out = tmp_path / 'refused.png'
    base = [str(tiny.configs['petr-lid']), str(tiny.checkpoints['petr-lid'])]
    cases = [
        (['--decoder-query', '30'], "--decoder-query 30: 30 outside the model's 30 object queries"),
        (['--layers', '3'], "--layers 3: 3 outside the model's 3 decoder layers"),
        (['--heads', '4'], "--heads 4: 4 outside the model's 4 attention heads"),
        (['--sizes', '64'], '--sizes 64: a 3D detector (PETRDetector) draws a sample of its data set'),
        (['--scene', '1'], 'has 1 samples; give an index from 0 to 0'),
        (['--data-root', str(tmp_path / 'none')], '`vispe dataset multiview-scenes`'),
    ]
    for extra, message in cases:
        with pytest.raises(InvalidArgument) as refused:
            tool.main([*base, *extra, '--out', str(out)])
        assert message in str(refused.value), str(refused.value)
    assert not out.exists()
