"""flashdeberta.AutoTokenizer against the C++ program (`flashdeberta tokenize`, from FLASHDEBERTA_CLI) on the
same texts: ids, token types, mask, offsets and tokens of every text, alone and with pairs, under every
truncation strategy, for the three fixture tokenizers and the vocabulary of models/tiny-en.

The CLI prints one JSON line per TEXT argument; a truncation HF refuses makes it exit 1, and then the
Python call must raise ValueError.
"""
import re

import pytest

from conftest import MODELS, TOKENIZERS, json_lines, run_cli

LONG = "The quick brown fox jumps over the lazy dog near the old stone wall. " * 3
TEXTS = [
    "Hello world",
    " Hello world",
    "  leading and trailing  ",
    "",
    "Paris is the [MASK] of France.",
    "[CLS] special tokens [SEP] inside [PAD] text",
    "Café au lait, naïve résumé, Zürich, São Paulo",
    "e\u0301 combining marks a\u0308",
    "東京は日本の首都です。",
    "😀 emoji 👩\u200d👩\u200d👧 zwj family",
    "ＦＵＬＬ ｗｉｄｔｈ！ and ﬁ ligature ™ ①",
    "tabs\tand\nnewlines\r\nhere",
    "zero\u200bwidth and\u00a0no-break spaces",
    "multiple     spaces    between",
    "a" * 200 + " long word",
    "Don't stop-believing; it's 3.14 o'clock!",
    LONG,
]
PAIRS = ["How are you?", "", "Short.", LONG]
# (pair, max_length, truncation) settings; None leaves the option out.
SETTINGS = [(None, None, None)] + [(p, None, None) for p in PAIRS] + [
    (None, 8, "longest_first"), (None, 8, "only_first"),
    ("How are you?", 12, "longest_first"), ("How are you?", 12, "only_first"), ("How are you?", 12, "only_second"),
    (LONG, 16, "longest_first"), (LONG, 20, "only_second"), ("Short.", 9, "only_first"), (LONG, 3, "longest_first"),
]
TOKENIZER_DIRS = {"spm": TOKENIZERS / "spm", "bpe": TOKENIZERS / "bpe", "tiny-en": MODELS / "tiny-en"}
FIELDS = {"input_ids": "input_ids", "token_type_ids": "token_type_ids", "attention_mask": "attention_mask",
          "offset_mapping": "offsets"}


def cli_args(directory, pair, max_length, truncation):
    args = ["tokenize", "--model", directory]
    if pair is not None:
        args += ["--pair", pair]
    if max_length is not None:
        args += ["--max-length", max_length]
    if truncation is not None:
        args += ["--truncation", truncation]
    return args


def cli_results(cli, directory, setting):
    """One CLI result per text: the JSON object, or the error line where the CLI refused the text."""
    results = []
    while len(results) < len(TEXTS):
        status, out, err = run_cli(cli, cli_args(directory, *setting) + ["--", *TEXTS[len(results):]])
        done = json_lines(out)
        if status == 0:
            results += done
            continue
        # Texts on the command line are all encoded before any line is printed: a refusal prints none and
        # names the text ("text K", counting this call's texts); the ones before it are asked again alone.
        assert status == 1 and not done, f"status {status}, {len(done)} lines printed before: {err}"
        match = re.search(r"error: text (\d+):", err)
        assert match, f"no text number in: {err}"
        refused = len(results) + int(match.group(1)) - 1
        for text in TEXTS[len(results):refused]:
            status, out, err_one = run_cli(cli, cli_args(directory, *setting) + ["--", text])
            assert status == 0, f"text {text[:40]!r} refused alone: {err_one}"
            results += json_lines(out)
        results.append(err.strip())
    return results


@pytest.fixture(scope="module")
def directories(spm_lower_punct_dir):
    return {**TOKENIZER_DIRS, "spm_lower_punct": spm_lower_punct_dir}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: f"pair={'LONG' if s[0] == LONG else s[0]!r}"
                                                            f",max_length={s[1]},truncation={s[2]}")
@pytest.mark.parametrize("name", ["spm", "spm_lower_punct", "bpe", "tiny-en"])
def test_tokenizer_matches_cli(fd, cli, directories, name, setting):
    directory = directories[name]
    pair, max_length, truncation = setting
    tok = fd.AutoTokenizer.from_pretrained(str(directory))
    kwargs = {"return_offsets_mapping": True, "return_tensors": "np"}
    if max_length is not None:
        kwargs["max_length"] = max_length
        kwargs["truncation"] = truncation if truncation is not None else True
    for text, want in zip(TEXTS, cli_results(cli, directory, setting)):
        where = f"{name} text {text[:40]!r}"
        if isinstance(want, str):  # the CLI refused it
            assert want.startswith("flashdeberta: error:"), want
            with pytest.raises(ValueError) as info:
                tok(text, pair, **kwargs)
            # The same C++ message, without the CLI's prefix and text number.
            assert want.split(": ", 3)[-1] in str(info.value), f"{where}: {info.value} vs CLI {want}"
            continue
        enc = tok(text, pair, **kwargs)
        for key, field in FIELDS.items():
            assert enc[key].shape[0] == 1, f"{where}: {key} shape {enc[key].shape}"
            assert enc[key][0].tolist() == want[field], f"{where}: {key}\n  python {enc[key][0].tolist()}\n" \
                                                        f"  cli    {want[field]}"
        ids = enc["input_ids"][0].tolist()
        assert tok.convert_ids_to_tokens(ids) == want["tokens"], where
        if max_length is None:
            assert tok.encode(text, pair) == ids, f"{where}: encode()"
            if not pair:
                assert tok.tokenize(text) == want["tokens"][1:-1], f"{where}: tokenize()"


def test_max_length_alone_truncates_longest_first(fd, cli):
    # HF: max_length without truncation (and without padding) truncates longest_first; so does the CLI.
    tok = fd.AutoTokenizer.from_pretrained(str(TOKENIZERS / "spm"))
    status, out, err = run_cli(cli, cli_args(TOKENIZERS / "spm", "How are you?", 10, None) + ["--", LONG])
    assert status == 0, err
    want = json_lines(out)[0]
    enc = tok(LONG, "How are you?", max_length=10, return_tensors="np")
    assert enc["input_ids"][0].tolist() == want["input_ids"]
    assert enc["token_type_ids"][0].tolist() == want["token_type_ids"]


def test_stdin_lines_match_arguments(fd, cli):
    # Texts from stdin (one per line) are what a corpus job feeds; \r\n endings are dropped by the CLI.
    tok = fd.AutoTokenizer.from_pretrained(str(TOKENIZERS / "spm"))
    texts = [t for t in TEXTS if "\n" not in t and "\r" not in t]
    status, out, err = run_cli(cli, ["tokenize", "--model", TOKENIZERS / "spm"], stdin="\n".join(texts) + "\n")
    assert status == 0, err
    for text, want in zip(texts, json_lines(out), strict=True):
        assert tok.encode(text) == want["input_ids"], text


def test_only_second_without_a_pair_is_refused_as_by_the_cli(fd, cli):
    status, _, err = run_cli(cli, cli_args(TOKENIZERS / "spm", None, 5, "only_second") + ["--", "Hello world again"])
    assert status == 1, err
    tok = fd.AutoTokenizer.from_pretrained(str(TOKENIZERS / "spm"))
    with pytest.raises(ValueError) as info:
        tok("Hello world again", max_length=5, truncation="only_second")
    assert err.strip().split(": ", 3)[-1] in str(info.value)
