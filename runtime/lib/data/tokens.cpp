//===- tokens.cpp - llm.c token shards ------------------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Each shard is validated (magic, version, exact size) and mapped; a sample
// index is turned into (shard, window) by binary search over the running
// window counts. Shards of one source may mix 16- and 32-bit tokens, and
// those with a loss mask turn the targets it excludes into label -1. The header fields are little-endian as llm.c writes them;
// like llm.c, this reader assumes a little-endian host.
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/tokens.h"
#include "dtrt/data/source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "token shards are little-endian");

namespace dtrt {

namespace {

/// One read-only mapped shard.
struct Shard {
  std::string path;
  void *map = nullptr;
  size_t mapBytes = 0;
  /// uint16 or uint32 tokens.
  const void *tokens = nullptr;
  bool wide = false;
  /// One byte per token, 0 where the token is not a target; null: all are.
  const uint8_t *mask = nullptr;
  int64_t count = 0;

  int32_t token(int64_t i) const {
    return wide ? int32_t(static_cast<const uint32_t *>(tokens)[i])
                : int32_t(static_cast<const uint16_t *>(tokens)[i]);
  }
  int64_t windows = 0;
};

class TokenSource final : public DataSource {
public:
  TokenSource(std::vector<Shard> shards, const DataSpec &spec)
      : shards_(std::move(shards)), spec_(spec) {
    int64_t total = 0;
    for (const Shard &s : shards_) {
      firstSample_.push_back(total);
      total += s.windows;
      tokens_ += s.count;
    }
    size_ = total;
    fields_ = {{"x", DType::I32, spec.seq, false},
               {"y", DType::I32, spec.seq, true}};
  }

  ~TokenSource() override {
    for (Shard &s : shards_)
      munmap(s.map, s.mapBytes);
  }

  std::string describe() const override {
    return fmt::format("tokens, {} windows of {} + 1 from {} tokens in {} "
                       "shard{} ({})",
                       size_, spec_.seq, tokens_, shards_.size(),
                       shards_.size() == 1 ? "" : "s", spec_.path);
  }
  int64_t size() const override { return size_; }
  const std::vector<FieldInfo> &fields() const override { return fields_; }
  int64_t tokensPerSample() const override { return spec_.seq; }

