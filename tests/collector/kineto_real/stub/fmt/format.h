// fmt/format.h: fmt::format for the "{}" forms ThreadUtil.cpp uses (Kineto
// vendors fmt as a submodule, which a plain checkout lacks).
#pragma once
#include <cstring>
#include <sstream>
#include <string>

namespace fmt {
inline void format_to_(std::ostringstream& o, const char* f) { o << f; }
template <class T, class... A>
void format_to_(std::ostringstream& o, const char* f, const T& v, const A&... rest) {
  const char* at = std::strstr(f, "{}");
  if (!at) {
    o << f;
    return;
  }
  o.write(f, at - f);
  o << v;
  format_to_(o, at + 2, rest...);
}
template <class... A>
std::string format(const char* f, const A&... a) {
  std::ostringstream o;
  format_to_(o, f, a...);
  return o.str();
}
} // namespace fmt
