//===- pretrained.cpp - Hugging Face weights in and out -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/pretrained.h"

#include "dtrt/checkpoint.h"
#include "dtrt/file.h"
#include "dtrt/layout.h"
#include "dtrt/safetensors.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace dtrt {

namespace {

/// A whole file mapped into memory: read-only for loading, shared and
/// writable for exporting.
class MappedFile {
public:
  static Expected<MappedFile> open(const std::string &path, bool writable) {
    int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0)
      return Error(fmt::format("cannot open '{}': {}", path,
                               std::strerror(errno)));
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Error(fmt::format("cannot stat '{}': {}", path,
                               std::strerror(errno)));
    }
    MappedFile m;
    m.fd_ = fd;
    m.size_ = size_t(st.st_size);
    m.path_ = path;
    if (m.size_ == 0)
      return m;
    void *p = ::mmap(nullptr, m.size_,
                     writable ? PROT_READ | PROT_WRITE : PROT_READ,
                     writable ? MAP_SHARED : MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      return Error(fmt::format("cannot map '{}': {}", path,
                               std::strerror(errno)));
    m.data_ = static_cast<char *>(p);
    return m;
  }

  MappedFile() = default;
  MappedFile(MappedFile &&o) noexcept { *this = std::move(o); }
  MappedFile &operator=(MappedFile &&o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(fd_, o.fd_);
    std::swap(path_, o.path_);
    return *this;
  }
  ~MappedFile() {
    if (data_)
      ::munmap(data_, size_);
    if (fd_ >= 0)
      ::close(fd_);
  }

  char *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// Makes what was written through the mapping durable.
  Status sync() {
    if (data_ && ::msync(data_, size_, MS_SYNC) != 0)
      return Error(fmt::format("cannot write '{}': {}", path_,
                               std::strerror(errno)));
    if (fd_ >= 0 && ::fsync(fd_) != 0)
      return Error(fmt::format("cannot write '{}': {}", path_,
                               std::strerror(errno)));
    return Status::ok();
  }

private:
  char *data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  std::string path_;
};

std::vector<int64_t> fileShape(const BufferDesc &b, bool transposed) {
  std::vector<int64_t> shape = b.globalShape;
  if (transposed)
    std::reverse(shape.begin(), shape.end());
  return shape;
}

/// Every line of `problems`, at most `shown` of them.
std::string listed(const std::vector<std::string> &problems, size_t shown) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < shown; ++i)
    out += "\n  " + problems[i];
  if (problems.size() > shown)
    out += fmt::format("\n  ... and {} more", problems.size() - shown);
  return out;
}

/// Reads this rank's elements of `b` from tensor `t` (the file mapped at
/// `file`, its data at `dataStart`) into the arena.
Status readParam(const BufferDesc &b, const StTensor &t, bool transposed,
                 const MappedFile &file, uint64_t dataStart, Arena &arena,
                 const MeshSpec &mesh, const std::vector<int> &coords,
                 uint64_t &bytesRead) {
  const char *src = file.data() + dataStart + t.begin;
  size_t esize = stDTypeBits(t.dtype) / 8;
  // dt's [rows, cols]; a transposed file holds [cols, rows].
  int64_t rows = b.globalShape.empty() ? 1 : b.globalShape[0];
  int64_t cols = b.globalShape.size() < 2 ? 1 : b.globalShape[1];
  std::vector<float> values;
  std::optional<Error> bad;
  forEachRun(b, mesh, coords, [&](int64_t local, int64_t global, int64_t n) {
    if (bad)
      return;
    values.resize(size_t(n));
    if (!transposed) {
      stToF32(t.dtype, src + uint64_t(global) * esize, n, values.data());
    } else {
      // A run may span rows (a whole unsharded buffer is one run).
      for (int64_t k = 0; k < n; ++k) {
        int64_t g = global + k, r = g / cols, c = g % cols;
        stToF32(t.dtype, src + uint64_t(c * rows + r) * esize, 1,
                &values[size_t(k)]);
      }
    }
    bytesRead += uint64_t(n) * esize;
    for (int64_t k = 0; k < n; ++k)
      if (!std::isfinite(values[size_t(k)])) {
        // The element as the file counts it.
        int64_t g = global + k;
        int64_t at = transposed ? (g % cols) * rows + g / cols : g;
        bad = Error(fmt::format(
            "tensor '{}' of '{}' holds {} at element {}: the file is "
            "corrupt, or the weights diverged before they were saved",
            t.name, file.path(), values[size_t(k)], at));
        return;
      }
    arena.writePart(b, size_t(local) * sizeof(float),
                    size_t(n) * sizeof(float), values.data());
  });
  if (bad)
    return *bad;
  return Status::ok();
}

} // namespace

