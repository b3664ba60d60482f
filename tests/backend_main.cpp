// Entry point of backend_tests: registers the backends of this build, then runs the suites.
#include <gtest/gtest.h>

#include "engine/backend_registry.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tandem::register_builtin_backends();
  return RUN_ALL_TESTS();
}
