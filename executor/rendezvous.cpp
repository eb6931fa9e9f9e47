#include "executor/rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "executor/backend.h"

namespace parallax::executor {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x50585256;  // "PXRV"
constexpr uint32_t kMaxPayload = 1U << 20;

enum class FrameType : uint32_t { kHello = 1, kOk = 2, kError = 3, kBlob = 4, kGather = 5 };

struct Frame {
  FrameType type = FrameType::kOk;
  std::vector<uint8_t> payload;
};

Clock::time_point DeadlineIn(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int MsLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

//! Waits for `events` on `fd`; false at the deadline.
Result<bool> WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MsLeft(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return Error{std::string("poll: ") + std::strerror(errno), ErrorKind::kIo};
  }
}

Status SendAll(int fd, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    auto ready = WaitFd(fd, POLLOUT, deadline);
    if (!ready) return ready.error();
    if (!*ready) return Error{"timed out sending", ErrorKind::kInternal};
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k < 0) return Error{std::string("send: ") + std::strerror(errno), ErrorKind::kIo};
    p += k;
    n -= static_cast<size_t>(k);
  }
  return {};
}

Status RecvAll(int fd, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    auto ready = WaitFd(fd, POLLIN, deadline);
    if (!ready) return ready.error();
    if (!*ready) return Error{"timed out", ErrorKind::kInternal};
    const ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k < 0) return Error{std::string("recv: ") + std::strerror(errno), ErrorKind::kIo};
    if (k == 0) return Error{"the connection was closed", ErrorKind::kIo};
    p += k;
    n -= static_cast<size_t>(k);
  }
  return {};
}

Status SendFrame(int fd, FrameType type, const void* payload, size_t bytes, Clock::time_point deadline) {
  const uint32_t header[3] = {htonl(kMagic), htonl(static_cast<uint32_t>(type)), htonl(static_cast<uint32_t>(bytes))};
  if (Status s = SendAll(fd, header, sizeof(header), deadline); !s) return s;
  return SendAll(fd, payload, bytes, deadline);
}

Status SendText(int fd, FrameType type, const std::string& text, Clock::time_point deadline) {
  return SendFrame(fd, type, text.data(), text.size(), deadline);
}

Result<Frame> RecvFrame(int fd, Clock::time_point deadline) {
  uint32_t header[3] = {};
  if (Status s = RecvAll(fd, header, sizeof(header), deadline); !s) return s.error();
  if (ntohl(header[0]) != kMagic) return Error{"a peer that is not a parallax rendezvous spoke", ErrorKind::kIo};
  const uint32_t bytes = ntohl(header[2]);
  if (bytes > kMaxPayload) return Error{"an oversized frame (" + std::to_string(bytes) + " bytes)", ErrorKind::kIo};
  Frame f;
  f.type = static_cast<FrameType>(ntohl(header[1]));
  f.payload.resize(bytes);
  if (Status s = RecvAll(fd, f.payload.data(), bytes, deadline); !s) return s.error();
  return f;
}

std::string Text(const Frame& f) { return {f.payload.begin(), f.payload.end()}; }

//! Rank 0's listening socket on every interface (IPv6 dual-stack, else IPv4).
Result<SocketFd> Listen(int port, int backlog) {
  for (const int family : {AF_INET6, AF_INET}) {
    SocketFd fd(socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) continue;
    const int one = 1, zero = 0;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc = -1;
    if (family == AF_INET6) {
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(static_cast<uint16_t>(port));
      rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(static_cast<uint16_t>(port));
      rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    if (rc != 0) {
      if (family == AF_INET6 && errno != EADDRINUSE) continue;
      return Error{"cannot listen on port " + std::to_string(port) + ": " + std::strerror(errno), ErrorKind::kIo};
    }
    if (listen(fd.get(), backlog) != 0) {
      return Error{"listen on port " + std::to_string(port) + ": " + std::strerror(errno), ErrorKind::kIo};
    }
    return fd;
  }
  return Error{std::string("socket: ") + std::strerror(errno), ErrorKind::kIo};
}

//! One non-blocking connect attempt to any address of `addr`:`port`, bounded by the deadline.
Result<SocketFd> ConnectOnce(const std::string& addr, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int g = getaddrinfo(addr.c_str(), service.c_str(), &hints, &found); g != 0) {
    return Error{std::string("cannot resolve the address: ") + gai_strerror(g), ErrorKind::kIo};
  }
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> list(found, freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    SocketFd fd(socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) continue;
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
      last = std::strerror(errno);
      continue;
    }
    auto ready = WaitFd(fd.get(), POLLOUT, deadline);
    if (!ready) return ready.error();
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (*ready && err == 0) {
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    last = *ready ? std::strerror(err) : "timed out";
  }
  return Error{last, ErrorKind::kIo};
}

