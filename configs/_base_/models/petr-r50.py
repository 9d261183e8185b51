# PETR-R50 C5 (Liu et al., ECCV 2022; megvii-research/PETR petr_r50dcn_gridmask_c5.py): ImageNet ResNet-50 (timm;
# the paper's R50 has DCN in stages 3-4 and FCOS3D weights, which timm does not have), stride 32, a 1x1 input
# projection to 256, 6 post-norm decoder layers of 8 heads (FFN 2048, dropout 0.1), 900 learnable 3D reference points,
# PETR's heads (code with velocity), focal 2.0 / L1 0.25, the nuScenes position range (±61.2 m, ±10 m) and box range.
position_range = (-61.2, -61.2, -10.0, 61.2, 61.2, 10.0)
model = dict(
    type='PETRDetector',
    backbone=dict(type='TimmFeatures', model_name='resnet50', out_index=-1, pretrained=True),
    num_classes=10,
    num_queries=900,
    embed_dim=256,
    code_size=10,
    pc_range=(-51.2, -51.2, -5.0, 51.2, 51.2, 3.0),
    decoder=dict(depth=6, num_heads=8, mlp_dim=2048, dropout=0.1),
)