  void read(size_t field, int64_t index, void *dst) const override {
    // The last shard whose first sample is <= index holds it.
    size_t s = size_t(
        std::upper_bound(firstSample_.begin(), firstSample_.end(), index) -
        firstSample_.begin() - 1);
    // x is the window's first seq tokens, y (field 1) the seq after them.
    const Shard &shard = shards_[s];
    int64_t first = (index - firstSample_[s]) * spec_.seq + (field == 1 ? 1 : 0);
    int32_t *out = static_cast<int32_t *>(dst);
    for (int64_t k = 0; k < spec_.seq; ++k)
      out[k] = shard.token(first + k);
    if (field == 1 && shard.mask)
      for (int64_t k = 0; k < spec_.seq; ++k)
        if (!shard.mask[first + k])
          out[k] = -1;
  }

private:
  std::vector<Shard> shards_;
  DataSpec spec_;
  std::vector<int64_t> firstSample_;
  int64_t size_ = 0, tokens_ = 0;
  std::vector<FieldInfo> fields_;
};

/// The files `pattern` names, sorted; a pattern without wildcards names itself
/// (so that a missing file is reported by open's errno).
Expected<std::vector<std::string>> expand(const std::string &pattern,
                                          const std::string &role) {
  if (pattern.find_first_of("*?[") == std::string::npos)
    return std::vector<std::string>{pattern};
  glob_t g;
  int rc = glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> paths;
  if (rc == 0)
    paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  globfree(&g);
  if (rc == GLOB_NOMATCH || paths.empty())
    return Error(fmt::format("no {} token shard matches '{}'; point to the "
                             "shards with --data {}=PATTERN",
                             role, pattern, role));
  if (rc != 0)
    return Error(
        fmt::format("cannot list the {} token shards '{}'", role, pattern));
  std::sort(paths.begin(), paths.end());
  return paths;
}

Expected<Shard> openShard(const std::string &path, const std::string &role) {
  std::string option = fmt::format("--data {}=PATH", role);
  Shard s;
  s.path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(fmt::format("cannot open the {} token shard '{}': {}; point "
                             "to it with {}",
                             role, path, std::strerror(errno), option));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(fmt::format("the {} token shard '{}' is not a regular file; "
                             "point to a shard with {}",
                             role, path, option));
  }
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("the {} token shard '{}' is not an llm.c token "
                             "shard: {}; point to a valid shard with {}",
                             role, path, why, option));
  };
  constexpr size_t kHeader = kTokenShardHeaderInts * sizeof(int32_t);
  size_t bytes = size_t(st.st_size);
  if (bytes < kHeader) {
    ::close(fd);
    return fail(fmt::format("it holds {} bytes, less than the {}-byte header",
                            bytes, kHeader));
  }
  s.map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (s.map == MAP_FAILED)
    return Error(fmt::format("cannot map the {} token shard '{}': {}", role,
                             path, std::strerror(errno)));
  s.mapBytes = bytes;
  int32_t header[3];
  std::memcpy(header, s.map, sizeof header);
  auto failUnmap = [&](const std::string &why) {
    munmap(s.map, s.mapBytes);
    return fail(why);
  };
  if (header[0] == kTokenShardMagic) {
    if (header[1] != kTokenShardVersion)
      return failUnmap(fmt::format("version {} is not {}", header[1],
                                   kTokenShardVersion));
  } else if (header[0] == kTokenShard32Magic) {
    if (header[1] != kTokenShard32Version)
      return failUnmap(fmt::format("version {} is not {}", header[1],
                                   kTokenShard32Version));
    s.wide = true;
  } else {
    return failUnmap(fmt::format("bad magic number {} (expected {} or {})",
                                 header[0], kTokenShardMagic,
                                 kTokenShard32Magic));
  }
  int32_t maskWord;
  std::memcpy(&maskWord, static_cast<char *>(s.map) +
                             kTokenShardMaskWord * sizeof(int32_t),
              sizeof maskWord);
  if (maskWord != 0 && maskWord != 1)
    return failUnmap(fmt::format("header word {} (dt's loss-mask flag) is {}, "
                                 "not 0 or 1",
                                 kTokenShardMaskWord, maskWord));
  s.count = header[2];
  uint64_t perToken = (s.wide ? 4 : 2) + (maskWord ? 1 : 0);
  uint64_t expected =
      kHeader + perToken * uint64_t(std::max(s.count, int64_t(0)));
  if (s.count < 0 || expected != bytes)
    return failUnmap(fmt::format("the header promises {} tokens{} ({} bytes) "
                                 "but the file holds {} bytes{}",
                                 s.count, maskWord ? " and their loss mask" : "",
                                 expected, bytes,
                                 expected > bytes ? " (truncated)" : ""));
  s.tokens = static_cast<char *>(s.map) + kHeader;
  if (maskWord)
    s.mask = reinterpret_cast<const uint8_t *>(static_cast<char *>(s.map) +
                                               kHeader +
                                               (s.wide ? 4 : 2) * s.count);
  return s;
}

} // namespace

Expected<std::unique_ptr<DataSource>> openTokenSource(const DataSpec &spec,
                                                      const std::string &role) {
  Expected<std::vector<std::string>> paths = expand(spec.path, role);
  if (!paths)
    return paths.error();
  std::vector<Shard> shards;
  auto unmapAll = [&] {
    for (Shard &s : shards)
      munmap(s.map, s.mapBytes);
  };
  for (const std::string &path : *paths) {
    Expected<Shard> shard = openShard(path, role);
    if (!shard) {
      unmapAll();
      return shard.error();
    }
    shard->windows = tokenWindows(shard->count, spec.seq);
    shards.push_back(*shard);
  }
  auto source = std::make_unique<TokenSource>(std::move(shards), spec);
  if (source->size() == 0)
    return Error(fmt::format("the {} token shards '{}' hold no window of {} + "
                             "1 tokens; use longer shards",
                             role, spec.path, spec.seq));
  return std::unique_ptr<DataSource>(std::move(source));
}

} // namespace dtrt
