# V-DETR's ScanNet setting on vispe's point detector (GPUs): 40000 points, 2048 PointNet++ tokens (3DETR's
# pre-encoder: radius 0.2 m, 64 neighbours, 64-128-256), width 256, 3 encoder and 8 decoder layers of 4 heads with
# one shared key/value head and 3DV-RPE in every cross-attention, 1024 queries; AdamW at 3DETR's 4e-4, weight decay
# 0.1, 540 epochs as V-DETR. vispe's backbone is PointNet++ where V-DETR uses a sparse-convolution ResNet (no build
# of MinkowskiEngine for this torch), so its numbers are not V-DETR's 77.8 / 66.0 AP25 / AP50.
_base_ = ['../_base_/datasets/scannet-points.py', '../_base_/vdetr_runtime.py']
model = dict(
    type='VDETR',
    num_classes=18,
    backbone=dict(in_channels=3, channels=(64, 128, 256), num_samples=2048, radius=0.2, group_size=64),
    embed_dim=256,
    encoder=dict(depth=3, num_heads=4, mlp_dim=128, dropout=0.1),
    decoder=dict(depth=8, num_heads=4, mlp_dim=256, dropout=0.1, num_kv_heads=1, encoding=dict(type='VertexRPE')),
    num_queries=1024,
)
max_epochs = 540
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=4e-4, weight_decay=0.1), clip_grad=dict(max_norm=0.1, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=9, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=9, end=max_epochs, eta_min=1e-6, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=10)
val_cfg = dict()
test_cfg = dict()
