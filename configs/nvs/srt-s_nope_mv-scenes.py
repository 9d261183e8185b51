# SRT-S on mv-scenes-nvs with no position: every target ray of a view is the same query, so the model can only paint
# one colour per view (the floor of the comparison).
_base_ = ['../_base_/models/srt-s_mv-scenes.py', '../_base_/datasets/mv-scenes-nvs.py',
          '../_base_/schedules/nvs-mv-scenes.py', '../_base_/nvs_runtime.py']
model = dict(encoding=dict(type='NoPE'))
