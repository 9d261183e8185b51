# PETR-R18 on mv-scenes at 90x160 px per camera with GTA (Miyato et al., ICLR 2024) in the decoder's cross-attention:
# each object query is posed at its 3D reference point (ego axes, no rotation) and reads the camera tokens through
# the relative transform E_query · E_camera⁻¹ (SE(3)) and the tokens' image positions (SO(2)), on the queries, keys,
# values and output. The keys keep the no-3D-PE config's multi-view 2D sine; no encoder.
_base_ = ['../_base_/models/petr-r18_mv-scenes.py', '../_base_/datasets/mv-scenes.py',
          '../_base_/schedules/petr-mv-scenes.py', '../_base_/petr_runtime.py']
model = dict(encoding=dict(type='MultiViewSine'), decoder=dict(encoding=dict(type='GTA')))
