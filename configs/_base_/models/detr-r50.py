# DETR-R50 (Carion et al., ECCV 2020): ImageNet ResNet-50 with frozen BatchNorm, C5 (stride 32),
# 6 + 6 post-norm layers of width 256, 8 heads, FFN 2048, dropout 0.1, 100 queries, auxiliary losses,
# matching and loss weights class 1 / L1 5 / GIoU 2, no-object weight 0.1.
model = dict(
    type='DETR',
    backbone=dict(type='TimmFeatures', model_name='resnet50', out_index=-1, pretrained=True, frozen_bn=True),
    num_classes=80,
    num_queries=100,
    embed_dim=256,
    image_size=800,
    encoder=dict(depth=6, num_heads=8, mlp_dim=2048, dropout=0.1, encoding=dict(type='DETRSine')),
    decoder=dict(depth=6, num_heads=8, mlp_dim=2048, dropout=0.1),
)
