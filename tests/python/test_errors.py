"""Errors a user meets: OSError for missing directories and files, ValueError for bad content, input and
arguments, each carrying the C++ message (which names the file, tensor, key or sizes: docs/errors.md)."""
import numpy as np
import pytest

from conftest import FIXTURES, HEADS, PIPELINES, SPM, copy_checkpoint

SEQCLS = HEADS / "seqcls_v3"  # vocab 100, 3 labels, no token types
SEQCLS_V1 = HEADS / "seqcls_v1"  # token types (type_vocab_size 2)


def ids(*rows):
    return np.array(rows, dtype=np.int64)


# --- files ---------------------------------------------------------------------------------------------

def test_missing_directory(fd, tmp_path):
    missing = tmp_path / "no-such-model"
    for load in (fd.AutoModel.from_pretrained, fd.AutoModelForSequenceClassification.from_pretrained,
                 fd.AutoTokenizer.from_pretrained):
        with pytest.raises(OSError) as info:
            load(str(missing))
        assert str(missing) in str(info.value)  # C++: "<dir>: no such directory" or "<dir>/config.json: ..."
    with pytest.raises(OSError):
        fd.pipeline("text-classification", model=str(missing))


def test_missing_weights_names_the_directory_and_the_files_looked_for(fd, tmp_path):
    d = tmp_path / "config-only"
    d.mkdir()
    (d / "config.json").write_bytes((SEQCLS / "config.json").read_bytes())
    with pytest.raises(OSError, match="model.safetensors") as info:
        fd.AutoModel.from_pretrained(str(d))
    assert str(d) in str(info.value)


def test_missing_config_names_the_file(fd, tmp_path):
    d = tmp_path / "weights-only"
    d.mkdir()
    (d / "model.safetensors").write_bytes((SEQCLS / "model.safetensors").read_bytes())
    with pytest.raises(OSError, match="config.json") as info:
        fd.AutoModel.from_pretrained(str(d))
    assert str(d / "config.json") in str(info.value)


def test_missing_tokenizer_files(fd, tmp_path):
    # The pipeline fixtures ship without a tokenizer: without tokenizer= it must say which files it wants.
    with pytest.raises(OSError, match="no tokenizer files"):
        fd.AutoTokenizer.from_pretrained(str(PIPELINES / "classify"))
    with pytest.raises(OSError, match="spm.model"):
        fd.pipeline("text-classification", model=str(PIPELINES / "classify"))


# --- malformed content ---------------------------------------------------------------------------------

def test_malformed_config_json(fd, tmp_path):
    d = copy_checkpoint(SEQCLS, tmp_path / "bad-json")
    (d / "config.json").write_text('{"hidden_size": 32', encoding="utf-8")
    with pytest.raises(ValueError, match="JSON") as info:
        fd.AutoModel.from_pretrained(str(d))
    assert str(d / "config.json") in str(info.value)


def test_config_value_of_the_wrong_type(fd, tmp_path):
    d = copy_checkpoint(SEQCLS, tmp_path / "bad-type", lambda c: c.update(hidden_size="32"))
    with pytest.raises(ValueError, match="hidden_size") as info:
        fd.AutoModel.from_pretrained(str(d))
    assert "must be an integer" in str(info.value)


def test_classifier_shape_disagreeing_with_the_labels(fd, tmp_path):
    # seqcls_v3's weights (3 labels) under a config with 5 labels.
    d = copy_checkpoint(SEQCLS, tmp_path / "labels",
                        lambda c: c.update(id2label={str(i): f"L{i}" for i in range(5)},
                                           label2id={f"L{i}": i for i in range(5)}))
    with pytest.raises(ValueError, match=r"classifier.weight' has shape \[3, 32\]"):
        fd.AutoModelForSequenceClassification.from_pretrained(str(d))


def test_head_missing_from_the_checkpoint(fd):
    with pytest.raises(ValueError, match="classifier.weight"):
        fd.AutoModelForTokenClassification.from_pretrained(str(HEADS / "qa_v3"))
    with pytest.raises(ValueError, match="multiple-choice head needs a DeBERTa v2/v3 checkpoint"):
        fd.AutoModelForMultipleChoice.from_pretrained(str(SEQCLS_V1))


# --- inputs --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def classifier(fd):
    return fd.AutoModelForSequenceClassification.from_pretrained(str(SEQCLS))


def test_bad_input_shapes(classifier):
    with pytest.raises(ValueError):
        classifier(np.array([1, 5, 6, 2], dtype=np.int64))  # 1-D: HF wants (B, L) too
    with pytest.raises(ValueError):
        classifier(np.ones((2, 3, 4), dtype=np.int64))  # 3-D is for multiple choice only
    with pytest.raises(ValueError):
        classifier(ids([1, 5, 6, 2]), attention_mask=ids([1, 1, 1]))
    with pytest.raises(ValueError):
        classifier(ids([1, 5, 6, 2]), token_type_ids=ids([0, 0], [0, 0]))


def test_every_integer_layout_gives_the_int64_result(classifier):
    # C-contiguous aligned int64 is read in place; every other integer array through numpy's conversion.
    base = ids([1, 5, 6, 2, 0], [1, 7, 2, 0, 0])
    mask = (base != 0).astype(np.int64)
    want = classifier(base, attention_mask=mask)["logits"]
    unaligned = np.frombuffer(b"\0" + base.tobytes(), dtype=np.int64, offset=1).reshape(base.shape)
    assert not unaligned.flags.aligned
    for name, variant in (("int32", base.astype(np.int32)), ("uint8", base.astype(np.uint8)),
                          ("Fortran order", np.asfortranarray(base)), ("big-endian", base.astype(">i8")),
                          ("every other column", np.repeat(base, 2, axis=1)[:, ::2]), ("unaligned", unaligned)):
        got = classifier(variant, attention_mask=mask)["logits"]
        assert np.array_equal(got, want), name
    with pytest.raises(ValueError, match="input_ids has dtype float64"):
        classifier(base.astype(np.float64))


