"""Where tokens are: the per-forward :class:`Positions` object and 2D patch-grid helpers; cameras, frustum
points, 3D boxes and the augmentations that keep them consistent, point sampling (docs/geometry.md)."""
from vispe.geometry.grid import (
    feature_grid_size, grid_coords, pad_prefix, pairwise_offsets, relative_offsets, to_2tuple)
from vispe.geometry.positions import GEOMETRY, CameraGeometry, ImageGeometry, Positions, SceneGeometry
from vispe.geometry.cameras import Cameras
from vispe.geometry.boxes import (
    BOX_CORNER_SIGNS, box_corners, boxes_from_mmdet3d_legacy, boxes_from_nuscenes, boxes_to_nuscenes, check_boxes,
    check_gravity_similarity, transform_boxes, wrap_angle)
from vispe.geometry.frustum import (depth_bins, depth_map_points, frustum_pixels, frustum_points, homogeneous_pixels,
                                    lift, normalize_points)
from vispe.geometry.iou3d import axis_aligned_iou3d, rotated_giou3d, rotated_iou3d
from vispe.geometry.point_cloud import (POINT_CLOUD_SUFFIXES, PointCloudFileError, estimate_normals, knn, read_points,
                                        voxel_down_sample, write_points)
from vispe.geometry.point_sampling import ball_query, farthest_point_sample, group_points
from vispe.geometry.augment import SceneTransform, crop_cameras, hflip_cameras, resize_cameras, transform_intrinsics

__all__ = [
    'GEOMETRY', 'CameraGeometry', 'ImageGeometry', 'Positions', 'SceneGeometry', 'feature_grid_size',
    'grid_coords', 'pad_prefix', 'pairwise_offsets', 'relative_offsets', 'to_2tuple', 'Cameras',
    'BOX_CORNER_SIGNS', 'box_corners', 'boxes_from_mmdet3d_legacy', 'boxes_from_nuscenes', 'boxes_to_nuscenes',
    'check_boxes', 'check_gravity_similarity', 'transform_boxes', 'wrap_angle', 'depth_bins', 'depth_map_points',
    'frustum_pixels', 'frustum_points', 'homogeneous_pixels', 'lift', 'normalize_points', 'axis_aligned_iou3d',
    'ball_query', 'farthest_point_sample', 'group_points', 'rotated_giou3d', 'rotated_iou3d',
    'POINT_CLOUD_SUFFIXES', 'PointCloudFileError', 'estimate_normals', 'knn', 'read_points', 'voxel_down_sample',
    'write_points', 'SceneTransform', 'crop_cameras', 'hflip_cameras', 'resize_cameras', 'transform_intrinsics',
]
