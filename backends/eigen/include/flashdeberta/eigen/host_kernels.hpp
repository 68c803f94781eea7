// Which host kernels EigenPolicy's operations were compiled with, asked of the operations themselves: a program
// that links flashdeberta::eigen_ops runs kernels compiled apart from it, with that library's flags.
#pragma once

namespace flashdeberta {

// True where the flash attention kernels are the AVX-512 micro-kernels (head size 64), false where they are
// Eigen's products: set by the flags the operations were compiled with (-march=native on an AVX-512 machine).
// Defined with the operations (eigen_policy_ops.hpp).
bool eigen_flash_microkernels();

}  // namespace flashdeberta
