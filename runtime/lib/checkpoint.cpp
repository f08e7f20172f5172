//===- checkpoint.cpp - Atomic, verified checkpoints ----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The layout and the atomicity protocol are described in dtrt/checkpoint.h.
// Tensors are copied out of (and into) the arena in chunks of at most
// kChunkBytes through a reusable host buffer, their CRC32 computed as they
// pass, so a checkpoint costs 64 MiB of extra memory whatever the model (a
// 4 GiB embedding included).
//
//===----------------------------------------------------------------------===//

#include "dtrt/checkpoint.h"

#include "dtrt/abi.h"
#include "dtrt/file.h"
#include "dtrt/rng.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <zlib.h>

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace dtrt {

static constexpr const char *kPrefix = "step_";
static constexpr const char *kTmpPrefix = ".tmp-";
static constexpr size_t kTensorAlign = 64;

std::string checkpointName(int64_t step) {
  return fmt::format("{}{:08d}", kPrefix, step);
}

static bool isCheckpointTensor(const BufferDesc &b) {
  return b.role == Role::Param || b.role == Role::State;
}

constexpr size_t kChunkBytes = size_t(64) << 20;

static uint32_t crc32Update(uint32_t crc, const char *bytes, size_t n) {
  return uint32_t(crc32_z(crc, reinterpret_cast<const Bytef *>(bytes), n));
}

static std::string utcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Expected<std::string> writeCheckpoint(const std::string &root, Arena &arena,
                                      const TrainPosition &pos) {
  const Manifest &m = arena.manifest();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    return Error(fmt::format("cannot create the checkpoint directory '{}': {}",
                             root, ec.message()));
  std::string name = checkpointName(pos.step);
  std::string final = (fs::path(root) / name).string();
  std::string tmp = (fs::path(root) / (kTmpPrefix + name)).string();
  if (fs::exists(final, ec))
    return Error(fmt::format("checkpoint '{}' already exists; refusing to "
                             "overwrite it",
                             final));
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec))
    return Error(fmt::format("cannot create '{}': {}", tmp, ec.message()));

  // tensors.bin, with each tensor's CRC computed from the very bytes written.
  Expected<OutputFile> out = OutputFile::open(tmp + "/tensors.bin");
  if (!out)
    return out.error();
  ojson tensors = ojson::array();
  std::vector<char> host;
  static const char zeros[kTensorAlign] = {};
  size_t offset = 0;
  for (const BufferDesc &b : m.buffers) {
    if (!isCheckpointTensor(b))
      continue;
    size_t aligned = (offset + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    if (Status s = out->write(zeros, aligned - offset); !s)
      return s.error();
    offset = aligned;
    uint32_t crc = crc32Update(0, nullptr, 0);
    for (size_t from = 0; from < b.bytes; from += kChunkBytes) {
      size_t n = std::min(kChunkBytes, b.bytes - from);
      host.resize(n);
      arena.readPart(b, from, n, host.data());
      crc = crc32Update(crc, host.data(), n);
      if (Status s = out->write(host.data(), n); !s)
        return s.error();
    }
    tensors.push_back({{"name", b.name},
                       {"role", roleName(b.role)},
                       {"dtype", dtypeName(b.dtype)},
                       {"shape", b.shape},
                       {"offset", offset},
                       {"bytes", b.bytes},
                       {"crc32", crc}});
    offset += b.bytes;
  }
  if (Status s = out->sync(); !s)
    return s.error();
  if (Status s = out->close(); !s)
    return s.error();

  ojson j = {
      {"format", "dt-checkpoint"},
      {"version", kCheckpointFormatVersion},
      {"program", m.name},
      {"source", m.source},
      {"abi", m.abi},
      {"runtime", fmt::format("libdtrt {}", kRuntimeVersion)},
      {"created", utcNow()},
      {"step", pos.step},
      {"total_steps", pos.totalSteps},
      {"epoch", pos.epoch},
      {"epoch_step", pos.epochStep},
      {"steps_per_epoch", pos.stepsPerEpoch},
      {"seed", pos.seed},
      {"train_samples", pos.trainSamples},
      // The data order is a pure function of (seed, epoch): this is the
      // generator state epoch `epoch` starts from (dtrt/data/order.h).
      {"data_order",
       {{"algorithm", "fisher-yates/splitmix64"},
        {"epoch", pos.epoch},
        {"state",
         randomBits(streamKey(pos.seed, "data-order"), uint64_t(pos.epoch))}}},
      {"elapsed_s", pos.elapsedSeconds},
      {"tensors_file", "tensors.bin"},
      {"tensors_bytes", offset},
      {"tensors", tensors},
  };
  if (Status s = writeFileSynced(tmp + "/manifest.json", j.dump(2) + "\n"); !s)
    return s.error();
  if (Status s = syncDirectory(tmp); !s)
    return s.error();
  if (Status s = renameSynced(tmp, final); !s)
    return s.error();
  return final;
}

