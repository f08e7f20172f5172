//===- safetensors.cpp - Hugging Face safetensors files -------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fnmatch.h>
#include <filesystem>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace dtrt {

namespace {

/// The reference reader's bound on N (MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeInfo {
  const char *name;
  unsigned bits;
};

constexpr DTypeInfo kDTypes[] = {
    {"BOOL", 8},     {"U8", 8},          {"I8", 8},          {"F8_E5M2", 8},
    {"F8_E4M3", 8},  {"F8_E8M0", 8},     {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
    {"F4", 4},       {"F6_E2M3", 6},     {"F6_E3M2", 6},     {"I16", 16},
    {"U16", 16},     {"F16", 16},        {"BF16", 16},       {"I32", 32},
    {"U32", 32},     {"F32", 32},        {"C64", 64},        {"F64", 64},
    {"I64", 64},     {"U64", 64}};

std::string systemError(const std::string &what, const std::string &path) {
  return fmt::format("cannot {} '{}': {}", what, path, std::strerror(errno));
}

/// Reads exactly `n` bytes at `offset`.
Status preadAll(int fd, void *dst, size_t n, uint64_t offset,
                const std::string &path) {
  char *p = static_cast<char *>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return Error(systemError("read", path));
    if (got == 0)
      return Error(fmt::format("'{}' ends early: it is truncated", path));
    p += got;
    n -= size_t(got);
    offset += uint64_t(got);
  }
  return Status::ok();
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13); // inf or nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // A subnormal half is a normal float: shift the mantissa up.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

} // namespace

int64_t StTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

unsigned stDTypeBits(std::string_view dtype) {
  for (const DTypeInfo &d : kDTypes)
    if (dtype == d.name)
      return d.bits;
  return 0;
}

bool stIsFloat(std::string_view dtype) {
  return dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64";
}

Expected<StHeader> parseStHeader(std::string_view header,
                                 uint64_t headerBytes, uint64_t fileSize,
                                 const std::string &path) {
  auto bad = [&](const std::string &why) {
    return Error(fmt::format("'{}' is not a valid safetensors file: {}", path,
                             why));
  };
  ojson j;
  try {
    j = ojson::parse(header);
  } catch (const std::exception &e) {
    return bad(fmt::format("its header is not JSON ({})", e.what()));
  }
  if (!j.is_object())
    return bad("its header is not a JSON object");
  StHeader h;
  h.dataStart = 8 + headerBytes;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &name = it.key();
    const ojson &v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return bad("'__metadata__' is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return bad(fmt::format("'__metadata__' entry '{}' is not a string",
                                 m.key()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    auto badTensor = [&](const std::string &why) {
      return bad(fmt::format("tensor '{}': {}", name, why));
    };
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      return badTensor("needs 'dtype', 'shape' and 'data_offsets'");
    StTensor t;
    t.name = name;
    if (!v["dtype"].is_string())
      return badTensor("'dtype' is not a string");
    t.dtype = v["dtype"].get<std::string>();
    unsigned bits = stDTypeBits(t.dtype);
    if (bits == 0)
      return badTensor(fmt::format("unknown dtype '{}'", t.dtype));
    const ojson &shape = v["shape"], &offsets = v["data_offsets"];
    if (!shape.is_array())
      return badTensor("'shape' is not a list");
    // Sizes fit in 48 bits (the format's schema), so products stay exact.
    constexpr int64_t kMax = int64_t(1) << 48;
    int64_t elements = 1;
    for (const ojson &d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() >= uint64_t(kMax))
        return badTensor("'shape' holds something other than a size");
      t.shape.push_back(d.get<int64_t>());
      elements = t.shape.back() == 0 ? 0 : elements * t.shape.back();
      if (elements >= kMax)
        return badTensor("it has more than 2^48 elements");
    }
    if (!offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return badTensor("'data_offsets' is not [begin, end]");
    t.begin = offsets[0].get<uint64_t>();
    t.end = offsets[1].get<uint64_t>();
    if (t.end < t.begin)
      return badTensor("'data_offsets' ends before it begins");
    uint64_t bitsTotal = uint64_t(elements) * bits;
    if (bitsTotal % 8 != 0 || t.end - t.begin != bitsTotal / 8)
      return badTensor(fmt::format(
          "its {} bytes do not hold {} {} elements", t.end - t.begin,
          elements, t.dtype));
    h.tensors.push_back(std::move(t));
  }
  // The buffer is the tensors back to back from 0, as the reference reader
  // requires; anything else (gaps, overlaps, trailing bytes) is corruption.
  std::vector<const StTensor *> order;
  for (const StTensor &t : h.tensors)
    order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const StTensor *a, const StTensor *b) {
              return a->begin != b->begin ? a->begin < b->begin
                                          : a->end < b->end;
            });
  uint64_t at = 0;
  for (const StTensor *t : order) {
    if (t->begin != at)
      return bad(fmt::format("tensor '{}' starts at byte {} of the data, "
                             "expected {} (a gap or an overlap)",
                             t->name, t->begin, at));
    at = t->end;
  }
  if (h.dataStart + at != fileSize)
    return bad(fmt::format(
        "the header describes {} bytes of tensors but the file holds {}{}",
        at, fileSize < h.dataStart ? 0 : fileSize - h.dataStart,
        h.dataStart + at > fileSize ? ": it is truncated" : ""));
  return h;
}

