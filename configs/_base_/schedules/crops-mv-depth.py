# AdamW with a linear warm-up and cosine decay, 15 epochs of 8000 random crops (125 steps each at batch 64),
# validation after every epoch.
max_epochs = 15
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05), clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=125),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=1e-5, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
