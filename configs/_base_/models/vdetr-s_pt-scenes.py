# A small V-DETR for pt-scenes on CPU: PointNet++ set abstraction of the 4096 input points to 512 tokens (ball radius
# 0.4 m, 32 neighbours: at 4096 points a room, 3DETR's 0.2 m ball holds about 7 points and the proposals could not
# tell an object's size; 0.4 m trebled val AP25 after 2 epochs, a second set-abstraction level did not), width 128, 2
# encoder layers, 4 decoder layers of 4 heads with one shared key/value head (V-DETR's multi-query cross-attention),
# 64 queries from the proposal stage (scenes hold 4-12 objects). V-DETR's ScanNet model is the same design at width
# 256, 8 decoder layers and 1024 queries on 40k points (configs/vdetr/vdetr-m_vertex-rpe_scannet.py). No dropout in
# the encoder (on the CPU, attention dropout forces the explicit softmax over 512 x 512 per head). Each config in
# configs/vdetr/ sets the decoder's encoding.
model = dict(
    type='VDETR',
    num_classes=7,
    backbone=dict(in_channels=3, channels=(32, 64, 128), num_samples=512, radius=0.4, group_size=32),
    embed_dim=128,
    encoder=dict(depth=2, num_heads=4, mlp_dim=256, dropout=0.0),
    decoder=dict(depth=4, num_heads=4, mlp_dim=256, dropout=0.1, num_kv_heads=1),
    num_queries=64,
)
