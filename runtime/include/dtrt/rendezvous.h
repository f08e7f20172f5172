//===- dtrt/rendezvous.h - Ranks meeting at the master ---------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Launchers other than MPI's (torchrun, Slurm without PMIx, SageMaker,
// Vertex) tell each process only its rank, the world size and where rank 0
// is. The ranks meet there over TCP: each says who it is, rank 0 checks that
// every rank came and that all were started for the same program and world,
// then hands each rank, one at a time, what it needs to join the MPI world
// (comm/mpi_world.cpp). Only this meeting is ours; every collective after it
// is MPI's.
//
// The protocol is one line each way, so a stray client (a port scanner, a
// rank of another job) is refused with a message rather than misread:
//   rank -> 0:  "dt-rendezvous 1 <rank> <world> <program>\n"
//   0 -> rank:  "ok\n<payload>" then close, or "error: <why>\n" then close.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_RENDEZVOUS_H
#define DTRT_RENDEZVOUS_H

#include "dtrt/error.h"

#include <chrono>
#include <map>
#include <string>

namespace dtrt {

using Deadline = std::chrono::steady_clock::time_point;

/// Where and as whom a rank meets the others.
struct Rendezvous {
  std::string host;
  int port = 0;
  int rank = 0;
  int worldSize = 1;
  /// Ranks on this rank's node.
  int localWorldSize = 1;
  /// The program's name: ranks of different programs must not meet.
  std::string program;
  /// How long rank 0 waits for the others to arrive (and a rank for rank
  /// 0 to listen); a rank that arrived waits twice this for its turn.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

/// Rank 0's side: a listening socket and the ranks that arrived.
class RendezvousServer {
public:
  /// Listens on `port` (0: any free port) on every interface.
  static Expected<RendezvousServer> listen(int port);
  RendezvousServer(RendezvousServer &&other) noexcept;
  RendezvousServer &operator=(RendezvousServer &&) = delete;
  ~RendezvousServer();

  /// The port it listens on.
  int port() const { return port_; }
  /// Waits until ranks 1 .. worldSize-1 arrived, each for `program` and a
  /// world of `worldSize`; refuses (and tells) any that does not fit.
  Status gather(int worldSize, const std::string &program, Deadline deadline);
  /// Lets rank `rank` (which arrived) go on with `payload`.
  Status release(int rank, const std::string &payload);
  /// Tells every rank still waiting why the job cannot start.
  void failAll(const std::string &why);

private:
  explicit RendezvousServer(int fd, int port) : fd_(fd), port_(port) {}
  int fd_;
  int port_;
  /// Arrived ranks' connections, by rank.
  std::map<int, int> waiting_;
};

/// A rank's side: arrives at `meet.host:meet.port` (retrying while rank 0 is
/// not listening yet) and returns the payload rank 0 released it with.
Expected<std::string> arriveAt(const Rendezvous &meet);

} // namespace dtrt

#endif // DTRT_RENDEZVOUS_H
