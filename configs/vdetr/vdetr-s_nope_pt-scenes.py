# V-DETR-S on pt-scenes with no position in the decoder's cross-attention (NoPE): the point tokens' features
# carry only local geometry, so the decoder cannot relate a query's box to where the points are.
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(decoder=dict(encoding=dict(type='NoPE')))
