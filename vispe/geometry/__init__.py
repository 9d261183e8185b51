"""Where tokens are: the per-forward :class:`Positions` object and 2D patch-grid helpers."""
from vispe.geometry.grid import feature_grid_size, grid_coords, pad_prefix, relative_offsets, to_2tuple
from vispe.geometry.positions import Positions

__all__ = ['Positions', 'feature_grid_size', 'grid_coords', 'pad_prefix', 'relative_offsets', 'to_2tuple']
