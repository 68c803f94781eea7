"""AutoModel and AutoModelFor*: a checkpoint with one head on a backend, called with numpy inputs and
returning HF's output fields (float32 numpy arrays in HF's layouts)."""

from . import _native
from ._arguments import checkpoint_path, threads_and_max_tokens
from .config import PretrainedConfig

# model(input_ids, attention_mask, token_type_ids, on_device) for a _native.Model, without pybind11's dispatcher.
_call = _native.call_model

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16", "int8": "int8"}


def backend_for(device, backend):
    """The C++ backend of a device: "cpu" (HF's device=-1) runs the Eigen backend (or backend="kokkos"), "cuda"
    ("cuda:0", HF's device=0, a torch.device) the CUDA one."""
    if backend is not None:
        return backend
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            return "eigen"
        device = f"cuda:{device}"
    device = str(device)
    if device == "cpu":
        return "eigen"
    if device == "cuda" or device.startswith("cuda:"):
        if device not in ("cuda", "cuda:0"):
            raise ValueError(f"device={device!r}: flashdeberta runs on the first CUDA device ('cuda')")
        return "cuda"
    raise ValueError(f"device={device!r} is not 'cpu' or 'cuda'")


def dtype_name(dtype):
    name = str(dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise ValueError(f"dtype={dtype!r} is not one of float32, bfloat16, float16, int8")
    return _DTYPES[name]


class ModelOutput(dict):
    """HF's ModelOutput: the fields by key (out["logits"]), as attributes (out.logits) or by position in HF's
    order (out[0], out[:2], to_tuple())."""

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return tuple(self.values())[key]
        return dict.__getitem__(self, key)

    def to_tuple(self):
        return tuple(self.values())

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"this output has no field {name!r} (fields: {', '.join(self)})") from None


class PreTrainedModel(_native.ModelBase):
    """A loaded model. Call it with input_ids (and attention_mask, token_type_ids) as [B, L] integer arrays
    ([B, C, L] for multiple choice); positions whose attention_mask is 0 hold zeros in the outputs."""

    # model(...) is _native.ModelBase's tp_call: the common call (numpy arrays in and out) in C, as forward
    # makes it, every other call through forward. self._native is that base's field.

    def __init__(self, directory, head, *, device, dtype, attention, threads, max_tokens, backend):
        self.name_or_path = directory
        self._head, self._attention = head, attention
        self._threads, self._max_tokens = threads_and_max_tokens(threads, max_tokens)
        self._load(device, backend, dtype_name(dtype))
        # config.json as the C++ loader's strict reader reads it (duplicate keys, NaN, invalid UTF-8 refused).
        self.config = PretrainedConfig(self._native.config, self._native.labels)

    def _load(self, device, backend, dtype):
        native = _native.Model(self.name_or_path, self._head, backend_for(device, backend), dtype, self._attention,
                               self._threads, self._max_tokens, ModelOutput)
        self._native = native
        self._backend = backend
        self.device = "cuda" if backend_for(device, backend) == "cuda" else "cpu"
        self.dtype = dtype

    def eval(self):
        """HF's eval(): flashdeberta models always run as in eval mode (no dropout); returns the model."""
        return self

    def train(self, mode=True):
        if mode:
            raise NotImplementedError("flashdeberta models run inference only: train() is not available")
        return self

    def to(self, *args, **kwargs):
        """HF's to(device) / to(dtype) / to(device, dtype): the same weights loaded again on that device or in
        that dtype (a load, not a copy), in place; returns the model."""
        device, dtype = self.device, self.dtype
        for value in (*args, *kwargs.values()):
            name = str(value).replace("torch.", "")
            if name in _DTYPES:
                dtype = dtype_name(name)
            elif name == "cpu" or name == "cuda" or name.startswith("cuda:") or isinstance(value, int):
                device = value if isinstance(value, int) else name  # backend_for checks an index
            else:
                raise ValueError(f"to({value!r}): not a device ('cpu', 'cuda', 'cuda:0', 0) or a dtype")
        unknown = set(kwargs) - {"device", "dtype"}
        if unknown:
            raise TypeError(f"to() got unexpected argument(s) {', '.join(sorted(unknown))}")
        same_device = backend_for(device, None) == backend_for(self.device, None)
        if not same_device or dtype != self.dtype:
            self._load(device, self._backend if same_device else None, dtype)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    @property
    def id2label(self):
        # The labels as the library reads them (HF's PretrainedConfig rule: id2label when there is one, which
        # also gives their number, else LABEL_<i> for num_labels, 2 by default).
        return dict(enumerate(self._native.labels))

    @property
    def label2id(self):
        return {label: i for i, label in self.id2label.items()}

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, *, return_tensors="np", **unused):
        """return_tensors: "np" (float32 numpy arrays, the default); "dlpack" (on CUDA the outputs stay in GPU
        memory, in the model's dtype, as DeviceArrays that torch.from_dlpack, cupy.from_dlpack or
        jax.dlpack.from_dlpack take without a copy; numpy arrays on the CPU); "pt" (torch tensors, through
        DLPack on CUDA). output_hidden_states=True adds HF's hidden_states: a tuple of num_hidden_layers + 1
        [B, L, H] arrays, the embedding output first (gathered in host memory, also on CUDA; "pt" copies them to
        the model's device). output_attentions=True is refused: the flash kernel never forms the probabilities."""
        # numpy is imported on the first call, not with the package, whose import it would take most of; once
        # imported, this is a dictionary lookup.
        import numpy as np

        # The common call (numpy arrays in and out) goes straight to the binding: after a forward has swept the
        # caches, every line of Python here costs a cache miss or two.
        if (not unused and return_tensors == "np" and type(input_ids) is np.ndarray
                and (attention_mask is None or type(attention_mask) is np.ndarray)
                and (token_type_ids is None or type(token_type_ids) is np.ndarray)):
            return _call(self._native, input_ids, attention_mask, token_type_ids, False)
        hidden_states = bool(unused.pop("output_hidden_states", False))
        if unused.pop("output_attentions", False):
            raise ValueError("output_attentions=True: flashdeberta's attention never forms the L x L attention "
                             "probabilities (the flash kernel keeps them in registers), so it cannot return them")
        if unused:
            unknown = [k for k in unused if k not in ("return_dict", "offset_mapping")]
            if unknown:
                raise TypeError(f"unexpected argument(s) {', '.join(unknown)}: flashdeberta models take input_ids, "
                                "attention_mask and token_type_ids (and output_hidden_states)")
        if input_ids is None:
            raise ValueError("input_ids is required")
        # numpy arrays go to the binding as they are (the common case, and the cheapest); torch tensors (on any
        # device: `tokenizer(..., return_tensors="pt").to("cuda")` is how HF's users call a GPU model) through
        # host memory, the ids being a few kilobytes; anything else (lists) through np.asarray.
        def host_array(a):
            if a is None or type(a) is np.ndarray:
                return a
            if hasattr(a, "detach") and hasattr(a, "cpu"):
                return a.detach().cpu().numpy()
            return np.asarray(a)

        try:
            ids, mask, types = (host_array(a) for a in (input_ids, attention_mask, token_type_ids))
        except ValueError:  # the tokenizer's lists (its default output) of unpadded texts
            raise ValueError("the input rows have different lengths and make no [B, L] array: tokenize with "
                             "padding=True") from None
        if hidden_states:
            return self._with_hidden_states(ids, mask, types, return_tensors)
        if return_tensors == "np":
            return _call(self._native, ids, mask, types, False)
        if return_tensors not in ("dlpack", "pt"):
            raise ValueError(f"return_tensors={return_tensors!r} is not one of 'np', 'dlpack', 'pt'")
        on_device = self.device == "cuda"
        outputs = _call(self._native, ids, mask, types, on_device)
        if return_tensors == "pt":
            import torch  # only for this form of output
            convert = torch.from_dlpack if on_device else torch.from_numpy
            outputs = {name: convert(value) for name, value in outputs.items()}
        return outputs if isinstance(outputs, ModelOutput) else ModelOutput(outputs)

    def _with_hidden_states(self, ids, mask, types, return_tensors):
        """HF's output_hidden_states=True: the outputs, then hidden_states, a tuple of num_hidden_layers + 1
        [B, L, H] arrays (the embedding output first, the last layer's last), computed in host memory."""
        if return_tensors not in ("np", "dlpack", "pt"):
            raise ValueError(f"return_tensors={return_tensors!r} is not one of 'np', 'dlpack', 'pt'")
        raw = self._native.call_with_hidden_states(ids, mask, types)
        states = tuple(raw[f"hidden_states.{k}"] for k in range(sum(1 for key in raw if key.startswith("hidden_"))))
        out = ModelOutput({k: v for k, v in raw.items() if not k.startswith("hidden_states.")})
        out["hidden_states"] = states
        if return_tensors == "pt":
            import torch  # only for this form of output
            place = (lambda t: t.to("cuda")) if self.device == "cuda" else (lambda t: t)
            out = ModelOutput({k: tuple(place(torch.from_numpy(a)) for a in v) if k == "hidden_states"
                               else place(torch.from_numpy(v)) for k, v in out.items()})
        return out

    def __repr__(self):
        return (f"flashdeberta.{type(self).__name__}({self.name_or_path!r}, head={self._native.head}, "
                f"{self._native.description})")


