// The training ops' kernels and launchers (training/launch.hpp), compiled once into flashdeberta::cuda: the dense
// backward ops, the elementwise ops, the attention backward (eager and flash: float32, and the flash passes with
// bf16 / fp16 tensor-core products) and mixed precision's tensor-core attention forward.
#include "flashdeberta/cuda/training/attention_backward_eager.cuh"
#include "flashdeberta/cuda/training/attention_backward_flash.cuh"
#include "flashdeberta/cuda/training/attention_backward_mma.cuh"
#include "flashdeberta/cuda/training/attention_forward_mma.cuh"
#include "flashdeberta/cuda/training/elementwise.cuh"
#include "flashdeberta/cuda/training/reductions.cuh"
#include "flashdeberta/cuda/training/scatter.cuh"
