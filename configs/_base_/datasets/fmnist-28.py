# Fashion-MNIST at 28 px (Debian's dataset-fashion-mnist; see datasets/README.md).
# Training: a balanced 10k subset with random resized crops (scale augmentation, as ViT recipes have);
# validation: a balanced 2k subset of the test split.
train_dataloader = dict(
    batch_size=128,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='FashionMNIST', split='train', image_size=28, train_augment=True, crop_scale=(0.35, 1.0),
                 subset=10000, subset_seed=0),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=0,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='FashionMNIST', split='test', image_size=28, subset=2000, subset_seed=0),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator
