"""GLiNER: zero-shot named entities with GLiNER 0.2.27's uni-encoder span and token-level models (a GLiNER
model directory as GLiNER's save_pretrained writes it: gliner_config.json, the weights, the tokenizer), with
GLiNER's Python API:

    model = flashdeberta.GLiNER.from_pretrained("path/to/gliner")
    model.predict_entities("Ada Lovelace worked in London.", ["person", "location"], threshold=0.5)
    # [{"start": 0, "end": 12, "text": "Ada Lovelace", "label": "person", "score": 0.97}, ...]

start and end count code points (Python str indices). The work runs in C++ with the GIL released.

A text longer than the model's max_len words is cut there, as GLiNER cuts it (long_text="truncate", the
default). long_text="windows" reads all of it in overlapping windows of at most max_len words
(window_overlap words shared, default max_len // 4) and merges their entities as one pass would decode them;
long_text="single_pass" encodes every word in one sequence, which GLiNER never does (docs/gliner.md,
"Long texts")."""

import numbers
import os

from . import _native
from ._arguments import check_text, checkpoint_path, integer, real, str_items, text_list, threads_and_max_tokens
from .models import backend_for


_LONG_TEXT = ("truncate", "windows", "single_pass")


def _long_text(long_text, window_overlap):
    if not isinstance(long_text, str) or long_text not in _LONG_TEXT:
        raise ValueError(f"long_text must be one of {', '.join(map(repr, _LONG_TEXT))}, not {long_text!r}")
    if window_overlap is not None and (isinstance(window_overlap, bool)
                                       or not isinstance(window_overlap, numbers.Integral)):
        raise ValueError(f"window_overlap must be an int or None, not {type(window_overlap).__name__}")
    if window_overlap is not None:  # past int64 it is still outside [0, max_len - 1], as the C++ check says
        window_overlap = max(-2**62, min(int(window_overlap), 2**62))
    return long_text, window_overlap


def _labels(labels):
    if isinstance(labels, str) or not isinstance(labels, (list, tuple)):
        raise ValueError(f"labels must be a list of str, not {type(labels).__name__}")
    return str_items(labels, "labels")


class GLiNER:
    """A loaded GLiNER model (docs/gliner.md): uni-encoder span models (every span mode, BiLSTM,
    fuse_layers) and token-level models on a DeBERTa-v2/v3 backbone; other kinds are refused at load."""

    def __init__(self, native, name_or_path, batch_size=8):
        self._native = native
        self.name_or_path = name_or_path
        self.batch_size = batch_size

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, device="cpu", threads=0, *, backend=None,
                        attention="flash", max_tokens=65536):
        """Loads a local GLiNER directory. device "cpu" runs the Eigen backend (backend="kokkos" the Kokkos
        one), "cuda" the CUDA backend. max_tokens bounds the tokens of one batch of texts with their
        label prompts. Raises OSError for a missing directory or file, ValueError for the rest."""
        directory = checkpoint_path(pretrained_model_name_or_path, "pretrained_model_name_or_path")
        if not os.path.isdir(directory):
            raise OSError(f"{directory}: no such directory (a GLiNER model directory with gliner_config.json is "
                          "expected)")
        threads, max_tokens = threads_and_max_tokens(threads, max_tokens)
        native = _native.Gliner(directory, backend_for(device, backend), attention, threads, max_tokens)
        return cls(native, directory)

    def predict_entities(self, text, labels, flat_ner=True, threshold=0.5, multi_label=False, *,
                         long_text="truncate", window_overlap=None):
        """The entities of one text, as GLiNER's predict_entities: a list of {"start", "end", "text", "label",
        "score"} sorted by start. flat_ner=False keeps nested spans; multi_label lets a span take several labels;
        long_text and window_overlap as the module says."""
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, not {type(text).__name__}")
        check_text(text, "text")
        return self.batch_predict_entities([text], labels, flat_ner=flat_ner, threshold=threshold,
                                           multi_label=multi_label, long_text=long_text,
                                           window_overlap=window_overlap)[0]

    def batch_predict_entities(self, texts, labels, flat_ner=True, threshold=0.5, multi_label=False,
                               batch_size=None, *, long_text="truncate", window_overlap=None):
        """The entities of each text (a list per text) for the same labels, batch_size texts per forward pass
        (default 8; under long_text="windows" every window of those texts). Each text's result is what it gets
        alone (GLiNER's batch of one)."""
        long_text, window_overlap = _long_text(long_text, window_overlap)
        texts, single = text_list(texts, "texts")
        if single:
            raise ValueError("texts must be a list of str (predict_entities takes one text)")
        labels = _labels(labels)
        size = self.batch_size if batch_size is None else integer(batch_size, "batch_size", 1)
        threshold = real(threshold, "threshold")
        return self._native.predict_entities(texts, labels, threshold, bool(flat_ner), bool(multi_label), long_text,
                                             window_overlap, size)

    def __repr__(self):
        return f"flashdeberta.GLiNER({self.name_or_path!r}: {self._native.description})"
