# mv-crops-depth (python tools/dataset_converters/multiview_scenes.py --task crops writes it to
# datasets/mv-crops-depth): 96x128 images with dense depth, 45-75 degrees of horizontal field of view. Training
# draws 4 random square crops per image and epoch (side 1/3 to 2/3 of the height), evaluation the 9 crops of half
# the height on a 3x3 grid (centre, edge, corner); all resized to 32 px. The best checkpoint is chosen on 'val';
# 'test' has the training fields of view, 'test-wide' (90-100 degrees) and 'test-tele' (30-35) unseen ones.
data_root = 'datasets/mv-crops-depth/'
train_dataloader = dict(
    batch_size=64,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.crop_depth_collate'),
    dataset=dict(type='CropDepth', data_root=data_root, split='train', crop_size=32, crops_per_image=4),
)
val_dataloader = dict(
    batch_size=72,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.crop_depth_collate'),
    dataset=dict(type='CropDepth', data_root=data_root, split='val', crop_size=32),
)
test_dataloader = dict(val_dataloader, dataset=dict(val_dataloader['dataset'], split='test'))
val_evaluator = dict(type='CropDepthMetric')
test_evaluator = val_evaluator
