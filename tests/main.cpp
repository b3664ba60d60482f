// Entry point of tandem_tests: registers the backends and layers of this build, then runs.
#include <gtest/gtest.h>

#include "tools/app.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  tandem::register_everything();
  return RUN_ALL_TESTS();
}
