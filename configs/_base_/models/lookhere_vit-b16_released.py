# The model of the released LookHere ViT-B/16 files (GreenCUBIC/lookhere, LH_*_weights_and_config.pth) as
# `vispe convert lookhere` infers it, for evaluation: timm's ViT-B/16 with LayerScale, the reference's LayerNorm eps
# 1e-5 and its two-layer tanh head, and the LookHere encoding with the reference's bfloat16 rounding of the biases.
# The configs in configs/released/ set the directions of each variant.
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='TimmViT',
        model_name='vit_base_patch16_224',
        num_classes=1000,
        embed_dim=768,
        depth=12,
        num_heads=12,
        patch_size=16,
        mlp_ratio=4.0,
        init_values=1e-4,
        norm_eps=1e-5,
        head_hidden_dim=3072,
        head_act='tanh',
        encoding=dict(type='LookHere', directions='halves', global_slope=1.0, layer_slopes=[1.5, 0.5],
                      distance='linear', fill_with='inf', reference_rounding=True),
    ),
)
