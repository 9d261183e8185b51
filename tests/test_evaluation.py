"""The top-k accuracy metric and the weight-decay groups."""
from __future__ import annotations

import torch

import vispe
from vispe.evaluation import Accuracy
from vispe.models import NoDecayOptimWrapperConstructor


def test_topk_accuracy_by_hand() -> None:
    metric = Accuracy(topk=(1, 2))
    scores = torch.tensor([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7], [0.5, 0.1, 0.4]])
    labels = [0, 2, 1, 1]
    metric.process(None, [dict(scores=s, label=l) for s, l in zip(scores, labels)])
    assert metric.compute_metrics(metric.results) == {'top1': 25.0, 'top2': 75.0}


def test_no_weight_decay_groups_follow_timm() -> None:
    model = vispe.MODELS.build(dict(type='ImageClassifier', backbone=dict(
        type='TimmViT', model_name='vit_tiny_patch16_224', img_size=16, patch_size=4, depth=1, num_classes=3,
        encoding=['LearnedAPE', dict(type='RoPEMixed')])))
    constructor = NoDecayOptimWrapperConstructor(dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3,
                                                                                             weight_decay=0.05)))
    wrapper = constructor(model)
    names = {id(p): n for n, p in model.named_parameters()}
    no_decay = {names[id(p)] for group in wrapper.optimizer.param_groups if group['weight_decay'] == 0
                for p in group['params']}
    assert {'backbone.cls_token', 'backbone.encoding.encodings.0.pos_embed', 'backbone.encoding.encodings.1.freqs',
            'backbone.blocks.0.attn.qkv.bias', 'backbone.norm.weight'} <= no_decay
    assert 'backbone.blocks.0.attn.qkv.weight' not in no_decay


def test_classifier_losses_and_batch_augment() -> None:
    from vispe.models import ImageClassifier
    backbone = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 4))
    logits_of = lambda x: backbone(x)  # noqa: E731
    x, label = torch.randn(4, 3, 2, 2), torch.tensor([0, 1, 2, 3])
    bce = ImageClassifier(backbone, loss='bce')
    expected = torch.nn.functional.binary_cross_entropy_with_logits(logits_of(x), torch.eye(4)[label])
    assert torch.allclose(bce(x, label, mode='loss')['loss'], expected)
    mixed = ImageClassifier(backbone, batch_augment=dict(mixup_alpha=0.8, cutmix_alpha=0.0, num_classes=4,
                                                         label_smoothing=0.0))
    torch.manual_seed(0)
    loss = mixed(x, label, mode='loss')['loss']
    assert torch.isfinite(loss) and loss.ndim == 0
    predictions = mixed(x, label, mode='predict')
    assert len(predictions) == 4 and torch.allclose(predictions[0]['scores'].sum(), torch.tensor(1.0))
