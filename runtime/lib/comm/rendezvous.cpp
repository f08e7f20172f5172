//===- rendezvous.cpp - Ranks meeting at the master over TCP --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Plain POSIX sockets with poll(2) for every wait, so that no step of the
// meeting can block past its deadline: a rank that never comes, a rank 0 that
// never listens and a peer that connects and says nothing all end in a
// message that names who was missing.
//
//===----------------------------------------------------------------------===//

#include "dtrt/rendezvous.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace dtrt {
namespace {

constexpr const char *kGreeting = "dt-rendezvous 1";

int msLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return int(std::max<int64_t>(0, left.count()));
}

/// Sends all of `text`; false when the peer went away.
bool sendAll(int fd, const std::string &text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done,
                       MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// Reads until `stop` is seen (or end of stream when stop is 0), at most
/// `limit` bytes, until the deadline. Returns nullopt on timeout or error.
std::optional<std::string> receive(int fd, char stop, size_t limit,
                                   Deadline deadline) {
  std::string text;
  char buffer[512];
  while (text.size() < limit) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, msLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      return std::nullopt;
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      return stop ? std::nullopt : std::optional<std::string>(text);
    text.append(buffer, size_t(n));
    if (stop && text.find(stop) != std::string::npos)
      return text;
  }
  return std::nullopt;
}

void closeFd(int &fd) {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
}

} // namespace

Expected<RendezvousServer> RendezvousServer::listen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return Error(fmt::format("cannot open a socket for the other ranks: {}",
                             std::strerror(errno)));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    return Error(fmt::format(
        "rank 0 cannot listen on port {} for the other ranks: {}{}", port,
        std::strerror(err),
        err == EADDRINUSE ? " (another job or program holds it: give every "
                            "rank another MASTER_PORT)"
                          : ""));
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  return RendezvousServer(fd, ntohs(addr.sin_port));
}

RendezvousServer::RendezvousServer(RendezvousServer &&other) noexcept
    : fd_(other.fd_), port_(other.port_), waiting_(std::move(other.waiting_)) {
  other.fd_ = -1;
  other.waiting_.clear();
}

RendezvousServer::~RendezvousServer() {
  for (auto &[rank, fd] : waiting_)
    closeFd(fd);
  closeFd(fd_);
}

Status RendezvousServer::gather(int worldSize, const std::string &program,
                                Deadline deadline) {
  while (int(waiting_.size()) < worldSize - 1) {
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, msLeft(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      std::string missing;
      for (int r = 1; r < worldSize; ++r)
        if (!waiting_.count(r))
          missing += fmt::format("{}{}", missing.empty() ? "" : ", ", r);
      std::string why = fmt::format(
          "rank 0 waited at port {} for rank(s) {}, which did not arrive: "
          "start every rank with the same world size and master address, "
          "or give them longer with --timeout",
          port_, missing);
      failAll(why);
      return Error(why);
    }
    int peer = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (peer < 0)
      continue;
    int one = 1;
    ::setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A peer has a few seconds to say who it is; it connects only when it
    // has something to say.
    Deadline helloBy = std::min(
        deadline, std::chrono::steady_clock::now() + std::chrono::seconds(10));
    std::optional<std::string> hello = receive(peer, '\n', 1024, helloBy);
    std::istringstream line(hello ? *hello : "");
    std::string word1, word2, theirProgram;
    int version = 0, rank = -1, world = 0;
    line >> word1 >> version >> rank >> world >> theirProgram;
    std::string refusal;
    if (!hello || word1 + " " + std::to_string(version) != kGreeting)
      refusal = "this port is a dt rendezvous; that was not a dt rank";
    else if (world != worldSize)
      refusal = fmt::format("rank {} was started for a world of {} ranks, "
                            "rank 0 for {}: start every rank with the same "
                            "world size",
                            rank, world, worldSize);
    else if (theirProgram != program)
      refusal = fmt::format("rank {} runs program '{}', rank 0 runs '{}'",
                            rank, theirProgram, program);
    else if (rank < 1 || rank >= worldSize)
      refusal = fmt::format("rank {} is not a rank of a world of {}", rank,
                            worldSize);
    else if (waiting_.count(rank))
      refusal = fmt::format("two processes say they are rank {}: each rank "
                            "must have its own RANK",
                            rank);
    if (refusal.empty()) {
      waiting_[rank] = peer;
      continue;
    }
    sendAll(peer, "error: " + refusal + "\n");
    ::close(peer);
    // A stray connection is not the job's fault; a rank that does not fit is.
    if (hello && word1 == "dt-rendezvous") {
      failAll(refusal);
      return Error(refusal);
    }
  }
  return Status::ok();
}

