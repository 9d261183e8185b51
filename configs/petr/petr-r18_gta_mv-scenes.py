# PETR-R18 on mv-scenes at 90x160 px per camera with GTA (Miyato et al., ICLR 2024) as the encoding of a 2-layer
# encoder over the tokens of all six cameras: SE(3) of each camera's extrinsics and SO(2) of the token's image
# position on the queries, keys, values and output of its self-attention. The decoder keeps the no-3D-PE config's
# multi-view 2D sine, so what 3D geometry the detector has comes from GTA between the views.
_base_ = ['../_base_/models/petr-r18_mv-scenes.py', '../_base_/datasets/mv-scenes.py',
          '../_base_/schedules/petr-mv-scenes.py', '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='MultiViewSine'),
             encoder=dict(depth=2, num_heads=4, mlp_dim=512, dropout=0.1, encoding=dict(type='GTA')))
