"""SeqPE: digits by hand, parity with the authors' encoder, losses and attn_mul ViT (tests/data/README_parity.md),
embeddings that belong to positions (a grown grid keeps its cells' embeddings), the training shift, the samplers'
guarantees, the classifier's loss terms, and the refusals."""
from __future__ import annotations

import random

import pytest
import torch

import vispe
from vispe.encodings.seqpe import SequentialPositionEncoder, contrastive_loss, digit_tokens, distillation_loss
from vispe.encodings.seqpe.samplers import contrastive_positions, distillation_positions, hard_negative
from vispe.geometry import Positions
from vispe.models import ImageClassifier

from ..conftest import REPO_ROOT

GOLDEN = torch.load(REPO_ROOT / 'tests' / 'data' / 'seqpe_parity.pt', weights_only=True)
ENCODER = {key.removeprefix('encoding.encoder.'): value for key, value in GOLDEN['vit']['state'].items()
           if key.startswith('encoding.encoder.')}


def tiny_vit(**encoding) -> torch.nn.Module:
    torch.manual_seed(0)
    return vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2,
                            num_classes=5, encoding=dict(type='SeqPE', hidden_dim=32, **encoding))


def test_digits_by_hand() -> None:
    positions = torch.tensor([[3, 12], [0, 0], [41, 7], [99, 99]])
    assert digit_tokens(positions, 2).tolist() == [[0, 3, 1, 2], [0, 0, 0, 0], [4, 1, 0, 7], [9, 9, 9, 9]]
    assert digit_tokens(torch.tensor([3, 12]), 3).tolist() == [0, 0, 3, 0, 1, 2]


def test_encoder_equals_the_authors() -> None:
    encoder = SequentialPositionEncoder(2, 2, 32, 32, depth=2, num_heads=2).eval()
    encoder.load_state_dict(ENCODER)
    with torch.no_grad():
        out = encoder(digit_tokens(GOLDEN['positions'], 2))
    torch.testing.assert_close(out, GOLDEN['encoder_out'], atol=1e-5, rtol=0)


def test_losses_equal_the_authors() -> None:
    case = GOLDEN['contrastive']
    torch.testing.assert_close(contrastive_loss(case['pivots'], case['candidates'], case['labels']), case['loss'],
                               atol=1e-6, rtol=0)
    case = GOLDEN['distillation']
    torch.testing.assert_close(distillation_loss(case['students'], case['teachers'], case['heads']), case['loss'],
                               atol=1e-6, rtol=0)


def test_attn_mul_vit_equals_the_authors() -> None:
    """The authors' ViT (eager attention) against vispe's (SDPA): float32 rounding of a different kernel."""
    model = tiny_vit().eval()
    model.load_state_dict(GOLDEN['vit']['state'])
    with torch.no_grad():
        logits = model(GOLDEN['vit']['images'])
    torch.testing.assert_close(logits, GOLDEN['vit']['logits'], atol=5e-5, rtol=0)


def test_an_embedding_belongs_to_its_position_whatever_the_grid() -> None:
    encoding = tiny_vit().encoding.eval()
    small = encoding.table(Positions((4, 4), num_prefix_tokens=1, patch_size=8))[0, 1:].unflatten(0, (4, 4))
    grown = encoding.table(Positions((6, 9), num_prefix_tokens=1, patch_size=8))[0, 1:].unflatten(0, (6, 9))
    torch.testing.assert_close(grown[:4, :4], small)
    encoding.extrapolation = 'interpolate'
    resampled = encoding.table(Positions((6, 9), num_prefix_tokens=1, patch_size=8))[0, 1:]
    expected = torch.nn.functional.interpolate(small.permute(2, 0, 1)[None], size=(6, 9), mode='bicubic',
                                               align_corners=False)[0].flatten(1).T
    torch.testing.assert_close(resampled, expected)


def test_attn_mul_multiplies_queries_and_keys_by_each_layers_maps() -> None:
    encoding = tiny_vit().encoding.eval()
    pos = Positions((4, 4), num_prefix_tokens=1, patch_size=8)
    q, k = torch.randn(3, 2, 17, 16), torch.randn(3, 2, 17, 16)
    table = encoding.table(pos)[0]
    maps = encoding.modulators[1](table).unflatten(-1, (2, 2, 16))           # (17, 2, heads, d)
    rotated_q, rotated_k = encoding.rotate(q, k, pos, pos, 1)
    torch.testing.assert_close(rotated_q, q * maps[:, 0].transpose(0, 1))
    torch.testing.assert_close(rotated_k, k * maps[:, 1].transpose(0, 1))
    with pytest.raises(ValueError, match='self-attention'):
        encoding.rotate(q, k, pos, Positions((4, 4), num_prefix_tokens=1, patch_size=8), 0)


