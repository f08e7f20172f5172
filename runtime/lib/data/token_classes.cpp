//===- token_classes.cpp - Tokenized classification examples --------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The file format is in dtrt/data/token_classes.h. The whole file is checked
// when it is opened (sizes, offsets, labels), mapped read-only, and each
// example is padded or truncated to the program's seq as it is read: x the
// token ids (the pad id after the text), types the segment ids, mask 1 on
// tokens and 0 on padding (what an encoder's attention takes), y the label.
// Truncation keeps the template's trailing special tokens ([SEP]).
//
//===----------------------------------------------------------------------===//

#include "dtrt/data/token_classes.h"
#include "dtrt/data/source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "example files are little-endian");

namespace dtrt {

namespace {

class TokenClassesSource final : public DataSource {
public:
  TokenClassesSource(void *map, size_t bytes, const int32_t *header,
                     const DataSpec &spec)
      : map_(map), bytes_(bytes), spec_(spec) {
    examples_ = header[kTcExamples];
    width_ = header[kTcTokenBytes];
    pad_ = header[kTcPadId];
    trailing_ = header[kTcTrailing];
    classes_ = header[kTcClasses];
    const char *at = static_cast<const char *>(map) +
                     kTokenClassesHeaderInts * sizeof(int32_t);
    offsets_ = reinterpret_cast<const int64_t *>(at);
    at += sizeof(int64_t) * size_t(examples_ + 1);
    labels_ = reinterpret_cast<const int32_t *>(at);
    at += sizeof(int32_t) * size_t(examples_);
    tokens_ = at;
    at += size_t(width_) * size_t(offsets_[examples_]);
    types_ = reinterpret_cast<const uint8_t *>(at);
    fields_ = {{"x", DType::I32, spec.seq, false},
               {"types", DType::I32, spec.seq, false},
               {"mask", DType::F32, spec.seq, false},
               {"y", DType::I32, 1, true}};
  }
  ~TokenClassesSource() override { munmap(map_, bytes_); }

  std::string describe() const override {
    return fmt::format("token classes, {} examples in {} classes, padded or "
                       "truncated to {} tokens ({})",
                       examples_, classes_, spec_.seq, spec_.path);
  }
  int64_t size() const override { return examples_; }
  const std::vector<FieldInfo> &fields() const override { return fields_; }
  int64_t tokensPerSample() const override { return spec_.seq; }

  void read(size_t field, int64_t index, void *dst) const override {
    if (field == 3) {
      *static_cast<int32_t *>(dst) = labels_[index];
      return;
    }
    int64_t begin = offsets_[index], length = offsets_[index + 1] - begin;
    int64_t seq = spec_.seq;
    // Position k of the padded or truncated example: its token index in
    // the file, or -1 for padding.
    int64_t head =
        length <= seq ? length : std::max<int64_t>(seq - trailing_, 0);
    auto source = [&](int64_t k) -> int64_t {
      if (length <= seq)
        return k < length ? begin + k : -1;
      return k < head ? begin + k : begin + length - (seq - k);
    };
    for (int64_t k = 0; k < seq; ++k) {
      int64_t i = source(k);
      switch (field) {
      case 0:
        static_cast<int32_t *>(dst)[k] = i < 0 ? pad_ : token(i);
        break;
      case 1:
        static_cast<int32_t *>(dst)[k] = i < 0 ? 0 : types_[i];
        break;
      default:
        static_cast<float *>(dst)[k] = i < 0 ? 0.0f : 1.0f;
        break;
      }
    }
  }

private:
  int32_t token(int64_t i) const {
    return width_ == 4
               ? int32_t(reinterpret_cast<const uint32_t *>(tokens_)[i])
               : int32_t(reinterpret_cast<const uint16_t *>(tokens_)[i]);
  }

