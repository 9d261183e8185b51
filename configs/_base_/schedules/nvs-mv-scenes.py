# AdamW with a linear warm-up and cosine decay (SRT trains with Adam and a decaying rate), 30 epochs of the 1000
# training scenes (63 steps each at batch 16), validation every 5 epochs.
max_epochs = 30
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01), clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=100),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=1e-5, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=5)
val_cfg = dict()
test_cfg = dict()
