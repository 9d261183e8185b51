# A tiny ViT for 28 px grey images: patch 2 gives a 14x14 grid at 28 px, as ViT/16 has at 224 px.
# 64 wide, 4 blocks of 4 heads (head width 16), MLP ratio 2; the encoding is set by each config.
model = dict(
    type='ImageClassifier',
    label_smoothing=0.1,
    backbone=dict(
        type='TimmViT',
        model_name='vit_tiny_patch16_224',
        img_size=28,
        patch_size=2,
        in_chans=1,
        embed_dim=64,
        depth=4,
        num_heads=4,
        mlp_ratio=2.0,
        num_classes=10,
        drop_path_rate=0.05,
        encoding=dict(type='LearnedAPE'),
    ),
)
