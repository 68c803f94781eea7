"""pipeline(): HF's fill-mask, text-classification, token-classification, question-answering and
zero-shot-classification pipelines over the C++ tasks the CLI runs, taking HF's call arguments and returning
HF's structures; and "rerank" (text-embeddings-inference's /rerank) with a cross-encoder."""

import inspect
import itertools
import numbers
import warnings

from . import _native
from ._arguments import MAX_TOKENS, check_text, checkpoint_path, integer, str_items, text_list, \
    threads_and_max_tokens
from .models import PreTrainedModel, backend_for, dtype_name
from .tokenizer import Tokenizer

_TASKS = {"fill-mask": "fill-mask", "text-classification": "text-classification",
          "sentiment-analysis": "text-classification", "token-classification": "token-classification",
          "ner": "token-classification", "question-answering": "question-answering",
          "zero-shot-classification": "zero-shot-classification", "rerank": "rerank", "text-ranking": "rerank"}


class Pipeline:
    """What the pipelines share: the loaded checkpoint, the batch size and the call arguments given at
    construction (HF's pipeline(task, ..., top_k=3): defaults of every call). The tasks themselves (encoding,
    batches of batch_size inputs, post-processing) run in C++, the same task units as the CLI's commands.

    Calling a pipeline with a generator (or any iterator) streams: the results come back as a generator,
    batch_size inputs at a time, as HF's pipelines iterate over a dataset."""

    def __init__(self, native, task, batch_size, defaults=None):
        self._native = native
        self.task = task
        self.batch_size = batch_size
        defaults = dict(defaults or {})
        takes = inspect.signature(self._call).parameters
        unknown = sorted(k for k in defaults if k not in takes or k == "inputs")
        if unknown:
            raise TypeError(f"{task} pipelines take no argument(s) {', '.join(unknown)} (their arguments: "
                            f"{', '.join(k for k in takes if k != 'inputs')})")
        self._defaults = defaults

    def __call__(self, *args, **kwargs):
        params = {**self._defaults, **kwargs}
        if args and _is_stream(args[0]):
            return self._stream(args[0], args[1:], params)
        return self._call(*args, **params)

    def _stream(self, inputs, rest, params):
        size = self._batch_size(params.get("batch_size"))
        while True:
            chunk = list(itertools.islice(inputs, size))
            if not chunk:
                return
            results = self._call(chunk, *rest, **params)
            yield from ([results] if len(chunk) == 1 and self._unwraps_one_item_list else results)

    # HF's fill-mask gives a one-text list's result unwrapped, as for a single text; streams yield per input.
    _unwraps_one_item_list = False

    def _batch_size(self, batch_size):
        return self.batch_size if batch_size is None else integer(batch_size, "batch_size", 1)

    def __repr__(self):
        return f"flashdeberta.{type(self).__name__}(task={self.task!r})"


class FillMaskPipeline(Pipeline):
    _unwraps_one_item_list = True

    def _call(self, inputs, top_k=5, batch_size=None, targets=None, tokenizer_kwargs=None):
        """Per text, the top_k tokens at its mask (a list of dicts), or at each of its masks (a list of lists).
        targets (a str or a list of str): only these compete, each the vocabulary's token of that name or else
        the first token of its tokenization (with HF's warning); scores stay the softmax over the whole
        vocabulary and top_k is capped at the number of targets. tokenizer_kwargs: HF's tokenizer arguments of
        the texts, {"truncation": True | "longest_first" | ..., "max_length": N}."""
        texts, single = text_list(inputs, "inputs")
        if not texts:
            return []
        top_k = integer(top_k, "top_k", 1)
        target_ids = []
        if targets is not None:
            targets = [targets] if isinstance(targets, str) else targets
            if not isinstance(targets, (list, tuple)):
                raise ValueError(f"targets must be a str or a list of str, not {type(targets).__name__}")
            target_ids, notes = self._native.target_ids(str_items(targets, "targets"))
            for note in notes:  # HF logs these as warnings
                warnings.warn(note, UserWarning, stacklevel=3)
        max_length, truncation = _tokenizer_kwargs(tokenizer_kwargs or {}, "tokenizer_kwargs")
        outputs = self._native.fill_mask(texts, top_k, self._batch_size(batch_size), target_ids, max_length,
                                         truncation)
        # HF returns a one-text list's result unwrapped, as for a single text.
        return outputs[0] if single or len(outputs) == 1 else outputs


