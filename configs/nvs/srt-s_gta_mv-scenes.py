# SRT-S on mv-scenes-nvs with GTA (Miyato et al., ICLR 2024): SE(3) of the cameras and SO(2) of the pixels on the
# queries, keys, values and output of every attention, the decoder's ray queries included; no other position.
_base_ = ['../_base_/models/srt-s_mv-scenes.py', '../_base_/datasets/mv-scenes-nvs.py',
          '../_base_/schedules/nvs-mv-scenes.py', '../_base_/nvs_runtime.py']
model = dict(encoding=dict(type='GTA'))
