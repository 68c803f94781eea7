// How the program's OpenMP workers wait, chosen before libgomp reads its environment.
//
// libgomp lets an idle worker spin for GOMP_SPINCOUNT pause loops (300,000 by default: milliseconds) before
// it sleeps. Within one forward the ops follow each other within microseconds, so a short spin keeps a
// team's start fast; the long default only pays on a machine nobody else uses. Where other processes
// compete for the cores, a spinning worker takes the core from the thread it waits for, and a
// default-thread classify ran 2-7x slower than --threads 1 (bench/thread_contention.py). A bound of
// kSpinCount loops keeps the uncontended speed and degrades like --threads 1 under contention.
//
// libgomp reads the variables once, in its constructor, before main: the program sets the bound and
// starts itself again (execv of /proc/self/exe with the same arguments) when the user set neither OMP_WAIT_POLICY nor
// GOMP_SPINCOUNT (theirs always win). A constructor or .preinit_array entry cannot do it: libc resets `environ` after
// .preinit_array runs, and library constructors run in an order the dynamic loader chooses. If the exec fails, the
// program goes on with libgomp's default.
#include <unistd.h>

#include <cstdlib>

#include "openmp_wait.hpp"

namespace flashdeberta::cli {

namespace {

// A fraction of a millisecond of pause loops on current x86 cores: longer than the gap between two ops of
// a forward, far shorter than a scheduler time slice.
constexpr char const* kSpinCount = "10000";

}  // namespace

void bound_openmp_spinning(char** argv) {
  if (argv == nullptr || argv[0] == nullptr) return;
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  // The restarted program finds GOMP_SPINCOUNT set and goes on: one exec at most.
  if (::setenv("GOMP_SPINCOUNT", kSpinCount, 0) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Still here: no /proc (or no exec allowed); run with libgomp's default and leave the environment of
  // child processes as it was.
  ::unsetenv("GOMP_SPINCOUNT");
}

}  // namespace flashdeberta::cli
