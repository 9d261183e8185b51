# DETR (detr-r50.py) made small for the Fashion-MNIST detection set on CPU: ResNet-18 from scratch to
# stride 8 (its second stage), so a 64 px canvas gives an 8×8 grid (16×16 at 128 px); 3 + 3 layers of
# width 128, 10 queries. The encoder's encoding is set by each config in configs/detr/ (encoder.encoding).
_base_ = ['./detr-r50.py']
model = dict(
    backbone=dict(model_name='resnet18', out_index=-3, pretrained=False, frozen_bn=False),
    num_classes=10,
    num_queries=10,
    embed_dim=128,
    image_size=64,
    encoder=dict(depth=3, mlp_dim=512),
    decoder=dict(depth=3, mlp_dim=512),
)
