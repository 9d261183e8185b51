# SRT-S on mv-scenes-nvs with PETR-style camera rays: 16 points along the camera ray of each input token and of each
# target ray (canonical frame: the first input camera's), an MLP, added to the input tokens and to the ray queries
# (SRT's way of telling rays apart, with PETR's lifting).
_base_ = ['../_base_/models/srt-s_mv-scenes.py', '../_base_/datasets/mv-scenes-nvs.py',
          '../_base_/schedules/nvs-mv-scenes.py', '../_base_/nvs_runtime.py']
model = dict(encoding=dict(type='CameraRays', depth_num=16, depth_start=0.5,
                           position_range=(-12, -12, -12, 12, 12, 12)))