namespace {

/// Parses a checkpoint's manifest.json; fails if it is not a checkpoint.
Expected<ojson> readCheckpointManifest(const std::string &dir) {
  std::string path = dir + "/manifest.json";
  Expected<std::string> text = readFile(path);
  if (!text)
    return text.error();
  ojson j = ojson::parse(*text, nullptr, /*allow_exceptions=*/false);
  auto isInt = [&](const char *key) {
    return j.contains(key) && j[key].is_number_integer();
  };
  if (j.is_discarded() || !j.is_object() || !j.contains("format") ||
      j["format"] != "dt-checkpoint" || !isInt("step") || !isInt("version") ||
      !j.contains("tensors") || !j["tensors"].is_array())
    return Error(fmt::format("'{}' is not a dt checkpoint manifest", path));
  if (j["version"] != kCheckpointFormatVersion)
    return Error(fmt::format("'{}' has checkpoint format version {}; this "
                             "runtime reads version {}",
                             path, j["version"].dump(),
                             kCheckpointFormatVersion));
  return j;
}

} // namespace

/// The step_* directories of `root`, complete (with a readable manifest) or
/// not, sorted by step.
static Expected<std::vector<CheckpointRef>> scan(const std::string &root,
                                                 bool complete) {
  std::vector<CheckpointRef> found;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return found;
  for (const fs::directory_entry &e : fs::directory_iterator(root, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0 || !e.is_directory())
      continue;
    Expected<ojson> j = readCheckpointManifest(e.path().string());
    if (complete && j)
      found.push_back({e.path().string(), (*j)["step"].get<int64_t>()});
    if (!complete && !j)
      found.push_back(
          {e.path().string(), std::atoll(name.c_str() + std::strlen(kPrefix))});
  }
  if (ec)
    return Error(fmt::format("cannot list the checkpoint directory '{}': {}",
                             root, ec.message()));
  std::sort(found.begin(), found.end(),
            [](const CheckpointRef &a, const CheckpointRef &b) {
              return a.step < b.step;
            });
  return found;
}

Expected<std::vector<CheckpointRef>> listCheckpoints(const std::string &root) {
  return scan(root, /*complete=*/true);
}

Expected<std::vector<CheckpointRef>>
listIncompleteCheckpoints(const std::string &root) {
  return scan(root, /*complete=*/false);
}

