# DETR's optimisation (AdamW, weight decay 1e-4, gradient clipping at 0.1) shortened for CPU: the backbone
# trains from scratch at the transformer's learning rate; linear warm-up then cosine decay over 8 epochs.
max_epochs = 8
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=2e-4, weight_decay=1e-4),
    clip_grad=dict(max_norm=0.1, norm_type=2),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=150),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=2e-6, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=2)
val_cfg = dict()
test_cfg = dict()
