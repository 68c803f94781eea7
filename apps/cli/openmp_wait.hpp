// The OpenMP wait policy the program runs with (openmp_wait.cpp says why and how).
#pragma once

namespace flashdeberta::cli {

// Called first in main: unless the user chose a wait policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT), starts the
// program again with a bounded spin (GOMP_SPINCOUNT). Returns only when it did not restart.
void bound_openmp_spinning(char** argv);

}  // namespace flashdeberta::cli
