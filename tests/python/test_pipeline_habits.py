"""pipeline() as transformers' users call it: call arguments given at construction, HF's device forms, model
and tokenizer objects, generators streamed, QA's positional (question, context), and clear refusals of what
is not there."""
import numpy as np
import pytest

from conftest import PIPELINES, SPM

TEXTS = ["Paris is the capital of France.", "This library is great.", "A third text here."]


@pytest.fixture(scope="module")
def classify(fd):
    return fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, threads=1)


def test_construction_arguments_are_call_defaults(fd, classify):
    every = fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, threads=1, top_k=None)
    assert every(TEXTS) == classify(TEXTS, top_k=None)
    assert every(TEXTS, top_k=1) == classify(TEXTS, top_k=1)  # a call's own argument wins
    assert classify(TEXTS, return_all_scores=True) == classify(TEXTS, top_k=None)
    with pytest.raises(TypeError, match="take no argument.*bogus"):
        fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, bogus=1)


def test_devices_models_and_tokenizers_as_hf_takes_them(fd, classify):
    want = classify(TEXTS, top_k=None)
    model = fd.AutoModelForSequenceClassification.from_pretrained(PIPELINES / "classify", threads=1)
    tok = fd.AutoTokenizer.from_pretrained(SPM)
    for pipe in (fd.pipeline("text-classification", model=model, tokenizer=tok, threads=1),
                 fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, device=-1)):
        assert pipe(TEXTS, top_k=None) == want
    with pytest.raises(ValueError, match="first CUDA device"):
        fd.pipeline("text-classification", model=PIPELINES / "classify", tokenizer=SPM, device=1)


def test_generators_stream(fd, classify):
    streamed = classify((t for t in TEXTS * 3), top_k=None, batch_size=2)
    assert not isinstance(streamed, list)
    assert list(streamed) == classify(TEXTS * 3, top_k=None)
    fill = fd.pipeline("fill-mask", model=PIPELINES / "fill_mask", tokenizer=SPM, threads=1, batch_size=2)
    masked = ["Paris is [MASK].", "A [MASK] day.", "The [MASK] is blue."]
    assert list(fill(iter(masked))) == fill(masked)


def test_question_answering_positional_and_refusals(fd):
    qa = fd.pipeline("question-answering", model=PIPELINES / "qa", tokenizer=SPM, threads=1)
    question, context = "Where is the tower?", "The tower is in Paris, the capital of France."
    assert qa(question, context) == qa(question=question, context=context)
    assert qa({"question": question, "context": context}) == qa(question=question, context=context)
    ner = fd.pipeline("ner", model=PIPELINES / "ner", tokenizer=SPM, threads=1)
    # HF's default is "none": every token on its own.
    assert ner(TEXTS[0], aggregation_strategy="none") == ner(TEXTS[0]) != ner(TEXTS[0], aggregation_strategy="simple")
    assert all("index" in entity for entity in ner(TEXTS[0]))
    # What HF refuses is refused naming it (test_pipeline_arguments.py: what it takes).
    with pytest.raises(ValueError, match="stride"):
        ner(TEXTS[0], aggregation_strategy="none", stride=8)
    fill = fd.pipeline("fill-mask", model=PIPELINES / "fill_mask", tokenizer=SPM, threads=1)
    with pytest.raises(ValueError, match="not return_overflowing_tokens"):
        fill("Paris is [MASK].", tokenizer_kwargs={"return_overflowing_tokens": True})
    assert "streams" in fd.pipeline.__doc__ and "aggregation_strategy" in fd.pipeline.__doc__
