# PETR's schedule: AdamW (lr 2e-4, weight decay 0.01, backbone at 0.1x), gradient clipping at 35, 500 iterations of
# linear warm-up from 1/3, cosine decay to 1e-3 of the rate over 24 epochs; 8 GPUs x 1 sample.
max_epochs = 24
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=2e-4, weight_decay=0.01),
    paramwise_cfg=dict(custom_keys={'backbone': dict(lr_mult=0.1)}),
    clip_grad=dict(max_norm=35, norm_type=2),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1 / 3, by_epoch=False, begin=0, end=500),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=2e-7, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=24)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=8)