class TextClassificationPipeline(Pipeline):
    _LEGACY = object()  # top_k not given: HF's legacy form, the best label as a dict

    def _call(self, inputs, top_k=_LEGACY, batch_size=None, return_all_scores=None, function_to_apply=None,
              truncation=None, max_length=None):
        """Labels with scores, best first. A text (or {"text", "text_pair"}) with top_k not given: [best] for a
        str, best for a dict; top_k=None: every label; top_k=K: the K best. A list: one result per item.
        function_to_apply: "sigmoid", "softmax", "none" (the logits) or "default" (None): HF's choice for the
        checkpoint (none for problem_type "regression", sigmoid for "multi_label_classification" or one label,
        else softmax). truncation (True / "longest_first", "only_first", "only_second") and max_length: HF's
        tokenizer arguments; a text longer than max_length (default: the tokenizer's model_max_length) is cut
        as HF cuts it, where without them a text over max_tokens is refused."""
        if return_all_scores is not None:  # HF's older form of top_k=None (every label) against top_k=1
            if top_k is not TextClassificationPipeline._LEGACY:
                raise ValueError("give top_k or return_all_scores, not both")
            top_k = None if return_all_scores else TextClassificationPipeline._LEGACY
        legacy = top_k is TextClassificationPipeline._LEGACY
        items = inputs if isinstance(inputs, list) else [inputs]
        texts, pairs = [], []
        for item in items:
            if isinstance(item, str):
                texts.append(check_text(item, "inputs"))
                pairs.append(None)
            elif isinstance(item, dict) and set(item) <= {"text", "text_pair"} and isinstance(item.get("text"), str):
                texts.append(check_text(item["text"], "inputs['text']"))
                pair = item.get("text_pair")
                pairs.append(check_text(pair, "inputs['text_pair']") if isinstance(pair, str) else pair)
            else:
                raise ValueError("text-classification takes a str, a {'text', 'text_pair'} dict or a list of "
                                 f"them, not {type(item).__name__}")
        if not texts:
            return []
        for pair in pairs:
            if pair is not None and not isinstance(pair, str):
                raise ValueError(f"text_pair must be a str or None, not {type(pair).__name__}")
        k = None if legacy or top_k is None else integer(top_k, "top_k", 1)
        if function_to_apply is not None:
            function_to_apply = str(getattr(function_to_apply, "value", function_to_apply))  # HF's enum too
        length, strategy = _tokenizer_kwargs({"truncation": truncation, "max_length": max_length}, "")
        results = self._native.classify(texts, pairs, k, function_to_apply, self._batch_size(batch_size), length,
                                        strategy)
        if legacy:
            results = [labels[0] for labels in results]
            if isinstance(inputs, str):
                return [results[0]]
        return results if isinstance(inputs, list) else results[0]


class TokenClassificationPipeline(Pipeline):
    def _call(self, inputs, batch_size=None, aggregation_strategy=None, ignore_labels=None, stride=None):
        """Entities of each text. aggregation_strategy (a str, any case, or HF's AggregationStrategy; None is
        HF's default, "none"): "none": every token, {"entity", "score", "index", "word", "start", "end"};
        "simple" (what the CLI's ner and the server's /ner give): neighbouring tokens
        of one entity grouped, {"entity_group", "score", "word", "start", "end"}; "first", "average", "max":
        the same over whole words, each word labelled by its first token, its averaged scores or its best token.
        ignore_labels: the labels (entity groups) left out, default ["O"]. Each text is cut at the tokenizer's
        model_max_length when it has one, as HF's pipeline cuts it; with stride=N (less than model_max_length
        less the 2 special tokens) a longer text runs whole instead, as windows of model_max_length tokens that
        share N tokens with their neighbours, and the windows' entities are merged as HF merges them (of
        entities that overlap, the longer, or the higher score of equal lengths). As HF, stride= is refused
        with aggregation_strategy "none" given explicitly."""
        strategy = "none" if aggregation_strategy is None else str(getattr(aggregation_strategy, "value",
                                                                           aggregation_strategy))
        if stride is not None:
            stride = integer(stride, "stride", 0, MAX_TOKENS)
            if aggregation_strategy is not None and strategy.lower() == "none":
                raise ValueError('`stride` was provided to process all the text but `aggregation_strategy="none"`, '
                                 "please select another one instead (HF refuses it too)")
        if ignore_labels is None:
            ignore_labels = ["O"]
        elif isinstance(ignore_labels, str) or not isinstance(ignore_labels, (list, tuple, set, frozenset)):
            raise ValueError(f"ignore_labels must be a list of str, not {type(ignore_labels).__name__}")
        texts, single = text_list(inputs, "inputs")
        per_text = self._native.ner(texts, self._batch_size(batch_size), strategy,
                                    str_items(list(ignore_labels), "ignore_labels"), stride)
        return per_text[0] if single else per_text


