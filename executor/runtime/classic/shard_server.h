#pragma once
// A parameter server's shard: a contiguous range of the flat model with its AdamW state. Workers
// push gradients of the range and pull the weights back (executor/mailbox.h messages):
//   ps       synchronous: the mean of all W pushes of a step, clipped by the norm over every shard
//            (one all-reduce among the servers), one update, then every worker gets the weights
//   async    each push updates on arrival (clipped by the pushing worker's own norm, at 1/W of the
//            learning rate) and is answered at once; staleness = updates since the weights the
//            gradient was computed on
//   ssp:S    as async, but a worker's answer waits while it is more than S iterations ahead of the
//            slowest worker (Ho et al. 2013)
// A dedicated server rank serves until every worker pushed all its iterations; a colocated one is
// served by its host worker while that worker waits for its own answers.

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/backend.h"
#include "executor/mailbox.h"
#include "executor/runtime/classic/exchange_trace.h"
#include "executor/runtime/classic/shard_optimizer.h"
#include "model/sync_mode.h"

namespace parallax::executor {

//! How long a classic-mode rank waits for a message before it names the silent peer.
inline constexpr int kMailboxWaitS = 300;

enum ClassicTag : int { kTagInit = 9101, kTagPush = 9102, kTagWeights = 9103, kTagGrad = 9104, kTagModel = 9105 };

//! The fixed header in front of every push and weights message (doubles, so one memcpy moves it).
struct PushHeader {
  double version = 0;    //!< push: the shard version the gradient was computed on; weights: the version sent
  double iteration = 0;  //!< the worker's iteration (0-based)
  double clip_scale = 1; //!< async/ssp: the pushing worker's clipping factor
  double kind = 0;       //!< backup workers: 1 marks the worker's last message
};

//! [lo, hi) of shard `s` of `shards` over a flat model of `n` elements.
inline int64_t ShardBegin(int64_t n, int64_t s, int64_t shards) { return n * s / shards; }

struct ServerSetup {
  SyncMode mode;
  int64_t shard = 0;
  int64_t workers = 1;         //!< mailbox ranks 0..workers-1
  int64_t steps = 1;           //!< iterations every worker pushes
  double grad_clip = 0;
  Communicator* servers = nullptr;  //!< every shard's server (synchronous clipping); null: one shard
  ExchangeTrace* trace = nullptr;   //!< receive/apply/reply on lane "server <shard>"; null: not traced
};

class ShardServer {
 public:
  ShardServer(Mailbox& mailbox, const ServerSetup& setup, std::unique_ptr<ShardOptimizer> opt);
  //! Handles every push that is waiting; with `block`, first waits for one.
  Status Serve(bool block);
  bool done() const { return pushes_ == setup_.workers * setup_.steps; }
  //! How many pushes were applied at each staleness (async/ssp; index = staleness).
  const std::vector<int64_t>& staleness() const { return staleness_; }
  int64_t size() const { return opt_->size(); }

 private:
  Status Handle(int worker, const std::vector<char>& message);
  //! A slice of this shard's lane until the returned span ends.
  ExchangeSpan Span(ExchangeName name, int64_t bytes = -1) {
    return {setup_.trace, ExchangeLane::kServer, setup_.shard, name, bytes};
  }
  Status FinishSyncStep();
  Status ApplySum();  //!< ps: the mean of the step's pushes, clipped over every shard, applied
  Status Answer(int worker);
  Status ReleaseWaiting();

  Mailbox* mailbox_;
  ServerSetup setup_;
  std::unique_ptr<ShardOptimizer> opt_;
  std::vector<float> sum_;        //!< ps: the step's summed gradient
  int64_t received_ = 0;          //!< ps: pushes of the current step
  int64_t pushes_ = 0;
  std::vector<int64_t> clock_;    //!< iterations each worker has pushed
  std::vector<int> waiting_;      //!< ssp: workers whose answer waits for the slowest
  std::vector<int64_t> staleness_;
  // Buffers kept from step to step (a fresh one of a gradient's size is fresh pages every time).
  std::vector<char> incoming_;       //!< the push being received
  std::vector<float> grad_;          //!< async/ssp: the push's gradient
  std::vector<float> weights_;       //!< an answer's weights
  std::vector<char> answer_;         //!< an answer's message
};

//! Waits (at most kMailboxWaitS) until a message with `tag` from `peer` (or anyone) is waiting; sets
//! *source and *bytes as Mailbox::Poll does.
Status AwaitMessage(Mailbox& mailbox, int peer, int tag, int* source, int64_t* bytes);
//! Receives a whole message of unknown size from `peer` (or anyone) with `tag`; *source: its sender.
Status ReceiveMessage(Mailbox& mailbox, int peer, int tag, std::vector<char>* out, int* source = nullptr);

}  // namespace parallax::executor
