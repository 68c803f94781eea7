"""flashdeberta.AutoTokenizer against every case of tests/fixtures/tokenizers/*/expected.json
(make_tokenizer_fixtures.py; the C++ side is tests/tokenizer/fixture_cases.hpp, whose rules this follows).

Each case is called as HF was (tokenizer(text, pair, max_length=..., truncation=..., padding=...,
add_special_tokens=..., return_offsets_mapping=True)), with return_tensors="np": ids, token types, mask and
offsets must be the fixture's "expected" ("reference" says whether that is HF, sentencepiece where 5.x
skips NFKC, or the v1 pair template of 4.x: README "Where we do not follow transformers 5.x");
"error" cases must raise ValueError. Tokens are convert_ids_to_tokens(ids), as the fixture recorded them.
"""
import numpy as np
import pytest

from conftest import TOKENIZERS, read_json

FIXTURES = ["spm", "spm_lower_punct", "bpe"]
FIELDS = {"input_ids": "input_ids", "token_type_ids": "token_type_ids", "attention_mask": "attention_mask",
          "offset_mapping": "offsets"}

# Cases where we knowingly differ from the fixture, {(fixture, case name): reason}; they are expected to
# fail (xfail, strict: one that starts to pass must be removed from here). None at present, as in
# fixture_cases.hpp's kKnownDifferences.
KNOWN_DIFFERENCES = {}


def load_cases():
    params = []
    for name in FIXTURES:
        for case in read_json(TOKENIZERS / name / "expected.json")["cases"]:
            if "script_error" in case:  # the fixture script failed on it: nothing to compare with
                continue
            marks = []
            reason = KNOWN_DIFFERENCES.get((name, case["name"]))
            if reason:
                marks.append(pytest.mark.xfail(reason=reason, strict=True))
            params.append(pytest.param(name, case, id=f"{name}/{case['name']}", marks=marks))
    return params


def call_kwargs(case):
    kwargs = {"add_special_tokens": case.get("add_special_tokens", True), "return_offsets_mapping": True,
              "return_tensors": "np"}
    if case.get("max_length") is not None:
        kwargs["max_length"] = case["max_length"]
    if case.get("truncation"):
        kwargs["truncation"] = case["truncation"]
    if case.get("padding"):
        kwargs["padding"] = case["padding"]
    return kwargs


def is_pair(case):
    # tokenizer(text, "") is a single sequence in HF (an empty text_pair is falsy); in a batch it is a pair.
    return bool(case.get("pair")) or case.get("batch_pairs") is not None


def expects_refusal(case):
    if case["reference"] == "error":
        return True
    # A max_length below the special tokens: HF returns lengths there that follow no rule; we refuse
    # (README, Tokenizers; fixture_cases.hpp does the same).
    specials = (3 if is_pair(case) else 2) if case.get("add_special_tokens", True) else 0
    return case.get("max_length") is not None and bool(case.get("truncation")) and case["max_length"] < specials


def check_row(tok, enc, row, want, check_decode, where):
    for key, field in FIELDS.items():
        if field not in want:
            continue
        got = enc[key][row].tolist()
        assert got == want[field], f"{where}: {key} {got}\n  expected {want[field]}"
    ids = enc["input_ids"][row].tolist()
    if "tokens" in want:
        assert tok.convert_ids_to_tokens(ids) == want["tokens"], f"{where}: tokens"
    if check_decode and "decoded" in want:
        assert tok.decode(ids) == want["decoded"], f"{where}: decode"
        assert tok.decode(ids, skip_special_tokens=True) == want["decoded_skip_special"], f"{where}: decode, skip"


def check_arrays(enc, rows, length):
    assert set(enc) == set(FIELDS), f"keys {sorted(enc)}"
    for key in FIELDS:
        value = enc[key]
        assert isinstance(value, np.ndarray) and value.dtype == np.int64, f"{key}: {type(value)} {value.dtype}"
        shape = (rows, length, 2) if key == "offset_mapping" else (rows, length)
        assert value.shape == shape, f"{key}: shape {value.shape}, expected {shape}"


@pytest.fixture(scope="module")
def tokenizers(fd, spm_lower_punct_dir):
    dirs = {"spm": TOKENIZERS / "spm", "spm_lower_punct": spm_lower_punct_dir, "bpe": TOKENIZERS / "bpe"}
    return {name: fd.AutoTokenizer.from_pretrained(str(d)) for name, d in dirs.items()}


