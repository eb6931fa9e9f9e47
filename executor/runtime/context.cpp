#include "executor/runtime/context.h"

namespace parallax::executor {

Result<Tensor> RuntimeContext::Indices(const std::vector<int32_t>& host) {
  auto t = backend->Allocate(static_cast<int64_t>(host.size()), DType::kI32, MemoryKind::kWorkspace);
  if (t) backend->CopyToDevice(t->ptr(), host.data(), DType::kI32, static_cast<int64_t>(host.size()));
  return t;
}

Status RuntimeContext::EndStep() {
  Status s = backend->Synchronize();
  backend->ReleaseEvents(step_events_);
  step_events_.clear();
  return s;
}

}  // namespace parallax::executor
