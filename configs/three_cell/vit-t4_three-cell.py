# The Three Cell Experiment (LOOPE, 2025) at CPU scale: a 7x7 grid of 4 px cells (28 px; the paper: 14x14 of 16 px on
# an ImageNet-pretrained ViT-B), 10k draws split 8k/1k/1k, six sigmoid outputs with binary cross-entropy, the test
# split scored at the best validation average (the authors' protocol). The tiny ViT of the Fashion-MNIST zoo, 3
# channels, patch = cell, trained from scratch; no augmentation (a flip or turn changes the answers). The encoding
# is set per run: tools/three_cell.py trains this config once per encoding and seed (NoPE here, the paper's floor).
_base_ = ['../_base_/models/vit-t4_fmnist.py', '../_base_/default_runtime.py']
grid, cell_size, count = 7, 4, 10000
model = dict(loss='bce', backbone=dict(img_size=grid * cell_size, patch_size=cell_size, in_chans=3, num_classes=6,
                                       encoding=dict(type='NoPE')))
data = dict(type='ThreeCells', grid=grid, cell_size=cell_size, count=count, seed=0)
train_dataloader = dict(batch_size=64, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=True),
                        collate_fn=dict(type='default_collate'), dataset=dict(data, split='train'))
val_dataloader = dict(batch_size=250, num_workers=0, sampler=dict(type='DefaultSampler', shuffle=False),
                      collate_fn=dict(type='default_collate'), dataset=dict(data, split='val'))
test_dataloader = dict(val_dataloader, dataset=dict(data, split='test'))
val_evaluator = dict(type='ThreeCellMetric')
test_evaluator = val_evaluator
# The paper's optimiser (Adam, cosine from 1e-3 to 2.5e-5), 150 epochs there, 30 here.
max_epochs = 30
optim_wrapper = dict(optimizer=dict(type='Adam', lr=1e-3), clip_grad=dict(max_norm=1.0))
param_scheduler = [dict(type='CosineAnnealingLR', by_epoch=True, begin=0, end=max_epochs, eta_min=2.5e-5,
                        convert_to_iter_based=True)]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(checkpoint=dict(save_best='three_cell/average', rule='greater'))
custom_hooks = [dict(type='WeightsCheckpointHook', metric='three_cell/average')]
