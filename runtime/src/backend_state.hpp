// What a started Backend holds (loaded_model.cpp starts it): the backend its entry started. Private to
// runtime/src: the model and GLiNER loaders (loaded_model.cpp, gliner.cpp) ask it for their instantiations.
#pragma once

#include <memory>

#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"

namespace flashdeberta::runtime {

struct Backend::State {
  std::unique_ptr<StartedBackend> started;
};

}  // namespace flashdeberta::runtime
