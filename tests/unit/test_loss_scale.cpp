// DynamicLossScale against torch.cuda.amp.GradScaler's rules: a non-finite norm halves the scale and resets the count
// of good steps; growth_interval good steps in a row double it; a scale that would overflow stays; bad options and
// bad resumed states are refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "flashdeberta/train/loss_scale.hpp"

namespace fd = flashdeberta;

TEST_CASE("loss scale: grows after the interval, backs off on overflow") {
  fd::DynamicLossScale s({.initial = 8.0, .growth_interval = 3});
  CHECK(s.scale() == 8.0);
  CHECK(s.update(1.0));
  CHECK(s.update(2.0));
  CHECK(s.scale() == 8.0);
  CHECK(s.update(3.0));  // the third good step in a row
  CHECK(s.scale() == 16.0);
  CHECK(s.good_steps() == 0);
  CHECK(s.update(1.0));
  CHECK_FALSE(s.update(std::numeric_limits<double>::infinity()));
  CHECK(s.scale() == 8.0);
  CHECK(s.good_steps() == 0);
  CHECK_FALSE(s.update(std::nan("")));
  CHECK(s.scale() == 4.0);
}

TEST_CASE("loss scale: GradScaler's defaults, and a scale that cannot grow further stays") {
  fd::DynamicLossScale defaults;
  CHECK(defaults.scale() == 65536.0);
  fd::DynamicLossScale s({.initial = std::numeric_limits<double>::max(), .growth_interval = 1});
  CHECK(s.update(1.0));
  CHECK(s.scale() == std::numeric_limits<double>::max());
}

TEST_CASE("loss scale: bad options and states are refused") {
  CHECK_THROWS_WITH_AS(fd::DynamicLossScale({.initial = 0.0}), doctest::Contains("initial scale 0"), fd::Error);
  CHECK_THROWS_AS(fd::DynamicLossScale({.backoff_factor = 1.5}), fd::Error);
  CHECK_THROWS_AS(fd::DynamicLossScale({.growth_interval = 0}), fd::Error);
  fd::DynamicLossScale s;
  CHECK_THROWS_WITH_AS(s.restore(-1.0, 0), doctest::Contains("loss scale -1"), fd::Error);
  s.restore(128.0, 5);
  CHECK(s.scale() == 128.0);
  CHECK(s.good_steps() == 5);
}

TEST_CASE("loss scale: only fp16 products get one") {
  CHECK(fd::loss_scale_for(fd::DType::kF16).has_value());
  CHECK(fd::loss_scale_for(fd::DType::kF16)->scale() == 65536.0);
  CHECK_FALSE(fd::loss_scale_for(fd::DType::kBF16).has_value());
  CHECK_FALSE(fd::loss_scale_for(fd::DType::kF32).has_value());
}