def test_add_mode_adds_the_table_to_the_tokens() -> None:
    encoding = tiny_vit(method='add').encoding.eval()
    pos = Positions((4, 4), num_prefix_tokens=1, patch_size=8)
    x = torch.randn(2, 17, 32)
    torch.testing.assert_close(encoding.embed(x, pos), x + encoding.table(pos))
    assert encoding.active_hooks == frozenset({'embed'}) and tiny_vit().encoding.active_hooks == {'rotate'}


def test_a_shifted_training_step_gives_each_image_one_of_the_shifted_grids() -> None:
    encoding = tiny_vit(shift_rate=1.0, shift_grids=3, shift_pool=5).encoding.train()
    encoding.encoder.eval()                                     # no dropout, to compare embeddings
    pos = Positions((4, 4), num_prefix_tokens=1, patch_size=8)
    table = encoding.table(pos)
    assert table.shape == (3, 17, 32) and encoding.last_step_shifted
    assert bool((encoding.shift_starts <= 100 - 4).all()) and bool((encoding.shift_starts >= 0).all())
    grid = torch.stack(torch.meshgrid(torch.arange(4), torch.arange(4), indexing='ij'), -1).reshape(-1, 2)
    starts = [start for start in encoding.shift_starts if torch.allclose(
        encoding.embeddings(start + grid), table[0, 1:], atol=1e-6)]
    assert starts, 'the first shifted grid is one of the pool\'s starts'
    per_image = encoding.per_image(table, 7)
    assert torch.equal(per_image[4], table[1]) and torch.equal(per_image[6], table[0])
    assert encoding.training_losses(('distillation',))['distillation'].item() == 0.0


def test_samplers() -> None:
    rng = random.Random(0)
    pivots, candidates, nearest = contrastive_positions(16, 24, 2, rng)
    assert pivots.shape == (16, 2) and candidates.shape == (16, 24, 2)
    assert bool(((candidates >= 0) & (candidates < 100)).all())
    for pivot, cells, index in zip(pivots, candidates, nearest):
        assert len({tuple(cell) for cell in cells.tolist()}) == 24 and pivot.tolist() not in cells.tolist()
        distances = ((cells - pivot) ** 2).sum(-1)
        assert distances[index] == distances.min() and int(index) == int((distances == distances.min()).nonzero()[0])
    for _ in range(200):
        pivot = (rng.randrange(100), rng.randrange(100))
        other = hard_negative(pivot, 2, rng)
        assert all(0 <= value < 100 for value in other)
        assert other != pivot
    students, teachers = distillation_positions(20, 9, (4, 5), 2, rng)
    offsets = torch.stack([teachers // 5, teachers % 5], -1)
    starts = students - offsets
    assert bool((starts == starts[:, :1]).all())               # one start per window
    assert bool(((starts[:, 0, 0] >= 4) | (starts[:, 0, 1] >= 5)).all())
    assert bool((students < 100).all())


def test_the_classifier_adds_the_weighted_regularisers() -> None:
    backbone = dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=32,
                    depth=2, num_heads=2, num_classes=5, encoding=dict(type='SeqPE', hidden_dim=32, shift_rate=0.0))
    torch.manual_seed(0)
    model = ImageClassifier(backbone, encoding_losses=dict(contrastive=0.1, distillation=0.5)).train()
    losses = model(torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3]), mode='loss')
    assert set(losses) == {'loss', 'loss_contrastive', 'loss_distillation'}
    assert losses['loss_contrastive'] > 0 and losses['loss_distillation'] > 0
    sum(losses.values()).backward()
    assert model.backbone.encoding.encoder.digit_embed.weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match='does not compute; its regularisers: contrastive, distillation'):
        ImageClassifier(backbone, encoding_losses=dict(contrastiv=0.1))
    with pytest.raises(ValueError, match='finite weight'):
        ImageClassifier(backbone, encoding_losses=dict(contrastive=-1.0))
    with pytest.raises(ValueError, match='its regularisers: none'):
        ImageClassifier(dict(backbone, encoding=dict(type='NoPE')), encoding_losses=dict(contrastive=0.1))


