# COCO 2017 in DETR's layout: datasets/coco/{train2017,val2017}/ and datasets/coco/annotations/.
# Training: horizontal flip and a shorter side from 480..800 (step 32) with the longer side at most 1333
# (DETR also random-crops half of the images; vispe does not). Evaluation: shorter side 800.
# COCO holds a few boxes of zero height (train2017 annotations 918 and 2206849): they are dropped, as DETR does.
data_root = 'datasets/coco/'
train_dataloader = dict(
    batch_size=4,
    num_workers=4,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.detr_collate'),
    dataset=dict(type='CocoDetection', ann_file=data_root + 'annotations/instances_train2017.json',
                 data_root=data_root + 'train2017/', image_size=800, max_size=1333, invalid_boxes='drop',
                 train_augment=True, train_scales=tuple(range(480, 801, 32))),
)
val_dataloader = dict(
    batch_size=2,
    num_workers=2,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.detr_collate'),
    dataset=dict(type='CocoDetection', ann_file=data_root + 'annotations/instances_val2017.json',
                 data_root=data_root + 'val2017/', image_size=800, max_size=1333, invalid_boxes='drop'),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='CocoMetric', ann_file=data_root + 'annotations/instances_val2017.json')
test_evaluator = val_evaluator