Expected<PretrainedLoad> loadPretrained(const std::string &path,
                                        const std::vector<std::string> &ignore,
                                        Arena &arena,
                                        const std::vector<int> &coords) {
  const Manifest &m = arena.manifest();
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("cannot start from the weights in '{}': {}",
                             path, why));
  };
  Expected<StSet> set = StSet::open(path);
  if (!set)
    return fail(set.error().message());
  std::vector<StWant> wants;
  std::vector<const BufferDesc *> buffers;
  for (const CheckpointName &n : m.checkpointNames) {
    const BufferDesc *b = m.find(n.param);
    buffers.push_back(b);
    wants.push_back({n.param, n.name, fileShape(*b, n.transposed)});
  }
  StMatch match = matchStTensors(*set, wants, ignore);
  if (!match.problems.empty())
    return fail(fmt::format(
        "it does not fit the model ({} problem{}):{}\nmap names in the "
        "program's init = nn.safetensors(..., names = {{...}}), or skip "
        "file tensors with ignore = [...]",
        match.problems.size(), match.problems.size() == 1 ? "" : "s",
        listed(match.problems, 24)));

  PretrainedLoad load;
  load.prefix = match.prefix;
  load.skipped = match.skipped;
  std::vector<std::optional<MappedFile>> files(set->files().size());
  for (size_t i = 0; i < wants.size(); ++i) {
    const StTensor *t = match.found[i];
    if (!t) {
      load.fresh.push_back(wants[i].param);
      continue;
    }
    ++load.loaded;
    const BufferDesc &b = *buffers[i];
    if (!m.holds(b, coords))
      continue;
    if (!files[t->file]) {
      Expected<MappedFile> f =
          MappedFile::open(set->files()[t->file], /*writable=*/false);
      if (!f)
        return fail(f.error().message());
      // The header was checked against the size when the set was opened;
      // a file that shrank since would fault on access.
      if (f->size() < set->dataStart(t->file) + t->end)
        return fail(fmt::format("'{}' shrank while it was read",
                                set->files()[t->file]));
      files[t->file].emplace(std::move(*f));
    }
    if (Status s = readParam(b, *t, m.checkpointNames[i].transposed,
                             *files[t->file], set->dataStart(t->file), arena,
                             m.mesh, coords, load.bytesRead);
        !s)
      return fail(s.error().message());
  }
  return load;
}

