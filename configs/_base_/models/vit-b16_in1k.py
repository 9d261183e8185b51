# ViT-B/16 at 224 for ImageNet-1k as in the LookHere paper: drop-path 0.1, mixup 0.8 / cutmix 1.0, binary
# cross-entropy, classifier bias initialised to -6.9 (the paper's MLP head is a linear head here).
model = dict(
    type='ImageClassifier',
    loss='bce',
    batch_augment=dict(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.0, num_classes=1000),
    head_bias_init=-6.9,
    backbone=dict(
        type='TimmViT',
        model_name='vit_base_patch16_224',
        num_classes=1000,
        drop_path_rate=0.1,
        encoding=dict(type='LearnedAPE'),
    ),
)
