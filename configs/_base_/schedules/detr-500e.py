# DETR's schedule: AdamW, lr 1e-4 (backbone 1e-5), weight decay 1e-4, gradient clipping 0.1, 500 epochs with
# the learning rate divided by 10 after 400 (total batch 64 in the paper: 16 GPUs x 4).
max_epochs = 500
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-4, weight_decay=1e-4),
    clip_grad=dict(max_norm=0.1, norm_type=2),
    paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.1)}),
)
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, begin=0, end=max_epochs, milestones=[400], gamma=0.1)]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=10)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=64)
