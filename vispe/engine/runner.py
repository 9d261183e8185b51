"""Loading configs and building mmengine Runners with vispe's defaults and error messages."""
from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Iterator

from mmengine.config import Config
from mmengine.runner import Runner

from vispe import registry
from vispe.registry import UnknownTypeError, VispeRegistry, unknown_type_message


def load_config(path: str | Path, cfg_options: dict[str, Any] | None = None,
                work_dir: str | Path | None = None) -> Config:
    """Read a config, apply ``--cfg-options``, and set the work dir (default ``work_dirs/<config name>``)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'Config {path} not found.')
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = str(work_dir)
    elif cfg.get('work_dir') is None:
        cfg.work_dir = str(Path('work_dirs') / path.stem)
    return cfg


@contextlib.contextmanager
def named_unknown_types() -> Iterator[None]:
    """Turn mmengine's "X is not in the registry" errors raised inside the block into
    :class:`UnknownTypeError` naming the closest registered type (builds happen lazily: models when the
    Runner is made, datasets and metrics when it trains or tests)."""
    try:
        yield
    except KeyError as exc:
        match = re.search(r"(\S+) is not in the (?:\S+::)?(.+?) registry", str(exc))
        if match is None or isinstance(exc, UnknownTypeError):
            raise
        name, kind = match.group(1).strip('\'"'), match.group(2)
        children = [value for value in vars(registry).values() if isinstance(value, VispeRegistry) and value.name == kind]
        known = sorted({key for child in children for key in (*child.module_dict, *child.parent.module_dict)})
        raise UnknownTypeError(unknown_type_message(kind, name, known)) from None


def build_runner(cfg: Config) -> Runner:
    """``Runner.from_cfg`` inside :func:`named_unknown_types`."""
    with named_unknown_types():
        return Runner.from_cfg(cfg)
