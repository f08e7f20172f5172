//===- mpi_world.cpp - The MPI world of ranks no MPI launcher started -----===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Processes started by torchrun, a Slurm step without PMIx, SageMaker or
// Vertex are MPI singletons: each is a world of one. Open MPI joins
// singletons with MPI_Comm_connect/accept only through a name server that all
// of them know, ompi-server (Open MPI 4.1 refuses connect/accept between
// separately started processes otherwise). So rank 0 starts ompi-server as
// its child, and every rank, before MPI_Init, points Open MPI at it through
// the pmix_server_uri parameter, which reaches ranks by the TCP rendezvous.
//
// The world grows one rank at a time, in rank order: the ranks already in
// accept together (MPI_Comm_accept is collective over the accepting group)
// while rank 0 lets the next rank connect, and each merge puts the newcomer
// last, so the merged ranks are the launcher's ranks.
//
//===----------------------------------------------------------------------===//

#include "mpi_world.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace dtrt {
namespace {

/// Ends the process with a message when a step of joining takes too long: a
/// rank that died after it was let in leaves the others in MPI_Comm_accept,
/// which has no timeout of its own.
class JoinWatch {
public:
  JoinWatch(std::chrono::milliseconds timeout, std::string what)
      : thread_([this, timeout, what = std::move(what)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, timeout, [this] { return done_; })) {
            std::fprintf(stderr, "error: %s did not finish within %lld s: a "
                                 "rank died or hangs while joining (its own "
                                 "messages say which); stopping\n",
                         what.c_str(),
                         static_cast<long long>(timeout.count() / 1000));
            std::fflush(stderr);
            std::_Exit(kExitFault);
          }
        }) {}
  ~JoinWatch() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_;
};

/// ompi-server, rank 0's child for the life of the job.
pid_t gServerPid = -1;

void stopServer() {
  if (gServerPid > 0) {
    ::kill(gServerPid, SIGTERM);
    ::waitpid(gServerPid, nullptr, 0);
    gServerPid = -1;
  }
}

/// Starts ompi-server and returns the URI it reports. It reports into a
/// file: its standard output is block-buffered into a pipe until it exits.
Expected<std::string> startNameServer(Deadline deadline) {
  const char *tmp = std::getenv("TMPDIR");
  std::string path =
      fmt::format("{}/dt-ompi-server-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = ::mkstemp(path.data());
  if (fd < 0)
    return Error(fmt::format("cannot start ompi-server: no temporary file "
                             "in {}: {}",
                             tmp && *tmp ? tmp : "/tmp", std::strerror(errno)));
  ::close(fd);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0)
    return Error(fmt::format("cannot start ompi-server: {}",
                             std::strerror(errno)));
  if (pid == 0) {
    // It dies with rank 0, however rank 0 ends.
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent)
      std::_Exit(1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDOUT_FILENO);
    const char *args[] = {"ompi-server", "--no-daemonize", "--report-uri",
                          path.c_str(), nullptr};
    ::execvp(args[0], const_cast<char **>(args));
#ifdef DTRT_OMPI_SERVER
    ::execv(DTRT_OMPI_SERVER, const_cast<char **>(args));
#endif
    std::_Exit(127);
  }
  gServerPid = pid;
  std::atexit(stopServer);
  // It starts in well under a second; a minute means it never will.
  deadline = std::min(deadline, std::chrono::steady_clock::now() +
                                    std::chrono::seconds(60));
  std::string uri;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::getline(in, uri);
    if (in && !uri.empty())
      break;
    uri.clear();
    if (::waitpid(pid, nullptr, WNOHANG) == pid) {
      gServerPid = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::unlink(path.c_str());
  if (uri.find("tcp") == std::string::npos) {
    stopServer();
    return Error("rank 0 could not start Open MPI's name server "
                 "(ompi-server, from the openmpi-bin package), which ranks "
                 "started without mpirun need to join: install openmpi-bin, "
                 "or start the job with mpirun or dtrun");
  }
  return uri;
}

Status mpiInit() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return Status::ok();
  // One thread calls MPI at a time: the rank's, or the communication thread
  // of asynchronous collectives (comm/queue.h).
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) !=
      MPI_SUCCESS)
    return Error("MPI_Init failed: was this program started by mpirun or "
                 "dtrun on a working OpenMPI installation?");
  return Status::ok();
}

std::string mpiMessage(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, size_t(len));
}

/// Merges the accepted or connected `inter` into `group`, the newcomer last.
Status merge(MPI_Comm &group, MPI_Comm inter, bool newcomer) {
  MPI_Comm merged = MPI_COMM_NULL;
  int rc = MPI_Intercomm_merge(inter, newcomer ? 1 : 0, &merged);
  MPI_Comm_disconnect(&inter);
  if (rc != MPI_SUCCESS)
    return Error("joining the MPI world failed: " + mpiMessage(rc));
  if (group != MPI_COMM_SELF)
    MPI_Comm_free(&group);
  group = merged;
  MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
  return Status::ok();
}

