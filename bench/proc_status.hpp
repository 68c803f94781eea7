// The benchmark programs' reading of /proc/self/status (Linux): one "Key:  value kB" line, in MiB.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace flashdeberta::bench {

// The value of the line starting with `key` ("VmHWM:", "RssAnon:", ...) in MiB; -1 when there is none.
inline double status_mib(std::string const& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + key.size()) / 1024.0;
  }
  return -1.0;
}

}  // namespace flashdeberta::bench
