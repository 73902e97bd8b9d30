// SPDX-License-Identifier: Apache-2.0
// CAPSULE_ASSERT: engine invariants (programming errors, never input errors). Unlike assert()
// it stays on in release builds, prints where it fired, and aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CAPSULE_ASSERT(condition, message)                                                       \
  do {                                                                                           \
    if (!(condition)) {                                                                          \
      std::fprintf(stderr, "%s:%d: capsule invariant violated: %s (%s)\n", __FILE__, __LINE__,   \
                   #condition, message);                                                         \
      std::abort();                                                                              \
    }                                                                                            \
  } while (false)
