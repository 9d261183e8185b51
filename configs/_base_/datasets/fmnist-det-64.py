# The Fashion-MNIST detection set (tools/dataset_converters/fmnist_detection.py writes it to
# datasets/fmnist-det): 6000 train / 500 minival / 500 val canvases of 64 px with 1-3 items of 16-32 px each.
# Training: horizontal flip and a shorter side drawn from 56/64/72 (DETR's multi-scale resize, scaled down).
# Validation (best checkpoint, eval_resolution --tune): 'minival', canvases of held-out training items.
# Test: 'val', canvases of Fashion-MNIST test items (the set results are reported on).
data_root = 'datasets/fmnist-det/'
train_dataloader = dict(
    batch_size=16,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.detr_collate'),
    dataset=dict(type='CocoDetection', ann_file=data_root + 'annotations/train.json', data_root=data_root,
                 image_size=64, max_size=None, train_augment=True, train_scales=(56, 64, 72)),
)
val_dataloader = dict(
    batch_size=32,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.detr_collate'),
    dataset=dict(type='CocoDetection', ann_file=data_root + 'annotations/minival.json', data_root=data_root,
                 image_size=64, max_size=None),
)
test_dataloader = dict(val_dataloader,
                       dataset=dict(val_dataloader['dataset'], ann_file=data_root + 'annotations/val.json'))
val_evaluator = dict(type='CocoMetric', ann_file=data_root + 'annotations/minival.json')
test_evaluator = dict(type='CocoMetric', ann_file=data_root + 'annotations/val.json')
