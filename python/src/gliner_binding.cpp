// flashdeberta._native.Gliner: runtime::GlinerModel (a GLiNER model directory on a host backend) and its
// predict_entities over a list of texts, each entity as the dict GLiNER returns. flashdeberta/gliner.py
// holds GLiNER's Python API (from_pretrained, predict_entities, batch_predict_entities).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/gliner/gliner_long_text.hpp"
#include "flashdeberta/runtime/gliner.hpp"
#include "json_objects.hpp"

namespace flashdeberta::python {

class Gliner {
 public:
  Gliner(std::string const& model, std::string const& backend, std::string const& attention, int threads,
         std::int64_t max_tokens) {
    runtime::RuntimeOptions const options = runtime_options(model, backend, "float32", attention, threads, max_tokens);
    py::gil_scoped_release const unlocked;
    ScopedNativeTime const timed;
    model_ = std::make_unique<runtime::GlinerModel>(options);
  }

  // Per text, its entities: [{"start", "end", "text", "label", "score"}, ...] in GLiNER's order. long_text:
  // "truncate", "windows" or "single_pass" (docs/gliner.md section 11).
  // texts in forwards of at most batch_size texts (and max_tokens tokens), as the CLI's --batch-size.
  py::object predict_entities(std::vector<std::string> const& texts, std::vector<std::string> const& labels,
                              double threshold, bool flat_ner, bool multi_label, std::string const& long_text,
                              std::optional<std::int64_t> window_overlap, std::size_t batch_size) const {
    require_fork_safe(model_->threads());
    std::optional<GlinerLongText> const mode = parse_gliner_long_text(long_text);
    if (!mode) {
      throw runtime::UsageError("long_text '" + long_text + "' is not one of " + kGlinerLongTextValues);
    }
    GlinerOptions const options{.threshold = threshold,
                                .flat_ner = flat_ner,
                                .multi_label = multi_label,
                                .long_text = *mode,
                                .window_overlap = window_overlap};
    if (batch_size == 0) throw runtime::UsageError("batch_size must be at least 1");
    runtime::JsonOut out = runtime::JsonOut::array();
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      for (auto const& entities : model_->predict_entities(texts, labels, options, {.batch_size = batch_size}))
        out.push_back(runtime::gliner_entities_json(entities));
    }
    return to_python(out);
  }

  std::string description() const { return model_->describe() + ", " + std::to_string(model_->threads()) + " threads"; }
  std::int64_t max_len() const { return model_->config().max_len; }

 private:
  std::unique_ptr<runtime::GlinerModel> model_;
};

void bind_gliner(py::module_& m) {
  py::class_<Gliner>(m, "Gliner")
      .def(py::init<std::string const&, std::string const&, std::string const&, int, std::int64_t>(), py::arg("model"),
           py::arg("backend"), py::arg("attention"), py::arg("threads"), py::arg("max_tokens"))
      .def("predict_entities", &Gliner::predict_entities, py::arg("texts"), py::arg("labels"), py::arg("threshold"),
           py::arg("flat_ner"), py::arg("multi_label"), py::arg("long_text"), py::arg("window_overlap"),
           py::arg("batch_size"))
      .def_property_readonly("description", &Gliner::description)
      .def_property_readonly("max_len", &Gliner::max_len);
}

}  // namespace flashdeberta::python
