#include "executor/runtime/classic/shard_server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "executor/runtime/optimizer.h"

namespace parallax::executor {

Status AwaitMessage(Mailbox& mailbox, int peer, int tag, int* source, int64_t* bytes) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    PX_ASSIGN(const bool ready, mailbox.Poll(peer, tag, source, bytes));
    if (ready) return {};
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(kMailboxWaitS)) {
      return Error{"classic mode: no message (tag " + std::to_string(tag) + ") from " +
                       (peer == kAnySource ? std::string("any rank") : "rank " + std::to_string(peer)) + " within " +
                       std::to_string(kMailboxWaitS) + " s",
                   ErrorKind::kInternal};
    }
    std::this_thread::yield();
  }
}

Status ReceiveMessage(Mailbox& mailbox, int peer, int tag, std::vector<char>* out, int* source) {
  // Its size first (polling, as Receive does, with the same limit), then the message whole.
  int from = -1;
  int64_t bytes = 0;
  PX_TRY(AwaitMessage(mailbox, peer, tag, &from, &bytes));
  out->resize(static_cast<size_t>(bytes));
  PX_ASSIGN(from, mailbox.Receive(from, tag, out->data(), bytes));
  if (source != nullptr) *source = from;
  return {};
}

ShardServer::ShardServer(Mailbox& mailbox, const ServerSetup& setup, std::unique_ptr<ShardOptimizer> opt)
    : mailbox_(&mailbox),
      setup_(setup),
      opt_(std::move(opt)),
      sum_(static_cast<size_t>(opt_->size()), 0.0f),
      clock_(static_cast<size_t>(setup.workers), 0) {}

Status ShardServer::Serve(bool block) {
  std::vector<char>& message = incoming_;
  for (bool first = true; !done(); first = false) {
    int source = -1;
    PX_ASSIGN(const bool ready, mailbox_->Poll(kAnySource, kTagPush, &source, nullptr));
    if (!ready && !(block && first)) break;
    if (!ready) PX_TRY(AwaitMessage(*mailbox_, kAnySource, kTagPush, &source, nullptr));
    {
      ExchangeSpan receive = Span(ExchangeName::kReceive);
      PX_TRY(ReceiveMessage(*mailbox_, kAnySource, kTagPush, &message, &source));
      PushHeader h;
      std::memcpy(&h, message.data(), std::min(sizeof(h), message.size()));
      receive.FlowIn({FlowKind::kPush, source, setup_.shard, static_cast<int64_t>(h.iteration)});
    }
    PX_TRY(Handle(source, message));
  }
  return {};
}

Status ShardServer::Handle(int worker, const std::vector<char>& message) {
  PushHeader h;
  std::memcpy(&h, message.data(), sizeof(h));
  const auto n = static_cast<size_t>(opt_->size());
  if (message.size() != sizeof(h) + n * 4) {
    return Error{"parameter server: a push of " + std::to_string(message.size()) + " bytes", ErrorKind::kInternal};
  }
  const auto* grad = reinterpret_cast<const float*>(message.data() + sizeof(h));
  ++pushes_;
  clock_[static_cast<size_t>(worker)] = static_cast<int64_t>(h.iteration) + 1;
  if (setup_.mode.kind == SyncKind::kPs) {
    for (size_t i = 0; i < n; ++i) sum_[i] += grad[i];
    if (++received_ == setup_.workers) return FinishSyncStep();
    return {};
  }
  const auto stale = static_cast<size_t>(std::max<int64_t>(0, opt_->updates() - static_cast<int64_t>(h.version)));
  if (staleness_.size() <= stale) staleness_.resize(stale + 1, 0);
  ++staleness_[stale];
  {
    ExchangeSpan apply = Span(ExchangeName::kApply);
    grad_.assign(grad, grad + n);
    // A push carries 1/W of a global batch: it takes 1/W of a step, so W pushes without staleness
    // move the weights as far as one synchronous step (exactly so for SGD).
    opt_->Apply(grad_, h.clip_scale, 1.0 / static_cast<double>(setup_.workers));
  }
  waiting_.push_back(worker);
  return ReleaseWaiting();
}

Status ShardServer::FinishSyncStep() {
  {
    ExchangeSpan apply = Span(ExchangeName::kApply);
    PX_TRY(ApplySum());
  }
  for (int w = 0; w < setup_.workers; ++w) PX_TRY(Answer(w));
  return {};
}

Status ShardServer::ApplySum() {
  for (float& x : sum_) x /= static_cast<float>(setup_.workers);
  // Clipping spans every shard: the global norm is the root of the servers' summed squares.
  double sq = SumSquares(sum_);
  if (setup_.servers != nullptr) PX_TRY(setup_.servers->HostAllReduce(&sq, 1, ReduceOp::kSum));
  opt_->Apply(sum_, ClipScale(std::sqrt(sq), setup_.grad_clip));
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  received_ = 0;
  return {};
}

Status ShardServer::ReleaseWaiting() {
  const int64_t slowest = *std::min_element(clock_.begin(), clock_.end());
  std::vector<int> still;
  for (int w : waiting_) {
    const int64_t c = clock_[static_cast<size_t>(w)];
    // SSP: a worker about to run iteration c may be at most S ahead of the slowest's clock.
    const bool free = setup_.mode.kind == SyncKind::kAsync || c >= setup_.steps || c - slowest <= setup_.mode.staleness;
    if (free) {
      PX_TRY(Answer(w));
    } else {
      still.push_back(w);
    }
  }
  waiting_ = std::move(still);
  return {};
}

Status ShardServer::Answer(int worker) {
  ExchangeSpan reply = Span(ExchangeName::kReply, opt_->size() * 4);
  std::vector<float>& w = weights_;
  opt_->ReadWeights(&w);
  std::vector<char>& message = answer_;
  message.resize(sizeof(PushHeader) + w.size() * 4);
  PushHeader h;
  h.version = static_cast<double>(opt_->updates());
  std::memcpy(message.data(), &h, sizeof(h));
  std::memcpy(message.data() + sizeof(h), w.data(), w.size() * 4);
  // The answer to the worker's latest push (clock_: iterations pushed).
  reply.FlowOut({FlowKind::kPull, setup_.shard, worker, clock_[static_cast<size_t>(worker)] - 1});
  return mailbox_->Post(worker, kTagWeights, message.data(), static_cast<int64_t>(message.size()));
}

}  // namespace parallax::executor