@pytest.mark.parametrize("name,case", load_cases())
def test_fixture_case(tokenizers, name, case):
    tok = tokenizers[name]
    kwargs = call_kwargs(case)
    where = f"{name}/{case['name']}"
    if "batch" in case:
        texts, pairs = case["batch"], case.get("batch_pairs")
        if expects_refusal(case):
            with pytest.raises(ValueError):
                tok(texts, pairs, **kwargs)
            return
        rows = case["expected"]["rows"]
        lengths = {len(r["input_ids"]) for r in rows}
        if len(lengths) > 1:
            # Rows of different lengths cannot make one array: HF's return_tensors="np" raises ValueError.
            with pytest.raises(ValueError):
                tok(texts, pairs, **kwargs)
            assert pairs is None  # rows one by one below would turn an empty pair into no pair
            for i, (text, want) in enumerate(zip(texts, rows)):
                enc = tok(text, **kwargs)
                check_arrays(enc, 1, len(want["input_ids"]))
                check_row(tok, enc, 0, want, False, f"{where} row {i} alone")
            return
        enc = tok(texts, pairs, **kwargs)
        check_arrays(enc, len(rows), lengths.pop())
        for i, want in enumerate(rows):
            check_row(tok, enc, i, want, False, f"{where} row {i}")
        return
    pair = case.get("pair")
    if expects_refusal(case):
        with pytest.raises(ValueError) as info:
            tok(case["text"], pair, **kwargs)
        assert "truncation" in str(info.value) or "max_length" in str(info.value), str(info.value)
        return
    want = case["expected"]
    enc = tok(case["text"], pair, **kwargs)
    check_arrays(enc, 1, len(want["input_ids"]))
    check_row(tok, enc, 0, want, case["reference"] == "hf", where)
    # encode() is the same ids as a list.
    ids = tok.encode(case["text"], pair, add_special_tokens=kwargs["add_special_tokens"]) \
        if "max_length" not in kwargs else None
    if ids is not None:
        assert ids == want["input_ids"], f"{where}: encode()"


@pytest.mark.parametrize("name", FIXTURES)
def test_special_tokens_and_sizes(tokenizers, name):
    meta = read_json(TOKENIZERS / name / "expected.json")["meta"]
    tok = tokenizers[name]
    ids = meta["special_ids"]
    assert tok.mask_token == "[MASK]"
    assert (tok.mask_token_id, tok.pad_token_id, tok.cls_token_id, tok.sep_token_id, tok.unk_token_id) == \
        (ids["[MASK]"], ids["[PAD]"], ids["[CLS]"], ids["[SEP]"], ids["[UNK]"])
    # HF: len() counts the added tokens ([MASK] after the spm pieces), vocab_size does not for spm.
    assert len(tok) == meta["len"]
    assert tok.vocab_size == meta["vocab_size"]


def test_tokenize_and_convert_ids(tokenizers):
    tok = tokenizers["spm"]
    text = "Paris is the [MASK] of France."
    enc = tok(text, return_tensors="np")
    ids = enc["input_ids"][0].tolist()
    tokens = tok.convert_ids_to_tokens(ids)
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]" and "[MASK]" in tokens
    assert tok.tokenize(text) == tokens[1:-1]
    assert tok.encode(text) == ids
    # HF drops every special token when asked, [MASK] included (the fixture's decoded_skip_special).
    assert tok.decode(ids, skip_special_tokens=True) == "Paris is the of France."
    assert tok.decode(ids) == "[CLS] Paris is the[MASK] of France.[SEP]"


def test_batch_rows_equal_single_rows(tokenizers):
    tok = tokenizers["spm"]
    texts = ["Hello world", "Été à Paris, naïve café", "", "東京は日本の首都です。"]
    enc = tok(texts, padding=True, return_offsets_mapping=True, return_tensors="np")
    width = enc["input_ids"].shape[1]
    for i, text in enumerate(texts):
        one = tok(text, padding="max_length", max_length=width, return_offsets_mapping=True, return_tensors="np")
        for key in FIELDS:
            assert np.array_equal(enc[key][i], one[key][0]), f"row {i} {key}"


def test_unequal_lengths_without_padding_raise(tokenizers):
    with pytest.raises(ValueError):
        tokenizers["spm"](["short", "a much longer text than the first one"], return_tensors="np")
    # padding="do_not_pad" and padding=False are the same refusal; "longest" and True pad.
    with pytest.raises(ValueError):
        tokenizers["spm"](["short", "a much longer text"], padding="do_not_pad", return_tensors="np")
    a = tokenizers["spm"](["short", "a much longer text"], padding="longest", return_tensors="np")
    b = tokenizers["spm"](["short", "a much longer text"], padding=True, return_tensors="np")
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_option_spellings(tokenizers):
    # HF's spellings: True is longest_first, False and "do_not_truncate" keep everything (a warning in HF);
    # without return_offsets_mapping there is no offset_mapping.
    tok = tokenizers["spm"]
    text = "The quick brown fox jumps over the lazy dog near the old stone wall."
    full = tok(text, return_tensors="np")
    assert set(full) == {"input_ids", "token_type_ids", "attention_mask"}
    assert full["input_ids"].ndim == 2 and full["input_ids"].shape[0] == 1
    for off in (False, "do_not_truncate"):
        assert np.array_equal(tok(text, max_length=8, truncation=off, return_tensors="np")["input_ids"],
                              full["input_ids"]), off
    a = tok(text, "How are you?", max_length=12, truncation=True, return_tensors="np")
    b = tok(text, "How are you?", max_length=12, truncation="longest_first", return_tensors="np")
    assert a["input_ids"].shape == (1, 12) and all(np.array_equal(a[k], b[k]) for k in a)
