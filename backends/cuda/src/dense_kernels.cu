// The dense operations' kernels and launchers (kernels/launch.hpp), compiled once into flashdeberta::cuda.
#include "flashdeberta/cuda/kernels/conv1d.cuh"
#include "flashdeberta/cuda/kernels/elementwise.cuh"
#include "flashdeberta/cuda/kernels/embedding.cuh"
#include "flashdeberta/cuda/kernels/gemm_f64.cuh"
#include "flashdeberta/cuda/kernels/layer_norm.cuh"
#include "flashdeberta/cuda/kernels/lstm_cell.cuh"
