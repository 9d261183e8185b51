# PETR made small for mv-scenes on CPU: ResNet-18 from scratch to stride 16 (its fourth stage), shared by the six
# views; width 128, 3 decoder layers of 4 heads, 100 learnable 3D reference points, PETR's heads, matching and
# losses. The position range holds the scene (objects 2-25 m from the ego, the lidar 1.84 m above the ground); each
# config in configs/petr/ sets the encoding (``position_range`` is for them).
position_range = (-30.0, -30.0, -4.0, 30.0, 30.0, 4.0)
model = dict(
    type='PETRDetector',
    backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-2, pretrained=False),
    num_classes=5,
    num_queries=100,
    embed_dim=128,
    code_size=8,
    pc_range=(-28.0, -28.0, -3.0, 28.0, 28.0, 2.0),
    decoder=dict(depth=3, num_heads=4, mlp_dim=512, dropout=0.1),
)