static Expected<TrainPosition> load(const std::string &dir, Arena &arena) {
  const Manifest &m = arena.manifest();
  Expected<ojson> parsed = readCheckpointManifest(dir);
  if (!parsed) {
    std::error_code ec;
    if (fs::is_directory(dir, ec) && !fs::exists(dir + "/manifest.json", ec)) {
      // A common slip: the checkpoint root instead of one checkpoint.
      Expected<std::vector<CheckpointRef>> inside = listCheckpoints(dir);
      std::string hint =
          inside && !inside->empty()
              ? fmt::format("; it holds checkpoints: pass one of them, e.g. "
                            "--resume {}, or use --checkpoint-dir {} "
                            "--resume auto",
                            inside->back().path, dir)
              : "";
      return Error(
          fmt::format("cannot resume: '{}' is not a checkpoint (it has no "
                      "manifest.json){}",
                      dir, hint));
    }
    return parsed.error().withContext("cannot resume");
  }
  const ojson &j = *parsed;
  auto otherProgram = [&](const std::string &what) {
    return Error(fmt::format("cannot resume from '{}': {}; the checkpoint is "
                             "from another program (or another version of "
                             "'{}'): resume from a checkpoint of this program "
                             "or start a fresh run in another "
                             "--checkpoint-dir",
                             dir, what, m.name));
  };
  std::string program = j.value("program", "");
  if (program != m.name)
    return otherProgram(fmt::format(
        "it was written by program '{}', this is '{}'", program, m.name));

  // Every param/state tensor of this program, and no other, with the same
  // dtype and shape.
  std::vector<const ojson *> entries;
  for (const BufferDesc &b : m.buffers) {
    if (!isCheckpointTensor(b))
      continue;
    const ojson *entry = nullptr;
    for (const ojson &t : j["tensors"])
      if (t.value("name", "") == b.name)
        entry = &t;
    if (!entry)
      return otherProgram(
          fmt::format("it has no tensor '{}' ({})", b.name, roleName(b.role)));
    std::vector<int64_t> shape = entry->value("shape", std::vector<int64_t>{});
    std::string dtype = entry->value("dtype", "");
    if (dtype != dtypeName(b.dtype) || shape != b.shape)
      return otherProgram(fmt::format(
          "tensor '{}' is {}[{}] in the checkpoint but {}[{}] in this program",
          b.name, dtype, fmt::join(shape, ", "), dtypeName(b.dtype),
          fmt::join(b.shape, ", ")));
    entries.push_back(entry);
  }
  if (entries.size() != j["tensors"].size()) {
    for (const ojson &t : j["tensors"]) {
      std::string name = t.value("name", "");
      const BufferDesc *b = m.find(name);
      if (!b || !isCheckpointTensor(*b))
        return otherProgram(fmt::format(
            "it holds tensor '{}', which this program lacks", name));
    }
  }

  std::string binPath = dir + "/tensors.bin";
  std::ifstream bin(binPath, std::ios::binary);
  if (!bin)
    return Error(fmt::format("cannot resume from '{}': cannot open '{}'; the "
                             "checkpoint is damaged: delete it and resume "
                             "from an older one",
                             dir, binPath));
  std::error_code ec;
  uint64_t fileBytes = fs::file_size(binPath, ec);
  uint64_t expectBytes = j.value("tensors_bytes", uint64_t(0));
  if (ec || fileBytes != expectBytes)
    return Error(fmt::format("cannot resume from '{}': '{}' holds {} bytes, "
                             "the checkpoint's manifest says {} (truncated "
                             "or damaged); delete '{}' and resume from an "
                             "older checkpoint",
                             dir, binPath, fileBytes, expectBytes, dir));

  std::vector<char> host;
  size_t i = 0;
  for (const BufferDesc &b : m.buffers) {
    if (!isCheckpointTensor(b))
      continue;
    const ojson &t = *entries[i++];
    uint64_t offset = t.value("offset", uint64_t(0));
    uint64_t bytes = t.value("bytes", uint64_t(0));
    if (bytes != b.bytes || offset > fileBytes || bytes > fileBytes - offset)
      return Error(fmt::format("cannot resume from '{}': tensor '{}' lies "
                               "outside '{}'; the checkpoint is damaged: "
                               "delete it and resume from an older one",
                               dir, b.name, binPath));
    // Chunks go into the arena as they are read; a CRC mismatch then fails the
    // resume, and the partly restored arena is never trained on.
    bin.seekg(std::streamoff(offset));
    uint32_t actual = crc32Update(0, nullptr, 0);
    for (size_t from = 0; from < b.bytes; from += kChunkBytes) {
      size_t n = std::min(kChunkBytes, b.bytes - from);
      host.resize(n);
      bin.read(host.data(), std::streamsize(n));
      if (!bin)
        return Error(fmt::format("cannot resume from '{}': cannot read tensor "
                                 "'{}' from '{}'",
                                 dir, b.name, binPath));
      actual = crc32Update(actual, host.data(), n);
      arena.writePart(b, from, n, host.data());
    }
    uint32_t stored = t.value("crc32", uint32_t(0));
    if (stored != actual)
      return Error(fmt::format(
          "cannot resume from '{}': tensor '{}' is corrupt (CRC32 {:08x}, the "
          "checkpoint recorded {:08x}); delete '{}' and resume from an older "
          "checkpoint (--resume auto then takes the newest remaining one), "
          "or pass another with --resume DIR",
          dir, b.name, actual, stored, dir));
  }

  TrainPosition pos;
  pos.step = j["step"].get<int64_t>();
  pos.totalSteps = j.value("total_steps", int64_t(0));
  pos.epoch = j.value("epoch", int64_t(0));
  pos.epochStep = j.value("epoch_step", int64_t(0));
  pos.stepsPerEpoch = j.value("steps_per_epoch", int64_t(0));
  pos.seed = j.value("seed", uint64_t(0));
  pos.trainSamples = j.value("train_samples", int64_t(0));
  pos.elapsedSeconds = j.value("elapsed_s", 0.0);
  if (const BufferDesc *step = m.find("step");
      step && arena.readI64(*step) != pos.step)
    return Error(fmt::format("cannot resume from '{}': its step counter "
                             "holds {} but its manifest says step {}; the "
                             "checkpoint is damaged",
                             dir, arena.readI64(*step), pos.step));
  return pos;
}

Expected<TrainPosition> loadCheckpoint(const std::string &dir, Arena &arena) {
  // A hand-edited or damaged manifest.json may hold values of the wrong JSON
  // type, which nlohmann reports by throwing.
  try {
    return load(dir, arena);
  } catch (const nlohmann::json::exception &e) {
    return Error(fmt::format("cannot resume from '{}': its manifest.json is "
                             "malformed ({}); delete it and resume from an "
                             "older checkpoint",
                             dir, e.what()));
  }
}

Status pruneCheckpoints(const std::string &root, int64_t keep) {
  if (keep <= 0)
    return Status::ok();
  Expected<std::vector<CheckpointRef>> all = listCheckpoints(root);
  if (!all)
    return all.error();
  for (size_t i = 0; i + size_t(keep) < all->size(); ++i) {
    std::error_code ec;
    fs::remove_all((*all)[i].path, ec);
    if (ec)
      return Error(fmt::format("cannot delete the old checkpoint '{}': {}",
                               (*all)[i].path, ec.message()));
  }
  return Status::ok();
}

Status removeCheckpointLeftovers(const std::string &root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return Status::ok();
  std::vector<fs::path> leftovers;
  for (const fs::directory_entry &e : fs::directory_iterator(root, ec))
    if (e.path().filename().string().rfind(kTmpPrefix, 0) == 0)
      leftovers.push_back(e.path());
  for (const fs::path &p : leftovers) {
    fs::remove_all(p, ec);
    if (ec)
      return Error(fmt::format("cannot delete the incomplete checkpoint '{}': "
                               "{}",
                               p.string(), ec.message()));
  }
  return Status::ok();
}

} // namespace dtrt
