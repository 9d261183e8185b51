# Fashion-MNIST at 28 px (Debian's dataset-fashion-mnist; see datasets/README.md).
# Training: the 58k images of the training file outside 'minival', with mild random resized crops (area 0.8-1:
# harsher crops remove most of a 28 px item) and flips, at the one training size (no multi-resolution training,
# which would turn extrapolation into interpolation). Validation (best checkpoint, eval_resolution --tune): 'minival',
# 2000 held-out training images. Test: the 10k test images (eval_resolution takes a balanced subset with --subset).
train_dataloader = dict(
    batch_size=128,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='FashionMNIST', split='train-minus-minival', image_size=28, train_augment=True,
                 crop_scale=(0.8, 1.0), subset=None, subset_seed=0),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='FashionMNIST', split='minival', image_size=28, subset=None, subset_seed=0),
)
test_dataloader = dict(val_dataloader, dataset=dict(val_dataloader['dataset'], split='test'))
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator
