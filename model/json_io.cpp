#include "model/json_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "model/atomic_publish.h"

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
  return Has(key) ? String(key) : std::move(fallback);
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

namespace {

// "line L, column C (byte B)" of the 1-based byte offset `byte` that nlohmann reports.
std::string Position(const std::string& text, size_t byte) {
  const size_t end = std::min(byte > 0 ? byte - 1 : 0, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + " (byte " + std::to_string(byte) + ")";
}

// Parser callback that rejects the first duplicate key with its JSON pointer (nlohmann keeps the
// last value silently). It follows the parse with one frame per open object or array.
class DuplicateKeyCheck {
 public:
  explicit DuplicateKeyCheck(const std::string& origin) : origin_(origin) {}

  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    switch (event) {
      case E::object_start: stack_.push_back(Frame{false, 0, {}, {}}); break;
      case E::array_start: stack_.push_back(Frame{true, 0, {}, {}}); break;
      case E::key: {
        Frame& f = stack_.back();
        f.key = parsed.get<std::string>();
        if (!f.keys.insert(f.key).second) throw JsonInputError{origin_ + ": " + Pointer() + ": duplicate key"};
        break;
      }
      case E::object_end:
      case E::array_end:
        stack_.pop_back();
        ValueDone();
        break;
      case E::value: ValueDone(); break;
    }
    return true;
  }

 private:
  struct Frame {
    bool array;
    int64_t index;  // arrays: elements completed so far
    std::string key;  // objects: the key being read
    std::set<std::string, std::less<>> keys;
  };
  void ValueDone() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
  }
  std::string Pointer() const {
    std::string out;
    for (const Frame& f : stack_) out += "/" + (f.array ? std::to_string(f.index) : EscapeKey(f.key));
    return out;
  }
  const std::string& origin_;
  std::vector<Frame> stack_;
};

}  // namespace

Result<Json> ParseJsonText(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text, DuplicateKeyCheck(origin));
  } catch (const JsonInputError& e) {
    return BadInput(e.message);
  } catch (const Json::parse_error& e) {
    const std::string what = e.what();
    // what(): "[json.exception.parse_error.101] parse error at line 1, column 5: <reason>"
    const size_t reason = what.find(": ", what.find(']'));
    return BadInput(origin + ": invalid JSON at " + Position(text, e.byte) + ": " +
                    (reason == std::string::npos ? what : what.substr(reason + 2)));
  } catch (const Json::exception& e) {
    // Number overflow ("1e400") and the like: nlohmann names the token but not where it is.
    std::string what = e.what();
    what = what.substr(what.find(']') + 1);
    while (!what.empty() && what.front() == ' ') what.erase(0, 1);
    const size_t quote = what.find('\'');
    const size_t at = quote == std::string::npos
                          ? std::string::npos
                          : text.find(what.substr(quote + 1, what.find('\'', quote + 1) - quote - 1));
    return BadInput(origin + ": invalid JSON" + (at == std::string::npos ? "" : " at " + Position(text, at + 1)) +
                    ": " + what);
  }
}

Result<int> OpenRegularFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; cleared again for a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return BadInput(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const bool dir = S_ISDIR(st.st_mode);
    ::close(fd);
    return BadInput(path + (dir ? ": is a directory, not a file" : ": is not a regular file"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Result<Json> LoadJsonFile(const std::string& path) {
  PX_ASSIGN(const int fd, OpenRegularFile(path));
  std::string text;
  char buf[1 << 16];
  int read_errno = 0;
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      read_errno = errno;
      break;
    }
    text.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  if (read_errno != 0) return BadInput(path + ": read failed: " + std::strerror(read_errno));
  return ParseJsonText(text, path);
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  std::string named;  // the temp file's name while it has one
  PX_ASSIGN(int fd, OpenTempFor(path, named));
  auto fail = [&](const char* what) -> Status {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (!named.empty()) ::unlink(named.c_str());
    return IoError(path + ": " + what + ": " + why);
  };
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  ::fchmod(fd, 0644);
  if (::fsync(fd) != 0) return fail("fsync failed");
  Status published = PublishTemp(fd, path, named);
  ::close(fd);
  return published;
}

Status WriteJsonAtomic(const std::string& path, const Json& j) {
  return WriteFileAtomic(path, j.dump(2) + "\n");
}

}  // namespace parallax
