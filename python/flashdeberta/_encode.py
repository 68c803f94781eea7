"""The parts of a tokenizer call done in Python around the native tokenizer: the words of a text (word_ids),
texts given as words (is_split_into_words), overflowing windows (return_overflowing_tokens with stride),
and the per-token rows (tokens, sequence ids, word ids) behind BatchEncoding's tokens() and word_ids()."""

import bisect
import unicodedata

from .batch_encoding import Encoding

_NO_LIMIT = ("do_not_truncate", None, "do_not_pad")


class Template:
    """Where the special tokens go around a text (prefix A suffix) or a pair (prefix A middle B suffix), with
    the token types, as the native tokenizer builds them (DeBERTa's [CLS] A [SEP] B [SEP], or a
    tokenizer.json's own template): found by encoding a one-token text with and without them."""

    def __init__(self, native, pair, add_special_tokens):
        bare = native.tokens("a", None, False)[0]
        enc = native.encode_batch(["a"], ["a"] if pair else None, add_special_tokens, *_NO_LIMIT, False, True)
        ids, types = enc["input_ids"][0], enc["token_type_ids"][0]
        k = len(bare)
        first = _find(ids, bare, 0)
        second = _find(ids, bare, first + k) if pair else first + k  # B's place; A's end for one text
        self.prefix, self.prefix_types = ids[:first], types[:first]
        self.middle, self.middle_types = ids[first + k:second], types[first + k:second]
        self.type_a = types[first]
        self.type_b = types[second] if pair else None
        end = second + k if pair else first + k
        self.suffix, self.suffix_types = ids[end:], types[end:]
        self.count = len(self.prefix) + len(self.middle) + len(self.suffix)


def _find(ids, part, start):
    for i in range(start, len(ids) - len(part) + 1):
        if part and ids[i:i + len(part)] == part:
            return i
    raise RuntimeError(f"the tokenizer's template {ids} does not hold the probe's tokens {part}")


# GPT-2's pre-tokenizer pattern, 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
# written out as gpt2_bpe.hpp does (Python's re has no \p{L}); \s is Unicode's White_Space.
def _char_class(c):
    category = unicodedata.category(c)[0]
    if category in "LN":
        return category
    return " " if c.isspace() and c not in "\x1c\x1d\x1e\x1f" else "O"


def _gpt2_match(s, i):
    if s[i] == "'":
        for suffix in ("s", "t", "re", "ve", "m", "ll", "d"):
            if s.startswith(suffix, i + 1):
                return 1 + len(suffix)
    j = i
    if s[j] == " " and j + 1 < len(s) and _char_class(s[j + 1]) != " ":
        j += 1
    cls = _char_class(s[j])
    if cls != " ":
        while j < len(s) and _char_class(s[j]) == cls:
            j += 1
        return j - i
    run = i
    while run < len(s) and _char_class(s[run]) == " ":
        run += 1
    return run - i - 1 if run < len(s) and run - i >= 2 else run - i  # '\s+(?!\S)' leaves one space


def _gpt2_starts(s, base, limit, prefix_space):
    """Where GPT-2's pre-tokens of s begin (as positions base + i), up to the first one past `limit`. With
    ByteLevel's add_prefix_space the stretch is matched with a space before it, which stands for its first
    character."""
    shift = 1 if prefix_space and not s.startswith(" ") else 0
    s = " " * shift + s
    starts, i = [], 0
    while i < len(s):
        starts.append(base + max(i - shift, 0))
        if base + i - shift > limit:
            break
        i += _gpt2_match(s, i)
    return starts


class WordRule:
    """HF's word_ids for one text: the index of the pre-token (the "word") each token comes from, as the
    pre-tokenizer of HF's fast tokenizer splits the text.

    Added tokens written in the text ([MASK], [SEP], ...) are cut out before pre-tokenization, so each is a
    word of its own and the text after it starts a new one. Between them:
    - SentencePiece (v2/v3) and tokenizer.json Unigram files: Metaspace splits at each space, which becomes the
      U+2581 that starts a piece; a word is a piece starting with U+2581 and the pieces after it up to the
      next such piece. Punctuation without a space ("hello,world") stays in its word; with split_by_punct
      (HF's Punctuation pre-tokenizer before Metaspace) every punctuation character gets a U+2581 of its
      own and so starts a word. A character sentencepiece's normalization drops (U+200B) does not split a
      word: it is not a space.
    - byte-level BPE (v1): GPT-2's pattern above splits the text ("hello,world" is hello | , | world; runs
      of spaces are one pre-token, the last space joining the next word), so a token starts a word where a
      pre-token begins after the previous token's first character. A U+0120 at the start of a token is not
      enough: "a    b" makes several U+0120 tokens of one pre-token.
    Caveat for tokenizer.json files: the rule assumes Metaspace's split=True and prepend_scheme "always"
    (what transformers writes for DeBERTa)."""

    def __init__(self, tokenizer):
        native = tokenizer._native
        self.bpe = native.kind == "gpt2-bpe"
        self.prefix_space = self.bpe and native.tokens("a", None, False)[1][0].startswith("\u0120")
        ids = (native.cls_token_id, native.sep_token_id, native.pad_token_id, native.unk_token_id,
               native.mask_token_id)
        self.added = {i for i in ids if i >= 0} | set(range(native.vocab_size, len(native)))
        self.token = native.id_to_token

    def __call__(self, text, ids, offsets, tokens):
        # A special token's id whose span is its own text was written in the text (an [UNK] the model made
        # for an unknown character spans that character).
        added = [i in self.added and text[b:e].strip() == tok for i, (b, e), tok in zip(ids, offsets, tokens)]
        starts = self._bpe_starts(text, offsets, added) if self.bpe and ids else None
        words, word = [], -1
        for t, tok in enumerate(tokens):
            if t == 0 or added[t] or added[t - 1]:
                new = True
            elif starts is not None:
                k = bisect.bisect_right(starts, offsets[t - 1][0])
                new = k < len(starts) and starts[k] <= offsets[t][0]
            else:
                new = tok.startswith("\u2581")
            word += new
            words.append(word)
        return words

    def _bpe_starts(self, text, offsets, added):
        limit = offsets[-1][0]
        starts, begin = [], 0
        for (b, e), is_added in zip(offsets + [(len(text), len(text))], added + [True]):
            if is_added:
                if b > begin:
                    starts += _gpt2_starts(text[begin:b], begin, limit, self.prefix_space)
                begin = e
        return sorted(starts)


