"""AutoTokenizer: the checkpoint's tokenizer (SentencePiece for v2/v3, byte-level BPE for v1), called as
transformers' tokenizers are, giving numpy arrays (HF's return_tensors="np") by default."""

import numbers
import operator

from . import _native
from ._arguments import MAX_TOKENS, check_text, checkpoint_path, integer, text_list

_PADDING = {False: "do_not_pad", None: "do_not_pad", "do_not_pad": "do_not_pad", True: "longest",
            "longest": "longest", "max_length": "max_length"}
_TRUNCATION = {False: "do_not_truncate", "do_not_truncate": "do_not_truncate", True: "longest_first",
               "longest_first": "longest_first", "only_first": "only_first", "only_second": "only_second"}


class Tokenizer:
    """A loaded tokenizer; share it between threads freely (every call releases the GIL)."""

    def __init__(self, native, directory):
        self._native = native
        self.name_or_path = directory

    def __call__(self, text, text_pair=None, *, add_special_tokens=True, padding=False, truncation=None,
                 max_length=None, return_offsets_mapping=False, return_tensors="np", return_attention_mask=True,
                 return_token_type_ids=True):
        """HF's tokenizer call: input_ids, token_type_ids, attention_mask (and offset_mapping) for a text or a
        list of texts (with text_pair: pairs). return_tensors: "np" (int64 arrays [B, L], the default), "pt"
        (torch tensors) or None (HF's lists); return_attention_mask / return_token_type_ids=False leave those
        out."""
        texts, single = text_list(text, "text")
        pairs = None
        if text_pair is not None:
            pairs, pair_single = text_list(text_pair, "text_pair")
            if pair_single != single or len(pairs) != len(texts):
                raise ValueError(f"text_pair must match text: {len(texts)} texts but {len(pairs)} text pairs")
            if single and pairs == [""]:
                pairs = None  # HF: tokenizer(text, "") encodes text alone (an empty pair in a batch stays)
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
        if return_tensors not in ("np", "pt", None):
            raise ValueError(f"return_tensors={return_tensors!r}: flashdeberta returns numpy arrays ('np'), torch "
                             "tensors ('pt') or lists (None)")
        rows = self._native.encode_batch(texts, pairs, add_special_tokens, trunc, max_length, pad,
                                         return_offsets_mapping, return_tensors is None)
        left_out = {name for name, wanted in (("attention_mask", return_attention_mask),
                                              ("token_type_ids", return_token_type_ids)) if not wanted}
        rows = {k: v for k, v in dict(rows).items() if k not in left_out}
        if return_tensors == "np":
            return rows
        if return_tensors == "pt":
            import torch  # only for this form of output
            return {k: torch.from_numpy(v) for k, v in rows.items()}
        # HF's return_tensors=None: lists, one row per text (the row itself for a single text).
        return {k: v[0] if single else v for k, v in rows.items()}

    def _one_text(self, text, text_pair):
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, not {type(text).__name__}")
        if text_pair is not None and not isinstance(text_pair, str):
            raise ValueError(f"text_pair must be a str or None, not {type(text_pair).__name__}")
        return check_text(text, "text"), None if text_pair is None else check_text(text_pair, "text_pair")

    def encode(self, text, text_pair=None, add_special_tokens=True):
        """The ids of one text (with its pair), as a list."""
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

    def decode(self, token_ids, skip_special_tokens=False):
        if hasattr(token_ids, "tolist"):
            token_ids = token_ids.tolist()
        if isinstance(token_ids, int):
            token_ids = [token_ids]  # HF decodes a single id too
        ids = [self._id(i) for i in token_ids]
        return self._native.decode(ids, bool(skip_special_tokens))

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, numbers.Integral):
            return self._native.id_to_token(self._id(ids))
        return [self._native.id_to_token(self._id(i)) for i in ids]

    def batch_decode(self, sequences, skip_special_tokens=False):
        """HF's batch_decode: decode() of each row (a list of lists, or a 2-D array)."""
        if hasattr(sequences, "tolist"):
            sequences = sequences.tolist()
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in sequences]

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

    def __repr__(self):
        return f"flashdeberta.Tokenizer({self.name_or_path!r}, {self._native.kind}, vocab_size={self.vocab_size})"


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path):
        """The tokenizer of a checkpoint directory (spm.model, or vocab.json + merges.txt, with
        tokenizer_config.json and the other files HF writes)."""
        directory = checkpoint_path(path, "path")
        return Tokenizer(_native.Tokenizer.load(directory), directory)
