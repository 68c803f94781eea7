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
  py::list predict_entities(std::vector<std::string> const& texts, std::vector<std::string> const& labels,
                            double threshold, bool flat_ner, bool multi_label, std::string const& long_text,
                            std::optional<std::int64_t> window_overlap) const {
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
    std::vector<std::vector<GlinerEntity>> results;
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      results = model_->predict_entities(texts, labels, options);
    }
    py::list out;
    for (auto const& entities : results) {
      py::list per_text;
      for (GlinerEntity const& e : entities) {
        per_text.append(py::dict(py::arg("start") = e.start, py::arg("end") = e.end, py::arg("text") = e.text,
                                 py::arg("label") = e.label, py::arg("score") = e.score));
      }
      out.append(per_text);
    }
    return out;
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
           py::arg("flat_ner"), py::arg("multi_label"), py::arg("long_text"), py::arg("window_overlap"))
      .def_property_readonly("description", &Gliner::description)
      .def_property_readonly("max_len", &Gliner::max_len);
}

}  // namespace flashdeberta::python