//! The root (rank 0): accepts every other rank's hello, checks it and answers every rank; returns the
//! sockets by rank, or the first disagreement (also sent to every rank that joined).
Result<std::vector<SocketFd>> AcceptAll(const SocketFd& listener, int world_size, double timeout_s,
                                        const std::string& where) {
  const auto deadline = DeadlineIn(timeout_s);
  std::vector<SocketFd> peers(static_cast<size_t>(world_size));
  std::vector<SocketFd> unnamed;
  std::string problem;
  for (int joined = 1; joined < world_size && problem.empty();) {
    auto ready = WaitFd(listener.get(), POLLIN, deadline);
    if (!ready) return ready.error();
    if (!*ready) {
      std::vector<int> missing;
      for (int r = 1; r < world_size; ++r) {
        if (!peers[static_cast<size_t>(r)].valid()) missing.push_back(r);
      }
      return Error{where + ": rank 0 waited " + std::to_string(static_cast<int>(timeout_s)) + " s for rank(s) " +
                       RankList(missing) + " to connect (were all " + std::to_string(world_size) +
                       " ranks started with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE?)",
                   ErrorKind::kInternal};
    }
    SocketFd fd(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) continue;
    const int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto hello = RecvFrame(fd.get(), deadline);
    if (!hello || hello->type != FrameType::kHello || hello->payload.size() != 8) continue;  // not one of ours
    uint32_t words[2] = {};
    std::memcpy(words, hello->payload.data(), sizeof(words));
    const int rank = static_cast<int>(ntohl(words[0])), size = static_cast<int>(ntohl(words[1]));
    if (size != world_size) {
      problem = where + ": rank " + std::to_string(rank) + " has WORLD_SIZE=" + std::to_string(size) +
                ", rank 0 has WORLD_SIZE=" + std::to_string(world_size) + " (every rank must be started with the same)";
    } else if (rank <= 0 || rank >= world_size || peers[static_cast<size_t>(rank)].valid()) {
      problem = where + ": a second rank " + std::to_string(rank) + " connected (ranks must be 0.." +
                std::to_string(world_size - 1) + ", each once)";
    }
    if (!problem.empty()) {
      unnamed.push_back(std::move(fd));
      break;
    }
    peers[static_cast<size_t>(rank)] = std::move(fd);
    ++joined;
  }
  for (auto* group : {&peers, &unnamed}) {
    for (SocketFd& fd : *group) {
      if (fd.valid()) (void)SendText(fd.get(), problem.empty() ? FrameType::kOk : FrameType::kError, problem, deadline);
    }
  }
  if (!problem.empty()) return BadInput(problem);
  return peers;
}

//! A rank other than 0: connects to rank 0 (retrying with backoff while it is not listening yet),
//! says hello and waits for its verdict.
Result<SocketFd> ConnectToRoot(const std::string& addr, int port, int rank, int world_size, double timeout_s,
                               const std::string& where) {
  const auto deadline = DeadlineIn(timeout_s);
  auto backoff = std::chrono::milliseconds(10);
  std::string last;
  for (;;) {
    auto fd = ConnectOnce(addr, port, deadline);
    if (fd) {
      const uint32_t words[2] = {htonl(static_cast<uint32_t>(rank)), htonl(static_cast<uint32_t>(world_size))};
      if (Status s = SendFrame(fd->get(), FrameType::kHello, words, sizeof(words), deadline); !s) {
        return Error{where + ": saying hello to rank 0: " + s.error().message, ErrorKind::kInternal};
      }
      auto verdict = RecvFrame(fd->get(), deadline);
      if (!verdict) {
        return Error{where + ": waiting for rank 0 to gather every rank: " + verdict.error().message +
                         " (waited for rank 0)",
                     ErrorKind::kInternal};
      }
      if (verdict->type == FrameType::kError) return BadInput(Text(*verdict));
      return std::move(fd).value();
    }
    last = fd.error().message;
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
  return Error{where + ": could not reach rank 0 within " + std::to_string(static_cast<int>(timeout_s)) +
                   " s (last error: " + last + ")",
               ErrorKind::kInternal};
}

//! The numeric address of the peer of a connected socket.
std::string PeerHost(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  char host[NI_MAXHOST] = {};
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return {};
  }
  return host;
}

}  // namespace