def _row(tokenizer, ids, types, offsets, seq_ids, word_ids, n_sequences, width):
    """An Encoding, padded on the right to `width` tokens as HF pads ([PAD], type 0, mask 0, offsets (0, 0))."""
    n = len(ids)
    pad = max(width - n, 0)
    tokens = [tokenizer._native.id_to_token(i) for i in ids] + [tokenizer.pad_token] * pad
    return Encoding(ids + [tokenizer.pad_token_id] * pad, types + [0] * pad, [1] * n + [0] * pad,
                    offsets + [(0, 0)] * pad, tokens, word_ids + [None] * pad, seq_ids + [None] * pad, n_sequences)


def _width(lengths, padding, max_length, multiple):
    if padding == "do_not_pad":
        return 0
    width = max_length if padding == "max_length" else max(lengths, default=0)
    return -(-width // multiple) * multiple if multiple else width


def native_rows(tokenizer, texts, pairs, add_special_tokens, truncation, max_length, padding, widths):
    """The Encoding of each row of a native encode_batch call (the call again, with offsets; for a pair, A's
    and B's tokens without truncation tell where A ends), row r padded to widths[r] tokens, the length the call
    gave it (unpadded rows keep their own lengths)."""
    native = tokenizer._native
    enc = native.encode_batch(texts, pairs, add_special_tokens, truncation, max_length, padding, True, True)
    template = tokenizer._template(pairs is not None, add_special_tokens)
    p, m, s = len(template.prefix), len(template.middle), len(template.suffix)
    bare = native.encode_batch(texts + pairs, None, False, *_NO_LIMIT, False, True)["input_ids"] if pairs else None
    rule = tokenizer._words()
    rows = []
    for r, (ids, types, mask, offsets) in enumerate(zip(enc["input_ids"], enc["token_type_ids"],
                                                         enc["attention_mask"], enc["offset_mapping"])):
        n = sum(mask)
        content = ids[p:n - s]
        la = len(content) if pairs is None else _split(content, template.middle, bare[r], bare[len(texts) + r])
        lb = len(content) - la - m if pairs is not None else 0
        tokens = [native.id_to_token(i) for i in ids[:n]]
        a = slice(p, p + la)
        b = slice(p + la + m, p + la + m + lb)
        seq = [None] * n
        words = [None] * n
        seq[a] = [0] * la
        words[a] = rule(texts[r], ids[a], offsets[a], tokens[a])
        if pairs is not None:
            seq[b] = [1] * lb
            words[b] = rule(pairs[r], ids[b], offsets[b], tokens[b])
        rows.append(_row(tokenizer, ids[:n], types[:n], offsets[:n], seq, words, 1 + (pairs is not None),
                         widths[r]))
    return rows


def _split(content, middle, a, b):
    """How many tokens of A a truncated pair's content (A[:x] middle B[:y]) holds: the largest x for which it
    reads so (only a text holding the template's own special tokens could read two ways)."""
    m = len(middle)
    x = 0
    while x < min(len(a), len(content) - m) and content[x] == a[x]:
        x += 1
    for x in range(x, -1, -1):
        if content[x:x + m] == middle and content[x + m:] == b[:len(content) - m - x]:
            return x
    raise RuntimeError("a pair's encoding does not read as its two texts")


def _windows(length, keep, stride, overflow):
    """Token ranges [start, stop) of a sequence cut to `keep` tokens: the first only, or with overflow every
    window of `keep` tokens, each starting keep - stride after the one before, until one reaches the end
    (tokenizers' Encoding.truncate)."""
    if not overflow or length <= keep:
        return [(0, min(length, keep))]
    if stride >= keep:
        raise ValueError(f"stride={stride} must be less than the {keep} tokens of each window (max_length less "
                         "the special tokens and the other text of a pair)")
    out, start = [], 0
    while True:
        out.append((start, min(start + keep, length)))
        if start + keep >= length:
            return out
        start += keep - stride


def _limits(la, lb, budget, truncation, stride, overflow, max_length):
    """Ranges of A and B (lb None: no pair) each row keeps, as tokenizers' truncate_encodings cuts them
    (budget: max_length less the special tokens)."""
    if lb is None:
        if truncation == "only_second":
            raise ValueError("truncation error: only_second needs a pair, but a single sequence was given")
        return [(a, None) for a in _windows(la, budget, stride, overflow)]
    if la + lb <= budget:
        return [((0, la), (0, lb))]
    if truncation in ("only_first", "only_second"):
        first = truncation == "only_first"
        target, to_remove = (la if first else lb), la + lb - budget
        if target <= to_remove:
            raise ValueError(f"truncation error: the {'first' if first else 'second'} sequence has {target} tokens, "
                             f"too few to remove the {to_remove} needed to fit max_length {max_length} with "
                             f"{truncation}")
        spans = _windows(target, target - to_remove, stride, overflow)
        return [(s, (0, lb)) for s in spans] if first else [((0, la), s) for s in spans]
    if overflow:
        raise ValueError("return_overflowing_tokens with a pair needs truncation='only_first' or 'only_second' "
                         "(the window to slide); truncation='longest_first' cuts both texts")
    # tokenizers' longest_first: the shorter keeps its tokens if they fit in half the budget, the longer
    # takes the rest; otherwise half each, the odd token to the second.
    shorter = min(la, lb)
    longer = shorter if shorter > budget else max(shorter, budget - shorter)
    if shorter + longer > budget:
        shorter, longer = budget // 2, budget - budget // 2
    return [((0, longer if la > lb else shorter), (0, shorter if la > lb else longer))]


def assemble(tokenizer, texts, pairs, split_words, add_special_tokens, truncation, max_length, stride, overflow,
             padding, multiple):
    """The rows of a call done here: each text (or list of words) tokenized without special tokens by the
    native tokenizer, then truncated (into windows with overflow), given the template's special tokens and
    padded. Returns (rows, the input each row comes from)."""
    native = tokenizer._native
    sequences = [texts] if pairs is None else [texts, pairs]
    flat = [w for seq in sequences for item in seq for w in (item if split_words else [item])]
    enc = native.encode_batch(flat, None, False, *_NO_LIMIT, True, True)
    rule = None if split_words else tokenizer._words()
    parts, k = [], 0
    for seq in sequences:  # per text: its ids, offsets and word ids
        part = []
        for item in seq:
            ids, offs, words = [], [], []
            for w, word in enumerate(item if split_words else [item]):
                ids += enc["input_ids"][k]
                offs += enc["offset_mapping"][k]
                words += [w] * len(enc["input_ids"][k])
                k += 1
            if rule is not None:
                words = rule(item, ids, offs, [native.id_to_token(i) for i in ids])
            part.append((ids, offs, words))
        parts.append(part)
    template = tokenizer._template(pairs is not None, add_special_tokens)
    limited = truncation != "do_not_truncate" and max_length is not None
    budget = None
    if limited:
        budget = max_length - template.count
        if budget < 0:
            raise ValueError(f"truncation error: max_length {max_length} is below the {template.count} special "
                             f"tokens of the {'pair' if pairs is not None else 'sequence'}")
    built, mapping = [], []
    for r in range(len(texts)):
        a = parts[0][r]
        b = parts[1][r] if pairs is not None else None
        lb = None if b is None else len(b[0])
        spans = [((0, len(a[0])), None if b is None else (0, lb))]
        if limited:
            spans = _limits(len(a[0]), lb, budget, truncation, stride, overflow, max_length)
        for sa, sb in spans:
            ids = template.prefix + a[0][sa[0]:sa[1]] + template.middle
            types = template.prefix_types + [template.type_a] * (sa[1] - sa[0]) + template.middle_types
            n_a = sa[1] - sa[0]
            offs = [(0, 0)] * len(template.prefix) + a[1][sa[0]:sa[1]] + [(0, 0)] * len(template.middle)
            seq = [None] * len(template.prefix) + [0] * n_a + [None] * len(template.middle)
            words = [None] * len(template.prefix) + a[2][sa[0]:sa[1]] + [None] * len(template.middle)
            if b is not None:
                n_b = sb[1] - sb[0]
                ids, types = ids + b[0][sb[0]:sb[1]], types + [template.type_b] * n_b
                offs, seq, words = offs + b[1][sb[0]:sb[1]], seq + [1] * n_b, words + b[2][sb[0]:sb[1]]
            n_s = len(template.suffix)
            built.append((ids + template.suffix, types + template.suffix_types, offs + [(0, 0)] * n_s,
                          seq + [None] * n_s, words + [None] * n_s))
            mapping.append(r)
    width = _width([len(row[0]) for row in built], padding, max_length, multiple)
    return [_row(tokenizer, *row, len(sequences), width) for row in built], mapping
