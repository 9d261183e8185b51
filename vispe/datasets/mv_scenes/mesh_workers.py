"""Rendering with the class meshes in worker processes, shared by the single-file-per-sample converters (``--task
nvs``, ``--task crops``): each worker loads the meshes once; one process renders with all open3d threads."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from vispe.datasets.mv_scenes.meshes import CanonicalMesh, load_class_meshes
from vispe.datasets.worker_pool import map_in_processes

__all__ = ['WORKER', 'render_in_workers']

# What a worker process renders with: the converter's config and the meshes, loaded once per process.
WORKER: dict[str, Any] = {}


def _init_worker(config: Any, roots: dict[str, Path | None] | None) -> None:
    import torch

    torch.set_num_threads(1)
    WORKER.update(config=config, meshes=load_class_meshes(roots=roots))


def render_in_workers(write: Callable[..., Any], tasks: Sequence[Any], out_root: Path, config: Any,
                      meshes: list[CanonicalMesh], workers: int, roots: dict[str, Path | None] | None, module: str,
                      chunksize: int = 8) -> Iterator[Any]:
    """``write(task, out_root)`` for each task in order, in ``workers`` processes that preload ``module`` (the
    converter's, where ``write`` lives) and read the config and meshes from :data:`WORKER`; with one worker
    ``write(task, out_root, config, meshes)`` in this process."""
    if workers <= 1:
        for task in tasks:
            yield write(task, out_root, config, meshes)
        return
    yield from map_in_processes(write, tasks, out_root, workers=workers, module=module, initializer=_init_worker,
                                initargs=(config, roots), chunksize=chunksize)