/// Accepts the ranks after this one's, as a member of `group`.
Status acceptTheRest(MPI_Comm &group, const Rendezvous &meet,
                     const char *port, RendezvousServer *server,
                     const std::string &payload) {
  int size = 1;
  MPI_Comm_size(group, &size);
  for (int next = size; next < meet.worldSize; ++next) {
    if (server)
      if (Status s = server->release(next, payload); !s)
        return s;
    JoinWatch watch(meet.timeout,
                    fmt::format("rank {}'s wait for rank {} to join",
                                meet.rank, next));
    MPI_Comm inter = MPI_COMM_NULL;
    int rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, group, &inter);
    if (rc != MPI_SUCCESS)
      return Error(fmt::format("rank {} could not let rank {} in: {}",
                               meet.rank, next, mpiMessage(rc)));
    if (Status s = merge(group, inter, false); !s)
      return s;
  }
  return Status::ok();
}

Expected<MPI_Comm> joinAtRendezvous(const Rendezvous &meet) {
  Deadline deadline = std::chrono::steady_clock::now() + meet.timeout;
  // Containers forbid the ptrace access of Open MPI's single-copy shared
  // memory; dtrun turns it off for the same reason.
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  // More ranks than cores: a rank waiting for a message must give its core
  // to the rank that sends it. mpirun decides this itself; singletons do not
  // know their neighbours, and busy-polling made collectives 10x slower.
  if (meet.localWorldSize > int(std::thread::hardware_concurrency()))
    ::setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
  if (meet.rank == 0) {
    Expected<RendezvousServer> server = RendezvousServer::listen(meet.port);
    if (!server)
      return server.error();
    if (Status s = server->gather(meet.worldSize, meet.program, deadline); !s)
      return s.error();
    Expected<std::string> uri = startNameServer(deadline);
    if (!uri) {
      server->failAll(uri.error().message());
      return uri.error();
    }
    ::setenv("OMPI_MCA_pmix_server_uri", uri->c_str(), 1);
    if (Status s = mpiInit(); !s) {
      server->failAll("rank 0: " + s.error().message());
      return s.error();
    }
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    char port[MPI_MAX_PORT_NAME] = {};
    if (int rc = MPI_Open_port(MPI_INFO_NULL, port); rc != MPI_SUCCESS) {
      std::string why = "rank 0 cannot open an MPI port: " + mpiMessage(rc);
      server->failAll(why);
      return Error(why);
    }
    MPI_Comm group = MPI_COMM_SELF;
    Status s = acceptTheRest(group, meet, port, &*server,
                             *uri + "\n" + port + "\n");
    MPI_Close_port(port);
    if (!s) {
      server->failAll(s.error().message());
      return s.error();
    }
    return group;
  }

  Expected<std::string> payload = arriveAt(meet);
  if (!payload)
    return payload.error();
  size_t cut = payload->find('\n');
  if (cut == std::string::npos)
    return Error("rank 0's answer at the rendezvous is not a dt one");
  std::string uri = payload->substr(0, cut);
  std::string port = payload->substr(cut + 1);
  while (!port.empty() && port.back() == '\n')
    port.pop_back();
  ::setenv("OMPI_MCA_pmix_server_uri", uri.c_str(), 1);
  if (Status s = mpiInit(); !s)
    return s.error();
  // Errors come back as codes, so that messages say what failed.
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm inter = MPI_COMM_NULL;
  {
    JoinWatch watch(meet.timeout,
                    fmt::format("rank {}'s connection to rank 0", meet.rank));
    int rc = MPI_Comm_connect(port.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF,
                              &inter);
    if (rc != MPI_SUCCESS)
      return Error(fmt::format("rank {} could not join rank 0's MPI world: {}",
                               meet.rank, mpiMessage(rc)));
  }
  MPI_Comm group = MPI_COMM_SELF;
  if (Status s = merge(group, inter, true); !s)
    return s.error();
  // The port matters only at the accepting root, rank 0.
  if (Status s = acceptTheRest(group, meet, "", nullptr, {}); !s)
    return s.error();
  return group;
}

} // namespace

Expected<MPI_Comm> openMpiWorld(const std::optional<Rendezvous> &meet) {
  if (!meet || meet->worldSize == 1) {
    if (Status s = mpiInit(); !s)
      return s.error();
    return MPI_COMM_WORLD;
  }
  Expected<MPI_Comm> world = joinAtRendezvous(*meet);
  if (!world)
    return world;
  int rank = -1;
  MPI_Comm_rank(*world, &rank);
  if (rank != meet->rank)
    return Error(fmt::format("the MPI world numbered rank {} as {}: its ranks "
                             "joined out of order",
                             meet->rank, rank));
  return world;
}

} // namespace dtrt