class QuestionAnsweringPipeline(Pipeline):
    def _call(self, inputs=None, context_=None, *, question=None, context=None, top_k=1, topk=None,
              max_answer_len=15, handle_impossible_answer=False, doc_stride=None, max_seq_len=None,
              max_question_len=64, align_to_words=True, padding=None, batch_size=None):
        """Answer spans, as transformers 4.x's question-answering pipeline: {"score", "start", "end",
        "answer"} for qa(question=..., context=...), qa("question", "context") or qa({"question", "context"});
        a list of such dicts gives a list of results. top_k: that many answers, best first (a list; HF gives
        a single answer as a dict, and fewer than top_k when the context has fewer spans). max_answer_len:
        the most tokens of an answer (15). handle_impossible_answer: the empty answer {"start": 0, "end": 0,
        "answer": ""} competes with the score of [CLS]. max_seq_len (default min(model_max_length, 384)) and
        doc_stride (default min(max_seq_len // 2, 128)): a context too long for one window of max_seq_len
        tokens is split into windows sharing doc_stride tokens, and their answers merged (equal texts add
        their scores). align_to_words: widen spans to whole words. max_question_len and padding only matter to
        HF's slow tokenizers and change nothing here."""
        if isinstance(inputs, str) and isinstance(context_, str):  # HF's positional (question, context)
            inputs, question, context = None, inputs, context_
        elif context_ is not None:
            raise ValueError("question-answering takes (question, context) as two str, or question= and context=")
        if topk is not None and top_k == 1:  # HF's deprecated name
            warnings.warn("topk parameter is deprecated, use top_k instead", UserWarning, stacklevel=3)
            top_k = topk
        if isinstance(top_k, numbers.Integral) and not isinstance(top_k, bool) and top_k < 1:
            raise ValueError(f"top_k parameter should be >= 1 (got {top_k})")
        if isinstance(max_answer_len, numbers.Integral) and not isinstance(max_answer_len, bool) \
                and max_answer_len < 1:
            raise ValueError(f"max_answer_len parameter should be >= 1 (got {max_answer_len}")
        integer(max_question_len, "max_question_len", 1)
        options = (integer(top_k, "top_k", 1), integer(max_answer_len, "max_answer_len", 1),
                   bool(handle_impossible_answer), bool(align_to_words),
                   None if max_seq_len is None else integer(max_seq_len, "max_seq_len", 1, MAX_TOKENS),
                   None if doc_stride is None else integer(doc_stride, "doc_stride", 0, MAX_TOKENS))

        def one(q, c):
            found = self._native.answers(check_text(q, "question"), check_text(c, "context"), *options)
            return found[0] if len(found) == 1 else found  # HF: a single answer as a dict

        if inputs is None:
            if isinstance(question, list) and isinstance(context, str):  # HF: several questions, one context
                return [one(q, context) for q in str_items(question, "question")]
            if isinstance(question, list) and isinstance(context, list):
                if len(question) != len(context):
                    raise ValueError("Questions and contexts don't have the same lengths")
                return [one(q, c) for q, c in zip(str_items(question, "question"), str_items(context, "context"))]
            if not isinstance(question, str) or not isinstance(context, str):
                raise ValueError("question-answering needs question= and context= (str)")
            return one(question, context)
        items = inputs if isinstance(inputs, list) else [inputs]
        answers = []
        for item in items:
            if not (isinstance(item, dict) and isinstance(item.get("question"), str)
                    and isinstance(item.get("context"), str)):
                raise ValueError("question-answering takes {'question': str, 'context': str} dicts")
            answers.append(one(item["question"], item["context"]))
        return answers if isinstance(inputs, list) else answers[0]


