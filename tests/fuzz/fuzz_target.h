#pragma once
// One fuzz entry per reader, written once and built two ways:
//  - with clang++ -fsanitize=fuzzer (PARALLAX_LIBFUZZER defined): the entry is the binary's
//    LLVMFuzzerTestOneInput (targets fuzz_<reader>, see tests/fuzz/CMakeLists.txt);
//  - with the project's compiler: the entry registers itself under its reader name, and
//    fuzz_replay_test runs the committed seeds, the crash regressions and a bounded number of
//    deterministic mutations through it (also under the AddressSanitizer build).
// An entry aborts (Violation) when a property fails; an exception escaping it is a crash too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/result.h"

namespace parallax::fuzz {

using FuzzFn = int (*)(const uint8_t* data, size_t size);

//! Registers `fn` as the entry of `reader`; returns true (for a static initializer).
bool Register(const char* reader, FuzzFn fn);
//! The entry registered for `reader`, or nullptr.
FuzzFn Find(std::string_view reader);
//! Counts inputs a reader accepted (the replay test checks that seeds load and mutations fail).
void NoteAccepted();
int64_t AcceptedCount();

//! Prints which property failed and aborts (libFuzzer then saves the input as a crash).
[[noreturn]] void Violation(const char* reader, const char* what, const std::string& detail);
//! A rejected input must be bad input whose message starts with "<origin>: ".
void CheckBadInput(const char* reader, const Error& e, std::string_view origin);

//! The input as text.
inline std::string Text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace parallax::fuzz

#ifdef PARALLAX_LIBFUZZER
#define PARALLAX_FUZZ_TARGET(reader)                                                                  \
  static int FuzzOne(const uint8_t* data, size_t size);                                               \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) { return FuzzOne(data, size); } \
  static int FuzzOne(const uint8_t* data, size_t size)
#else
#define PARALLAX_FUZZ_TARGET(reader)                                                          \
  static int FuzzOne(const uint8_t* data, size_t size);                                       \
  [[maybe_unused]] static const bool kFuzzRegistered = ::parallax::fuzz::Register(reader, &FuzzOne); \
  static int FuzzOne(const uint8_t* data, size_t size)
#endif
