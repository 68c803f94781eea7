// How far an attention forward and backward are from attention_backward_reference.hpp's float64 results: each
// tensor's largest error relative to its own scale, gathered over the runs of a test (the Eigen test, and the
// suite every training policy runs, attention_backward_suite.hpp).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

namespace flashdeberta::attention_tests {

// max |got - want| / max |want|: the error relative to the tensor's scale (NaN, an unwritten element, fails).
inline double relative_error(std::vector<double> const& got, std::vector<double> const& want) {
  REQUIRE(got.size() == want.size());
  double err = 0.0, scale = 0.0;
  for (std::size_t x = 0; x < got.size(); ++x) {
    double const e = std::abs(got[x] - want[x]);
    err = std::isnan(e) ? INFINITY : std::max(err, e);
    scale = std::max(scale, std::abs(want[x]));
  }
  return scale > 0.0 ? err / scale : err;
}

// The worst relative error of the forward output and of each gradient over the runs of one test case.
struct Errors {
  double out = 0, dq = 0, dk = 0, dv = 0, dpos_key = 0, dpos_query = 0;

  double worst() const { return std::max({out, dq, dk, dv, dpos_key, dpos_query}); }
  void take_max(Errors const& e) {
    out = std::max(out, e.out);
    dq = std::max(dq, e.dq);
    dk = std::max(dk, e.dk);
    dv = std::max(dv, e.dv);
    dpos_key = std::max(dpos_key, e.dpos_key);
    dpos_query = std::max(dpos_query, e.dpos_query);
  }
  std::string text() const {
    std::ostringstream os;
    os.precision(2);
    os << std::scientific << "out " << out << ", dq " << dq << ", dk " << dk << ", dv " << dv << ", dpos_key "
       << dpos_key << ", dpos_query " << dpos_query;
    return os.str();
  }
};

}  // namespace flashdeberta::attention_tests
