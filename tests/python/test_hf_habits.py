"""What transformers' users type out of habit, on the fixture models: the config as an object, outputs by
position, eval() and to(), batch_decode, an unknown token's id."""
import numpy as np
import pytest

from conftest import HEADS, SPM, read_json


@pytest.fixture(scope="module")
def seqcls(fd):
    return fd.AutoModelForSequenceClassification.from_pretrained(HEADS / "seqcls_v3", threads=1)


def test_config_reads_as_pretrained_config(fd, seqcls):
    config = seqcls.config
    raw = read_json(HEADS / "seqcls_v3" / "config.json")
    assert isinstance(config, fd.PretrainedConfig)
    assert config.hidden_size == raw["hidden_size"] and config["hidden_size"] == raw["hidden_size"]
    assert config.id2label == {0: "negative", 1: "neutral", 2: "positive"}
    assert config.label2id == {"negative": 0, "neutral": 1, "positive": 2}
    assert config.num_labels == 3
    assert config == raw and "vocab_size" in config and config.get("no such field", 7) == 7
    as_dict = config.to_dict()
    assert as_dict["num_labels"] == 3 and as_dict["id2label"][2] == "positive"
    with pytest.raises(AttributeError, match="config.json has no field 'no_such_field'"):
        config.no_such_field
    with pytest.raises(AttributeError, match="read-only"):
        config.hidden_size = 3
    # Without id2label in config.json: HF's LABEL_<i>, two of them.
    v1 = fd.AutoModelForSequenceClassification.from_pretrained(HEADS / "seqcls_v1", threads=1)
    assert v1.config.id2label == {0: "LABEL_0", 1: "LABEL_1"} and v1.config.num_labels == 2


def test_outputs_by_position_and_eval(seqcls):
    assert seqcls.eval() is seqcls
    ids = np.array([[1, 20, 30, 2]])
    out = seqcls(input_ids=ids)
    assert np.array_equal(out[0], out["logits"]) and np.array_equal(out[0], out.logits)
    assert len(out.to_tuple()) == len(out) and np.array_equal(out[:1][0], out.logits)
    with pytest.raises(NotImplementedError, match="inference only"):
        seqcls.train()
    assert seqcls.train(False) is seqcls


def test_to_reloads_or_keeps_the_model(fd, seqcls):
    ids = np.array([[1, 20, 30, 2]])
    before = seqcls(input_ids=ids).logits
    assert seqcls.to("cpu") is seqcls and seqcls.cpu() is seqcls and seqcls.device == "cpu"
    assert seqcls.to(dtype="float32") is seqcls
    assert np.array_equal(seqcls(input_ids=ids).logits, before)
    with pytest.raises(ValueError, match="not a device"):
        seqcls.to("tpu")
    with pytest.raises(TypeError, match="copy"):
        seqcls.to("cpu", copy=True)
    model = fd.AutoModelForSequenceClassification.from_pretrained(HEADS / "seqcls_v3", threads=1)
    assert model.to(dtype="bfloat16").dtype == "bfloat16"  # loaded again, bf16 linear layers on the CPU
    assert np.allclose(model(input_ids=ids).logits, before, atol=0.05)


def test_tokenizer_habits(fd):
    tok = fd.AutoTokenizer.from_pretrained(SPM)
    rows = [tok.encode("hello world"), tok.encode("a second text")]
    assert tok.batch_decode(rows) == [tok.decode(r) for r in rows]
    assert tok.batch_decode(np.array([rows[0], rows[0]]), skip_special_tokens=True) == [
        tok.decode(rows[0], skip_special_tokens=True)] * 2
    # HF gives the unknown token's id for a token the vocabulary lacks (not None).
    assert tok.convert_tokens_to_ids("no-such-token-anywhere") == tok.unk_token_id
    assert tok.convert_tokens_to_ids(["[CLS]", "no-such-token-anywhere"]) == [tok.cls_token_id, tok.unk_token_id]


def test_tokenizer_return_flags(fd):
    tok = fd.AutoTokenizer.from_pretrained(SPM)
    full = tok(["hello world", "a longer second text"], padding=True, return_tensors="np")
    ids_only = tok(["hello world", "a longer second text"], padding=True, return_attention_mask=False,
                   return_token_type_ids=False, return_tensors="np")
    assert set(ids_only) == {"input_ids"} and np.array_equal(ids_only["input_ids"], full["input_ids"])
    assert "attention_mask" in tok("x", return_token_type_ids=False)
    torch = pytest.importorskip("torch")
    pt = tok(["hello world", "a longer second text"], padding=True, return_tensors="pt")
    assert isinstance(pt["input_ids"], torch.Tensor)
    assert np.array_equal(pt["attention_mask"].numpy(), full["attention_mask"])
    with pytest.raises(ValueError, match="return_tensors='tf'"):
        tok("x", return_tensors="tf")
