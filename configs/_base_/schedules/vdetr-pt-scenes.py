# AdamW (3DETR's weight decay 0.1 and gradient clipping at 0.1), a linear warm-up then cosine decay, shortened to fit
# 30 minutes on 2 CPU cores (6 epochs: VertexRPE about 23 minutes alone, 46 on one core beside a second run; the
# absolute encodings and NoPE about 12 alone, 18-20 beside another run);
# validation on the held-out 'val' scenes every 2 epochs.
max_epochs = 6
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=5e-4, weight_decay=0.1),
    clip_grad=dict(max_norm=0.1, norm_type=2),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=1e-6, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=2)
val_cfg = dict()
test_cfg = dict()
