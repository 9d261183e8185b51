# A tiny ViT for 32 px crops (patch 4: an 8x8 grid), 96 wide, 4 blocks of 3 heads (head width 32), MLP ratio 2, no
# class token, and CropDepthViT's linear head to the log-depth of each patch's 4x4 pixels. ViT-T's head width at a
# width and depth a CPU trains in minutes; the encoding is set by each config in configs/crops/.
model = dict(
    type='CropDepthViT',
    min_depth=0.1,
    max_depth=100.0,
    backbone=dict(
        type='TimmViT',
        model_name='vit_tiny_patch16_224',
        img_size=32,
        patch_size=4,
        embed_dim=96,
        depth=4,
        num_heads=3,
        mlp_ratio=2.0,
        num_classes=0,
        class_token=False,
        global_pool='avg',
        drop_path_rate=0.0,
        encoding=dict(type='NoPE'),
    ),
)
