# A small SRT-style model for 48x64 views on CPU: a 4-level CNN (stride 8: 6x8 tokens a view), width 128, 4 encoder
# layers over the 3 input views' 144 tokens, 2 ray-decoder layers, 4 heads of 32 channels (GTA: 16 SE(3) + 16 SO(2),
# 4 frequencies). Each config in configs/nvs/ sets the encoding.
model = dict(type='NovelViewTransformer', embed_dim=128, num_heads=4, encoder_depth=4, decoder_depth=2, mlp_dim=256,
             cnn_channels=(32, 64, 96, 128))
