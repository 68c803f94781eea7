// Umbrella header of the core: the model, its layers, checkpoint I/O. Backends have their own headers
// (flashdeberta/eigen/eigen_policy.hpp, flashdeberta/kokkos/kokkos_policy.hpp).
#pragma once

#include "flashdeberta/config.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/variant/dispatch.hpp"
