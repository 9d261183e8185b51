# nuScenes (datasets/nuscenes: v1.0-trainval tables, samples/, sweeps/; see datasets/README.md): the six cameras of
# key frames at 512x1408 (PETR's C5 recipe: the images cover 512x1408, cropped at the bottom), training with PETR's
# random resize around that scale and horizontal flips (cameras and boxes updated); the devkit's train/val split and
# its detection evaluation on val (the official ten classes).
data_root = 'datasets/nuscenes/'
classes = ('car', 'truck', 'construction_vehicle', 'bus', 'trailer', 'barrier', 'motorcycle', 'bicycle', 'pedestrian',
           'traffic_cone')
image_size = (512, 1408)
train_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.multiview_collate'),
    dataset=dict(type='MultiViewDetection', data_root=data_root, split='train', classes=classes, image_size=image_size,
                 train_augment=True, resize_range=(0.91, 1.14), flip=True),
)
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.multiview_collate'),
    dataset=dict(type='MultiViewDetection', data_root=data_root, split='val', classes=classes, image_size=image_size),
)
test_dataloader = val_dataloader
# nusc/devkit/NDS_official is the official NDS (all five errors; velocity and attributes come from the devkit).
val_evaluator = dict(type='NuScenesMetric', data_root=data_root, split='val', classes=classes)
test_evaluator = val_evaluator
