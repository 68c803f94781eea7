// flashdeberta._native.Tokenizer: the C++ tokenizer (SentencePiece for v2/v3, byte-level BPE for v1) with
// a batch call that returns numpy arrays. HF's argument forms (padding=True, truncation="only_second",
// ...) are mapped to these names in flashdeberta/tokenizer.py.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/tokenizer.hpp"

namespace flashdeberta::python {

namespace {

tokenizer::Truncation truncation_of(std::string const& name) {
  if (name == "longest_first") return tokenizer::Truncation::kLongestFirst;
  if (name == "only_first") return tokenizer::Truncation::kOnlyFirst;
  if (name == "only_second") return tokenizer::Truncation::kOnlySecond;
  FLASHDEBERTA_REQUIRE(name == "do_not_truncate", "truncation '" << name
                                                                 << "' is not one of longest_first, only_first, "
                                                                    "only_second, do_not_truncate");
  return tokenizer::Truncation::kNone;
}

tokenizer::Padding padding_of(std::string const& name) {
  if (name == "longest") return tokenizer::Padding::kLongest;
  if (name == "max_length") return tokenizer::Padding::kMaxLength;
  FLASHDEBERTA_REQUIRE(name == "do_not_pad", "padding '" << name << "' is not one of longest, max_length, do_not_pad");
  return tokenizer::Padding::kNone;
}

// The encodings as (B, L) arrays; offsets as (B, L, 2). Rows of different lengths cannot make one array:
// HF refuses them the same way when asked for tensors.
py::dict to_arrays(std::vector<tokenizer::Encoding>&& rows, bool offsets) {
  std::size_t const length = rows.empty() ? 0 : rows.front().size();
  for (std::size_t b = 0; b < rows.size(); ++b) {
    FLASHDEBERTA_REQUIRE(rows[b].size() == length,
                         "text " << b << " makes " << rows[b].size() << " tokens and text 0 " << length
                                 << "; rows of different lengths make no array: pass padding=True (or "
                                    "padding='max_length' with max_length) to pad them");
  }
  auto const batch = static_cast<std::int64_t>(rows.size());
  auto const width = static_cast<std::int64_t>(length);
  std::vector<std::int64_t> ids, types, mask, spans;
  ids.reserve(rows.size() * length);
  for (tokenizer::Encoding const& e : rows) {
    ids.insert(ids.end(), e.input_ids.begin(), e.input_ids.end());
    types.insert(types.end(), e.token_type_ids.begin(), e.token_type_ids.end());
    mask.insert(mask.end(), e.attention_mask.begin(), e.attention_mask.end());
    if (offsets) {
      for (tokenizer::Span const& s : e.offsets) {
        spans.push_back(s.begin);
        spans.push_back(s.end);
      }
    }
  }
  py::dict out;
  out["input_ids"] = to_numpy(std::move(ids), {batch, width});
  out["token_type_ids"] = to_numpy(std::move(types), {batch, width});
  out["attention_mask"] = to_numpy(std::move(mask), {batch, width});
  if (offsets) out["offset_mapping"] = to_numpy(std::move(spans), {batch, width, 2});
  return out;
}

// The encodings as HF's return_tensors=None gives them: a list per row, each row as long as it is (padded by
// the tokenizer when padding was asked for), offsets as [start, end] pairs.
py::dict to_lists(std::vector<tokenizer::Encoding> const& rows, bool offsets) {
  py::list ids, types, mask, spans;
  for (tokenizer::Encoding const& e : rows) {
    ids.append(py::cast(e.input_ids));
    types.append(py::cast(e.token_type_ids));
    mask.append(py::cast(e.attention_mask));
    if (offsets) {
      py::list row;
      for (tokenizer::Span const& s : e.offsets) row.append(py::make_tuple(s.begin, s.end));
      spans.append(std::move(row));
    }
  }
  py::dict out;
  out["input_ids"] = ids;
  out["token_type_ids"] = types;
  out["attention_mask"] = mask;
  if (offsets) out["offset_mapping"] = spans;
  return out;
}

}  // namespace

void bind_tokenizer(py::module_& m) {
  using tokenizer::Tokenizer;
  py::class_<Tokenizer>(m, "Tokenizer")
      .def_static(
          "load",
          [](std::string const& directory) {
            py::gil_scoped_release const unlocked;
            ScopedNativeTime const timed;
            return tokenizer::load_tokenizer(directory);
          },
          py::arg("directory"))
      .def(
          "encode_batch",
          [](Tokenizer const& tok, std::vector<std::string> const& texts,
             std::optional<std::vector<std::string>> const& pairs, bool add_special_tokens,
             std::string const& truncation, std::optional<std::int64_t> max_length, std::string const& padding,
             bool return_offsets, bool as_lists) -> py::object {
            tokenizer::EncodeOptions options;
            options.add_special_tokens = add_special_tokens;
            options.truncation = truncation_of(truncation);
            options.padding = padding_of(padding);
            if (max_length) {
              FLASHDEBERTA_REQUIRE(*max_length >= 0, "max_length " << *max_length << " is negative");
              options.max_length = static_cast<std::size_t>(*max_length);
            }
            std::vector<tokenizer::Encoding> rows;
            {
              py::gil_scoped_release const unlocked;
              ScopedNativeTime const timed;
              rows = pairs ? tok.encode_batch(texts, *pairs, options) : tok.encode_batch(texts, options);
            }
            if (as_lists) return to_lists(rows, return_offsets);
            return to_arrays(std::move(rows), return_offsets);
          },
          py::arg("texts"), py::arg("pairs"), py::arg("add_special_tokens"), py::arg("truncation"),
          py::arg("max_length"), py::arg("padding"), py::arg("return_offsets"), py::arg("as_lists") = false)
      .def(
          "tokens",
          [](Tokenizer const& tok, std::string const& text, std::optional<std::string> const& pair,
             bool add_special_tokens) {
            tokenizer::EncodeOptions options;
            options.add_special_tokens = add_special_tokens;
            py::gil_scoped_release const unlocked;
            ScopedNativeTime const timed;
            tokenizer::Encoding const e =
                pair && !pair->empty() ? tok.encode(text, *pair, options) : tok.encode(text, options);
            return std::make_pair(e.input_ids, e.tokens);
          },
          py::arg("text"), py::arg("pair"), py::arg("add_special_tokens"))
      .def(
          "decode",
          [](Tokenizer const& tok, std::vector<std::int64_t> const& ids, bool skip_special_tokens) {
            py::gil_scoped_release const unlocked;
            ScopedNativeTime const timed;
            return tok.decode(ids, skip_special_tokens);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false)
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"))
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"))
      .def_property_readonly("vocab_size", &Tokenizer::base_vocab_size)
      .def("__len__", &Tokenizer::vocab_size)
      .def_property_readonly("kind", &Tokenizer::kind)
      .def_property_readonly("model_max_length", &Tokenizer::model_max_length)
      .def_property_readonly("mask_token_id", &Tokenizer::mask_token_id)
      .def_property_readonly("cls_token_id", [](Tokenizer const& t) { return t.special_ids().cls; })
      .def_property_readonly("sep_token_id", [](Tokenizer const& t) { return t.special_ids().sep; })
      .def_property_readonly("pad_token_id", [](Tokenizer const& t) { return t.special_ids().pad; })
      .def_property_readonly("cls_token", [](Tokenizer const& t) { return t.special_ids().cls_token; })
      .def_property_readonly("sep_token", [](Tokenizer const& t) { return t.special_ids().sep_token; })
      .def_property_readonly("pad_token", [](Tokenizer const& t) { return t.special_ids().pad_token; })
      .def_property_readonly("unk_token_id", [](Tokenizer const& t) { return t.special_ids().unk; })
      .def_property_readonly("unk_token", [](Tokenizer const& t) { return t.special_ids().unk_token; });
}

}  // namespace flashdeberta::python