def test_multiple_choice_wants_three_dimensions(fd):
    mc = fd.AutoModelForMultipleChoice.from_pretrained(str(HEADS / "mc_v3"))
    with pytest.raises(ValueError):
        mc(ids([1, 5, 6, 2], [1, 7, 8, 2]))


def test_ids_outside_the_vocabulary(classifier):
    with pytest.raises(ValueError, match="outside the vocabulary") as info:
        classifier(ids([1, 5, 100, 2]))  # vocab_size 100
    assert "100" in str(info.value)
    with pytest.raises(ValueError):
        classifier(ids([1, -5, 6, 2]))


def test_token_types_outside_the_table(fd):
    model = fd.AutoModel.from_pretrained(str(SEQCLS_V1))
    with pytest.raises(ValueError):
        model(ids([1, 5, 6, 2]), token_type_ids=ids([0, 0, 5, 0]))


def test_pooler_refuses_a_left_padded_row(classifier):
    # HF would pool a padding position there; the C++ heads refuse it, naming the sequence.
    with pytest.raises(ValueError, match="pool") as info:
        classifier(ids([1, 5, 6], [7, 8, 9]), attention_mask=ids([1, 1, 1], [0, 1, 1]))
    assert "position 0" in str(info.value)


def test_max_tokens(fd):
    model = fd.AutoModel.from_pretrained(str(SEQCLS), max_tokens=16)
    model(np.ones((2, 8), dtype=np.int64))  # exactly the limit
    with pytest.raises(ValueError, match="16"):
        model(np.ones((2, 9), dtype=np.int64))


# --- arguments -----------------------------------------------------------------------------------------

def test_bad_dtype_device_attention(fd):
    # float16 on the CPU too: the host backend computes in float32, its linear layers optionally in bf16 or int8.
    for kwargs, needle in (({"dtype": "float8"}, "float8"), ({"device": "tpu"}, "tpu"),
                           ({"attention": "sparse"}, "sparse"), ({"dtype": "float16"}, "fp16|float16")):
        with pytest.raises(ValueError, match=needle):
            fd.AutoModel.from_pretrained(str(SEQCLS), **kwargs)
    with pytest.raises(ValueError, match="float8"):
        fd.pipeline("text-classification", model=str(PIPELINES / "classify"), tokenizer=str(SPM), dtype="float8")


def test_unknown_task(fd):
    with pytest.raises(ValueError, match="summarization"):
        fd.pipeline("summarization", model=str(PIPELINES / "classify"), tokenizer=str(SPM))


def test_wrong_head_for_the_task(fd):
    # A sequence-classification checkpoint for ner: the message names what config.json has.
    with pytest.raises(ValueError, match="DebertaV2ForSequenceClassification"):
        fd.pipeline("ner", model=str(PIPELINES / "classify"), tokenizer=str(SPM))
    with pytest.raises(ValueError, match="DebertaV2Model"):
        fd.pipeline("text-classification", model=str(FIXTURES / "v3_c2p"), tokenizer=str(SPM))


def test_fill_mask_without_a_mask(fd):
    pipe = fd.pipeline("fill-mask", model=str(PIPELINES / "fill_mask"), tokenizer=str(SPM))
    with pytest.raises(ValueError, match=r"\[MASK\]"):
        pipe("no mask here")


def test_pipeline_text_over_max_tokens(fd):
    """The refusals name Python's arguments, not the CLI's --max-tokens and --batch-size."""
    pipe = fd.pipeline("text-classification", model=str(PIPELINES / "classify"), tokenizer=str(SPM), max_tokens=8)
    with pytest.raises(ValueError, match=r"more than max_tokens 8 \(tokenizing stopped there; raise max_tokens\)"):
        pipe("this text is certainly longer than eight tokens once it is tokenized")
    # Texts that fit max_tokens alone but not together run in one forward each, as with batch_size=1.
    pipe = fd.pipeline("text-classification", model=str(PIPELINES / "classify"), tokenizer=str(SPM), max_tokens=12)
    texts = ["seven words in this text here", "six words in this text here"]
    assert pipe(texts, batch_size=2) == pipe(texts, batch_size=1)


def test_tokenizer_arguments(fd):
    tok = fd.AutoTokenizer.from_pretrained(str(SPM))
    with pytest.raises(ValueError, match="only_second"):
        tok("Hello world again", truncation="only_second", max_length=4)  # no pair to truncate
    with pytest.raises(ValueError):
        tok("Hello", truncation="bogus", max_length=4)
    with pytest.raises(ValueError):
        tok("Hello", padding="bogus")
    with pytest.raises(ValueError):
        tok(["a", "b"], text_pair=["only one pair"])  # HF: the batch and its pairs differ in length


def test_errors_leave_the_objects_usable(fd):
    # A refused call must not poison the shared model or tokenizer.
    model = fd.AutoModelForSequenceClassification.from_pretrained(str(SEQCLS))
    good = model(ids([1, 5, 6, 2]))["logits"]
    with pytest.raises(ValueError):
        model(ids([1, 5, 100, 2]))
    assert np.array_equal(model(ids([1, 5, 6, 2]))["logits"], good)
