# Real ScanNet v2 in the preprocessed layout of VoteNet / 3DETR / V-DETR (datasets/README.md: datasets/scannet, made
# by 3DETR's scannet/batch_load_scannet_data.py): 40000 points per scene with colour, the 18 nyu40 classes 3DETR
# detects, 3DETR's augmentation; trained on 'train', reported on 'val' (ScanNet's test labels are not public).
data_root = 'datasets/scannet/'
classes = ('cabinet', 'bed', 'chair', 'sofa', 'table', 'door', 'window', 'bookshelf', 'picture', 'counter', 'desk',
           'curtain', 'refrigerator', 'showercurtrain', 'toilet', 'sink', 'bathtub', 'garbagebin')
num_points = 40000
# The training scenes' horizontal extent in metres, approximate (not measured from the files): ScanNet's scans run
# from small bathrooms of about 2 m across to apartments of about 15 m. tools/infer_points.py warns when a scan is far
# outside it.
scene_extent = (2.0, 15.0)
train_dataloader = dict(
    batch_size=8,
    num_workers=4,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.pointscenes_collate'),
    dataset=dict(type='PointScenes', data_root=data_root, split='train', num_points=num_points, use_color=True,
                 train_augment=True),
)
val_dataloader = dict(
    batch_size=8,
    num_workers=4,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.pointscenes_collate'),
    dataset=dict(type='PointScenes', data_root=data_root, split='val', num_points=num_points, use_color=True),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='IndoorAP', classes=classes)
test_evaluator = val_evaluator
