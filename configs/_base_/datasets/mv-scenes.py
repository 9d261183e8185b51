# mv-scenes (tools/dataset_converters/multiview_scenes.py writes it to datasets/mv-scenes): 6 cameras of real meshes on
# a ground plane in the nuScenes format. Training: rig 1 with per-sample jitter, PETR's resize-crop-flip (cameras
# updated with the images). Validation: held-out scenes of rig 1 ('test-rig1'); the second rig is split 'val'.
data_root = 'datasets/mv-scenes/'
classes = ('car', 'truck', 'bicycle', 'pedestrian', 'traffic_cone')
image_size = (90, 160)
train_dataloader = dict(
    batch_size=4,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.multiview_collate'),
    dataset=dict(type='MultiViewDetection', data_root=data_root, split='train', classes=classes, image_size=image_size,
                 train_augment=True, resize_range=(0.9, 1.1), flip=True),
)
val_dataloader = dict(
    batch_size=8,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.multiview_collate'),
    dataset=dict(type='MultiViewDetection', data_root=data_root, split='test-rig1', classes=classes,
                 image_size=image_size),
)
test_dataloader = val_dataloader
# The pedestrian mesh (a bone standing on end) looks the same after a half turn (vispe.datasets.mv_scenes.symmetry:
# chamfer 0.010 of its size, as its own mirror image; car 0.059, truck 0.092, bicycle 0.051), so its orientation error
# uses barrier's period pi; cones have none, as in nuScenes. The devkit's numbers (nusc/devkit/*) keep its own rules.
val_evaluator = dict(type='NuScenesMetric', data_root=data_root, split='test-rig1', classes=classes,
                     yaw_symmetry=dict(pedestrian=2))
test_evaluator = val_evaluator