_DEFAULT_HYPOTHESIS_TEMPLATE = "This example is {}."


class ZeroShotClassificationPipeline(Pipeline):
    def _call(self, sequences, candidate_labels=None, hypothesis_template=_DEFAULT_HYPOTHESIS_TEMPLATE,
                 multi_label=False, batch_size=None):
        """HF's zero-shot-classification: {"sequence", "labels", "scores"} (labels best first) for a str, a
        list of them for a list. candidate_labels: a list, or a str of comma-separated labels. Each batch of
        sequences runs with every label's (sequence, hypothesis) pair in one forward pass."""
        texts, single = text_list(sequences, "sequences")
        if isinstance(candidate_labels, str):  # HF's _parse_labels
            candidate_labels = [label.strip() for label in candidate_labels.split(",") if label.strip()]
        if not isinstance(candidate_labels, (list, tuple)):
            raise ValueError("candidate_labels must be a str of comma-separated labels or a list of str, not "
                             f"{type(candidate_labels).__name__}")
        candidate_labels = str_items(candidate_labels, "candidate_labels")
        if not candidate_labels or not texts:
            raise ValueError("You must include at least one label and at least one sequence.")
        hypothesis_template = check_text(str(hypothesis_template), "hypothesis_template")
        results = self._native.zero_shot(texts, list(candidate_labels), hypothesis_template, bool(multi_label),
                                         self._batch_size(batch_size))
        return results[0] if single else results


class RerankPipeline(Pipeline):
    def _call(self, query, passages, top_n=None, raw_scores=False, return_text=False, truncation=False,
                 max_length=None, batch_size=None):
        """The passages by descending relevance to query, as text-embeddings-inference's /rerank:
        [{"index", "score"}] ("text" too with return_text), index counting passages from 0, score the sigmoid
        of the cross-encoder's logit (the logit with raw_scores), the top_n best when given. truncation
        (True/"longest_first", "only_first", "only_second") cuts each (query, passage) pair to max_length
        tokens, or to the tokenizer's model_max_length without one, as HF's tokenizer; max_length alone cuts
        longest_first (as the CLI's --max-length). batch_size counts passages per forward pass."""
        if not isinstance(query, str):
            raise ValueError(f"query must be a str, not {type(query).__name__}")
        check_text(query, "query")
        texts, _ = text_list(passages, "passages")
        top_n = None if top_n is None else integer(top_n, "top_n", 1)
        if truncation is True:
            truncation = "longest_first"
        strategy = None if truncation is False or truncation is None else str(truncation)
        length = None if max_length is None else integer(max_length, "max_length", 1)
        return self._native.rerank(query, texts, top_n, bool(raw_scores), bool(return_text), length, strategy,
                                   self._batch_size(batch_size))


_CLASSES = {"fill-mask": FillMaskPipeline, "text-classification": TextClassificationPipeline,
            "token-classification": TokenClassificationPipeline, "question-answering": QuestionAnsweringPipeline,
            "zero-shot-classification": ZeroShotClassificationPipeline, "rerank": RerankPipeline}