def _auto(name, head, doc):
    def from_pretrained(cls, path, *, device="cpu", dtype="float32", attention="flash", threads=0,
                        max_tokens=65536, backend=None):
        directory = checkpoint_path(path, "path", must_exist=True)
        return PreTrainedModel(directory, head, device=device, dtype=dtype, attention=attention, threads=threads,
                               max_tokens=max_tokens, backend=backend)

    from_pretrained.__doc__ = (f"{doc}\n\ndevice: 'cpu' or 'cuda'; dtype: 'float32' (or 'bfloat16', 'float16' on "
                               "CUDA; 'bfloat16' or 'int8' linear layers on the CPU); attention: 'flash' or 'eager'; threads: host threads (0: every core); "
                               "max_tokens: refuse inputs of more positions; backend: 'eigen', 'kokkos' or "
                               "'cuda' instead of the device's default.")
    return type(name, (), {"from_pretrained": classmethod(from_pretrained), "__doc__": doc})


AutoModel = _auto("AutoModel", "base", "The backbone: last_hidden_state [B, L, H].")
AutoModelForMaskedLM = _auto("AutoModelForMaskedLM", "mlm", "Masked LM: logits [B, L, vocab].")
AutoModelForSequenceClassification = _auto("AutoModelForSequenceClassification", "seqcls",
                                           "Sequence classification: logits [B, num_labels].")
AutoModelForTokenClassification = _auto("AutoModelForTokenClassification", "tokcls",
                                        "Token classification: logits [B, L, num_labels].")
AutoModelForQuestionAnswering = _auto("AutoModelForQuestionAnswering", "qa",
                                      "Extractive question answering: start_logits, end_logits [B, L].")
AutoModelForMultipleChoice = _auto("AutoModelForMultipleChoice", "mc",
                                   "Multiple choice (v2/v3): inputs [B, C, L], logits [B, C].")
