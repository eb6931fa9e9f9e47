#include "model/json_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace parallax {
namespace {

std::string TypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::discarded: return "invalid";
    default: return "a number";
  }
}

// JSON Pointer escaping (RFC 6901).
std::string EscapeKey(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

}  // namespace

ObjectReader::ObjectReader(const Json& j, std::string file, std::string path)
    : j_(j), file_(std::move(file)), path_(std::move(path)) {
  if (!j_.is_object()) {
    throw JsonInputError{file_ + ": " + (path_.empty() ? "/" : path_) + ": expected an object, got " +
                         TypeName(j_)};
  }
}

std::string ObjectReader::PathOf(std::string_view key) const { return path_ + "/" + EscapeKey(key); }

void ObjectReader::Fail(std::string_view key, std::string_view what) const {
  throw JsonInputError{file_ + ": " + PathOf(key) + ": " + std::string(what)};
}

bool ObjectReader::Has(std::string_view key) const {
  return j_.find(std::string(key)) != j_.end();
}

const Json& ObjectReader::Get(std::string_view key) {
  auto it = j_.find(std::string(key));
  if (it == j_.end()) Fail(key, "missing required field");
  seen_.emplace(key);
  return *it;
}

const Json& ObjectReader::Raw(std::string_view key) { return Get(key); }

ObjectReader ObjectReader::Object(std::string_view key) {
  const Json& v = Get(key);
  if (!v.is_object()) Fail(key, "expected an object, got " + TypeName(v));
  return ObjectReader(v, file_, PathOf(key));
}

std::string ObjectReader::String(std::string_view key) {
  const Json& v = Get(key);
  if (!v.is_string()) Fail(key, "expected a string, got " + TypeName(v));
  std::string s = v.get<std::string>();
  if (s.empty()) Fail(key, "must not be empty");
  return s;
}

std::string ObjectReader::String(std::string_view key, std::string fallback) {
  return Has(key) ? String(key) : fallback;
}

std::string ObjectReader::Choice(std::string_view key, std::initializer_list<std::string_view> allowed,
                                 std::string fallback) {
  if (!Has(key)) return fallback;
  std::string s = String(key);
  std::string list;
  for (auto a : allowed) {
    if (a == s) return s;
    list += (list.empty() ? "" : ", ") + std::string("\"") + std::string(a) + "\"";
  }
  Fail(key, "unknown value \"" + s + "\" (expected one of " + list + ")");
}

int64_t ObjectReader::PositiveInt(std::string_view key) {
  const Json& v = Get(key);
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())) {
    Fail(key, "expected an integer, got " + (v.is_number() ? std::string("a fraction") : TypeName(v)));
  }
  const double d = v.get<double>();
  if (d <= 0) Fail(key, "must be > 0 (got " + v.dump() + ")");
  if (d > 9.0e15) Fail(key, "is too large (got " + v.dump() + ")");
  return v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
}

int64_t ObjectReader::PositiveInt(std::string_view key, int64_t fallback) {
  return Has(key) ? PositiveInt(key) : fallback;
}

int64_t ObjectReader::NonNegativeInt(std::string_view key, int64_t fallback) {
  if (!Has(key)) return fallback;
  const Json& v = Get(key);
  if (!v.is_number_integer()) Fail(key, "expected an integer, got " + TypeName(v));
  if (v.get<int64_t>() < 0) Fail(key, "must be >= 0 (got " + v.dump() + ")");
  return v.get<int64_t>();
}

double ObjectReader::PositiveNumber(std::string_view key) {
  const Json& v = Get(key);
  if (!v.is_number()) Fail(key, "expected a number, got " + TypeName(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d <= 0) Fail(key, "must be > 0 (got " + v.dump() + ")");
  return d;
}

double ObjectReader::PositiveNumber(std::string_view key, double fallback) {
  return Has(key) ? PositiveNumber(key) : fallback;
}

double ObjectReader::NonNegativeNumber(std::string_view key) {
  const Json& v = Get(key);
  if (!v.is_number()) Fail(key, "expected a number, got " + TypeName(v));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < 0) Fail(key, "must be >= 0 (got " + v.dump() + ")");
  return d;
}

double ObjectReader::NonNegativeNumber(std::string_view key, double fallback) {
  return Has(key) ? NonNegativeNumber(key) : fallback;
}

bool ObjectReader::Bool(std::string_view key, bool fallback) {
  if (!Has(key)) return fallback;
  const Json& v = Get(key);
  if (!v.is_boolean()) Fail(key, "expected true or false, got " + TypeName(v));
  return v.get<bool>();
}

void ObjectReader::Header(std::string_view kind, int64_t max_version) {
  const std::string k = String("kind");
  if (k != kind) Fail("kind", "expected \"" + std::string(kind) + "\", got \"" + k + "\"");
  const int64_t v = PositiveInt("version");
  if (v > max_version) {
    Fail("version", "version " + std::to_string(v) + " is newer than this parallax understands (" +
                        std::to_string(max_version) + ")");
  }
}

void ObjectReader::Finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (seen_.find(it.key()) == seen_.end()) Fail(it.key(), "unknown key");
  }
}

Result<Json> ParseJsonText(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return BadInput(origin + ": invalid JSON at byte " + std::to_string(e.byte) + ": " +
                    std::string(e.what()).substr(std::string(e.what()).find(':') + 2));
  }
}

Result<Json> LoadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return BadInput(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return BadInput(path + ": read failed");
  return ParseJsonText(ss.str(), path);
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  // Built by append: GCC 12 at -O3 warns falsely (-Wrestrict, GCC PR 105329) on "." + string.
  std::string name(".");
  name.append(target.filename().string()).append(".tmpXXXXXX");
  std::string tmpl = (dir / name).string();
  const int fd = mkstemp(tmpl.data());
  if (fd < 0) return IoError(path + ": cannot create a temporary file: " + std::strerror(errno));
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmpl.c_str());
      return IoError(path + ": write failed: " + why);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    return IoError(path + ": fsync/close failed: " + why);
  }
  ::chmod(tmpl.c_str(), 0644);
  if (std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    return IoError(path + ": rename failed: " + why);
  }
  // Persist the rename itself.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteJsonAtomic(const std::string& path, const Json& j) {
  return WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace parallax