Expected<std::vector<std::string>>
exportPretrained(const std::string &dir, uint64_t shardBytes, Arena &arena,
                 Communicator *comm, const std::vector<int> &coords) {
  const Manifest &m = arena.manifest();
  int rank = comm ? comm->rank() : 0;
  auto agree = [&](const Status &mine, const char *stage) -> Status {
    if (!comm)
      return mine;
    return agreeAcrossRanks(*comm, mine, stage, "the model was not exported");
  };

  // The files and every tensor's offset follow from the manifest alone, so
  // every rank computes the same layout.
  std::vector<StEntry> entries;
  std::vector<size_t> order;
  for (size_t i = 0; i < m.checkpointNames.size(); ++i) {
    const CheckpointName &n = m.checkpointNames[i];
    entries.push_back(
        {n.name, fileShape(*m.find(n.param), n.transposed), "F32"});
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].name < entries[b].name;
  });
  std::vector<StEntry> sorted;
  for (size_t i : order)
    sorted.push_back(entries[i]);
  std::vector<std::vector<size_t>> split = splitStEntries(sorted, shardBytes);
  struct FileOut {
    std::string name, tmp;
    StFileLayout layout;
    std::vector<size_t> names; // indices into m.checkpointNames
  };
  std::vector<FileOut> files;
  for (size_t f = 0; f < split.size(); ++f) {
    FileOut out;
    out.name = stFileName(f, split.size());
    out.tmp = (fs::path(dir) / (".tmp-" + out.name)).string();
    std::vector<StEntry> mine;
    for (size_t i : split[f]) {
      mine.push_back(sorted[i]);
      out.names.push_back(order[i]);
    }
    out.layout = layOutStFile(mine, {{"format", "pt"}});
    files.push_back(std::move(out));
  }

  // Every rank writes into the files rank 0 made, so DIR must be one
  // directory for all of them: rank 0 leaves a token there that the others
  // must read back before they write (a directory local to each node would
  // otherwise leave holes in rank 0's files).
  std::string tokenPath = (fs::path(dir) / ".tmp-export-token").string();
  uint64_t token = 0;
  if (comm && comm->worldSize() > 1) {
    uint64_t mine = (uint64_t(std::random_device()()) << 32) ^
                    uint64_t(std::random_device()()) ^ uint64_t(::getpid());
    std::vector<uint64_t> all(size_t(comm->worldSize()));
    if (Status s = comm->allGather(&mine, all.data(), 1, DType::I64,
                                   comm->mesh().allAxes(), "the export");
        !s)
      return s.error();
    token = all[0];
  }

  // 1. Rank 0 makes the files: header written, size set.
  Status made = Status::ok();
  if (rank == 0)
    made = [&]() -> Status {
      std::error_code ec;
      fs::create_directories(dir, ec);
      if (ec)
        return Error(fmt::format("cannot create the export directory '{}': "
                                 "{}",
                                 dir, ec.message()));
      if (token)
        if (Status s = writeFileSynced(tokenPath, std::to_string(token)); !s)
          return s;
      for (const FileOut &f : files) {
        Expected<OutputFile> out = OutputFile::open(f.tmp);
        if (!out)
          return out.error();
        uint64_t n = f.layout.header.size();
        unsigned char size[8];
        for (int i = 0; i < 8; ++i)
          size[i] = (unsigned char)(n >> (8 * i));
        if (Status s = out->write(size, 8); !s)
          return s;
        if (Status s = out->write(f.layout.header.data(), n); !s)
          return s;
        if (Status s = out->close(); !s)
          return s;
        if (::truncate(f.tmp.c_str(), off_t(f.layout.size)) != 0)
          return Error(fmt::format("cannot size '{}' to {} bytes: {}", f.tmp,
                                   f.layout.size, std::strerror(errno)));
      }
      return Status::ok();
    }();
  if (Status s = agree(made, "create the export files"); !s)
    return s.error();

  // 2. Every rank writes the pieces it is the writer of.
  Status wrote = [&]() -> Status {
    if (token && rank != 0) {
      Expected<std::string> seen = readFile(tokenPath);
      if (!seen || *seen != std::to_string(token))
        return Error(fmt::format(
            "the export directory '{}' is not the one rank 0 writes into "
            "(rank 0's files are not visible here): export to a directory "
            "every rank shares, such as one on a shared file system",
            dir));
    }
    std::vector<float> values;
    for (const FileOut &f : files) {
      MappedFile map;
      bool mapped = false;
      for (size_t k = 0; k < f.names.size(); ++k) {
        const CheckpointName &n = m.checkpointNames[f.names[k]];
        const BufferDesc &b = *m.find(n.param);
        if (!m.holds(b, coords) ||
            (comm && !writesPiece(b, coords, m.pipelineAxis())))
          continue;
        if (!mapped) {
          Expected<MappedFile> opened = MappedFile::open(f.tmp, true);
          if (!opened)
            return opened.error();
          map = std::move(*opened);
          mapped = true;
        }
        float *dst = reinterpret_cast<float *>(map.data() +
                                               f.layout.offsets[k]);
        int64_t rows = b.globalShape.empty() ? 1 : b.globalShape[0];
        int64_t cols = b.globalShape.size() < 2 ? 1 : b.globalShape[1];
        forEachRun(b, m.mesh, coords,
                   [&](int64_t local, int64_t global, int64_t count) {
                     values.resize(size_t(count));
                     arena.readPart(b, size_t(local) * sizeof(float),
                                    size_t(count) * sizeof(float),
                                    values.data());
                     if (!n.transposed) {
                       std::memcpy(dst + global, values.data(),
                                   size_t(count) * sizeof(float));
                       return;
                     }
                     for (int64_t e = 0; e < count; ++e) {
                       int64_t g = global + e, r = g / cols, c = g % cols;
                       dst[c * rows + r] = values[size_t(e)];
                     }
                   });
      }
      if (mapped)
        if (Status s = map.sync(); !s)
          return s;
    }
    return Status::ok();
  }();
  if (Status s = agree(wrote, "write its part of the export"); !s)
    return s.error();

  // 3. Rank 0 publishes the files, the index, and removes what an earlier
  // export of another split left.
  std::vector<std::string> written;
  Status published = Status::ok();
  if (rank == 0)
    published = [&]() -> Status {
      std::vector<std::string> keep;
      for (const FileOut &f : files) {
        std::string final = (fs::path(dir) / f.name).string();
        if (Status s = renameSynced(f.tmp, final); !s)
          return s;
        keep.push_back(f.name);
        written.push_back(final);
      }
      std::string index =
          (fs::path(dir) / "model.safetensors.index.json").string();
      if (files.size() > 1) {
        if (Status s = writeFileSynced(index, stIndexJSON(sorted, split)); !s)
          return s;
        keep.push_back("model.safetensors.index.json");
        written.push_back(index);
      }
      if (!m.hfConfig.empty()) {
        std::string config = (fs::path(dir) / "config.json").string();
        if (Status s = writeFileSynced(config, m.hfConfig); !s)
          return s;
        written.push_back(config);
      }
      std::error_code ec;
      fs::remove(tokenPath, ec);
      for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
        std::string name = e.path().filename().string();
        bool ours = name == "model.safetensors" ||
                    name == "model.safetensors.index.json" ||
                    (name.rfind("model-", 0) == 0 &&
                     e.path().extension() == ".safetensors");
        if (ours && std::find(keep.begin(), keep.end(), name) == keep.end())
          fs::remove(e.path(), ec);
      }
      return syncDirectory(dir);
    }();
  if (Status s = agree(published, "publish the export"); !s)
    return s.error();
  return written;
}

} // namespace dtrt
