#pragma once
// Strict JSON reading with file + JSON-pointer error messages, and atomic file writes.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "model/result.h"

namespace parallax {

using Json = nlohmann::json;

//! Thrown only inside readers and caught at their public boundary (converted to Error).
struct JsonInputError {
  std::string message;
};

//! Reads one JSON object field by field; Finish() rejects keys nobody asked for.
//! Every error message reads "<file>: <json path>: <what is wrong>".
class ObjectReader {
 public:
  ObjectReader(const Json& j, std::string file, std::string path);

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  std::string PathOf(std::string_view key) const;
  [[noreturn]] void Fail(std::string_view key, std::string_view what) const;

  bool Has(std::string_view key) const;
  const Json& Raw(std::string_view key);  //!< marks the key as read; key must exist
  ObjectReader Object(std::string_view key);

  std::string String(std::string_view key);
  std::string String(std::string_view key, std::string fallback);
  //! A string that must be one of `allowed`.
  std::string Choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                     std::string fallback);
  int64_t PositiveInt(std::string_view key);
  int64_t PositiveInt(std::string_view key, int64_t fallback);
  int64_t NonNegativeInt(std::string_view key, int64_t fallback);
  double PositiveNumber(std::string_view key);
  double PositiveNumber(std::string_view key, double fallback);
  double NonNegativeNumber(std::string_view key);
  double NonNegativeNumber(std::string_view key, double fallback);
  bool Bool(std::string_view key, bool fallback);
  //! Checks "kind" equals `kind` and "version" is a supported integer.
  void Header(std::string_view kind, int64_t max_version);
  //! Throws for the first key present in the object but never read.
  void Finish() const;

 private:
  const Json& Get(std::string_view key);
  const Json& j_;
  std::string file_;
  std::string path_;
  std::set<std::string, std::less<>> seen_;
};

//! Opens an input file for reading (O_CLOEXEC). A directory, a FIFO or any other non-regular
//! file is bad input (never blocks on a FIFO without a writer); so is a path that cannot be opened.
Result<int> OpenRegularFile(const std::string& path);
//! Reads and parses a JSON file; parse errors name the file, line, column and byte offset.
Result<Json> LoadJsonFile(const std::string& path);
//! Parses JSON text held in memory (`origin` names it in messages). Strict: a duplicate key, a
//! number out of double's range, invalid UTF-8 or trailing text is bad input.
Result<Json> ParseJsonText(const std::string& text, const std::string& origin);
//! Writes `contents` to `path` atomically: an unnamed temp file in the same folder (O_TMPFILE;
//! a named one where the file system lacks it), fsync, then linked and renamed over `path`. A
//! writer killed at any point leaves the previous file intact and no partial file behind.
Status WriteFileAtomic(const std::string& path, std::string_view contents);
//! Pretty JSON (2-space indent) written atomically.
Status WriteJsonAtomic(const std::string& path, const Json& j);
//! Runs `fn` and converts a JsonInputError into an Error.
template <class F>
auto CatchJsonErrors(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const JsonInputError& e) {
    return BadInput(e.message);
  }
}

}  // namespace parallax
