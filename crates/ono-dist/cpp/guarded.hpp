// What every extern "C" function of the shims keeps: no exception leaves it (unwinding across
// the FFI boundary is undefined behaviour). `guarded` runs a body, catches c10::Error (torch's
// message without the C++ backtrace) and any std::exception, writes the message into the
// caller's buffer and returns the failure value.
#pragma once

#include <c10/util/Exception.h>

#include <cstddef>
#include <cstring>
#include <exception>

namespace {

// Copies `msg` into the caller's buffer, truncated and always NUL-terminated.
void put(char* err, size_t errlen, const char* msg) {
  if (err == nullptr || errlen == 0) {
    return;
  }
  size_t n = std::strlen(msg);
  if (n >= errlen) {
    n = errlen - 1;
  }
  std::memcpy(err, msg, n);
  err[n] = '\0';
}

// Runs `body`; on any exception writes its message and returns `fail`.
template <typename T, typename F>
T guarded(char* err, size_t errlen, T fail, F body) {
  try {
    return body();
  } catch (const c10::Error& e) {
    put(err, errlen, e.what_without_backtrace());
  } catch (const std::exception& e) {
    put(err, errlen, e.what());
  } catch (...) {
    put(err, errlen, "unknown C++ exception");
  }
  return fail;
}

}  // namespace
