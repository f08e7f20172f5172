//===- RendezvousTest.cpp - Tests of the ranks' meeting at rank 0 ---------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Ranks as threads meeting on a free loopback port: every rank that fits is
// let in with its payload, in the order rank 0 chooses; a rank of another
// world or program is refused and fails the meeting; a missing rank is named
// when the meeting times out; a stray connection is turned away without
// failing the job.
//
//===----------------------------------------------------------------------===//

#include "dtrt/rendezvous.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace dtrt;
using namespace std::chrono_literals;

namespace {

Rendezvous meetAt(int port, int rank, int world,
                  std::string program = "gpt") {
  Rendezvous m;
  m.host = "127.0.0.1";
  m.port = port;
  m.rank = rank;
  m.worldSize = world;
  m.program = std::move(program);
  m.timeout = 10s;
  return m;
}

Deadline in(std::chrono::milliseconds d) {
  return std::chrono::steady_clock::now() + d;
}

} // namespace

TEST(Rendezvous, LetsEveryRankInWithItsPayload) {
  Expected<RendezvousServer> server = RendezvousServer::listen(0);
  ASSERT_TRUE(bool(server)) << server.error().message();
  int port = server->port();
  std::vector<std::string> got(4);
  std::vector<std::thread> ranks;
  for (int r = 1; r < 4; ++r)
    ranks.emplace_back([&, r] {
      Expected<std::string> p = arriveAt(meetAt(port, r, 4));
      got[r] = p ? *p : "failed: " + p.error().message();
    });
  // A port scanner connects and says nothing useful; the job goes on.
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
    ASSERT_EQ(::send(fd, "GET / HTTP/1.0\n", 15, 0), 15);
    ::close(fd);
  }
  Status s = server->gather(4, "gpt", in(10s));
  ASSERT_TRUE(bool(s)) << s.error().message();
  for (int r = 1; r < 4; ++r)
    ASSERT_TRUE(bool(server->release(r, "payload " + std::to_string(r))));
  for (std::thread &t : ranks)
    t.join();
  for (int r = 1; r < 4; ++r)
    EXPECT_EQ(got[r], "payload " + std::to_string(r));
}

TEST(Rendezvous, RefusesARankOfAnotherWorldOrProgram) {
  for (auto [world, program, expected] :
       {std::tuple{3, "gpt", "started for a world of 3 ranks, rank 0 for 2"},
        std::tuple{2, "mlp", "runs program 'mlp', rank 0 runs 'gpt'"}}) {
    Expected<RendezvousServer> server = RendezvousServer::listen(0);
    ASSERT_TRUE(bool(server));
    std::string answer;
    std::thread rank1([&, port = server->port(), world = world,
                       program = program] {
      Expected<std::string> p = arriveAt(meetAt(port, 1, world, program));
      answer = p ? *p : p.error().message();
    });
    Status s = server->gather(2, "gpt", in(10s));
    rank1.join();
    ASSERT_FALSE(bool(s));
    EXPECT_NE(s.error().message().find(expected), std::string::npos)
        << s.error().message();
    EXPECT_NE(answer.find("was refused"), std::string::npos) << answer;
    EXPECT_NE(answer.find(expected), std::string::npos) << answer;
  }
}

TEST(Rendezvous, NamesTheRanksThatNeverCame) {
  Expected<RendezvousServer> server = RendezvousServer::listen(0);
  ASSERT_TRUE(bool(server));
  std::string answer;
  std::thread rank2([&, port = server->port()] {
    Expected<std::string> p = arriveAt(meetAt(port, 2, 4));
    answer = p ? *p : p.error().message();
  });
  Status s = server->gather(4, "gpt", in(1500ms));
  rank2.join();
  ASSERT_FALSE(bool(s));
  EXPECT_NE(s.error().message().find("for rank(s) 1, 3, which did not arrive"),
            std::string::npos)
      << s.error().message();
  // The rank that came hears why it will not start.
  EXPECT_NE(answer.find("did not arrive"), std::string::npos) << answer;
}

TEST(Rendezvous, ARankGivesUpWhenNobodyListens) {
  // A port nobody listens on: bind one, then close it.
  int port;
  {
    Expected<RendezvousServer> server = RendezvousServer::listen(0);
    ASSERT_TRUE(bool(server));
    port = server->port();
  }
  Rendezvous m = meetAt(port, 1, 2);
  m.timeout = 500ms;
  Expected<std::string> p = arriveAt(m);
  ASSERT_FALSE(bool(p));
  EXPECT_NE(p.error().message().find("could not reach rank 0 at 127.0.0.1:"),
            std::string::npos)
      << p.error().message();
}

TEST(Rendezvous, SaysWhenThePortIsTaken) {
  Expected<RendezvousServer> first = RendezvousServer::listen(0);
  ASSERT_TRUE(bool(first));
  Expected<RendezvousServer> second = RendezvousServer::listen(first->port());
  ASSERT_FALSE(bool(second));
  EXPECT_NE(second.error().message().find("give every rank another "
                                          "MASTER_PORT"),
            std::string::npos)
      << second.error().message();
}
