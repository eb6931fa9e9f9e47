// The seam's kernel-argument structs (executor/backend.h, "Arguments") are filled by name only: a
// kernel called with its pointers by position, a struct filled by position, or fields named in the
// wrong order do not compile. The static_asserts are the test (this file stops building when one
// no longer holds); the GoogleTest cases show that a named fill reaches the kernel as named.
#include <gtest/gtest.h>

#include <vector>

#include "executor/backend.h"
#include "executor/cpu/cpu_backend.h"
#include "executor/runtime/transformer_layer.h"

namespace parallax::executor {
namespace {

// Positional fills of a struct (with or without an empty first element for the ByName tag).
template <class Args>
concept FillsByPosition = requires(DevPtr p) { Args{p, p}; } || requires(DevPtr p) { Args{{}, p, p}; };

// The check itself can fail: a struct without the ByName tag fills by position.
struct TwoPointersWithoutTag {
  DevPtr y{}, x{};
};
static_assert(FillsByPosition<TwoPointersWithoutTag>);

static_assert(!FillsByPosition<GemmArgs>);
static_assert(!FillsByPosition<AdamWTensor>);
static_assert(!FillsByPosition<CopyArgs>);
static_assert(!FillsByPosition<AxpyArgs>);
static_assert(!FillsByPosition<BiasArgs>);
static_assert(!FillsByPosition<BiasBackwardArgs>);
static_assert(!FillsByPosition<NormArgs>);
static_assert(!FillsByPosition<NormBackwardArgs>);
static_assert(!FillsByPosition<ResidualNormArgs>);
static_assert(!FillsByPosition<ResidualAddArgs>);
static_assert(!FillsByPosition<GeluArgs>);
static_assert(!FillsByPosition<GeluBackwardArgs>);
static_assert(!FillsByPosition<BiasGeluArgs>);
static_assert(!FillsByPosition<BiasGeluBackwardArgs>);
static_assert(!FillsByPosition<SwigluArgs>);
static_assert(!FillsByPosition<SwigluBackwardArgs>);
static_assert(!FillsByPosition<RotaryArgs>);
static_assert(!FillsByPosition<AttentionArgs>);
static_assert(!FillsByPosition<AttentionBackwardArgs>);
static_assert(!FillsByPosition<EmbeddingArgs>);
static_assert(!FillsByPosition<EmbeddingBackwardArgs>);
static_assert(!FillsByPosition<RowMaxArgs>);
static_assert(!FillsByPosition<CrossEntropyStatsArgs>);
static_assert(!FillsByPosition<CrossEntropyCombineArgs>);
static_assert(!FillsByPosition<CrossEntropyBackwardArgs>);
static_assert(!FillsByPosition<LinearArgs>);
static_assert(!FillsByPosition<LinearBackwardArgs>);

// Axpy's operands swapped: by position (the former signature), or named out of order.
template <class B>
concept AxpyTakesPointersByPosition = requires(B& be, DevPtr p) { be.Axpy(p, p, int64_t{1}, 1.0f); };
template <class B>
concept AxpyTakesNamesInOrder = requires(B& be, DevPtr p) { be.Axpy({.y = p, .x = p, .n = 1}); };
template <class B>
concept AxpyTakesNamesOutOfOrder = requires(B& be, DevPtr p) { be.Axpy({.x = p, .y = p, .n = 1}); };
// Controls: the former signature is detected, and so is a struct whose fields are named in order.
struct FormerAxpy {
  void Axpy(DevPtr, DevPtr, int64_t, float) {}
};
static_assert(AxpyTakesPointersByPosition<FormerAxpy>);
static_assert(!AxpyTakesPointersByPosition<Backend>);
static_assert(AxpyTakesNamesInOrder<Backend>);
static_assert(!AxpyTakesNamesOutOfOrder<Backend>);

// The widest kernels: the former nine- and twelve-pointer signatures are gone.
template <class B>
concept LayerNormBackwardTakesPointersByPosition = requires(B& be, DevPtr p) {
  be.LayerNormBackward(p, p, p, p, p, p, p, p, int64_t{1}, int64_t{1});
};
template <class B>
concept ResidualLayerNormTakesPointersByPosition = requires(B& be, DevPtr p) {
  be.ResidualLayerNormForward(p, p, p, p, p, p, p, p, p, int64_t{1}, int64_t{1}, 1e-5f);
};
static_assert(!LayerNormBackwardTakesPointersByPosition<Backend>);
static_assert(!ResidualLayerNormTakesPointersByPosition<Backend>);
// Every kernel reports errors one way (sticky, Backend::Fail): none returns a Status.
static_assert(std::is_void_v<decltype(std::declval<Backend&>().LayerNormBackwardAdd(NormBackwardArgs{}))>);
static_assert(std::is_void_v<decltype(std::declval<Backend&>().RmsNormBackwardAdd(NormBackwardArgs{}))>);

std::vector<float> ToHost(CpuBackend& be, const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  be.CopyToHost(out.data(), DType::kF32, t.ptr(), t.numel());
  return out;
}

TEST(KernelArgs, NamedOperandsReachTheKernelAsNamed) {
  CpuBackend be;
  auto y = be.Allocate(3, DType::kF32, MemoryKind::kWorkspace);
  auto x = be.Allocate(3, DType::kF32, MemoryKind::kWorkspace);
  ASSERT_TRUE(y && x);
  const float y0[] = {1, 2, 3}, x0[] = {10, 20, 30};
  be.CopyToDevice(y->ptr(), y0, DType::kF32, 3);
  be.CopyToDevice(x->ptr(), x0, DType::kF32, 3);
  be.Axpy({.y = y->ptr(), .x = x->ptr(), .n = 3, .alpha = 0.5f});  // y += x / 2; x unchanged
  EXPECT_EQ(ToHost(be, *y), (std::vector<float>{6, 12, 18}));
  EXPECT_EQ(ToHost(be, *x), (std::vector<float>{10, 20, 30}));
}

TEST(KernelArgs, OmittedFieldsAreNullOrTheirDocumentedDefaults) {
  const NormArgs n{.rows = 2, .cols = 3};
  EXPECT_FALSE(n.x);
  EXPECT_FALSE(n.beta);
  EXPECT_FLOAT_EQ(n.eps, 1e-5f);
  const AxpyArgs a{};
  EXPECT_FLOAT_EQ(a.alpha, 1.0f);
  const GemmArgs g{.m = 4};
  EXPECT_EQ(g.batch, 1);
  EXPECT_FLOAT_EQ(g.beta, 0.0f);
}

}  // namespace
}  // namespace parallax::executor
