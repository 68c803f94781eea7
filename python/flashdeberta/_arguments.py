"""Argument checks the package's entry points share, raising what transformers raises for the same mistakes."""

import os


def checkpoint_path(path, what, must_exist=False):
    """`path` (str or os.PathLike) as a str; with must_exist, OSError when it is not a directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{what} must be a checkpoint directory (str or os.PathLike), not {type(path).__name__}")
    directory = os.fspath(path)
    if must_exist and not os.path.isdir(directory):
        raise OSError(f"{directory}: no such directory (a Hugging Face checkpoint directory with config.json "
                      "and model.safetensors is expected)")
    return directory


def text_list(value, name):
    """A str or a list/tuple of str as (list, whether it was a single text)."""
    if isinstance(value, str):
        return [value], True
    if isinstance(value, (list, tuple)) and all(isinstance(t, str) for t in value):
        return list(value), False
    raise ValueError(f"{name} must be a str or a list of str, not {type(value).__name__}")
