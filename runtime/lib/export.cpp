//===- export.cpp - The model out as Hugging Face and PEFT write it -------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// --export DIR, collectively over every rank, in three stages that each end
// with every rank agreeing it succeeded:
//   1. rank 0 creates the files: header written, the size allocated (every
//      tensor's offset follows from the manifest alone, so every rank knows
//      the layout without being told);
//   2. every rank maps them and writes the pieces it is the writer of, so no
//      rank gathers the model;
//   3. rank 0 renames them into place, writes the index and config.json, and
//      removes what an export of another split left.
//
// A program with LoRA adapters exports the model with the adapters merged
// (W + scale · B A, in f32, as PEFT's merge_and_unload computes it), or with
// --export-adapters the adapters alone in PEFT's layout. For the merge every
// rank needs the whole of the (small) factors of the weight pieces it
// writes, whatever layout split them: the adapter file is written first, by
// the same stages, and each rank reads the factors back from it.
//
//===----------------------------------------------------------------------===//

#include "dtrt/pretrained.h"

#include "dtrt/checkpoint.h"
#include "dtrt/file.h"
#include "dtrt/layout.h"
#include "dtrt/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <map>
#include <random>
#include <unistd.h>

namespace fs = std::filesystem;

namespace dtrt {

namespace {

/// One tensor of an export: a parameter under its name in the file, or an
/// i64 scalar that PyTorch keeps beside one (a batch norm's
/// `num_batches_tracked`).
struct OutTensor {
  std::string name;
  const BufferDesc *buffer = nullptr;
  /// Stored [in, out] (GPT-2's Conv1D) rather than dt's [out, in].
  bool transposed = false;
  std::optional<int64_t> counter;

  std::vector<int64_t> shape() const {
    if (counter)
      return {};
    std::vector<int64_t> s = buffer->globalShape;
    if (transposed)
      std::reverse(s.begin(), s.end());
    return s;
  }
  const char *dtype() const { return counter ? "I64" : "F32"; }
};

/// PyTorch's batch norms count their training forward passes beside the
/// running statistics (`num_batches_tracked`, which a strict load_state_dict
/// requires): the steps taken times the micro-batches of a step.
std::optional<std::string> counterBeside(const std::string &name) {
  static const std::string kMean = "running_mean";
  if (name.size() < kMean.size() ||
      name.compare(name.size() - kMean.size(), kMean.size(), kMean) != 0)
    return std::nullopt;
  return name.substr(0, name.size() - kMean.size()) + "num_batches_tracked";
}

/// One file of an export, made under a temporary name.
struct OutFile {
  std::string name, tmp;
  StFileLayout layout;
  std::vector<OutTensor> tensors; ///< In the layout's order.
};

/// A LoRA layer's factors, whole, for merging into the pieces of its weight.
struct Factors {
  int64_t rank = 0;
  double scale = 0;
  std::vector<float> a, b; ///< [rank, in], [out, rank]
};

class Exporter {
public:
  Exporter(const std::string &dir, Arena &arena, Communicator *comm,
           const std::vector<int> &coords)
      : dir_(dir), arena_(arena), m_(arena.manifest()), comm_(comm),
        coords_(coords), rank_(comm ? comm->rank() : 0),
        tokenPath_((fs::path(dir) / ".tmp-export-token").string()) {}

  Expected<std::vector<std::string>> run(uint64_t shardBytes,
                                         bool adaptersOnly);

private:
  /// Lays `tensors` out as files named by `name(i, n)` of at most
  /// `shardBytes` each (sorted by name, as Hugging Face writes them).
  std::vector<OutFile>
  layOut(std::vector<OutTensor> tensors, uint64_t shardBytes,
         const std::function<std::string(size_t, size_t)> &name);
  Status shareToken();
  Status create(const std::vector<OutFile> &files);
  Status write(const std::vector<OutFile> &files,
               const std::map<std::string, Factors> &merge);
  /// Reads every adapter's factors back from the written adapter file.
  Expected<std::map<std::string, Factors>> readFactors(const OutFile &file);
  Status agree(const Status &mine, const char *stage) {
    if (!comm_)
      return mine;
    return agreeAcrossRanks(*comm_, mine, stage, "the model was not exported");
  }

