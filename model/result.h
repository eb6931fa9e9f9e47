#pragma once
// Result<T> / Status: expected failures (bad input, infeasible plan) travel as values.
// An Error's message already names the file and JSON path: "cluster.json: /inter_node/bandwidth_GBps: must be > 0".

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace parallax {

//! Why an error happened, for the exit status: bad input is 2, everything else 1.
enum class ErrorKind { kBadInput, kInfeasible, kIo, kInternal };

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kBadInput;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const Error& error() const { return std::get<1>(v_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Error> v_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT(google-explicit-constructor)
  static Status Ok() { return {}; }

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

inline Error BadInput(std::string message) { return Error{std::move(message), ErrorKind::kBadInput}; }
inline Error IoError(std::string message) { return Error{std::move(message), ErrorKind::kIo}; }

//! Process exit status for an error kind: 2 bad input / infeasible, 1 otherwise.
inline int ExitCodeFor(const Error& e) {
  return (e.kind == ErrorKind::kBadInput || e.kind == ErrorKind::kInfeasible) ? 2 : 1;
}

}  // namespace parallax

// Early return of an error, for functions that return Status or Result<T>.
#define PX_CONCAT_INNER(a, b) a##b
#define PX_CONCAT(a, b) PX_CONCAT_INNER(a, b)
//! `PX_TRY(status_expr);` returns the error from the enclosing function (Status or Result<T>).
#define PX_TRY(expr)                                        \
  do {                                                      \
    if (const ::parallax::Status& px_s_ = (expr); !px_s_) return px_s_.error(); \
  } while (0)
#define PX_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                   \
  if (!tmp) return tmp.error();        \
  lhs = std::move(tmp).value()
//! `PX_ASSIGN(Tensor t, ctx.Act(n));` declares/assigns the value of a Result<T> or returns its
//! error from the enclosing function.
#define PX_ASSIGN(lhs, expr) PX_ASSIGN_IMPL(PX_CONCAT(px_r_, __LINE__), lhs, expr)
