"""flashdeberta: DeBERTa (v1, v2, v3, mDeBERTa) Hugging Face checkpoints on a flash-style C++ engine.

The API follows transformers where it has one:

    import flashdeberta
    tokenizer = flashdeberta.AutoTokenizer.from_pretrained("models/tiny-en")
    model = flashdeberta.AutoModelForMaskedLM.from_pretrained("models/tiny-en")
    outputs = model(**tokenizer(["Paris is the [MASK] of France."], padding=True, return_tensors="np"))
    outputs["logits"].shape                      # (1, L, vocab), a float32 numpy array

    classify = flashdeberta.pipeline("text-classification", model="models/tiny-en-sections")
    classify("A library for reading and writing PNG images.")

    ner = flashdeberta.GLiNER.from_pretrained("path/to/gliner")   # GLiNER's zero-shot named entities
    ner.predict_entities("Ada Lovelace lived in London.", ["person", "location"])

Every call runs in C++ with the GIL released, so Python threads share one model in parallel. Errors are
OSError (a missing or unreadable file) or ValueError (anything else the caller got wrong), carrying the
library's message, which names the file, tensor, field and sizes.
"""

from . import _openmp_wait  # noqa: F401 (before _native: libgomp reads its environment when loaded)
from ._native import __version__
from .batch_encoding import BatchEncoding
from .config import PretrainedConfig
from .gliner import GLiNER
from .models import (AutoModel, AutoModelForMaskedLM, AutoModelForMultipleChoice, AutoModelForQuestionAnswering,
                     AutoModelForSequenceClassification, AutoModelForTokenClassification, ModelOutput,
                     PreTrainedModel)
from .pipelines import (FillMaskPipeline, QuestionAnsweringPipeline, TextClassificationPipeline,
                        TokenClassificationPipeline, pipeline)
from .tokenizer import AutoTokenizer, Tokenizer
from .training import Trainer, TrainingArguments, TrainOutput

__all__ = [
    "__version__", "AutoTokenizer", "Tokenizer", "BatchEncoding", "AutoModel", "AutoModelForMaskedLM",
    "AutoModelForSequenceClassification", "AutoModelForTokenClassification", "AutoModelForQuestionAnswering",
    "AutoModelForMultipleChoice", "PreTrainedModel", "PretrainedConfig", "ModelOutput", "pipeline", "FillMaskPipeline",
    "TextClassificationPipeline", "TokenClassificationPipeline", "QuestionAnsweringPipeline", "GLiNER", "Trainer",
    "TrainingArguments", "TrainOutput",
]