Expected<StHeader> readStHeader(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(systemError("open", path));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Error(systemError("stat", path));
  uint64_t size = uint64_t(st.st_size);
  if (size < 8)
    return Error(fmt::format("'{}' is not a valid safetensors file: it has "
                             "{} bytes, fewer than the 8 of the header size",
                             path, size));
  unsigned char sizeBytes[8];
  if (Status s = preadAll(fd, sizeBytes, 8, 0, path); !s)
    return s.error();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | sizeBytes[i];
  if (n > kMaxHeaderBytes || n > size - 8)
    return Error(fmt::format("'{}' is not a valid safetensors file: its "
                             "header size {} is beyond {}",
                             path, n,
                             n > kMaxHeaderBytes ? "the format's 100 MB"
                                                 : "the end of the file"));
  std::string header(size_t(n), '\0');
  if (Status s = preadAll(fd, header.data(), size_t(n), 8, path); !s)
    return s.error();
  return parseStHeader(header, n, size, path);
}

Expected<StSet> StSet::open(const std::string &path) {
  std::error_code ec;
  std::string index;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    fs::path single = fs::path(path) / "model.safetensors";
    fs::path idx = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(idx, ec))
      index = idx.string();
    else if (fs::exists(single, ec))
      files.push_back(single.string());
    else
      return Error(fmt::format("'{}' holds neither model.safetensors nor "
                               "model.safetensors.index.json",
                               path));
  } else if (!fs::exists(path, ec)) {
    return Error(fmt::format("no such file or directory: '{}'", path));
  } else if (fs::path(path).extension() == ".json") {
    index = path;
  } else {
    files.push_back(path);
  }

  StSet set;
  // Per file, the names the index says it holds (empty without an index).
  std::vector<std::set<std::string>> promised;
  if (!index.empty()) {
    std::string text;
    {
      int fd = ::open(index.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        return Error(systemError("open", index));
      struct stat st;
      ::fstat(fd, &st);
      text.resize(size_t(st.st_size));
      Status s = preadAll(fd, text.data(), text.size(), 0, index);
      ::close(fd);
      if (!s)
        return s.error();
    }
    ojson j;
    try {
      j = ojson::parse(text);
    } catch (const std::exception &e) {
      return Error(fmt::format("'{}' is not JSON: {}", index, e.what()));
    }
    if (!j.is_object() || !j.contains("weight_map") ||
        !j["weight_map"].is_object())
      return Error(fmt::format("'{}' has no 'weight_map' object; it is not a "
                               "safetensors index",
                               index));
    fs::path dir = fs::path(index).parent_path();
    std::map<std::string, size_t> fileIndex;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return Error(fmt::format("'{}': the weight map's entry for '{}' is "
                                 "not a file name",
                                 index, it.key()));
      std::string file = it.value().get<std::string>();
      if (file.find('/') != std::string::npos)
        return Error(fmt::format("'{}': '{}' names a file outside the "
                                 "index's directory",
                                 index, file));
      auto [pos, inserted] = fileIndex.try_emplace(file, files.size());
      if (inserted) {
        files.push_back((dir / file).string());
        promised.emplace_back();
      }
      promised[pos->second].insert(it.key());
    }
    if (files.empty())
      return Error(fmt::format("'{}' lists no tensors", index));
  }

  for (size_t f = 0; f < files.size(); ++f) {
    Expected<StHeader> h = readStHeader(files[f]);
    if (!h)
      return h.error();
    set.files_.push_back(files[f]);
    set.dataStarts_.push_back(h->dataStart);
    for (StTensor &t : h->tensors) {
      if (!promised.empty() && !promised[f].count(t.name))
        continue; // The index names its file; an extra copy is ignored.
      t.file = f;
      auto [it, inserted] = set.byName_.try_emplace(t.name, set.tensors_.size());
      if (!inserted)
        return Error(fmt::format("tensor '{}' is in both '{}' and '{}'",
                                 t.name, files[set.tensors_[it->second].file],
                                 files[f]));
      set.tensors_.push_back(std::move(t));
    }
    if (!promised.empty())
      for (const std::string &name : promised[f])
        if (!set.byName_.count(name))
          return Error(fmt::format("'{}' says tensor '{}' is in '{}', which "
                                   "does not hold it",
                                   index, name, files[f]));
  }
  return set;
}

