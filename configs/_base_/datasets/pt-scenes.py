# pt-scenes (tools/dataset_converters/point_scenes.py writes it to datasets/pt-scenes): rooms of real meshes scanned
# by open3d's ray caster, in ScanNet's preprocessed layout. 4096 points per scene (random in training, a fixed seeded
# sample in evaluation), colour on, 3DETR's flips and +-5 degree turns in training; the best checkpoint is chosen
# on 'val', the reported numbers are on 'test'.
data_root = 'datasets/pt-scenes/'
classes = ('bunny', 'cow', 'bone', 'airplane', 'wuson', 'spider', 'engine')
num_points = 4096
# The training scenes' horizontal extent in metres: a room's longer side lies in RoomConfig's min_size..max_size
# (vispe/datasets/pt_scenes/room.py, 4..7 m). tools/infer_points.py warns when a scan is far outside it.
scene_extent = (4.0, 7.0)
train_dataloader = dict(
    batch_size=8,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='vispe.pointscenes_collate'),
    dataset=dict(type='PointScenes', data_root=data_root, split='train', num_points=num_points, use_color=True,
                 train_augment=True),
)
val_dataloader = dict(
    batch_size=8,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.pointscenes_collate'),
    dataset=dict(type='PointScenes', data_root=data_root, split='val', num_points=num_points, use_color=True),
)
test_dataloader = dict(
    batch_size=8,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='vispe.pointscenes_collate'),
    dataset=dict(type='PointScenes', data_root=data_root, split='test', num_points=num_points, use_color=True),
)
val_evaluator = dict(type='IndoorAP', classes=classes)
test_evaluator = val_evaluator
