// EigenPolicy's operations, compiled once for every target that links flashdeberta::eigen_ops (the definitions and
// why: include/flashdeberta/eigen/eigen_policy_ops.hpp). FLASHDEBERTA_EIGEN_COMPILED_OPS is defined for this file
// too, so eigen_policy.hpp leaves the definitions to the include below, which makes them non-inline.
#define FLASHDEBERTA_EIGEN_OPS_LINKAGE
#include "flashdeberta/eigen/eigen_policy_ops.hpp"