Status RendezvousServer::release(int rank, const std::string &payload) {
  auto it = waiting_.find(rank);
  if (it == waiting_.end())
    return Error(fmt::format("rank {} has not arrived", rank));
  bool sent = sendAll(it->second, "ok\n" + payload);
  closeFd(it->second);
  waiting_.erase(it);
  if (!sent)
    return Error(fmt::format("rank {} left the rendezvous before rank 0 let "
                             "it in: it failed (its own messages say why)",
                             rank));
  return Status::ok();
}

void RendezvousServer::failAll(const std::string &why) {
  for (auto &[rank, fd] : waiting_) {
    sendAll(fd, "error: " + why + "\n");
    closeFd(fd);
  }
  waiting_.clear();
}

Expected<std::string> arriveAt(const Rendezvous &meet) {
  Deadline deadline = std::chrono::steady_clock::now() + meet.timeout;
  std::string where = fmt::format("{}:{}", meet.host, meet.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string lastError = "nothing listened there";
  // Rank 0 may start after us: retry until it listens.
  for (auto pause = std::chrono::milliseconds(50);;
       pause = std::min(pause * 2, std::chrono::milliseconds(1000))) {
    addrinfo *found = nullptr;
    int rc = ::getaddrinfo(meet.host.c_str(),
                           std::to_string(meet.port).c_str(), &hints, &found);
    if (rc != 0) {
      lastError = fmt::format("cannot resolve {}: {}", meet.host,
                              ::gai_strerror(rc));
    } else {
      for (addrinfo *a = found; a; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                          a->ai_protocol);
        if (fd < 0)
          continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
          lastError = std::strerror(errno);
          ::close(fd);
          continue;
        }
        ::freeaddrinfo(found);
        found = nullptr;
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        bool said = sendAll(fd, fmt::format("{} {} {} {}\n", kGreeting,
                                            meet.rank, meet.worldSize,
                                            meet.program));
        // Rank 0 waits up to the timeout for the last rank and then lets
        // the ranks in one by one: a rank that arrived waits twice as long
        // for its turn, so that it hears rank 0's verdict rather than
        // giving up first.
        Deadline turn = std::chrono::steady_clock::now() + 2 * meet.timeout;
        std::optional<std::string> answer =
            said ? receive(fd, 0, 1 << 20, turn) : std::nullopt;
        ::close(fd);
        if (!answer)
          return Error(fmt::format(
              "rank {} arrived at {} but rank 0 did not let it in within {} s: "
              "rank 0 failed or waits for another rank (their messages say "
              "which)",
              meet.rank, where,
              std::chrono::duration_cast<std::chrono::seconds>(2 *
                                                               meet.timeout)
                  .count()));
        if (answer->rfind("ok\n", 0) == 0)
          return answer->substr(3);
        std::string why =
            answer->rfind("error: ", 0) == 0 ? answer->substr(7)
            : answer->empty() ? "rank 0 closed the meeting without letting it "
                                "in: it failed (its own messages say why)"
                              : "rank 0 answered something else";
        while (!why.empty() && why.back() == '\n')
          why.pop_back();
        return Error(fmt::format("rank {} was refused at {}: {}", meet.rank,
                                 where, why));
      }
      if (found)
        ::freeaddrinfo(found);
    }
    if (std::chrono::steady_clock::now() + pause >= deadline)
      return Error(fmt::format(
          "rank {} could not reach rank 0 at {} within {} s ({}): is rank 0 "
          "running, and do MASTER_ADDR and MASTER_PORT name it?",
          meet.rank, where,
          std::chrono::duration_cast<std::chrono::seconds>(meet.timeout)
              .count(),
          lastError));
    std::this_thread::sleep_for(pause);
  }
}

} // namespace dtrt
