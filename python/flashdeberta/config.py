"""A checkpoint's config.json as transformers' PretrainedConfig is used: fields as attributes
(config.hidden_size), the labels as id2label with integer keys, label2id and num_labels, to_dict(); item
access (config["vocab_size"]) reads the file's own fields."""


class PretrainedConfig:
    def __init__(self, fields, labels):
        # fields: config.json as the C++ loader's strict reader read it; labels: the library's rule for them
        # (id2label when the file has one, else LABEL_<i> for num_labels, 2 by default, as HF).
        object.__setattr__(self, "_fields", dict(fields))
        object.__setattr__(self, "id2label", dict(enumerate(labels)))
        object.__setattr__(self, "label2id", {label: i for i, label in enumerate(labels)})

    @property
    def num_labels(self):
        return len(self.id2label)

    def __getattr__(self, name):
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        raise AttributeError(f"config.json has no field {name!r}")

    def __setattr__(self, name, value):
        raise AttributeError("a loaded model's config is read-only: the model was built from config.json as it is")

    def __getitem__(self, key):
        return self._fields[key]

    def __contains__(self, key):
        return key in self._fields

    def get(self, key, default=None):
        return self._fields.get(key, default)

    def keys(self):
        return self._fields.keys()

    def items(self):
        return self._fields.items()

    def to_dict(self):
        """config.json's fields, with id2label (integer keys), label2id and num_labels as HF's to_dict has them."""
        out = dict(self._fields)
        out.update(id2label=dict(self.id2label), label2id=dict(self.label2id), num_labels=self.num_labels)
        return out

    def __eq__(self, other):
        if isinstance(other, PretrainedConfig):
            return self._fields == other._fields
        if isinstance(other, dict):
            return self._fields == other
        return NotImplemented

    def __repr__(self):
        kind = self._fields.get("model_type", "deberta")
        return f"flashdeberta.PretrainedConfig({kind}, {len(self._fields)} fields, num_labels={self.num_labels})"
