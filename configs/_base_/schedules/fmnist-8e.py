# AdamW with linear warm-up (1 epoch) and cosine decay over 8 epochs of the 58k training images; no weight decay
# on biases, norms, prefix tokens and position parameters (timm's rule, from each module's no_weight_decay()).
max_epochs = 8
optim_wrapper = dict(
    constructor='NoDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05, betas=(0.9, 0.999)),
    clip_grad=dict(max_norm=1.0),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=1, end=max_epochs, eta_min=1e-5, convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