def test_refusals() -> None:
    encoding = tiny_vit().encoding.eval()
    with pytest.raises(ValueError, match='max_digits=2 digits.*needs 100'):
        encoding.table(Positions((101, 4), num_prefix_tokens=1, patch_size=8))
    with pytest.raises(ValueError, match='distillation_cells=20 exceeds the 16 cells'):
        tiny_vit(distillation_cells=20)


def test_shifted_grids_of_a_larger_training_grid_stay_inside_the_digits() -> None:
    encoding = tiny_vit(shift_rate=1.0).encoding.train()
    seen = []
    original = encoding.embeddings
    encoding.embeddings = lambda positions: seen.append(positions) or original(positions)
    encoding.table(Positions((20, 20), num_prefix_tokens=1, patch_size=8))
    assert int(seen[0].max()) <= 99 and encoding.last_step_shifted and encoding._teacher is None
    unshifted = tiny_vit(shift_rate=0.0).encoding.train()
    unshifted.table(Positions((4, 4), num_prefix_tokens=1, patch_size=8))
    assert unshifted._teacher is not None and unshifted._teacher.shape == (16, 32)


def test_options_that_cannot_work_are_refused_at_build_or_draw() -> None:
    from vispe.encodings.seqpe.samplers import _insert_digit
    with pytest.raises(ValueError, match='do not divide'):
        vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=64, depth=1, num_heads=2,
                         num_classes=5, encoding=dict(type='SeqPE', hidden_dim=384))
    with pytest.raises(ValueError, match='max_digits'):
        tiny_vit(max_digits=1)
    with pytest.raises(ValueError, match='fit nowhere'):
        distillation_positions(2, 4, (50, 50), 2, random.Random(0))
    assert _insert_digit('31', 10 ** 4, 2, random.Random(0)) is None       # the reference's length check


def test_module_methods_are_not_shadowed_by_options() -> None:
    """An option named like an nn.Module method (SeqPE's first name for ``method`` was ``apply``) broke
    ``model.apply(fn)``, which mmengine's and timm's initialisers call."""
    model = tiny_vit(method='add')
    visited = []
    model.apply(visited.append)
    assert model.encoding in visited


def test_a_stack_passes_its_members_regularisers_on() -> None:
    backbone = dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=32,
                    depth=2, num_heads=2, num_classes=5,
                    encoding=[dict(type='LearnedAPE'), dict(type='SeqPE', hidden_dim=32, shift_rate=0.0)])
    torch.manual_seed(0)
    model = ImageClassifier(backbone, encoding_losses=dict(contrastive=0.1)).train()
    assert model.backbone.encoding.loss_terms == ('contrastive', 'distillation')
    losses = model(torch.randn(2, 3, 32, 32), torch.tensor([0, 1]), mode='loss')
    assert set(losses) == {'loss', 'loss_contrastive'} and losses['loss_contrastive'] > 0


def test_the_last_block_computes_only_the_summary_token() -> None:
    torch.manual_seed(0)
    encoder = SequentialPositionEncoder(2, 2, 64, 32, depth=2, dropout=0.0).eval()
    tokens = torch.randn(5, 5, 64)
    full = encoder.blocks[-1](tokens)
    assert torch.allclose(encoder.blocks[-1](tokens, last_only=True)[:, 0], full[:, -1], atol=1e-6)


def test_evaluation_encodes_a_grid_once_until_the_encoder_changes(monkeypatch) -> None:
    torch.manual_seed(0)
    model = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=8, num_classes=3,
                             encoding=dict(type='SeqPE')).eval()
    encoding, images = model.encoding, torch.randn(2, 3, 32, 32)
    calls = []
    forward = encoding.encoder.forward
    monkeypatch.setattr(encoding.encoder, 'forward', lambda digits: calls.append(len(digits)) or forward(digits))
    with torch.no_grad():
        first = model(images)
        assert torch.equal(model(images), first) and calls == [16]
        encoding.encoder.out_proj.bias.add_(1.0)
        changed = model(images)
    assert calls == [16, 16] and not torch.equal(changed, first)
    model(images)  # gradients on: encoded again, never cached
    assert calls == [16, 16, 16]
