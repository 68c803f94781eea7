"""AutoTokenizer: the checkpoint's tokenizer (SentencePiece for v2/v3, byte-level BPE for v1), called as
transformers' fast tokenizers are: a BatchEncoding of lists by default, numpy arrays or torch tensors with
return_tensors="np" / "pt"."""

import numbers
import operator

from . import _encode, _native
from ._arguments import MAX_TOKENS, check_text, checkpoint_path, excerpt, integer, str_items, text_list
from .batch_encoding import BatchEncoding

_PADDING = {False: "do_not_pad", None: "do_not_pad", "do_not_pad": "do_not_pad", True: "longest",
            "longest": "longest", "max_length": "max_length"}
_TRUNCATION = {False: "do_not_truncate", "do_not_truncate": "do_not_truncate", True: "longest_first",
               "longest_first": "longest_first", "only_first": "only_first", "only_second": "only_second"}
# HF's clean_up_tokenization (decode(..., clean_up_tokenization_spaces=True)).
_CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
             (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))


class Tokenizer:
    """A loaded tokenizer; share it between threads freely (every call releases the GIL)."""

    model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"
    is_fast = True  # HF's fast tokenizers are what this follows: offsets, word_ids(), overflow rows

    def __init__(self, native, directory):
        self._native = native
        self.name_or_path = directory
        self._cache = {}  # templates and the word rule, found once (see _encode)

    def __call__(self, text=None, text_pair=None, *, add_special_tokens=True, padding=False, truncation=None,
                 max_length=None, stride=0, is_split_into_words=False, pad_to_multiple_of=None, padding_side=None,
                 return_tensors=None, return_token_type_ids=None, return_attention_mask=None,
                 return_overflowing_tokens=False, return_special_tokens_mask=False, return_offsets_mapping=False,
                 return_length=False, verbose=True, split_special_tokens=False):
        """HF's tokenizer call: a BatchEncoding of input_ids, token_type_ids, attention_mask (and
        special_tokens_mask, offset_mapping, length, overflow_to_sample_mapping when asked) for a text, a
        list of texts (text_pair: their pairs; or a list of (text, text_pair) tuples), or with
        is_split_into_words=True a list of words or a list of such lists. return_tensors: None (lists, the
        default: a list for one text, a list of lists for a batch), "np" (int64 arrays [B, L], also for one
        text) or "pt" (torch tensors). Any other keyword is a TypeError, as in HF's fast tokenizers. verbose
        is taken and changes nothing (nothing here warns)."""
        texts, pairs, single = self._inputs(text, text_pair, is_split_into_words)
        pad, trunc, max_length = self._strategies(padding, truncation, max_length)
        stride = integer(stride, "stride", 0)
        multiple = None if pad_to_multiple_of is None else integer(pad_to_multiple_of, "pad_to_multiple_of", 1)
        limited = trunc != "do_not_truncate" and max_length is not None
        if multiple and pad != "do_not_pad" and limited and max_length % multiple:
            raise ValueError(f"Truncation and padding are both activated but truncation length ({max_length}) is "
                             f"not a multiple of pad_to_multiple_of ({multiple}).")
        if padding_side not in (None, "right"):
            raise ValueError(f"padding_side={padding_side!r}: flashdeberta pads on the right (DeBERTa's side)")
        if split_special_tokens:
            raise ValueError("split_special_tokens=True is not supported: the native tokenizer always matches "
                             "the special tokens written in a text")
        if return_tensors not in ("np", "pt", None):
            raise ValueError(f"return_tensors={return_tensors!r}: flashdeberta returns numpy arrays ('np'), torch "
                             "tensors ('pt') or lists (None)")
        if is_split_into_words or (return_overflowing_tokens and limited):
            rows, mapping = _encode.assemble(self, texts, pairs, is_split_into_words, add_special_tokens, trunc,
                                             max_length, stride, return_overflowing_tokens, pad, multiple)
            data = {"input_ids": [r.ids for r in rows], "token_type_ids": [r.type_ids for r in rows],
                    "attention_mask": [r.attention_mask for r in rows]}
            if return_offsets_mapping:
                data["offset_mapping"] = [r.offsets for r in rows]
            encodings = rows
        else:
            # Arrays straight from the binding unless rows are to be padded further here.
            as_lists = return_tensors is None or multiple is not None
            data = dict(self._native.encode_batch(texts, pairs, add_special_tokens, trunc, max_length, pad,
                                                  return_offsets_mapping, as_lists))
            if multiple is not None and data["input_ids"]:
                width = _encode._width([len(r) for r in data["input_ids"]], pad, max_length, multiple)
                for key, value in (("input_ids", self.pad_token_id), ("token_type_ids", 0), ("attention_mask", 0),
                                   ("offset_mapping", (0, 0))):
                    for row in data.get(key, ()):
                        row += [value] * (width - len(row))
            widths = [len(r) for r in data["input_ids"]]
            mapping = list(range(len(texts)))
            call = (texts, pairs, add_special_tokens, trunc, max_length, pad, widths)
            encodings = lambda: _encode.native_rows(self, *call)  # noqa: E731 (computed when first read)
        out = {"input_ids": data["input_ids"]}
        if return_token_type_ids is not False:  # None: the model's default, which has them
            out["token_type_ids"] = data["token_type_ids"]
        if return_attention_mask is not False:
            out["attention_mask"] = data["attention_mask"]
        if return_special_tokens_mask:
            if callable(encodings):
                encodings = encodings()
            out["special_tokens_mask"] = [r.special_tokens_mask for r in encodings]
        if return_offsets_mapping:
            out["offset_mapping"] = data["offset_mapping"]
        if return_length:  # HF's fast tokenizers count the padding too
            out["length"] = [len(r) for r in data["input_ids"]]
        if return_overflowing_tokens:
            out["overflow_to_sample_mapping"] = mapping
        if single and return_tensors is None and not return_overflowing_tokens:
            # HF's one text: each list of rows becomes its row (length stays a list of one count, as in HF).
            out = {k: v[0] if len(v) and isinstance(v[0], list) else v for k, v in out.items()}
        return BatchEncoding(out, encodings, return_tensors, n_sequences=1 + (pairs is not None))

    def _inputs(self, text, text_pair, split_words):
        """(texts, pairs or None, whether one input was given); with split_words each text is a list of words."""
        if text is None:
            raise ValueError("text is required: a str or a list of str (with is_split_into_words=True, a list of "
                             "words or a list of such lists)")
        if split_words:
            texts, single = _word_lists(text, "text")
            if text_pair is None or (single and text_pair == []):
                return texts, None, single  # HF: an empty pair of one input is no pair
            pairs, pair_single = _word_lists(text_pair, "text_pair")
        else:
            if (text_pair is None and isinstance(text, (list, tuple)) and text
                    and all(isinstance(t, (list, tuple)) for t in text)):
                for i, item in enumerate(text):  # HF's batch of (text, text_pair) pairs
                    if len(item) != 2:
                        raise ValueError(f"text[{i}] must be a str or a (text, text_pair) pair, not a "
                                         f"{type(item).__name__} of {len(item)} items")
                return str_items([t for t, _ in text], "text"), str_items([p for _, p in text], "text_pair"), False
            texts, single = text_list(text, "text")
            if text_pair is None or (single and text_pair == ""):
                return texts, None, single  # HF: tokenizer(text, "") encodes text alone (a batch's "" stays)
            pairs, pair_single = text_list(text_pair, "text_pair")
        if pair_single != single or len(pairs) != len(texts):
            raise ValueError(f"text_pair must match text: {len(texts)} texts but {len(pairs)} text pairs")
        return texts, pairs, single

    def _strategies(self, padding, truncation, max_length):
        if padding not in _PADDING:
            raise ValueError(f"padding={padding!r}: use True/'longest', 'max_length' or False/'do_not_pad'")
        pad = _PADDING[padding]
        if truncation is None:
            # HF truncates when only max_length is given (and warns); with padding to max_length it does not.
            trunc = "longest_first" if max_length is not None and pad == "do_not_pad" else "do_not_truncate"
        elif truncation in _TRUNCATION:
            trunc = _TRUNCATION[truncation]
        else:
            raise ValueError(f"truncation={truncation!r}: use True/'longest_first', 'only_first', 'only_second' "
                             "or False/'do_not_truncate'")
        if max_length is None and (trunc != "do_not_truncate" or pad == "max_length"):
            max_length = self.model_max_length  # HF's default; None (no limit) when the config has none
        if pad == "max_length" and max_length is None:
            raise ValueError("padding='max_length' needs max_length (tokenizer_config.json has no model_max_length)")
        if max_length is not None:
            if isinstance(max_length, numbers.Integral) and not isinstance(max_length, bool) and max_length < 0:
                raise ValueError(f"max_length {max_length} is negative")
            # Past 2**62 it cuts nothing; padding to it is bounded as --max-tokens is (an array of that many
            # positions per text is more memory than there is).
            max_length = integer(max_length, "max_length", 0, MAX_TOKENS if pad == "max_length" else None)
        return pad, trunc, max_length

    def _template(self, pair, add_special_tokens):
        key = ("template", bool(pair), bool(add_special_tokens))
        if key not in self._cache:
            self._cache[key] = _encode.Template(self._native, pair, add_special_tokens)
        return self._cache[key]

    def _words(self):
        if "words" not in self._cache:
            self._cache["words"] = _encode.WordRule(self)
        return self._cache["words"]

    def encode_plus(self, text, text_pair=None, **kwargs):
        """HF's older name for a call on one text (or one list of words)."""
        return self(text, text_pair, **kwargs)

    def batch_encode_plus(self, batch_text_or_text_pairs, **kwargs):
        """HF's older name for a call on a batch: texts, (text, text_pair) tuples, or lists of words."""
        if not isinstance(batch_text_or_text_pairs, (list, tuple)):
            raise ValueError("batch_text_or_text_pairs must be a list of texts or of (text, text_pair) pairs, not "
                             f"{type(batch_text_or_text_pairs).__name__}")
        items = list(batch_text_or_text_pairs)
        if kwargs.get("is_split_into_words") and items and all(
                isinstance(t, tuple) and len(t) == 2 and isinstance(t[0], (list, tuple)) for t in items):
            return self([list(t) for t, _ in items], [list(p) for _, p in items], **kwargs)  # (words, words)
        return self(items, **kwargs)

    def pad(self, encoded_inputs, padding=True, max_length=None, pad_to_multiple_of=None, padding_side=None,
            return_attention_mask=None, return_tensors=None, verbose=True):
        """HF's pad: pads a BatchEncoding or dict of rows (or a list of dicts, one per example, as a data
        collator has them) on the right: input_ids with [PAD], token_type_ids 0, attention_mask 0 (made when
        missing), special_tokens_mask 1; other keys stay as they are."""
        if isinstance(encoded_inputs, (list, tuple)) and encoded_inputs and isinstance(encoded_inputs[0], dict):
            encoded_inputs = {k: [example[k] for example in encoded_inputs] for k in encoded_inputs[0]}
        if not isinstance(encoded_inputs, dict) or "input_ids" not in encoded_inputs:
            raise ValueError("encoded_inputs must be a BatchEncoding, a dict with input_ids, or a list of such "
                             f"dicts, not {type(encoded_inputs).__name__}")
        if padding_side not in (None, "right"):
            raise ValueError(f"padding_side={padding_side!r}: flashdeberta pads on the right (DeBERTa's side)")
        data = {k: [r.tolist() if hasattr(r, "tolist") else r for r in (v.tolist() if hasattr(v, "tolist") else v)]
                for k, v in encoded_inputs.items()}
        single = not data["input_ids"] or not isinstance(data["input_ids"][0], list)
        if single:
            data = {k: [v] for k, v in data.items()}
        if return_attention_mask is not False and "attention_mask" not in data:
            data["attention_mask"] = [[1] * len(row) for row in data["input_ids"]]
        if return_attention_mask is False:
            data.pop("attention_mask", None)
        pad, _, max_length = self._strategies(padding, False, max_length)
        multiple = None if pad_to_multiple_of is None else integer(pad_to_multiple_of, "pad_to_multiple_of", 1)
        width = _encode._width([len(r) for r in data["input_ids"]], pad, max_length, multiple)
        values = {"input_ids": self.pad_token_id, "token_type_ids": 0, "attention_mask": 0, "special_tokens_mask": 1}
        for key, value in values.items():
            if key in data:
                data[key] = [list(row) + [value] * (width - len(row)) for row in data[key]]
        if single:  # HF: one example stays one row (a 1-D tensor with return_tensors)
            data = {k: v[0] for k, v in data.items()}
        return BatchEncoding(data, None, return_tensors)

    def _one_text(self, text, text_pair):
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, not {type(text).__name__}")
        if text_pair is not None and not isinstance(text_pair, str):
            raise ValueError(f"text_pair must be a str or None, not {type(text_pair).__name__}")
        return check_text(text, "text"), None if text_pair is None else check_text(text_pair, "text_pair")

    def encode(self, text, text_pair=None, add_special_tokens=True, **kwargs):
        """The ids of one text (with its pair), as a list; with any call argument (max_length, truncation,
        return_tensors, ...) the input_ids of that call, as HF's encode."""
        if kwargs:
            return self(text, text_pair, add_special_tokens=add_special_tokens, **kwargs)["input_ids"]
        return self._native.tokens(*self._one_text(text, text_pair), bool(add_special_tokens))[0]

    def tokenize(self, text, text_pair=None, add_special_tokens=False):
        """The token strings of one text, without the special tokens by default (HF's tokenize)."""
        return self._native.tokens(*self._one_text(text, text_pair), bool(add_special_tokens))[1]

    @staticmethod
    def _id(value):
        # An integer (Python or numpy; a float is refused, not truncated), kept in int64 so that one far
        # outside the vocabulary gets the library's "outside the vocabulary" answer.
        try:
            i = operator.index(value)
        except TypeError:
            raise ValueError(f"token ids must be integers, not {type(value).__name__} {value!r}") from None
        return max(-2**62, min(i, 2**62))

    def decode(self, token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=None):
        """The text of a list of ids (or one id, a 1-D array or tensor); rows of ids (a list of lists, a 2-D
        array) give a list of texts, as batch_decode. clean_up_tokenization_spaces=True removes the space
        before punctuation and contractions (HF's clean_up_tokenization; off by default, as in HF for DeBERTa)."""
        if hasattr(token_ids, "tolist"):
            token_ids = token_ids.tolist()
        if isinstance(token_ids, numbers.Integral):
            token_ids = [token_ids]  # HF decodes a single id too
        if token_ids and isinstance(token_ids[0], (list, tuple)):
            return self.batch_decode(token_ids, skip_special_tokens, clean_up_tokenization_spaces)
        text = self._native.decode([self._id(i) for i in token_ids], bool(skip_special_tokens))
        if clean_up_tokenization_spaces:
            for before, after in _CLEAN_UP:
                text = text.replace(before, after)
        return text

    def batch_decode(self, sequences, skip_special_tokens=False, clean_up_tokenization_spaces=None):
        """HF's batch_decode: decode() of each row (a list of lists, or a 2-D array)."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(ids, skip_special_tokens, clean_up_tokenization_spaces) for ids in sequences]

    def convert_ids_to_tokens(self, ids, skip_special_tokens=False):
        """The token of an id, or the tokens of a list of ids (without the special tokens, if asked)."""
        if isinstance(ids, numbers.Integral):
            return self._native.id_to_token(self._id(ids))
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        skip = set(self.all_special_ids) if skip_special_tokens else ()
        return [self._native.id_to_token(self._id(i)) for i in ids if i not in skip]

    def convert_tokens_to_ids(self, tokens):
        """The id of a token (a list: of each); a token the vocabulary lacks gives the unknown token's id, as HF."""
        def one(token):
            found = self._native.token_to_id(check_text(token, "tokens") if isinstance(token, str) else token)
            return self.unk_token_id if found is None else found

        if isinstance(tokens, str):
            return one(tokens)
        return [one(t) for t in tokens]

    def __len__(self):
        """HF's len(tokenizer): the vocabulary with the added tokens ([MASK] for v3)."""
        return len(self._native)

    vocab_size = property(lambda self: self._native.vocab_size)  # without the added tokens, as HF
    model_max_length = property(lambda self: self._native.model_max_length)
    mask_token_id = property(lambda self: self._native.mask_token_id if self._native.mask_token_id >= 0 else None)
    mask_token = property(lambda self: None if self.mask_token_id is None else
                          self._native.id_to_token(self.mask_token_id))
    cls_token_id = property(lambda self: self._native.cls_token_id)
    sep_token_id = property(lambda self: self._native.sep_token_id)
    pad_token_id = property(lambda self: self._native.pad_token_id)
    cls_token = property(lambda self: self._native.cls_token)
    sep_token = property(lambda self: self._native.sep_token)
    pad_token = property(lambda self: self._native.pad_token)
    unk_token_id = property(lambda self: self._native.unk_token_id if self._native.unk_token_id >= 0 else None)
    unk_token = property(lambda self: self._native.unk_token)

    @property
    def special_tokens_map(self):
        """HF's special_tokens_map: DeBERTa's [CLS] and [SEP] are also its bos and eos tokens."""
        names = (("bos_token", self.cls_token), ("eos_token", self.sep_token), ("unk_token", self.unk_token),
                 ("sep_token", self.sep_token), ("pad_token", self.pad_token), ("cls_token", self.cls_token),
                 ("mask_token", self.mask_token))
        return {name: token for name, token in names if token is not None}

    @property
    def all_special_tokens(self):
        """The special tokens once each, in HF's order (bos, eos, unk, sep, pad, cls, mask)."""
        return list(dict.fromkeys(self.special_tokens_map.values()))

    @property
    def all_special_ids(self):
        return [self.convert_tokens_to_ids(t) for t in self.all_special_tokens]

    def num_special_tokens_to_add(self, pair=False):
        return self._template(pair, True).count

    def get_vocab(self):
        """{token: id} for every id, the added tokens included."""
        return {self._native.id_to_token(i): i for i in range(len(self))}

    def __repr__(self):
        return f"flashdeberta.Tokenizer({self.name_or_path!r}, {self._native.kind}, vocab_size={self.vocab_size})"


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path):
        """The tokenizer of a checkpoint directory (spm.model, or vocab.json + merges.txt, with
        tokenizer_config.json and the other files HF writes)."""
        directory = checkpoint_path(path, "path")
        return Tokenizer(_native.Tokenizer.load(directory), directory)


def _word_lists(value, name):
    """is_split_into_words input: a list of words (one input) or a list of such lists, as (lists, single)."""
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple)):
            return [str_items(item, f"{name}[{i}]") if isinstance(item, (list, tuple)) else
                    _not_words(item, f"{name}[{i}]") for i, item in enumerate(value)], False
        return [str_items(value, name)], True
    return _not_words(value, name)


def _not_words(value, name):
    raise ValueError(f"{name} must be a list of words (str) or a list of such lists with is_split_into_words=True, "
                     f"not {type(value).__name__} {excerpt(value)}")
