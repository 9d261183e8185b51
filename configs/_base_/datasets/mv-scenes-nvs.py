# mv-scenes-nvs (python tools/dataset_converters/multiview_scenes.py --task nvs writes it to datasets/mv-scenes-nvs):
# 3 input views and 2 target views of 48x64 per scene. Training draws 256 random rays of each target view per scene;
# evaluation renders every pixel of both target views; the best checkpoint is chosen on 'val', numbers reported on
# 'test'.
data_root = 'datasets/mv-scenes-nvs/'
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.nvs_collate'),
    dataset=dict(type='NVSScenes', data_root=data_root, split='train', rays_per_view=256),
)
val_dataloader = dict(
    batch_size=10,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.nvs_collate'),
    dataset=dict(type='NVSScenes', data_root=data_root, split='val'),
)
test_dataloader = dict(val_dataloader, dataset=dict(val_dataloader['dataset'], split='test'))
val_evaluator = dict(type='NVSMetric')
test_evaluator = val_evaluator