SocketFd::~SocketFd() {
  if (fd_ >= 0) close(fd_);
}

SocketFd& SocketFd::operator=(SocketFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Rendezvous::Rendezvous(std::string addr, int port, int rank, int world_size, double timeout_s)
    : addr_(std::move(addr)), port_(port), rank_(rank), world_size_(world_size), timeout_s_(timeout_s) {}

Rendezvous::~Rendezvous() = default;

std::string Rendezvous::Where() const {
  return label_ + ", rank " + std::to_string(rank_) + " of " + std::to_string(world_size_);
}

Result<std::unique_ptr<Rendezvous>> Rendezvous::Join(const std::string& addr, int port, int rank, int world_size,
                                                     double timeout_s) {
  std::unique_ptr<Rendezvous> r(new Rendezvous(addr, port, rank, world_size, timeout_s));
  r->label_ = "rendezvous at " + addr + ":" + std::to_string(port) + " (MASTER_ADDR:MASTER_PORT)";
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return BadInput(r->Where() + ": the rank must be in 0..WORLD_SIZE-1");
  }
  if (port < 1 || port > 65535) return BadInput(r->Where() + ": MASTER_PORT must be in 1..65535");
  if (addr.empty() && rank != 0) return BadInput(r->Where() + ": MASTER_ADDR is not set");
  r->hosts_.assign(static_cast<size_t>(world_size), addr);
  if (world_size == 1) return r;
  SocketFd listener;
  if (rank == 0) {
    auto l = Listen(port, world_size);
    if (!l) return Error{r->Where() + ": " + l.error().message, l.error().kind};
    listener = std::move(l).value();
  }
  if (Status s = r->Connect(listener); !s) return s.error();
  // Every rank learns every rank's address as rank 0 saw it, for the groups' own rendezvous.
  std::string table;
  for (const std::string& h : r->hosts_) table += h + "\n";
  auto shared = r->Broadcast(std::vector<uint8_t>(table.begin(), table.end()));
  if (!shared) return shared.error();
  r->hosts_.clear();
  std::string line;
  for (const uint8_t c : *shared) {
    if (c != '\n') {
      line.push_back(static_cast<char>(c));
      continue;
    }
    r->hosts_.push_back(line);
    line.clear();
  }
  if (static_cast<int>(r->hosts_.size()) != world_size) return Error{r->Where() + ": a bad host table", ErrorKind::kIo};
  return r;
}

Status Rendezvous::Connect(const SocketFd& listener) {
  if (rank_ == 0) {
    auto peers = AcceptAll(listener, world_size_, timeout_s_, Where());
    if (!peers) return peers.error();
    peers_ = std::move(peers).value();
    for (int p = 1; p < world_size_; ++p) hosts_[static_cast<size_t>(p)] = PeerHost(peers_[static_cast<size_t>(p)].get());
    return {};
  }
  auto fd = ConnectToRoot(addr_, port_, rank_, world_size_, timeout_s_, Where());
  if (!fd) return fd.error();
  peers_.push_back(std::move(fd).value());
  return {};
}

