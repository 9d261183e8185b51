# PETR's optimisation (AdamW, weight decay 0.01, gradient clipping at 35, cosine decay after a linear warm-up)
# shortened to one epoch of the 2000 training samples (500 steps of 4, about 11 minutes on 2 CPU cores); the
# backbone trains from scratch at the transformer's rate; one evaluation, at the end.
max_epochs = 1
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01),
    clip_grad=dict(max_norm=35, norm_type=2),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1 / 3, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=5e-6, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=max_epochs)
val_cfg = dict()
test_cfg = dict()
