// The CUPTI tracer (see cupti_tracer.h). libcupti is dlopen'ed; its headers give the record
// layouts and constants only.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "profiler/cuda/cupti_tracer.h"

namespace parallax::profiler {
namespace {

using executor::ActivityKind;
using executor::ActivityRecord;
using executor::ExternalLink;

// The CUPTI entry points we use, resolved from the loaded library.
struct CuptiApi {
  void* handle = nullptr;
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) RegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) Enable = nullptr;
  decltype(&cuptiActivityDisable) Disable = nullptr;
  decltype(&cuptiActivityFlushAll) FlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) GetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) GetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) PushExternal = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) PopExternal = nullptr;
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
  decltype(&cuptiFinalize) Finalize = nullptr;

  std::string Why(CUptiResult r) const {
    const char* s = nullptr;
    if (GetResultString != nullptr && GetResultString(r, &s) == CUPTI_SUCCESS && s != nullptr) return s;
    return "CUPTI error " + std::to_string(static_cast<int>(r));
  }
};

template <class F>
bool Resolve(void* handle, const char* name, F& fn) {
  fn = reinterpret_cast<F>(::dlsym(handle, name));
  return fn != nullptr;
}

Result<CuptiApi> LoadCupti(const std::string& library) {
  std::vector<std::string> names;
  if (!library.empty()) {
    names.push_back(library);
  } else {
    names = {"libcupti.so", "libcupti.so.13"};
#ifdef PARALLAX_CUPTI_LIBRARY_DIR
    // The toolkit this was built with, when the loader's path does not name it.
    names.push_back(PARALLAX_CUPTI_LIBRARY_DIR "/libcupti.so");
#endif
  }
  CuptiApi api;
  std::string tried;
  for (const std::string& n : names) {
    api.handle = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.handle != nullptr) break;
    const char* e = ::dlerror();
    tried += (tried.empty() ? "" : "; ") + (e != nullptr ? std::string(e) : n);
  }
  if (api.handle == nullptr) return IoError("CUPTI library not found (" + tried + ")");
  const bool ok = Resolve(api.handle, "cuptiGetVersion", api.GetVersion) &&
                  Resolve(api.handle, "cuptiGetResultString", api.GetResultString) &&
                  Resolve(api.handle, "cuptiActivityRegisterCallbacks", api.RegisterCallbacks) &&
                  Resolve(api.handle, "cuptiActivityEnable", api.Enable) &&
                  Resolve(api.handle, "cuptiActivityDisable", api.Disable) &&
                  Resolve(api.handle, "cuptiActivityFlushAll", api.FlushAll) &&
                  Resolve(api.handle, "cuptiActivityGetNextRecord", api.GetNextRecord) &&
                  Resolve(api.handle, "cuptiActivityGetNumDroppedRecords", api.GetNumDroppedRecords) &&
                  Resolve(api.handle, "cuptiActivityPushExternalCorrelationId", api.PushExternal) &&
                  Resolve(api.handle, "cuptiActivityPopExternalCorrelationId", api.PopExternal) &&
                  Resolve(api.handle, "cuptiGetCallbackName", api.GetCallbackName) &&
                  Resolve(api.handle, "cuptiFinalize", api.Finalize);
  if (!ok) {
    ::dlclose(api.handle);
    return IoError("the CUPTI library lacks the Activity API entry points parallax uses (too old)");
  }
  uint32_t version = 0;
  if (const CUptiResult r = api.GetVersion(&version); r != CUPTI_SUCCESS) {
    const std::string why = api.Why(r);
    ::dlclose(api.handle);
    return IoError("cuptiGetVersion failed: " + why);
  }
  if (std::string problem = CuptiVersionProblem(version, CUPTI_API_VERSION); !problem.empty()) {
    ::dlclose(api.handle);
    return IoError(problem);
  }
  return api;
}

const char* SyncName(CUpti_ActivitySynchronizationType t) {
  switch (t) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: return "cudaDeviceSynchronize";
    default: return "synchronize";
  }
}

const char* KindName(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return "kernels (CONCURRENT_KERNEL)";
    case CUPTI_ACTIVITY_KIND_MEMCPY: return "copies (MEMCPY)";
    case CUPTI_ACTIVITY_KIND_MEMSET: return "fills (MEMSET)";
    case CUPTI_ACTIVITY_KIND_RUNTIME: return "runtime calls (RUNTIME)";
    case CUPTI_ACTIVITY_KIND_DRIVER: return "driver calls (DRIVER)";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return "synchronizations (SYNCHRONIZATION)";
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return "external correlation (EXTERNAL_CORRELATION)";
    default: return "an activity kind";
  }
}

// DRIVER as well as RUNTIME: cuBLASLt launches its kernels through the driver API, and the external
// correlation of a kernel (which op it belongs to) comes through the API call that launched it. With
// RUNTIME alone, the H100 trace of 2026-11-27 credited fc1's and lm_head's GEMMs to no op (about 1 us
// an op where CUDA events measured 90 us and 3.9 ms). Untested on a GPU since this change.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,          CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,          CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

class CuptiTracer;
std::atomic<CuptiTracer*> g_tracer{nullptr};

class CuptiTracer final : public executor::DeviceActivity {
 public:
  CuptiTracer(CuptiApi api, int64_t buffer_bytes) : api_(api), buffer_bytes_(static_cast<size_t>(buffer_bytes)) {}
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  ~CuptiTracer() override {
    // RAII: disable every kind we enabled, hand back the buffers, unsubscribe.
    for (const CUpti_ActivityKind k : enabled_) api_.Disable(k);
    if (!enabled_.empty()) api_.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    g_tracer.store(nullptr);
    if (registered_) api_.Finalize();
  }