def pipeline(task, model=None, tokenizer=None, *, device="cpu", dtype="float32", attention="flash", threads=0,
             batch_size=8, max_tokens=65536, backend=None, **call_defaults):
    """HF's pipeline(task, model=...), running on flashdeberta's C++ tasks.

    task: "fill-mask", "text-classification" ("sentiment-analysis"), "token-classification" ("ner"),
      "question-answering", "zero-shot-classification" (an NLI checkpoint) or "rerank" ("text-ranking": a
      cross-encoder, one label).
    model: a checkpoint directory whose config.json's architectures hold the task's head, or a model loaded by
      AutoModelFor*.from_pretrained (its directory is loaded for the task; its device and dtype are kept unless
      given here). flashdeberta downloads nothing.
    tokenizer: a directory with the tokenizer files, or an AutoTokenizer; default: the model's directory.
    device: "cpu" (or -1), "cuda" ("cuda:0", 0, a torch.device). dtype: "float32", "bfloat16", "float16"
      (CUDA), "int8" (CPU linear layers). attention: "flash" or "eager". threads: host threads (0: every
      core). batch_size: inputs per forward pass. max_tokens: the largest forward, in tokens.
    Any other keyword is a default of every call, as HF's pipeline(..., top_k=3) is. The call arguments (HF's):
      fill-mask: top_k (5), targets (str or list: only these tokens compete), tokenizer_kwargs ({"truncation",
        "max_length"}).
      text-classification: top_k (not given: the best label alone, HF's legacy form; None: every label),
        return_all_scores (deprecated form of top_k=None), function_to_apply ("default", "sigmoid", "softmax",
        "none"), truncation and max_length (HF's tokenizer arguments: cut instead of refusing a long text).
      token-classification: aggregation_strategy ("none", HF's default; "simple", "first", "average", "max"), ignore_labels
        (["O"]), stride (a longer text runs as overlapping windows instead of being cut at the tokenizer's
        model_max_length).
      question-answering: top_k (1), max_answer_len (15), handle_impossible_answer (False), max_seq_len
        (min(model_max_length, 384)), doc_stride (min(max_seq_len // 2, 128)): a long context runs as
        overlapping windows, max_question_len (64, HF's slow tokenizers only), align_to_words (True).
      zero-shot-classification: candidate_labels, hypothesis_template, multi_label.
      rerank: top_n, raw_scores, return_text, truncation, max_length.
      Every task: batch_size.

    Calls: pipe(text) or pipe([texts]) (a generator streams: results come back as a generator); QA takes
    question=, context= (or the two as positional str, or {"question", "context"} dicts). What HF offers and
    flashdeberta does not (tokenizer arguments other than truncation and max_length) is refused naming it."""
    if task not in _TASKS:
        raise ValueError(f"task {task!r} is not one of {', '.join(sorted(_TASKS))}")
    if model is None:
        raise ValueError("pipeline() needs model=, a checkpoint directory (flashdeberta downloads nothing)")
    if isinstance(model, PreTrainedModel):
        if device == "cpu" and backend is None:
            device = model.device
        if dtype == "float32":
            dtype = model.dtype
        model = model.name_or_path
    if isinstance(tokenizer, Tokenizer):
        tokenizer = tokenizer.name_or_path
    model = checkpoint_path(model, "model", must_exist=True)
    tokenizer = None if tokenizer is None else checkpoint_path(tokenizer, "tokenizer")
    batch_size = integer(batch_size, "batch_size", 1)
    threads, max_tokens = threads_and_max_tokens(threads, max_tokens)
    native = _native.Pipeline(_TASKS[task], model, tokenizer,
                              backend_for(device, backend), dtype_name(dtype), attention, threads, max_tokens)
    return _CLASSES[_TASKS[task]](native, _TASKS[task], batch_size, call_defaults)


def _tokenizer_kwargs(kwargs, name):
    """HF's tokenizer truncation= and max_length= (from a pipeline's tokenizer_kwargs dict or its own arguments)
    as (max_length or None, strategy name or None). truncation True is "longest_first"; False, None and
    "do_not_truncate" cut nothing; max_length alone cuts longest_first (HF's tokenizer does, with a warning)."""
    if not isinstance(kwargs, dict):
        raise ValueError(f"{name} must be a dict, not {type(kwargs).__name__}")
    unknown = sorted(str(k) for k in kwargs if k not in ("truncation", "max_length", "padding"))
    if unknown:
        raise ValueError(f"{name or 'tokenizer arguments'}: flashdeberta takes truncation, max_length and padding "
                         f"(which changes no result), not {', '.join(unknown)}")
    truncation, max_length = kwargs.get("truncation"), kwargs.get("max_length")
    truncation = getattr(truncation, "value", truncation)  # HF's TruncationStrategy
    if truncation is True:
        truncation = "longest_first"
    elif truncation is False or truncation is None or truncation == "do_not_truncate":
        truncation = None
    elif not isinstance(truncation, str):
        raise ValueError(f"truncation must be a bool or a strategy name, not {type(truncation).__name__}")
    length = None if max_length is None else integer(max_length, "max_length", 1)
    if length is not None and truncation is None and kwargs.get("truncation") is not None:
        length = None  # HF: max_length with truncation=False only pads
    return length, truncation


def _is_stream(value):
    """A generator or another iterator (not a str, list, tuple or dict): HF iterates over it lazily."""
    return not isinstance(value, (str, bytes, list, tuple, dict)) and hasattr(value, "__next__")