Result<std::unique_ptr<Rendezvous>> Rendezvous::Split(const std::vector<int>& ranks) {
  const auto me = std::find(ranks.begin(), ranks.end(), rank_);
  if (me == ranks.end()) return Error{Where() + ": Split: this rank is not in its own group", ErrorKind::kInternal};
  const int root = ranks.front();
  // The group's first member listens on a fresh port; every rank learns every root's port.
  SocketFd listener;
  uint32_t my_port = 0;
  if (rank_ == root && ranks.size() > 1) {
    auto l = Listen(0, static_cast<int>(ranks.size()));
    if (!l) return Error{Where() + ": Split: " + l.error().message, l.error().kind};
    listener = std::move(l).value();
    sockaddr_storage a{};
    socklen_t len = sizeof(a);
    getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len);
    my_port = ntohs(a.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&a)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&a)->sin_port);
  }
  std::vector<uint32_t> ports(static_cast<size_t>(world_size_));
  if (Status s = AllGather(&my_port, ports.data(), sizeof(my_port)); !s) return s.error();
  const int port = static_cast<int>(ports[static_cast<size_t>(root)]);
  const std::string& host = hosts_[static_cast<size_t>(root)];
  std::unique_ptr<Rendezvous> g(new Rendezvous(host, port, static_cast<int>(me - ranks.begin()),
                                               static_cast<int>(ranks.size()), timeout_s_));
  g->label_ = "group " + RankList(ranks) + " rendezvous at " + host + ":" + std::to_string(port);
  for (int r : ranks) g->hosts_.push_back(hosts_[static_cast<size_t>(r)]);
  if (ranks.size() == 1) return g;
  if (Status s = g->Connect(listener); !s) return s.error();
  return g;
}

Result<std::vector<uint8_t>> Rendezvous::Broadcast(const std::vector<uint8_t>& blob) {
  const auto deadline = DeadlineIn(timeout_s_);
  if (rank_ == 0) {
    for (int r = 1; r < world_size_; ++r) {
      if (Status s = SendFrame(peers_[static_cast<size_t>(r)].get(), FrameType::kBlob, blob.data(), blob.size(), deadline);
          !s) {
        return Error{Where() + ": broadcast to rank " + std::to_string(r) + ": " + s.error().message,
                     ErrorKind::kInternal};
      }
    }
    return blob;
  }
  auto f = RecvFrame(peers_.front().get(), deadline);
  if (!f || f->type != FrameType::kBlob) {
    return Error{Where() + ": broadcast: waited for rank 0: " + (f ? "an unexpected frame" : f.error().message),
                 ErrorKind::kInternal};
  }
  return std::move(f->payload);
}

Status Rendezvous::AllGather(const void* send, void* recv, size_t bytes) { return Gather(send, recv, bytes, "all-gather"); }

Status Rendezvous::Barrier() { return Gather(nullptr, nullptr, 0, "barrier"); }

Status Rendezvous::Gather(const void* send, void* recv, size_t bytes, const char* what) {
  const auto deadline = DeadlineIn(timeout_s_);
  auto fail = [&](int peer, const std::string& why) {
    return Error{Where() + ": " + what + ": waited for rank " + std::to_string(peer) + ": " + why, ErrorKind::kInternal};
  };
  const size_t total = bytes * static_cast<size_t>(world_size_);
  if (rank_ != 0) {
    const int fd = peers_.front().get();
    if (Status s = SendFrame(fd, FrameType::kGather, send, bytes, deadline); !s) return fail(0, s.error().message);
    auto f = RecvFrame(fd, deadline);
    if (!f) return fail(0, f.error().message);
    if (f->type != FrameType::kGather || f->payload.size() != total) return fail(0, "an unexpected frame");
    if (total > 0) std::memcpy(recv, f->payload.data(), total);
    return {};
  }
  std::vector<uint8_t> all(total);
  if (bytes > 0) std::memcpy(all.data(), send, bytes);
  for (int r = 1; r < world_size_; ++r) {
    auto f = RecvFrame(peers_[static_cast<size_t>(r)].get(), deadline);
    if (!f) return fail(r, f.error().message);
    if (f->type != FrameType::kGather || f->payload.size() != bytes) return fail(r, "a frame of another size or kind");
    if (bytes > 0) std::memcpy(all.data() + bytes * static_cast<size_t>(r), f->payload.data(), bytes);
  }
  for (int r = 1; r < world_size_; ++r) {
    if (Status s = SendFrame(peers_[static_cast<size_t>(r)].get(), FrameType::kGather, all.data(), total, deadline); !s) {
      return Error{Where() + ": " + what + ": answering rank " + std::to_string(r) + ": " + s.error().message,
                   ErrorKind::kInternal};
    }
  }
  if (total > 0) std::memcpy(recv, all.data(), total);
  return {};
}

}  // namespace parallax::executor
