"""The Hungarian matcher finds the assignment of least total cost (checked by brute force)."""
from __future__ import annotations

import itertools

import pytest
import torch

from vispe.models.detr import HungarianMatcher


def random_boxes(n: int) -> torch.Tensor:
    centres = torch.rand(n, 2) * 0.6 + 0.2
    return torch.cat([centres, torch.rand(n, 2) * 0.3 + 0.05], dim=1)


@pytest.mark.parametrize('queries,targets', [(4, 1), (4, 3), (5, 5), (6, 2), (3, 0)])
def test_matching_equals_brute_force(queries, targets) -> None:
    matcher = HungarianMatcher()
    for trial in range(5):
        generator = torch.Generator().manual_seed(trial)
        logits = torch.randn(2, queries, 4, generator=generator)
        boxes = torch.rand(2, queries, 4, generator=generator) * 0.4 + 0.1
        target = [dict(labels=torch.randint(0, 3, (targets,), generator=generator), boxes=random_boxes(targets))
                  for _ in range(2)]
        costs = matcher.cost_matrices(logits, boxes, target)
        for (rows, cols), cost in zip(matcher(logits, boxes, target), costs):
            assert len(rows) == len(cols) == targets and len(set(rows.tolist())) == targets
            found = cost[rows, cols].sum().item()
            best = min((sum(cost[q, t].item() for t, q in enumerate(perm)) for perm in
                        itertools.permutations(range(queries), targets)), default=0.0)
            assert found == pytest.approx(best, abs=1e-5)


def test_cost_is_detrs() -> None:
    """One query, one target, hand values: −p(c) + 5·L1 − 2·GIoU."""
    logits = torch.log(torch.tensor([[[0.7, 0.2, 0.1]]]))
    boxes = torch.tensor([[[0.5, 0.5, 0.2, 0.2]]])
    target = [dict(labels=torch.tensor([1]), boxes=torch.tensor([[0.5, 0.6, 0.2, 0.2]]))]
    # boxes overlap on half their height: IoU = 0.02 / 0.06 = 1/3; the enclosing box is the union, GIoU = 1/3.
    expected = -0.2 + 5 * 0.1 - 2 * (1 / 3)
    assert HungarianMatcher().cost_matrices(logits, boxes, target)[0].item() == pytest.approx(expected, abs=1e-6)