  Status Begin() {
    CuptiTracer* none = nullptr;
    if (!g_tracer.compare_exchange_strong(none, this)) return IoError("a CUPTI tracer is already running in this process");
    if (const CUptiResult r = api_.RegisterCallbacks(&BufferRequested, &BufferCompleted); r != CUPTI_SUCCESS) {
      g_tracer.store(nullptr);
      return IoError("CUPTI refused the activity buffers: " + api_.Why(r));
    }
    registered_ = true;
    for (const CUpti_ActivityKind k : kKinds) {
      if (const CUptiResult r = api_.Enable(k); r != CUPTI_SUCCESS) {
        return IoError(std::string("CUPTI cannot record ") + KindName(k) + ": " + api_.Why(r) +
                       (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ? " (no GPU or driver here?)" : ""));
      }
      enabled_.push_back(k);
    }
    return {};
  }

  std::string source() const override { return "cupti"; }

  void EnterOp(uint64_t key) override { api_.PushExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, key); }
  void ExitOp() override {
    uint64_t last = 0;
    api_.PopExternal(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }

  Status Drain(std::vector<ActivityRecord>& records, std::vector<ExternalLink>& links) override {
    // Completed buffers come back through BufferCompleted (possibly on CUPTI's thread).
    if (const CUptiResult r = api_.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS) {
      return IoError("cuptiActivityFlushAll failed: " + api_.Why(r));
    }
    const std::lock_guard<std::mutex> lock(mu_);
    records.insert(records.end(), std::make_move_iterator(records_.begin()), std::make_move_iterator(records_.end()));
    links.insert(links.end(), links_.begin(), links_.end());
    records_.clear();
    links_.clear();
    return {};
  }

  executor::ActivityStats stats() const override {
    const std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
    CuptiTracer* t = g_tracer.load();
    const size_t bytes = t != nullptr ? t->buffer_bytes_ : (8u << 20);
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, bytes));
    *size = *buffer != nullptr ? bytes : 0;
    *max_records = 0;  // as many as fit
  }

  static void CUPTIAPI BufferCompleted(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                                       size_t valid) {
    CuptiTracer* t = g_tracer.load();
    if (t != nullptr && buffer != nullptr) t->Consume(ctx, stream_id, buffer, valid);
    // CUPTI hands back the buffer BufferRequested allocated with aligned_alloc (a C interface).
    std::free(buffer);  // NOLINT(cppcoreguidelines-no-malloc)
  }

  void Consume(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t valid) {
    std::vector<ActivityRecord> got;
    std::vector<ExternalLink> got_links;
    CUpti_Activity* rec = nullptr;
    int64_t count = 0;
    while (valid > 0 && api_.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
      ++count;
      ActivityRecord a;
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
          a = {ActivityKind::kKernel, static_cast<int64_t>(k->start), static_cast<int64_t>(k->end), k->correlationId,
               k->streamId, -1, k->name != nullptr ? k->name : "kernel"};
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          a = {ActivityKind::kMemcpy, static_cast<int64_t>(m->start), static_cast<int64_t>(m->end), m->correlationId,
               m->streamId, static_cast<int64_t>(m->bytes), "memcpy"};
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          a = {ActivityKind::kMemset, static_cast<int64_t>(m->start), static_cast<int64_t>(m->end), m->correlationId,
               m->streamId, static_cast<int64_t>(m->bytes), "memset"};
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* r = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
          const bool runtime = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
          const char* name = nullptr;
          if (api_.GetCallbackName(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, r->cbid, &name) !=
                  CUPTI_SUCCESS ||
              name == nullptr) {
            name = runtime ? "cuda runtime call" : "cuda driver call";
          }
          a = {ActivityKind::kRuntime, static_cast<int64_t>(r->start), static_cast<int64_t>(r->end), r->correlationId,
               r->threadId, -1, name};
          break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
          const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(rec);
          a = {ActivityKind::kSync, static_cast<int64_t>(s->start), static_cast<int64_t>(s->end), s->correlationId,
               s->streamId, -1, SyncName(s->type)};
          break;
        }
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
          if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) got_links.push_back({e->correlationId, e->externalId});
          continue;
        }
        default: continue;
      }
      got.push_back(std::move(a));
    }
    size_t dropped = 0;
    api_.GetNumDroppedRecords(ctx, stream_id, &dropped);
    const std::lock_guard<std::mutex> lock(mu_);
    stats_.records += count;
    stats_.dropped += static_cast<int64_t>(dropped);
    ++stats_.buffers;
    records_.insert(records_.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
    links_.insert(links_.end(), got_links.begin(), got_links.end());
  }

  CuptiApi api_;
  size_t buffer_bytes_;
  bool registered_ = false;
  std::vector<CUpti_ActivityKind> enabled_;
  mutable std::mutex mu_;
  executor::ActivityStats stats_;
  std::vector<ActivityRecord> records_;
  std::vector<ExternalLink> links_;
};

}  // namespace

Result<std::unique_ptr<executor::DeviceActivity>> StartCuptiTracer(const DeviceTracerOptions& options) {
  auto api = LoadCupti(options.library);
  if (!api) return api.error();
  // aligned_alloc needs a multiple of the record alignment.
  const int64_t bytes = (options.buffer_bytes + ACTIVITY_RECORD_ALIGNMENT - 1) / ACTIVITY_RECORD_ALIGNMENT * ACTIVITY_RECORD_ALIGNMENT;
  auto tracer = std::make_unique<CuptiTracer>(*api, bytes);
  if (Status s = tracer->Begin(); !s) return s.error();
  return std::unique_ptr<executor::DeviceActivity>(std::move(tracer));
}

}  // namespace parallax::profiler
