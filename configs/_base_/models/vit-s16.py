# ViT-S/16 (timm vit_small_patch16_224) with a position encoding chosen by the config that inherits this.
model = dict(
    type='TimmViT',
    model_name='vit_small_patch16_224',
    num_classes=1000,
    drop_path_rate=0.1,
    encoding=dict(type='LearnedAPE'),
)
