"""BatchEncoding: what a tokenizer call returns, as transformers' fast tokenizers return it: a dict of
input_ids, token_type_ids, attention_mask, ... (lists, numpy arrays or torch tensors), readable as
attributes too, with the per-token facts of each row (tokens, word_ids, sequence_ids, offsets) behind
tokens(i), word_ids(i), sequence_ids(i), token_to_word(...), char_to_token(...) and enc[i]."""

import collections
import warnings

CharSpan = collections.namedtuple("CharSpan", "start end")
TokenSpan = collections.namedtuple("TokenSpan", "start end")


class Encoding:
    """One row of a BatchEncoding, with tokenizers.Encoding's fields: ids, type_ids, attention_mask,
    offsets, tokens, word_ids, sequence_ids, special_tokens_mask, overflowing (always empty: the overflowing
    windows are rows of their own, as in HF's output)."""

    __slots__ = ("ids", "type_ids", "attention_mask", "offsets", "tokens", "word_ids", "sequence_ids",
                 "special_tokens_mask", "n_sequences")

    def __init__(self, ids, type_ids, attention_mask, offsets, tokens, word_ids, sequence_ids, n_sequences):
        self.ids, self.type_ids, self.attention_mask, self.offsets = ids, type_ids, attention_mask, offsets
        self.tokens, self.word_ids, self.sequence_ids = tokens, word_ids, sequence_ids
        # HF marks the template's special tokens and the padding, not special tokens written in the text.
        self.special_tokens_mask = [1 if s is None else 0 for s in sequence_ids]
        self.n_sequences = n_sequences

    words = property(lambda self: self.word_ids)
    overflowing = property(lambda self: [])

    def __len__(self):
        return len(self.ids)

    def __getstate__(self):
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state):
        for name, value in state.items():
            setattr(self, name, value)

    def __repr__(self):
        return (f"Encoding(num_tokens={len(self.ids)}, attributes=[ids, type_ids, tokens, offsets, attention_mask, "
                "special_tokens_mask, word_ids, sequence_ids])")


def _as_tensor(value, tensor_type, key):
    import numpy as np

    if hasattr(value, "detach"):  # a torch tensor already
        value = value.detach().cpu().numpy()
    try:
        array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.int64)
    except ValueError:
        raise ValueError(f"{key}: rows of different lengths make no tensor; pass padding=True (or "
                         "padding='max_length' with max_length) and truncation=True to give every row one "
                         "length") from None
    if array.dtype == object:
        raise ValueError(f"{key}: rows of different lengths make no tensor; pass padding=True")
    if tensor_type == "np":
        return array
    import torch  # only for this form of output

    return torch.from_numpy(np.ascontiguousarray(array))