  std::string dir_;
  Arena &arena_;
  const Manifest &m_;
  Communicator *comm_;
  const std::vector<int> &coords_;
  int rank_;
  std::string tokenPath_;
  uint64_t token_ = 0;
};

std::vector<OutFile>
Exporter::layOut(std::vector<OutTensor> tensors, uint64_t shardBytes,
                 const std::function<std::string(size_t, size_t)> &name) {
  std::sort(tensors.begin(), tensors.end(),
            [](const OutTensor &x, const OutTensor &y) {
              return x.name < y.name;
            });
  std::vector<StEntry> entries;
  for (const OutTensor &t : tensors)
    entries.push_back({t.name, t.shape(), t.dtype()});
  std::vector<std::vector<size_t>> split = splitStEntries(entries, shardBytes);
  std::vector<OutFile> files;
  for (size_t f = 0; f < split.size(); ++f) {
    OutFile out;
    out.name = name(f, split.size());
    out.tmp = (fs::path(dir_) / (".tmp-" + out.name)).string();
    std::vector<StEntry> mine;
    for (size_t i : split[f]) {
      mine.push_back(entries[i]);
      out.tensors.push_back(tensors[i]);
    }
    out.layout = layOutStFile(mine, {{"format", "pt"}});
    files.push_back(std::move(out));
  }
  return files;
}

Status Exporter::shareToken() {
  // Every rank writes into the files rank 0 made, so DIR must be one
  // directory for all of them: rank 0 leaves a token there that the others
  // must read back before they write (a directory local to each node would
  // otherwise leave holes in rank 0's files).
  if (!comm_ || comm_->worldSize() == 1)
    return Status::ok();
  uint64_t mine = (uint64_t(std::random_device()()) << 32) ^
                  uint64_t(std::random_device()()) ^ uint64_t(::getpid());
  std::vector<uint64_t> all(size_t(comm_->worldSize()));
  if (Status s = comm_->allGather(&mine, all.data(), 1, DType::I64,
                                  comm_->mesh().allAxes(), "the export");
      !s)
    return s;
  token_ = all[0];
  return Status::ok();
}

Status Exporter::create(const std::vector<OutFile> &files) {
  Status made = Status::ok();
  if (rank_ == 0)
    made = [&]() -> Status {
      std::error_code ec;
      fs::create_directories(dir_, ec);
      if (ec)
        return Error(fmt::format("cannot create the export directory '{}': "
                                 "{}",
                                 dir_, ec.message()));
      if (token_)
        if (Status s = writeFileSynced(tokenPath_, std::to_string(token_)); !s)
          return s;
      for (const OutFile &f : files) {
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
        // Allocated now, not when the ranks write through their mappings: a
        // full disk is this message, not a SIGBUS in the middle of a write.
        int fd = ::open(f.tmp.c_str(), O_RDWR | O_CLOEXEC);
        int rc = fd < 0 ? errno
                        : ::posix_fallocate(fd, 0, off_t(f.layout.size));
        if (fd >= 0)
          ::close(fd);
        if (rc != 0)
          return Error(fmt::format("cannot make '{}' {} bytes long: {}", f.tmp,
                                   f.layout.size, std::strerror(rc)));
      }
      return Status::ok();
    }();
  return agree(made, "create the export files");
}

Status Exporter::write(const std::vector<OutFile> &files,
                       const std::map<std::string, Factors> &merge) {
  Status wrote = [&]() -> Status {
    if (token_ && rank_ != 0) {
      Expected<std::string> seen = readFile(tokenPath_);
      if (!seen || *seen != std::to_string(token_))
        return Error(fmt::format(
            "the export directory '{}' is not the one rank 0 writes into "
            "(rank 0's files are not visible here): export to a directory "
            "every rank shares, such as one on a shared file system",
            dir_));
    }
    std::vector<float> values;
    for (const OutFile &f : files) {
      MappedFile map;
      bool mapped = false;
      // Maps the file on this rank's first piece of it.
      auto mapFile = [&]() -> Status {
        if (mapped)
          return Status::ok();
        Expected<MappedFile> opened = MappedFile::open(f.tmp, true);
        if (!opened)
          return opened.error();
        map = std::move(*opened);
        mapped = true;
        return Status::ok();
      };
      for (size_t k = 0; k < f.tensors.size(); ++k) {
        const OutTensor &t = f.tensors[k];
        if (t.counter) {
          if (rank_ != 0)
            continue;
          if (Status s = mapFile(); !s)
            return s;
          std::memcpy(map.data() + f.layout.offsets[k], &*t.counter,
                      sizeof(int64_t));
          continue;
        }
        const BufferDesc &b = *t.buffer;
        if (!m_.holds(b, coords_) ||
            (comm_ && !writesPiece(b, coords_, m_.pipelineAxis())))
          continue;
        if (Status s = mapFile(); !s)
          return s;
        float *dst = reinterpret_cast<float *>(map.data() +
                                               f.layout.offsets[k]);
        int64_t rows = b.globalShape.empty() ? 1 : b.globalShape[0];
        int64_t cols = b.globalShape.size() < 2 ? 1 : b.globalShape[1];
        auto adapter = merge.find(b.name);
        const Factors *lora = adapter == merge.end() ? nullptr
                                                      : &adapter->second;
        forEachRun(b, m_.mesh, coords_,
                   [&](int64_t local, int64_t global, int64_t count) {
                     values.resize(size_t(count));
                     arena_.readPart(b, size_t(local) * sizeof(float),
                                     size_t(count) * sizeof(float),
                                     values.data());
                     for (int64_t e = 0; lora && e < count; ++e) {
                       // W[r][c] + scale · (B A)[r][c], the product in f32
                       // as PEFT forms it before adding.
                       int64_t g = global + e, r = g / cols, c = g % cols;
                       float delta = 0;
                       for (int64_t q = 0; q < lora->rank; ++q)
                         delta += lora->b[size_t(r * lora->rank + q)] *
                                  lora->a[size_t(q * cols + c)];
                       values[size_t(e)] += float(lora->scale) * delta;
                     }
                     if (!t.transposed) {
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
  return agree(wrote, "write its part of the export");
}

Expected<std::map<std::string, Factors>>
Exporter::readFactors(const OutFile &file) {
  Expected<MappedFile> map = MappedFile::open(file.tmp, false);
  if (!map)
    return map.error();
  std::map<std::string, const float *> at;
  for (size_t k = 0; k < file.tensors.size(); ++k)
    at[file.tensors[k].buffer->name] =
        reinterpret_cast<const float *>(map->data() + file.layout.offsets[k]);
  std::map<std::string, Factors> out;
  const AdapterSpec &spec = *m_.adapters;
  for (const AdapterSpec::Layer &layer : spec.layers) {
    const BufferDesc &a = *m_.find(layer.a), &b = *m_.find(layer.b);
    Factors f;
    f.rank = spec.rank;
    f.scale = spec.scale;
    f.a.assign(at[layer.a], at[layer.a] + a.globalShape[0] * a.globalShape[1]);
    f.b.assign(at[layer.b], at[layer.b] + b.globalShape[0] * b.globalShape[1]);
    out[layer.weight] = std::move(f);
  }
  return out;
}

Expected<std::vector<std::string>> Exporter::run(uint64_t shardBytes,
                                                 bool adaptersOnly) {
  // The adapters' factors go to PEFT's file; everything else to the model's.
  std::vector<OutTensor> model, adapters;
  std::map<std::string, bool> isFactor;
  if (m_.adapters)
    for (const AdapterSpec::Layer &layer : m_.adapters->layers)
      isFactor[layer.a] = isFactor[layer.b] = true;
  int64_t passes = arena_.readI64(*m_.find("step")) * m_.train.accumulation;
  for (const CheckpointName &n : m_.checkpointNames) {
    OutTensor t{n.name, m_.find(n.param), n.transposed, std::nullopt};
    if (std::optional<std::string> counter = counterBeside(n.name);
        counter && t.buffer->buffer) {
      OutTensor c;
      c.name = *counter;
      c.counter = passes;
      model.push_back(std::move(c));
    }
    if (isFactor.count(n.param)) {
      t.name = m_.adapters->peftPrefix + n.name;
      adapters.push_back(std::move(t));
    } else {
      model.push_back(std::move(t));
    }
  }
  // PEFT keeps the adapters in one file, however big.
  std::vector<OutFile> adapterFiles = layOut(
      adapters, UINT64_MAX,
      [](size_t, size_t) { return std::string("adapter_model.safetensors"); });
  std::vector<OutFile> modelFiles;
  if (!adaptersOnly)
    modelFiles = layOut(model, shardBytes, stFileName);

  if (Status s = shareToken(); !s)
    return s.error();
  std::vector<OutFile> all = adapterFiles;
  all.insert(all.end(), modelFiles.begin(), modelFiles.end());
  if (Status s = create(all); !s)
    return s.error();
  if (Status s = write(adapterFiles, {}); !s)
    return s.error();
  std::map<std::string, Factors> merge;
  if (!adaptersOnly && !adapterFiles.empty()) {
    Expected<std::map<std::string, Factors>> factors =
        readFactors(adapterFiles.front());
    if (Status s = agree(factors.status(), "read the adapters back");
        !s)
      return s.error();
    merge = std::move(*factors);
  }
  if (Status s = write(modelFiles, merge); !s)
    return s.error();

  // 3. Rank 0 publishes the files, the index, the configs, and removes what
  // an earlier export of another split left.
  std::vector<std::string> written;
  Status published = Status::ok();
  if (rank_ == 0)
    published = [&]() -> Status {
      std::error_code ec;
      std::vector<std::string> keep;
      const std::vector<OutFile> &out =
          adaptersOnly ? adapterFiles : modelFiles;
      for (const OutFile &f : out) {
        std::string final = (fs::path(dir_) / f.name).string();
        if (Status s = renameSynced(f.tmp, final); !s)
          return s;
        keep.push_back(f.name);
        written.push_back(final);
      }
      if (!adaptersOnly)
        for (const OutFile &f : adapterFiles)
          fs::remove(f.tmp, ec);
      auto config = [&](const char *name, const std::string &text) -> Status {
        if (text.empty())
          return Status::ok();
        std::string path = (fs::path(dir_) / name).string();
        if (Status s = writeFileSynced(path, text); !s)
          return s;
        written.push_back(path);
        return Status::ok();
      };
      if (adaptersOnly) {
        if (Status s = config("adapter_config.json", m_.adapters->peftConfig);
            !s)
          return s;
      } else {
        std::string index = "model.safetensors.index.json";
        if (modelFiles.size() > 1) {
          std::vector<StEntry> entries;
          std::vector<std::vector<size_t>> split;
          for (const OutFile &f : modelFiles) {
            split.emplace_back();
            for (const OutTensor &t : f.tensors) {
              split.back().push_back(entries.size());
              entries.push_back({t.name, t.shape(), t.dtype()});
            }
          }
          if (Status s = config(index.c_str(), stIndexJSON(entries, split)); !s)
            return s;
          keep.push_back(index);
        }
        if (Status s = config("config.json", m_.hfConfig); !s)
          return s;
        for (const fs::directory_entry &e : fs::directory_iterator(dir_, ec)) {
          std::string name = e.path().filename().string();
          bool ours = name == "model.safetensors" || name == index ||
                      (name.rfind("model-", 0) == 0 &&
                       e.path().extension() == ".safetensors");
          if (ours && std::find(keep.begin(), keep.end(), name) == keep.end())
            fs::remove(e.path(), ec);
        }
      }
      fs::remove(tokenPath_, ec);
      return syncDirectory(dir_);
    }();
  if (Status s = agree(published, "publish the export"); !s)
    return s.error();
  return written;
}

} // namespace

Expected<std::vector<std::string>>
exportPretrained(const std::string &dir, uint64_t shardBytes, Arena &arena,
                 Communicator *comm, const std::vector<int> &coords,
                 bool adaptersOnly) {
  return Exporter(dir, arena, comm, coords).run(shardBytes, adaptersOnly);
}

} // namespace dtrt
