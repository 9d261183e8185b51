# rope-vit's released DeiT-III ViT-S/16 (Heo et al., ECCV 2024), evaluation only: the TimmViT that
# `vispe convert rope-vit` infers for rope_{axial,mixed}_deit_small_patch16_LS, less its encoding (set by the
# configs in configs/released/).
model = dict(
    type='ImageClassifier',
    backbone=dict(type='TimmViT', model_name='vit_small_patch16_224', num_classes=1000, embed_dim=384, depth=12,
                  num_heads=6, mlp_ratio=4.0, qkv_bias=True, init_values=1e-4, class_token=True, global_pool='token',
                  in_chans=3, patch_size=16),
)
