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
#include "dtrt/layout.h"
#include "dtrt/rng.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <zlib.h>

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace dtrt {

static constexpr const char *kPrefix = "step_";
static constexpr const char *kTmpPrefix = ".tmp-";
static constexpr size_t kTensorAlign = 64;

Status agreeAcrossRanks(Communicator &comm, const Status &mine,
                        const char *stage, const char *outcome) {
  // The others may still be reading or writing: wait as long as I/O may.
  IoWait wait(comm);
  int32_t ok = mine ? 1 : 0;
  std::vector<int32_t> all(size_t(comm.worldSize()));
  if (Status s = comm.allGather(&ok, all.data(), 1, DType::I32,
                                comm.mesh().allAxes(), stage);
      !s)
    return s;
  if (!mine)
    return mine;
  for (int r = 0; r < comm.worldSize(); ++r)
    if (!all[size_t(r)])
      return Error(fmt::format("rank {} could not {} (its message says why); "
                               "{}",
                               r, stage, outcome));
  return Status::ok();
}

bool writesPiece(const BufferDesc &b, const std::vector<int> &coords,
                 int pipelineAxis) {
  for (size_t a = 0; a < coords.size(); ++a) {
    bool used = false;
    if (b.layout)
      for (const DimLayout &d : b.layout->dims)
        used |= std::find(d.axes.begin(), d.axes.end(), int(a)) != d.axes.end();
    int writer = int(a) == pipelineAxis && b.ppRank >= 0 ? b.ppRank : 0;
    if (!used && coords[a] != writer)
      return false;
  }
  return true;
}

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

/// The checkpoint manifest's description of the program and the position.
static ojson positionJSON(const Manifest &m, const TrainPosition &pos,
                          int version) {
  return {
      {"format", "dt-checkpoint"},
      {"version", version},
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
  };
}

/// Writes the tensors `b` of `buffers` into `path`, each 64-byte aligned,
/// with their CRC32 computed from the very bytes written; returns their
/// entries (name, offset, bytes, crc32, ...) and sets `total` to the file's
/// size.
static Expected<ojson> writeTensors(const std::string &path, Arena &arena,
                                    const std::vector<const BufferDesc *> &buffers,
                                    size_t &total) {
  Expected<OutputFile> out = OutputFile::open(path);
  if (!out)
    return out.error();
  ojson tensors = ojson::array();
  std::vector<char> host;
  static const char zeros[kTensorAlign] = {};
  size_t offset = 0;
  for (const BufferDesc *b : buffers) {
    size_t aligned = (offset + kTensorAlign - 1) / kTensorAlign * kTensorAlign;
    if (Status s = out->write(zeros, aligned - offset); !s)
      return s.error();
    offset = aligned;
    uint32_t crc = crc32Update(0, nullptr, 0);
    for (size_t from = 0; from < b->bytes; from += kChunkBytes) {
      size_t n = std::min(kChunkBytes, b->bytes - from);
      host.resize(n);
      arena.readPart(*b, from, n, host.data());
      crc = crc32Update(crc, host.data(), n);
      if (Status s = out->write(host.data(), n); !s)
        return s.error();
    }
    tensors.push_back({{"name", b->name},
                       {"role", roleName(b->role)},
                       {"dtype", dtypeName(b->dtype)},
                       {"shape", b->shape},
                       {"offset", offset},
                       {"bytes", b->bytes},
                       {"crc32", crc}});
    offset += b->bytes;
  }
  if (Status s = out->sync(); !s)
    return s.error();
  if (Status s = out->close(); !s)
    return s.error();
  total = offset;
  return tensors;
}

/// The checkpoint of a program of one rank: tensors.bin and manifest.json
/// (format version 1).
static Expected<std::string> writeWhole(const std::string &root, Arena &arena,
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

  std::vector<const BufferDesc *> buffers;
  for (const BufferDesc &b : m.buffers)
    if (isCheckpointTensor(b))
      buffers.push_back(&b);
  size_t total = 0;
  Expected<ojson> tensors =
      writeTensors(tmp + "/tensors.bin", arena, buffers, total);
  if (!tensors)
    return tensors.error();
  ojson j = positionJSON(m, pos, kCheckpointFormatVersion);
  j["tensors_file"] = "tensors.bin";
  j["tensors_bytes"] = total;
  j["tensors"] = std::move(*tensors);
  if (Status s = writeFileSynced(tmp + "/manifest.json", j.dump(2) + "\n"); !s)
    return s.error();
  if (Status s = syncDirectory(tmp); !s)
    return s.error();
  if (Status s = renameSynced(tmp, final); !s)
    return s.error();
  return final;
}

namespace {

std::string shardName(int rank) { return fmt::format("shard_{:05d}", rank); }

ojson layoutJSON(const Layout &l) {
  ojson dims = ojson::array();
  for (const DimLayout &d : l.dims)
    dims.push_back({{"axes", d.axes}, {"blocks", d.blocks}});
  return {{"dims", dims}, {"partial", l.partial}};
}

/// The checkpoint of a sharded program (format version 2): every rank writes
/// shard_R.bin (the pieces it is the writer of) and shard_R.json (their
/// offsets and CRCs); once all have, rank 0 writes manifest.json with the
/// mesh, every tensor's whole shape and layout and its pieces, and publishes
/// the directory by one rename.
Expected<std::string> writeSharded(const std::string &root, Arena &arena,
                                   const TrainPosition &pos,
                                   Communicator &comm,
                                   const std::vector<int> &coords) {
  const Manifest &m = arena.manifest();
  int rank = comm.rank();
  std::string name = checkpointName(pos.step);
  std::string final = (fs::path(root) / name).string();
  std::string tmp = (fs::path(root) / (kTmpPrefix + name)).string();

  // 1. Rank 0 makes the directory.
  Status made = Status::ok();
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec)
      made = Error(fmt::format("cannot create the checkpoint directory '{}': "
                               "{}",
                               root, ec.message()));
    else if (fs::exists(final, ec))
      made = Error(fmt::format("checkpoint '{}' already exists; refusing to "
                               "overwrite it",
                               final));
    else {
      fs::remove_all(tmp, ec);
      if (!fs::create_directory(tmp, ec))
        made = Error(fmt::format("cannot create '{}': {}", tmp, ec.message()));
    }
  }
  if (Status s = agreeAcrossRanks(comm, made, "create the checkpoint directory",
                                    "no checkpoint was written"); !s)
    return s.error();

  // 2. Every rank its pieces.
  Status wrote = [&]() -> Status {
    // DT_TEST_SLOW_CHECKPOINT=R:MS (tests of the I/O timeout): rank R
    // takes MS ms longer to write its part, as on a slow disk.
    if (const char *slow = std::getenv("DT_TEST_SLOW_CHECKPOINT")) {
      int who = -1;
      long ms = 0;
      if (std::sscanf(slow, "%d:%ld", &who, &ms) == 2 && who == rank && ms > 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
    std::vector<const BufferDesc *> mine;
    for (const BufferDesc &b : m.buffers)
      if (isCheckpointTensor(b) &&
          writesPiece(b, coords, m.pipelineAxis()))
        mine.push_back(&b);
    size_t total = 0;
    Expected<ojson> tensors = writeTensors(
        tmp + "/" + shardName(rank) + ".bin", arena, mine, total);
    if (!tensors)
      return tensors.error();
    ojson index = {{"rank", rank}, {"coords", coords}, {"bytes", total},
                   {"tensors", std::move(*tensors)}};
    return writeFileSynced(tmp + "/" + shardName(rank) + ".json",
                           index.dump(1) + "\n");
  }();
  if (Status s = agreeAcrossRanks(comm, wrote, "write its part of the checkpoint",
                                    "no checkpoint was written"); !s)
    return s.error();

  // 3. Rank 0 describes the whole and publishes it.
  Status published = Status::ok();
  if (rank == 0)
    published = [&]() -> Status {
      ojson j = positionJSON(m, pos, kShardedCheckpointFormatVersion);
      ojson axes = ojson::array();
      for (size_t a = 0; a < m.mesh.names.size(); ++a)
        axes.push_back({{"name", m.mesh.names[a]}, {"size", m.mesh.sizes[a]}});
      j["mesh"] = {{"axes", axes}};
      // Each tensor with the pieces the ranks wrote of it.
      ojson tensors = ojson::array();
      std::vector<ojson> shards;
      for (int r = 0; r < comm.worldSize(); ++r) {
        Expected<std::string> text =
            readFile(tmp + "/" + shardName(r) + ".json");
        if (!text)
          return text.error();
        shards.push_back(ojson::parse(*text));
      }
      for (const BufferDesc &b : m.buffers) {
        if (!isCheckpointTensor(b))
          continue;
        ojson pieces = ojson::array();
        for (const ojson &shard : shards)
          for (const ojson &t : shard["tensors"])
            if (t["name"] == b.name)
              pieces.push_back({{"file", shardName(shard["rank"]) + ".bin"},
                                {"rank", shard["rank"]},
                                {"offset", t["offset"]},
                                {"bytes", t["bytes"]},
                                {"crc32", t["crc32"]}});
        tensors.push_back(
            {{"name", b.name},
             {"role", roleName(b.role)},
             {"dtype", dtypeName(b.dtype)},
             {"shape", b.globalShape},
             {"sharding", b.layout ? layoutJSON(*b.layout) : ojson(nullptr)},
             {"pieces", pieces}});
      }
      j["tensors"] = std::move(tensors);
      if (Status s = writeFileSynced(tmp + "/manifest.json", j.dump(2) + "\n");
          !s)
        return s;
      if (Status s = syncDirectory(tmp); !s)
        return s;
      return renameSynced(tmp, final);
    }();
  if (Status s = agreeAcrossRanks(comm, published, "publish the checkpoint",
                                    "no checkpoint was written"); !s)
    return s.error();
  return final;
}

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
  if (j["version"] != kCheckpointFormatVersion &&
      j["version"] != kShardedCheckpointFormatVersion)
    return Error(fmt::format("'{}' has checkpoint format version {}; this "
                             "runtime reads versions {} and {}",
                             path, j["version"].dump(),
                             kCheckpointFormatVersion,
                             kShardedCheckpointFormatVersion));
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

Expected<std::string> writeCheckpoint(const std::string &root, Arena &arena,
                                      const TrainPosition &position,
                                      Communicator *comm,
                                      const std::vector<int> &coords) {
  if (!comm)
    return writeWhole(root, arena, position);
  return writeSharded(root, arena, position, *comm, coords);
}

namespace {

/// One piece of a saved tensor: where its bytes are and which elements of the
/// whole tensor they hold.
struct SavedPiece {
  std::string file;
  uint64_t offset = 0, bytes = 0;
  uint32_t crc = 0;
  /// (piece element, tensor element, count) runs.
  std::vector<std::array<int64_t, 3>> runs;
};

/// A copy from a piece into this rank's shard: `count` elements from piece
/// element `from` to shard element `to`.
struct Copy {
  int64_t from, to, count;
};

/// The runs of a buffer on the rank at `coords`, as (local, global, count).
std::vector<std::array<int64_t, 3>> runsOf(const BufferDesc &b,
                                           const MeshSpec &mesh,
                                           const std::vector<int> &coords) {
  std::vector<std::array<int64_t, 3>> runs;
  forEachRun(b, mesh, coords, [&](int64_t l, int64_t g, int64_t n) {
    runs.push_back({l, g, n});
  });
  return runs;
}

/// The copies that move the elements `piece` and `mine` (both sorted by
/// tensor element) have in common.
std::vector<Copy> overlap(const std::vector<std::array<int64_t, 3>> &piece,
                          const std::vector<std::array<int64_t, 3>> &mine) {
  std::vector<Copy> copies;
  size_t i = 0, k = 0;
  while (i < piece.size() && k < mine.size()) {
    auto [pl, pg, pn] = piece[i];
    auto [ml, mg, mn] = mine[k];
    int64_t begin = std::max(pg, mg), end = std::min(pg + pn, mg + mn);
    if (begin < end)
      copies.push_back({pl + (begin - pg), ml + (begin - mg), end - begin});
    if (pg + pn <= mg + mn)
      ++i;
    else
      ++k;
  }
  std::sort(copies.begin(), copies.end(),
            [](const Copy &a, const Copy &b) { return a.from < b.from; });
  return copies;
}

/// Parses a layout written by layoutJSON (null: none).
std::optional<Layout> parseLayout(const ojson &j) {
  if (j.is_null())
    return std::nullopt;
  Layout l;
  for (const ojson &d : j.at("dims"))
    l.dims.push_back(
        {d.at("axes").get<std::vector<int>>(), d.at("blocks").get<int64_t>()});
  l.partial = j.at("partial").get<std::vector<int>>();
  return l;
}

Expected<TrainPosition> load(const std::string &dir, Arena &arena,
                             const std::vector<int> &coords) {
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
  auto damaged = [&](const std::string &what) {
    return Error(fmt::format("cannot resume from '{}': {}; the checkpoint is "
                             "damaged: delete it and resume from an older one",
                             dir, what));
  };
  std::string program = j.value("program", "");
  if (program != m.name)
    return otherProgram(fmt::format(
        "it was written by program '{}', this is '{}'", program, m.name));

  // The mesh it was saved on: version 1 is one rank holding whole tensors.
  bool sharded = j["version"] == kShardedCheckpointFormatVersion;
  MeshSpec saved;
  if (sharded)
    for (const ojson &a : j.at("mesh").at("axes")) {
      saved.names.push_back(a.at("name").get<std::string>());
      saved.sizes.push_back(a.at("size").get<int>());
    }

  // Every param/state tensor of this program, and no other, with the same
  // dtype and whole shape, whatever the layouts.
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
    if (dtype != dtypeName(b.dtype) || shape != b.globalShape)
      return otherProgram(fmt::format(
          "tensor '{}' is {}[{}] in the checkpoint but {}[{}] in this program",
          b.name, dtype, fmt::join(shape, ", "), dtypeName(b.dtype),
          fmt::join(b.globalShape, ", ")));
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

  // Each tensor: the pieces that hold elements of this rank's shard are read
  // whole (so that their CRCs are checked) and the common elements copied.
  std::vector<char> host;
  size_t i = 0;
  for (const BufferDesc &b : m.buffers) {
    if (!isCheckpointTensor(b))
      continue;
    const ojson &t = *entries[i++];
    // Another pipeline rank's tensor: its bytes here are that rank's own.
    if (!m.holds(b, coords))
      continue;
    size_t elementBytes = dtypeSize(b.dtype);
    std::vector<SavedPiece> pieces;
    if (!sharded) {
      // Version 1: tensors.bin must be exactly as long as the manifest says.
      std::string binPath =
          dir + "/" + j.value("tensors_file", std::string("tensors.bin"));
      std::error_code ec;
      uint64_t fileBytes = fs::file_size(binPath, ec);
      uint64_t expectBytes = j.value("tensors_bytes", uint64_t(0));
      if (ec || fileBytes != expectBytes)
        return Error(fmt::format(
            "cannot resume from '{}': '{}' holds {} bytes, the checkpoint's "
            "manifest says {} (truncated or damaged); delete '{}' and resume "
            "from an older checkpoint",
            dir, binPath, ec ? 0 : fileBytes, expectBytes, dir));
      SavedPiece p;
      p.file = j.value("tensors_file", std::string("tensors.bin"));
      p.offset = t.value("offset", uint64_t(0));
      p.bytes = t.value("bytes", uint64_t(0));
      p.crc = t.value("crc32", uint32_t(0));
      int64_t n = 1;
      for (int64_t d : b.globalShape)
        n *= d;
      if (n > 0)
        p.runs.push_back({0, 0, n});
      pieces.push_back(std::move(p));
    } else {
      // The saved layout's piece of the rank that wrote it.
      BufferDesc whole = b;
      whole.layout = parseLayout(t.at("sharding"));
      for (const ojson &pj : t.at("pieces")) {
        SavedPiece p;
        p.file = pj.at("file").get<std::string>();
        p.offset = pj.at("offset").get<uint64_t>();
        p.bytes = pj.at("bytes").get<uint64_t>();
        p.crc = pj.at("crc32").get<uint32_t>();
        std::vector<int> writer =
            meshCoordinates(saved, pj.at("rank").get<int>());
        whole.shape = b.globalShape;
        whole.elements = 1;
        if (whole.layout)
          for (size_t d = 0; d < whole.shape.size(); ++d)
            whole.shape[d] =
                localDimSize(b.globalShape[d], whole.layout->dims[d], saved);
        for (int64_t d : whole.shape)
          whole.elements *= d;
        if (p.bytes != uint64_t(whole.elements) * elementBytes)
          return damaged(fmt::format("a piece of tensor '{}' has {} bytes, its "
                                     "layout says {}",
                                     b.name, p.bytes,
                                     whole.elements * elementBytes));
        p.runs = runsOf(whole, saved, writer);
        pieces.push_back(std::move(p));
      }
    }
    std::vector<std::array<int64_t, 3>> mine = runsOf(b, m.mesh, coords);
    int64_t needed = 0, copied = 0;
    for (const auto &r : mine)
      needed += r[2];
    for (const SavedPiece &p : pieces) {
      std::vector<Copy> copies = overlap(p.runs, mine);
      if (copies.empty())
        continue;
      std::string path = dir + "/" + p.file;
      std::ifstream bin(path, std::ios::binary);
      std::error_code ec;
      uint64_t fileBytes = fs::file_size(path, ec);
      if (!bin || ec)
        return damaged(fmt::format("cannot open '{}'", path));
      if (p.offset > fileBytes || p.bytes > fileBytes - p.offset)
        return damaged(fmt::format("tensor '{}' lies outside '{}' ({} bytes: "
                                   "truncated?)",
                                   b.name, path, fileBytes));
      // Stream the piece in chunks: check its CRC, copy what this rank needs.
      bin.seekg(std::streamoff(p.offset));
      uint32_t actual = crc32Update(0, nullptr, 0);
      size_t next = 0;
      for (uint64_t from = 0; from < p.bytes; from += kChunkBytes) {
        size_t n = size_t(std::min<uint64_t>(kChunkBytes, p.bytes - from));
        host.resize(n);
        bin.read(host.data(), std::streamsize(n));
        if (!bin)
          return damaged(
              fmt::format("cannot read tensor '{}' from '{}'", b.name, path));
        actual = crc32Update(actual, host.data(), n);
        int64_t chunkBegin = int64_t(from / elementBytes),
                chunkEnd = int64_t((from + n) / elementBytes);
        for (size_t c = next; c < copies.size(); ++c) {
          const Copy &cp = copies[c];
          int64_t begin = std::max(cp.from, chunkBegin),
                  end = std::min(cp.from + cp.count, chunkEnd);
          if (begin >= end) {
            if (cp.from >= chunkEnd)
              break;
            continue;
          }
          arena.writePart(b, size_t(cp.to + (begin - cp.from)) * elementBytes,
                          size_t(end - begin) * elementBytes,
                          host.data() +
                              size_t(begin - chunkBegin) * elementBytes);
          copied += end - begin;
          if (cp.from + cp.count <= chunkEnd)
            next = c + 1;
        }
      }
      if (actual != p.crc)
        return Error(fmt::format(
            "cannot resume from '{}': tensor '{}' is corrupt (CRC32 {:08x}, "
            "the checkpoint recorded {:08x}{}); delete '{}' and resume from an "
            "older checkpoint (--resume auto then takes the newest remaining "
            "one), or pass another with --resume DIR",
            dir, b.name, actual, p.crc,
            sharded ? fmt::format(" in {}", p.file) : "", dir));
    }
    if (copied != needed)
      return damaged(fmt::format("its pieces of tensor '{}' hold {} of the {} "
                                 "elements this rank needs",
                                 b.name, copied, needed));
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
  pos.mesh = saved;
  if (const BufferDesc *step = m.find("step");
      step && arena.readI64(*step) != pos.step)
    return Error(fmt::format("cannot resume from '{}': its step counter "
                             "holds {} but its manifest says step {}; the "
                             "checkpoint is damaged",
                             dir, arena.readI64(*step), pos.step));
  return pos;
}

} // namespace

Expected<TrainPosition> loadCheckpoint(const std::string &dir, Arena &arena,
                                       const std::vector<int> &coords) {
  // A hand-edited or damaged manifest.json may hold values of the wrong JSON
  // type, which nlohmann reports by throwing.
  try {
    return load(dir, arena, coords);
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
