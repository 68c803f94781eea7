// The attention kernels (flash on CUDA cores and tensor cores, eager) and their launchers
// (kernels/launch.hpp), compiled once into flashdeberta::cuda: every dtype x head size instantiation lives here.
#include "flashdeberta/cuda/attention/dispatch.cuh"