const StTensor *StSet::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &tensors_[it->second];
}

void stToF32(std::string_view dtype, const void *src, int64_t count,
             float *dst) {
  const unsigned char *p = static_cast<const unsigned char *>(src);
  if (dtype == "F32") {
    std::memcpy(dst, p, size_t(count) * 4);
  } else if (dtype == "BF16") {
    for (int64_t i = 0; i < count; ++i) {
      uint32_t bits = uint32_t(p[2 * i] | (p[2 * i + 1] << 8)) << 16;
      std::memcpy(&dst[i], &bits, 4);
    }
  } else if (dtype == "F16") {
    for (int64_t i = 0; i < count; ++i)
      dst[i] = halfToFloat(uint16_t(p[2 * i] | (p[2 * i + 1] << 8)));
  } else if (dtype == "F64") {
    for (int64_t i = 0; i < count; ++i) {
      double d;
      std::memcpy(&d, p + 8 * i, 8);
      dst[i] = float(d);
    }
  }
}

StFileLayout layOutStFile(const std::vector<StEntry> &entries,
                          const std::map<std::string, std::string> &metadata) {
  // The reference writer's order: larger elements first, then by name.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    unsigned ba = stDTypeBits(entries[a].dtype),
             bb = stDTypeBits(entries[b].dtype);
    return ba != bb ? ba > bb : entries[a].name < entries[b].name;
  });
  StFileLayout l;
  std::vector<uint64_t> begin(entries.size()), end(entries.size());
  uint64_t at = 0;
  for (size_t i : order) {
    int64_t n = 1;
    for (int64_t d : entries[i].shape)
      n *= d;
    begin[i] = at;
    at += uint64_t(n) * stDTypeBits(entries[i].dtype) / 8;
    end[i] = at;
  }
  ojson j = ojson::object();
  if (!metadata.empty())
    j["__metadata__"] = metadata;
  for (size_t i : order)
    j[entries[i].name] = {{"dtype", entries[i].dtype},
                          {"shape", entries[i].shape},
                          {"data_offsets", {begin[i], end[i]}}};
  l.header = j.dump();
  l.header.append((8 - l.header.size() % 8) % 8, ' ');
  l.dataStart = 8 + l.header.size();
  for (size_t i = 0; i < entries.size(); ++i)
    l.offsets.push_back(l.dataStart + begin[i]);
  l.size = l.dataStart + at;
  return l;
}

std::vector<std::vector<size_t>>
splitStEntries(const std::vector<StEntry> &entries, uint64_t limit) {
  std::vector<std::vector<size_t>> files;
  uint64_t current = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    int64_t n = 1;
    for (int64_t d : entries[i].shape)
      n *= d;
    uint64_t bytes = uint64_t(n) * stDTypeBits(entries[i].dtype) / 8;
    if (bytes > limit) {
      files.push_back({i});
      current = limit; // nothing joins an oversized tensor's file
      continue;
    }
    if (files.empty() || current + bytes > limit) {
      files.emplace_back();
      current = 0;
    }
    files.back().push_back(i);
    current += bytes;
  }
  return files;
}

std::string stFileName(size_t index, size_t n) {
  if (n == 1)
    return "model.safetensors";
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, n);
}

std::string stIndexJSON(const std::vector<StEntry> &entries,
                        const std::vector<std::vector<size_t>> &files) {
  nlohmann::json map = nlohmann::json::object(); // sorted keys, as HF dumps
  uint64_t total = 0;
  for (size_t f = 0; f < files.size(); ++f)
    for (size_t i : files[f]) {
      map[entries[i].name] = stFileName(f, files.size());
      int64_t n = 1;
      for (int64_t d : entries[i].shape)
        n *= d;
      total += uint64_t(n) * stDTypeBits(entries[i].dtype) / 8;
    }
  nlohmann::json j = {{"metadata", {{"total_size", total}}},
                      {"weight_map", map}};
  return j.dump(2) + "\n";
}

std::string stShapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + "]";
}