class BatchEncoding(dict):
    """HF's BatchEncoding: a dict (len() is its number of keys) whose keys read as attributes too
    (enc.input_ids); enc[i] is row i's Encoding, enc[a:b] the rows a..b of every key."""

    def __init__(self, data=None, encoding=None, tensor_type=None, prepend_batch_axis=False, n_sequences=None):
        super().__init__(data or {})
        # A list of Encoding, or a function computing it on first use (it costs a second tokenization).
        self._encodings = encoding
        self._n_sequences = n_sequences
        self.convert_to_tensors(tensor_type, prepend_batch_axis)

    def __getitem__(self, item):
        if isinstance(item, str):
            return super().__getitem__(item)
        if isinstance(item, slice):
            return {key: value[item] for key, value in self.items()}
        if isinstance(item, int) and not isinstance(item, bool) and self.encodings is not None:
            return self.encodings[item]
        raise KeyError("Invalid key. Only three types of key are available: (1) string, (2) integers for "
                       "backend Encoding, and (3) slices for data subsetting.")

    def __getattr__(self, name):
        # Only called for names that are not attributes: the keys ("input_ids"), as HF's UserDict does.
        if not name.startswith("_") and name in self:
            return super().__getitem__(name)
        raise AttributeError(f"'BatchEncoding' object has no attribute {name!r}")

    def __reduce__(self):  # the encodings computed, without the tokenizer a pending computation holds
        return (type(self), (dict(self), self.encodings, None, False, self._n_sequences))

    @property
    def encodings(self):
        if callable(self._encodings):
            self._encodings = self._encodings()
        return self._encodings

    is_fast = property(lambda self: True)
    n_sequences = property(lambda self: self._n_sequences)

    def _row(self, batch_or_index, index):
        rows = self.encodings
        if rows is None:
            raise ValueError("this BatchEncoding holds no per-token information (it was not made by a tokenizer "
                             "call)")
        batch = 0 if index is None else batch_or_index
        return rows[batch], batch_or_index if index is None else index

    def tokens(self, batch_index=0):
        """The token strings of row batch_index ([CLS], the pieces, [SEP], [PAD] ...)."""
        return self._row(batch_index, 0)[0].tokens

    def word_ids(self, batch_index=0):
        """For each token of row batch_index, the index of the word it comes from (None for special tokens
        and padding): counted per sequence, as HF's pre-tokenizer splits the text (see tokenizer.py), or the
        index of the given word with is_split_into_words=True."""
        return self._row(batch_index, 0)[0].word_ids

    def words(self, batch_index=0):
        warnings.warn("words() is deprecated (as in transformers): use word_ids()", FutureWarning, stacklevel=2)
        return self.word_ids(batch_index)

    def sequence_ids(self, batch_index=0):
        """For each token of row batch_index: 0 (text), 1 (text_pair) or None (special token, padding)."""
        return self._row(batch_index, 0)[0].sequence_ids

    def token_to_sequence(self, batch_or_token_index, token_index=None):
        row, t = self._row(batch_or_token_index, token_index)
        return row.sequence_ids[t]

    def token_to_word(self, batch_or_token_index, token_index=None):
        row, t = self._row(batch_or_token_index, token_index)
        return row.word_ids[t]

    def token_to_chars(self, batch_or_token_index, token_index=None):
        """The token's span in its text (CharSpan), None for a special token or padding."""
        row, t = self._row(batch_or_token_index, token_index)
        return None if row.sequence_ids[t] is None else CharSpan(*row.offsets[t])

    def word_to_tokens(self, batch_or_word_index, word_index=None, sequence_index=0):
        """The tokens [start, end) of a word of sequence sequence_index (TokenSpan), None if it has none."""
        row, w = self._row(batch_or_word_index, word_index)
        found = [t for t, (s, i) in enumerate(zip(row.sequence_ids, row.word_ids)) if s == sequence_index and i == w]
        return TokenSpan(found[0], found[-1] + 1) if found else None

    def word_to_chars(self, batch_or_word_index, word_index=None, sequence_index=0):
        row, _ = self._row(batch_or_word_index, word_index)
        span = self.word_to_tokens(batch_or_word_index, word_index, sequence_index)
        return None if span is None else CharSpan(row.offsets[span.start][0], row.offsets[span.end - 1][1])

    def char_to_token(self, batch_or_char_index, char_index=None, sequence_index=0):
        """The first token of sequence sequence_index whose span holds character char_index, else None."""
        row, c = self._row(batch_or_char_index, char_index)
        for t, (s, (begin, end)) in enumerate(zip(row.sequence_ids, row.offsets)):
            if s == sequence_index and begin <= c < end:
                return t
        return None

    def char_to_word(self, batch_or_char_index, char_index=None, sequence_index=0):
        row, _ = self._row(batch_or_char_index, char_index)
        t = self.char_to_token(batch_or_char_index, char_index, sequence_index)
        return None if t is None else row.word_ids[t]

    def convert_to_tensors(self, tensor_type=None, prepend_batch_axis=False):
        """The values as numpy arrays ("np") or torch tensors ("pt"); None leaves them as they are."""
        if tensor_type is None:
            return self
        if tensor_type not in ("np", "pt"):
            raise ValueError(f"tensor_type={tensor_type!r}: flashdeberta converts to numpy arrays ('np') or torch "
                             "tensors ('pt')")
        for key, value in list(self.items()):
            self[key] = _as_tensor([value] if prepend_batch_axis else value, tensor_type, key)
        return self

    def to(self, device, *, non_blocking=False):
        """Moves the torch tensors to `device` (a str, an int or a torch.device), in place, and returns self;
        anything else (numpy arrays, lists) stays. As in HF, a dtype is not a device: a warning, no change."""
        if isinstance(device, (str, int)) or type(device).__name__ == "device":
            for key, value in list(self.items()):
                if hasattr(value, "to") and callable(value.to):
                    self[key] = value.to(device=device, non_blocking=non_blocking)
        else:
            warnings.warn(f"Attempting to cast a BatchEncoding to type {device}. This is not supported.",
                          stacklevel=2)
        return self
