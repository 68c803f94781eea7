"""Argument checks the package's entry points share, raising what transformers raises for the same mistakes."""

import numbers
import os

from . import _native

# The runtime's bounds on threads and max_tokens (runtime/options.hpp), the CLI's --threads and --max-tokens.
MAX_THREADS = _native.MAX_THREADS
MAX_TOKENS = _native.MAX_TOKENS
# What a count without an upper bound (top_k, top_n, batch_size, max_length) is clamped to: beyond it means
# "all" anyway, and the C++ side takes 64-bit integers.
_LARGEST = 2**62


def checkpoint_path(path, what, must_exist=False):
    """`path` (str or os.PathLike) as a str; with must_exist, OSError when it is not a directory."""
    if not isinstance(path, (str, os.PathLike)):
        raise ValueError(f"{what} must be a checkpoint directory (str or os.PathLike), not {type(path).__name__}")
    directory = os.fspath(path)
    if must_exist and not os.path.isdir(directory):
        raise OSError(f"{directory}: no such directory (a Hugging Face checkpoint directory with config.json "
                      "and model.safetensors, or a ZeroModels directory, is expected)")
    return directory


def check_text(text, name):
    """ValueError for a str that is not valid Unicode text (a lone surrogate such as '\\ud800', which has no
    UTF-8 form and cannot reach the tokenizer). ASCII texts, the common case, cost nothing."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"{name} is not valid Unicode text: {e.reason} {text[e.start]!r} at index {e.start} "
                             "(a lone surrogate has no UTF-8 form)") from None
    return text


def excerpt(value, limit=64):
    """repr(value) cut to `limit` characters, so that an error message quoting a caller's 100 KB value stays
    short (the C++ side's quoted())."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def str_items(value, name):
    """The items of a list/tuple of str as a list, each a valid text; a ValueError naming the first item that
    is not a str (bytes are not text: b"person" is refused, not decoded)."""
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{name}[{i}] must be a str, not {type(item).__name__} {excerpt(item)}")
        check_text(item, f"{name}[{i}]")
    return list(value)


def text_list(value, name):
    """A str or a list/tuple of str as (list, whether it was a single text)."""
    if isinstance(value, str):
        return [check_text(value, name)], True
    if isinstance(value, (list, tuple)):
        return str_items(value, name), False
    raise ValueError(f"{name} must be a str or a list of str, not {type(value).__name__}")


def integer(value, name, minimum, maximum=None, *, clamp=False):
    """An int argument (a Python or numpy integer; not a bool, float or str, which int() would quietly
    convert) at least `minimum`. Above `maximum` it is a ValueError, or with clamp=True `maximum` (a count
    beyond every item means all of them); without `maximum`, values past 2**62 are clamped."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an int, not {type(value).__name__} {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    if maximum is None:
        return min(value, _LARGEST)
    if value > maximum:
        if clamp:
            return maximum
        raise ValueError(f"{name} must be at most {maximum}, not {value}")
    return value


def threads_and_max_tokens(threads, max_tokens):
    """from_pretrained's threads (0: every core) and max_tokens, in the CLI's bounds."""
    return (integer(threads, "threads", 0, MAX_THREADS), integer(max_tokens, "max_tokens", 1, MAX_TOKENS))


def real(value, name):
    """A float argument from a real number (not a str, which float() would parse)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, not {type(value).__name__} {value!r}")
    return float(value)
