# V-DETR-S on pt-scenes with V-DETR's 3DV-RPE in the decoder: a bias between each query's box vertices
# and every point token (its 10^3 table read by grid_sample).
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(decoder=dict(encoding=dict(type='VertexRPE')))
