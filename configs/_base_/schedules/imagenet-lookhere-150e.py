# The LookHere paper's ViT-B/16 recipe (Fuller et al., NeurIPS 2024, App. A.4.1): 150 epochs, AdamW, lr 3e-3 at
# batch 2048, weight decay 0.05, linear warm-up for 10% of training, then cosine decay to 0.
max_epochs = 150
warmup_epochs = 15
optim_wrapper = dict(
    constructor='NoDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=3e-3, weight_decay=0.05, betas=(0.9, 0.999)),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', by_epoch=True, begin=warmup_epochs, end=max_epochs, eta_min=0.0,
         convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=5)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(enable=False, base_batch_size=2048)
