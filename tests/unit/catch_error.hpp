// Unit tests: run f, expect it to throw core::Error, and return that error
// (a failure is recorded when nothing is thrown).
#pragma once
#include <gtest/gtest.h>

#include "core/error.hpp"

template <class F>
dccl::core::Error catch_error(F&& f) {
  try {
    f();
  } catch (const dccl::core::Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a dccl::core::Error";
  return dccl::core::Error(dcclSuccess, "");
}
