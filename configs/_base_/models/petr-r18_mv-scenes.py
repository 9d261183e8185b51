# PETR made small for mv-scenes on CPU: ResNet-18 from scratch to stride 8 (its third stage), shared by the six
# views; width 128, 3 decoder layers of 4 heads, 30 queries (scenes hold 2-6 objects), PETR's heads, matching and
# losses. From scratch, PETR's learnable reference points stay blind to the image for thousands of steps (every
# sample got the same boxes; mAP 0.000-0.002 after 1500 steps of 4), so the mv-scenes recipe adds three aids, the
# same for every encoding: a 2D centre-heatmap head on the backbone, queries drawn from its best tokens with a
# proposal loss (two-stage DETR's query selection: a query starts from its token's features plus the encoding's key
# embedding, so what geometry it has comes from the encoding), and PETRv2's query denoising. The position range
# holds the scene (objects 2-15 m from the ego, the lidar 1.84 m above the ground); each config in configs/petr/
# sets the encoding (``position_range`` is for them).
position_range = (-20.0, -20.0, -4.0, 20.0, 20.0, 4.0)
model = dict(
    type='PETRDetector',
    backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-3, pretrained=False),
    num_classes=5,
    num_queries=30,
    embed_dim=128,
    code_size=8,
    pc_range=(-18.0, -18.0, -3.0, 18.0, 18.0, 2.0),
    decoder=dict(depth=3, num_heads=4, mlp_dim=512, dropout=0.1),
    denoising=dict(groups=10, noise_scale=1.0, split=0.75, weight=1.0),
    centre_heatmap=dict(weight=1.0),
    token_queries=dict(proposal_weight=0.25),
)
