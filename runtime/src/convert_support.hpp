// What convert.cpp takes from zeromodels_writer.cpp: the HF -> ZeroModels direction.
#pragma once

#include <filesystem>

#include "flashdeberta/runtime/convert.hpp"

namespace flashdeberta::runtime {

// Writes zm_config.json and model.weights.h5 for the HF checkpoint `from` into the directory `out`.
ConversionSummary write_zeromodels_directory(std::filesystem::path const& from, std::filesystem::path const& out);

}  // namespace flashdeberta::runtime
