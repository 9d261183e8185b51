# DeiT-S/16 at 224 for ImageNet-1k, for evaluating released DeiT-based weights (configs/released/): the backbone's
# sizes as the converters infer them from a DeiT-S file; each config adds its encoding.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='TimmViT',
        model_name='deit_small_patch16_224',
        embed_dim=384,
        depth=12,
        num_heads=6,
        patch_size=16,
        img_size=224,
        in_chans=3,
        mlp_ratio=4,
        qkv_bias=True,
        num_classes=1000,
    ),
)