  void *map_;
  size_t bytes_;
  DataSpec spec_;
  int64_t examples_ = 0;
  int32_t width_ = 2, pad_ = 0, trailing_ = 0, classes_ = 0;
  const int64_t *offsets_ = nullptr;
  const int32_t *labels_ = nullptr;
  const char *tokens_ = nullptr;
  const uint8_t *types_ = nullptr;
  std::vector<FieldInfo> fields_;
};

} // namespace

Expected<std::unique_ptr<DataSource>>
openTokenClassesSource(const DataSpec &spec, const std::string &role) {
  const std::string &path = spec.path;
  std::string option = fmt::format("--data {}=PATH", role);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(fmt::format("cannot open the {} examples '{}': {}; write "
                             "them with dt-tokenize --classes, or point to "
                             "them with {}",
                             role, path, std::strerror(errno), option));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error(
        fmt::format("the {} examples '{}' are not a regular file", role, path));
  }
  size_t bytes = size_t(st.st_size);
  auto fail = [&](const std::string &why) {
    return Error(fmt::format("the {} examples '{}' are not a file dt-tokenize "
                             "--classes writes: {}; write them again, or "
                             "point to the right file with {}",
                             role, path, why, option));
  };
  constexpr size_t kHeader = kTokenClassesHeaderInts * sizeof(int32_t);
  if (bytes < kHeader) {
    ::close(fd);
    return fail(fmt::format("it holds {} bytes, less than the {}-byte header",
                            bytes, kHeader));
  }
  void *map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return Error(fmt::format("cannot map the {} examples '{}': {}", role, path,
                             std::strerror(errno)));
  auto failUnmap = [&](const std::string &why) {
    munmap(map, bytes);
    return fail(why);
  };
  const auto *h = static_cast<const int32_t *>(map);
  if (h[kTcMagic] != kTokenClassesMagic)
    return failUnmap(fmt::format("bad magic number {} (expected {})",
                                 h[kTcMagic], kTokenClassesMagic));
  if (h[kTcVersion] != kTokenClassesVersion)
    return failUnmap(fmt::format("version {} is not {}", h[kTcVersion],
                                 kTokenClassesVersion));
  int64_t n = h[kTcExamples];
  int32_t width = h[kTcTokenBytes];
  if (n <= 0)
    return failUnmap(fmt::format("it holds {} examples", n));
  if (width != 2 && width != 4)
    return failUnmap(fmt::format("tokens of {} bytes", width));
  if (h[kTcTrailing] < 0 || h[kTcTrailing] >= spec.seq)
    return failUnmap(fmt::format("{} trailing special tokens do not fit seq "
                                 "= {}",
                                 h[kTcTrailing], spec.seq));
  uint64_t tables = kHeader + 8 * uint64_t(n + 1) + 4 * uint64_t(n);
  if (bytes < tables)
    return failUnmap(fmt::format("its offset and label tables need {} bytes, "
                                 "the file holds {} (truncated)",
                                 tables, bytes));
  const auto *offsets =
      reinterpret_cast<const int64_t *>(static_cast<char *>(map) + kHeader);
  const auto *labels = reinterpret_cast<const int32_t *>(offsets + n + 1);
  if (offsets[0] != 0)
    return failUnmap("the first example does not start at token 0");
  for (int64_t i = 0; i < n; ++i) {
    if (offsets[i + 1] <= offsets[i])
      return failUnmap(fmt::format("example {} is empty or its offsets go "
                                   "backwards",
                                   i));
    if (labels[i] < 0 || labels[i] >= h[kTcClasses])
      return failUnmap(fmt::format("example {} has label {}, outside the {} "
                                   "classes of the header",
                                   i, labels[i], h[kTcClasses]));
  }
  uint64_t expected = tables + uint64_t(width + 1) * uint64_t(offsets[n]);
  if (expected != bytes)
    return failUnmap(fmt::format("its {} examples of {} tokens need {} bytes, "
                                 "the file holds {}{}",
                                 n, offsets[n], expected, bytes,
                                 expected > bytes ? " (truncated)" : ""));
  return std::unique_ptr<DataSource>(
      std::make_unique<TokenClassesSource>(map, bytes, h, spec));
}

} // namespace dtrt
