"""tools/vis_orientation.py: predictions matched to ground truth as nuScenes matches true positives (by score, same
class, nearest under 2 m), orientation errors with the full and the half turn as period, and the figure drawn from
the JSON it writes."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import load_tool
from tests.test_vis_positions import TinyPETR, assert_figure, tiny_petr
from vispe.cli.vis_orientation import match_boxes, summarise
from vispe.models import PETRDetector


def test_matching_by_score_class_and_distance() -> None:
    gt = np.array([[0.0, 0.0, 0, 1, 1, 1, 0.0], [5.0, 0.0, 0, 1, 1, 1, 0.0], [10.0, 0.0, 0, 1, 1, 1, 0.0]])
    gt_labels = np.array([0, 0, 1])
    boxes = np.array([[0.5, 0.0, 0, 1, 1, 1, 0], [0.2, 0.0, 0, 1, 1, 1, 0], [9.0, 0.0, 0, 1, 1, 1, 0],
                      [7.5, 0.0, 0, 1, 1, 1, 0]])
    scores, labels = np.array([0.9, 0.5, 0.8, 0.7]), np.array([0, 0, 0, 1])
    # 0 takes gt 0 first (higher score), 1 finds gt 0 taken and gt 1 too far; 2 is of another class than gt 2;
    # 3 (class 1) is 2.5 m from gt 2.
    assert match_boxes(boxes, scores, labels, gt, gt_labels) == [(0, 0)]
    boxes[3, 0] = 8.5
    assert match_boxes(boxes, scores, labels, gt, gt_labels) == [(0, 0), (3, 2)]


def test_errors_with_the_full_and_the_half_turn() -> None:
    matches = [dict(cls='car', true=0.1, predicted=0.1 + math.pi - 0.2), dict(cls='car', true=-3.0, predicted=3.0)]
    summary = summarise(matches, ['car', 'truck'])
    assert summary['car']['matches'] == 2
    assert summary['car']['error_full_turn'] == pytest.approx((math.pi - 0.2 + 2 * math.pi - 6.0) / 2)
    assert summary['car']['error_half_turn'] == pytest.approx((0.2 + 2 * math.pi - 6.0) / 2)
    assert summary['truck']['matches'] == 0 and math.isnan(summary['truck']['error_full_turn'])


@pytest.fixture(scope='module')
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyPETR:
    return tiny_petr(tmp_path_factory)


def test_tool_writes_the_matches_and_draws_them_from_the_json(tiny: TinyPETR, tmp_path: Path, monkeypatch,
                                                               capsys) -> None:
    """A detector that returns the ground-truth boxes turned by 0.5 rad: every box matched, error 0.5."""
    def turned_ground_truth(self, batch):
        results = []
        for sample in batch['data_samples']:
            boxes = torch.as_tensor(sample['gt_boxes']).clone()
            boxes[:, 6] += 0.5
            results.append(dict(boxes_3d=boxes, scores=torch.full((len(boxes),), 0.9),
                                labels_3d=torch.as_tensor(sample['gt_labels'])))
        return results

    monkeypatch.setattr(PETRDetector, 'test_step', turned_ground_truth)
    tool = load_tool('vis_orientation')
    out = tmp_path / 'orientation.png'
    argv = [str(tiny.configs['petr-lid']), str(tiny.checkpoints['petr-lid']), '--score', '0', '--out', str(out)]
    assert tool.main(argv) == 0
    document = json.loads(out.with_suffix('.json').read_text())
    assert document['commit'] is None or len(document['commit']) == 40
    assert document['classes'][0] == 'car' and document['split'] == 'test-rig1'
    assert document['command'].startswith('vispe vis-orientation ') and '--score 0' in document['command']
    assert sum(stats['matches'] for stats in document['summary'].values()) == len(document['matches']) > 0
    for stats in document['summary'].values():
        assert stats['matches'] == 0 or stats['error_full_turn'] == pytest.approx(0.5, abs=1e-5)
    for match in document['matches']:
        assert -math.pi <= match['true'] < math.pi and -math.pi <= match['predicted'] < math.pi
    assert_figure(out, min_size=(1500, 400))
    again = tmp_path / 'again.png'
    assert tool.main(['--from-json', str(out.with_suffix('.json')), '--out', str(again)]) == 0
    assert_figure(again, min_size=(1500, 400))
    with pytest.raises(SystemExit):
        tool.main(['--out', str(again)])
    assert 'give a multi-view detection config and its checkpoint, or --from-json' in capsys.readouterr().err
