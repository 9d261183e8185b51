# ImageNet-1k at 224 px in ImageFolder layout (datasets/imagenet/{train,val}/<class>/<image>).
# Training: random resized crop, flip and DeiT-III's 3-Augment (timm's '3a': solarize, grayscale or blur, then
# colour jitter 0.3), the setting of the LookHere paper's best runs (its sweep also tried RandAugment(2, 15):
# auto_augment='rand-m15-n2'). Evaluation: the paper's own pipeline (eval_protocol='lookhere', GreenCUBIC/lookhere
# data_prep.py): the shorter side to 256 at 224 px and to S at any other size S (bilinear, antialiased), the centre
# S x S cropped, ImageNet mean/std (vispe.evaluation's docstring gives every detail).
data_root = 'datasets/imagenet'
train_dataloader = dict(
    batch_size=256,  # per process: 8 processes give the recipe's 2048
    num_workers=8,
    persistent_workers=False,  # workers restart each epoch: a resumed run equals an uninterrupted one
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='ImageFolderDataset', root=data_root, split='train', image_size=224, train_augment=True,
                 auto_augment='3a', color_jitter=0.3, re_prob=0.0),
)
val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='ImageFolderDataset', root=data_root, split='val', image_size=224, eval_protocol='lookhere'),
)
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator
