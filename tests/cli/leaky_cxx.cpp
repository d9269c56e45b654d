// leaky_cxx.cpp - an unmodified C++ program (no etch in it): new and
// delete go through malloc and free, which etch record --malloc traces.
// Never freed: 2 x new char[123], 1 x new long[5] (40 bytes).
#include <unistd.h>

#include <memory>
#include <vector>

char *volatile keep_a, *volatile keep_b;
long *volatile keep_c;

int main() {
  keep_a = new char[123];
  keep_b = new char[123];
  keep_c = new long[5];
  for (int i = 1; i <= 500; i++) {
    std::unique_ptr<int[]> p(new int[i]);
    p[0] = i;
    std::vector<double> v(static_cast<size_t>(i), 1.0);
    v.push_back(2.0);
  }
  static const char done[] = "leaky_cxx: done\n";
  return write(1, done, sizeof done - 1) == sizeof done - 1 ? 0 : 1;
}