namespace {

/// Tensors real checkpoints carry that are not parameters of any model:
/// GPT-2's causal-mask buffers, BERT's position ids, LLaMA's rotary
/// frequencies (finetune-formats.md, "Conversion gotchas"), a batch norm's
/// count of training passes (dt's export writes its own).
bool isKnownBuffer(const std::string &name) {
  auto endsWith = [&](std::string_view tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return endsWith(".attn.bias") || endsWith(".attn.masked_bias") ||
         name == "position_ids" || endsWith(".position_ids") ||
         endsWith(".token_type_ids") || endsWith(".rotary_emb.inv_freq") ||
         endsWith(".num_batches_tracked");
}

/// The tensor `name` in `set`, or under the old name TensorFlow-era BERT
/// checkpoints give a layer norm's parameters (`LayerNorm.gamma` for
/// `LayerNorm.weight`, `LayerNorm.beta` for `LayerNorm.bias`), which
/// transformers also accepts.
const StTensor *findAliased(const StSet &set, const std::string &name) {
  if (const StTensor *t = set.find(name))
    return t;
  auto swap = [&](std::string_view from, std::string_view to) -> std::string {
    if (name.size() < from.size() ||
        name.compare(name.size() - from.size(), from.size(), from) != 0)
      return "";
    return name.substr(0, name.size() - from.size()) + std::string(to);
  };
  for (auto [from, to] : {std::pair{"LayerNorm.weight", "LayerNorm.gamma"},
                          std::pair{"LayerNorm.bias", "LayerNorm.beta"}})
    if (std::string alias = swap(from, to); !alias.empty())
      return set.find(alias);
  return nullptr;
}

} // namespace

StMatch matchStTensors(const StSet &set, const std::vector<StWant> &wants,
                       const std::vector<std::string> &ignore) {
  StMatch m;
  // The prefix under which most wanted names exist; no prefix on a tie.
  size_t best = 0;
  // bert., distilbert.: an encoder inside a task model (BertForPreTraining's
  // file read by nn.Bert).
  for (const char *prefix :
       {"", "transformer.", "model.", "bert.", "distilbert."}) {
    size_t hits = 0;
    for (const StWant &w : wants)
      hits += findAliased(set, prefix + w.name) != nullptr;
    if (hits > best) {
      best = hits;
      m.prefix = prefix;
    }
  }
  std::set<std::string> taken;
  for (const StWant &w : wants) {
    // A model with a head keeps the head outside its base model's prefix
    // (LlamaForCausalLM's `lm_head.weight` beside `model.layers...`).
    const StTensor *t = findAliased(set, m.prefix + w.name);
    if (!t && !m.prefix.empty())
      t = findAliased(set, w.name);
    m.found.push_back(t);
    if (!t)
      continue;
    taken.insert(t->name);
    if (t->shape != w.shape)
      m.problems.push_back(fmt::format(
          "'{}' (for {}) is {} in the file, the model's is {}", t->name,
          w.param, stShapeText(t->shape), stShapeText(w.shape)));
    else if (!stIsFloat(t->dtype))
      m.problems.push_back(fmt::format("'{}' (for {}) holds {} elements, "
                                       "not floating-point weights",
                                       t->name, w.param, t->dtype));
  }
  for (const StTensor &t : set.tensors()) {
    if (taken.count(t.name))
      continue;
    bool ignored = isKnownBuffer(t.name);
    for (const std::string &glob : ignore)
      ignored |= ::fnmatch(glob.c_str(), t.name.c_str(), 0) == 0;
    if (ignored)
      m.skipped.push_back(t.name);
    else
      m.problems.push_back(fmt::format(
          "'{}' {} in the file is no parameter of the model", t.name,
          stShapeText(t.shape)));
  }
  // File tensors nothing takes beside parameters the file lacks: most
  // likely a name that maps wrong, so say how the first was looked for.
  bool unexpected = m.problems.size() > 0 &&
                    m.problems.back().find("is no parameter") != std::string::npos;
  for (size_t i = 0; i < wants.size() && unexpected && best > 0; ++i)
    if (!m.found[i]) {
      size_t missing = size_t(std::count(m.found.begin(), m.found.end(),
                                         nullptr));
      m.problems.insert(
          m.problems.begin(),
          fmt::format("the file lacks {} of the model's parameters, such as "
                      "{} (looked for as '{}')",
                      missing, wants[i].param, m.prefix + wants[i].name));
      break;
    }
  if (best == 0 && !wants.empty())
    m.problems.insert(m.problems.begin(),
                      fmt::format("the file holds none of the model's "
                                  "parameters (the first is '{}', looked for "
                                  "as '{}')",
                                  wants[0].param, wants[0].name));
  return m;
}

} // namespace dtrt
