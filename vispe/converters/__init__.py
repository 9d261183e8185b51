"""Converters for the papers' released checkpoints, one registry (:mod:`vispe.converters.registry`); one module per
family. ``vispe convert FAMILY IN OUT`` is the command line."""
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, ConverterOptionError,
                                       UnsupportedCheckpointError, check_family, convert_state_dict, get_converter,
                                       list_converters, register_converter, resembling_families)

__all__ = ['CheckpointConverter', 'CheckpointFamilyError', 'Conversion', 'ConverterOptionError',
           'UnsupportedCheckpointError', 'check_family', 'convert_state_dict', 'get_converter', 'list_converters',
           'register_converter', 'resembling_families']
