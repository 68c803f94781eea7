// Library version and the host/device annotations. This is the only header that tests __CUDACC__.
#pragma once

#define FLASHDEBERTA_VERSION_MAJOR 0
#define FLASHDEBERTA_VERSION_MINOR 1
#define FLASHDEBERTA_VERSION_PATCH 0
#define FLASHDEBERTA_VERSION_STRING "0.1.0"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define FLASHDEBERTA_HOST_DEVICE __host__ __device__
#else
#define FLASHDEBERTA_HOST_DEVICE
#endif
