//===- plan.cpp - A GPU plan, read for one rank ---------------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//

#include "dtrt/cuda/plan.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace dtrt::cuda {

namespace {

/// Each thunk kind: its name in the plan and how many pointers, integers and
/// floats it takes (the CPU kernel's arguments, in order).
struct KindInfo {
  const char *name;
  Thunk::Kind kind;
  size_t pointers, ints, floats;
};
constexpr KindInfo kKinds[] = {
    {"copy", Thunk::Copy, 2, 1, 0},
    {"matmul", Thunk::Matmul, 3, 6, 0},
    {"matmul_bias", Thunk::MatmulBias, 4, 6, 0},
    {"softmax", Thunk::Softmax, 2, 3, 0},
    {"layer_norm", Thunk::LayerNorm, 4, 2, 1},
    {"layer_norm_grad", Thunk::LayerNormGrad, 6, 2, 1},
    {"rms_norm", Thunk::RMSNorm, 3, 2, 1},
    {"rms_norm_grad", Thunk::RMSNormGrad, 5, 2, 1},
    {"rope", Thunk::Rope, 2, 4, 5},
    {"dropout", Thunk::Dropout, 8, 15, 1},
    {"conv2d", Thunk::Conv2d, 3, 16, 0},
    {"conv2d_input_grad", Thunk::Conv2dInputGrad, 3, 16, 0},
    {"conv2d_weight_grad", Thunk::Conv2dWeightGrad, 3, 16, 0},
    {"max_pool2d", Thunk::MaxPool, 2, 11, 0},
    {"max_pool2d_grad", Thunk::MaxPoolGrad, 3, 11, 0},
    {"avg_pool2d", Thunk::AvgPool, 2, 11, 0},
    {"avg_pool2d_grad", Thunk::AvgPoolGrad, 2, 11, 0},
    {"embedding", Thunk::Embedding, 3, 3, 0},
    {"embedding_grad", Thunk::EmbeddingGrad, 3, 3, 0},
    {"cross_entropy", Thunk::CrossEntropy, 3, 2, 0},
    {"cross_entropy_grad", Thunk::CrossEntropyGrad, 4, 2, 0},
    // Both in one launch (logits, labels, dloss, dlogits, loss), where
    // nothing between them reads the loss.
    {"cross_entropy_with_grad", Thunk::CrossEntropyWithGrad, 5, 2, 0},
    {"count_correct", Thunk::CountCorrect, 3, 2, 0},
    // (q, k, v, o, lse) and (q, k, v, o, lse, dout, dq, dk, dv).
    {"attention", Thunk::Attention, 5, 4, 0},
    {"attention_grad", Thunk::AttentionGrad, 9, 4, 0},
    // Vocabulary parallelism: a block's first row or class is an i64 in
    // the arena (its shard_start), the last pointer.
    {"embedding_shard", Thunk::EmbeddingShard, 4, 4, 0},
    {"embedding_grad_shard", Thunk::EmbeddingGradShard, 4, 4, 0},
    {"class_stats", Thunk::ClassStats, 4, 3, 0},
    {"cross_entropy_stats", Thunk::CrossEntropyStats, 3, 2, 0},
    {"count_correct_stats", Thunk::CountCorrectStats, 3, 2, 0},
    {"cross_entropy_grad_shard", Thunk::CrossEntropyGradShard, 6, 4, 0},
    // Collectives: (src, dst), then (count[, group], dtype, axes, id), as
    // the runtime's C entry points take them (dtrt/collectives.h).
    {"all_reduce", Thunk::AllReduce, 2, 4, 0},
    {"reduce_scatter", Thunk::ReduceScatter, 2, 5, 0},
    {"all_gather", Thunk::AllGather, 2, 5, 0},
    {"all_to_all", Thunk::AllToAll, 2, 5, 0},
    {"take_shard", Thunk::TakeShard, 2, 5, 0},
    {"shard_start", Thunk::ShardStart, 1, 1, 0},
    {"wait", Thunk::Wait, 0, 1, 0},
};

/// A span of the manifest: the trace's name ("matmul fc") and the cost
/// model's bytes and FLOPs of its op.
struct Span {
  std::string name;
  int64_t bytes = 0;
  double flops = 0;
};

/// Names a launch's NVTX range after its span (or `fallback`, its kind) and
/// gives it the span's cost.
void describeLaunch(Thunk &thunk, const std::map<int64_t, Span> &spans,
                    const std::string &fallback) {
  auto it = spans.find(thunk.span);
  thunk.range = it != spans.end() ? it->second.name : fallback;
  if (it != spans.end()) {
    thunk.bytes = it->second.bytes;
    thunk.flops = it->second.flops;
  }
}

Error planError(const std::string &what) {
  return Error("the program's GPU plan is malformed (" + what +
               "); rebuild it with this runtime's dtc");
}

} // namespace

/// The values of the manifest's collectives ("grad/fc1.weight"), by id.
static std::map<int64_t, std::string>
collectiveNames(const std::string &manifest) {
  std::map<int64_t, std::string> names;
  nlohmann::json m = nlohmann::json::parse(manifest, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("collectives") ||
      !m["collectives"].is_array())
    return names;
  for (const nlohmann::json &c : m["collectives"])
    if (c.is_object() && c.contains("id"))
      names[c.value("id", int64_t(-1))] = c.value("what", "");
  return names;
}

/// Resolves a collective's launch for this rank: checks its group against
/// the mesh, names it, and works out a shard's bytes (take_shard: i gains
/// the first byte, the bytes copied and the bytes zeroed) or a shard's
/// first row (shard_start: i gains it).
static Status resolveCollective(Thunk &t, const nlohmann::json &record,
                                const Mesh &mesh, int rank,
                                const std::map<int64_t, std::string> &names,
                                std::vector<AxisMask> &groups) {
  std::vector<int64_t> &i = t.i;
  if (t.kind == Thunk::Wait)
    return Status::ok();
  if (t.kind == Thunk::ShardStart) {
    // The rank's index over the axes, the first the coarsest, times the
    // block size (as dtrt_mesh_coord's callers compute it on the CPU).
    int64_t index = 0;
    std::vector<int> coords = mesh.coordinates(rank);
    for (int64_t axis : record.value("axes", std::vector<int64_t>{})) {
      if (axis < 0 || size_t(axis) >= mesh.axisCount())
        return planError(fmt::format("a shard's start names axis {} of a "
                                     "mesh of {} axes",
                                     axis, mesh.axisCount()));
      index = index * mesh.axisSize(size_t(axis)) + coords[size_t(axis)];
    }
    i.push_back(index * i[0]);
    return Status::ok();
  }
  int64_t count = i[0], dtype = i[i.size() - 3];
  AxisMask axes = AxisMask(i[i.size() - 2]);
  auto name = names.find(i.back());
  t.what = name != names.end() ? name->second
                               : fmt::format("collective #{}", i.back());
  if (dtype < 0 || dtype > int64_t(DType::F16) || count < 0 ||
      (axes & ~mesh.allAxes()))
    return planError(fmt::format("the collective of '{}' has dtype {}, "
                                 "count {}, axes {:#x} on a mesh of {} axes",
                                 t.what, dtype, count, axes, mesh.axisCount()));
  int group = mesh.groupSize(axes);
  if (t.kind == Thunk::TakeShard) {
    int64_t total = i[0], each = i[1];
    size_t bytes = dtypeSize(DType(dtype));
    if (each * group < total)
      return planError(fmt::format("{} shards of {} of '{}' do not cover {} "
                                   "elements",
                                   group, each, t.what, total));
    auto [begin, end] = mesh.shardRange(rank, axes, total, each);
    i.insert(i.end(), {begin * int64_t(bytes), (end - begin) * int64_t(bytes),
                       (each - (end - begin)) * int64_t(bytes)});
    return Status::ok();
  }
  if (t.kind != Thunk::AllReduce && i[1] != group)
    return Error(fmt::format("the GPU plan's collective of '{}' was compiled "
                             "for a group of {} ranks over {}, but the mesh "
                             "({}) gives {}",
                             t.what, i[1], mesh.describeAxes(axes),
                             mesh.describe(), group));
  t.collective = int32_t(i.back());
  groups.push_back(axes);
  return Status::ok();
}

/// The manifest's spans, by number.
static std::map<int64_t, Span> spansOf(const std::string &manifest) {
  std::map<int64_t, Span> spans;
  nlohmann::json m = nlohmann::json::parse(manifest, nullptr, false);
  if (m.is_discarded() || !m.is_object() || !m.contains("spans") ||
      !m["spans"].is_array())
    return spans;
  for (const nlohmann::json &s : m["spans"]) {
    if (!s.is_object() || !s.contains("id"))
      continue;
    Span span;
    span.name = s.value("op", "");
    std::string layer = s.value("layer", "");
    if (!layer.empty())
      span.name += " " + layer;
    if (s.contains("bytes") && s["bytes"].is_number())
      span.bytes = s["bytes"].get<int64_t>();
    if (s.contains("flops") && s["flops"].is_number())
      span.flops = s["flops"].get<double>();
    spans[s.value("id", int64_t(-1))] = span;
  }
  return spans;
}

const char *kindName(Thunk::Kind kind) {
  for (const KindInfo &k : kKinds)
    if (k.kind == kind)
      return k.name;
  return kind == Thunk::Kernel ? "kernel" : "?";
}

Expected<Plan> readPlan(const std::string &plan, const std::string &manifest,
                        const Mesh &mesh, int rank) {
  nlohmann::json j = nlohmann::json::parse(plan, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("entries") ||
      !j["entries"].is_object())
    return planError("not a JSON object with entries");
  std::map<int64_t, Span> spans = spansOf(manifest);
  std::map<int64_t, std::string> collectives = collectiveNames(manifest);
  Plan out;
  out.arenaBytes = j.value("arena_bytes", int64_t(0));
  out.scratchBytes = j.value("scratch_bytes", int64_t(0));
  out.deviceFrom = j.value("device_from", int64_t(0));
  if (out.deviceFrom < 0 || out.deviceFrom > out.arenaBytes)
    return planError("device_from lies outside the arena");
  for (auto &[name, list] : j["entries"].items()) {
    if (!list.is_array())
      return planError("entry " + name + " is not a list");
    std::vector<Thunk> thunks;
    for (const nlohmann::json &t : list) {
      std::string op = t.value("op", "");
      Thunk thunk;
      thunk.kind = Thunk::Kernel;
      thunk.name = thunk.range = op;
      thunk.span = int32_t(t.value("span", int64_t(-1)));
      thunk.async = t.value("async", false);
      if (op == "kernel") {
        std::string kernel = t.value("name", "");
        thunk.name = kernel;
        thunk.i = {t.value("n", int64_t(1))};
        thunk.grid = t.value("grid", int64_t(0));
        describeLaunch(thunk, spans, kernel);
        // Several kernels at once: named so, costing what they all do.
        if (t.contains("spans") && t["spans"].is_array()) {
          thunk.range = fmt::format("merged {} ({} kernels)", kernel,
                                    t.value("members", int64_t(0)));
          thunk.bytes = 0;
          thunk.flops = 0;
          for (const nlohmann::json &s : t["spans"])
            if (auto it = spans.find(s.is_number_integer() ? s.get<int64_t>()
                                                           : int64_t(-1));
                it != spans.end()) {
              thunk.bytes += it->second.bytes;
              thunk.flops += it->second.flops;
              thunk.members.push_back(int32_t(it->first));
            }
        }
        thunks.push_back(std::move(thunk));
        continue;
      }
      const KindInfo *info = nullptr;
      for (const KindInfo &k : kKinds)
        if (op == k.name)
          info = &k;
      if (!info)
        return planError("unknown launch '" + op + "'");
      thunk.kind = info->kind;
      thunk.p = t.value("p", std::vector<int64_t>{});
      thunk.i = t.value("i", std::vector<int64_t>{});
      thunk.f = t.value("f", std::vector<double>{});
      if (t.value("tf32", false))
        thunk.operands = Operands::TF32;
      if (t.value("bf16", false)) {
        if (info->kind != Thunk::Attention &&
            info->kind != Thunk::AttentionGrad)
          return planError("'" + op + "' is marked bf16");
        thunk.operands = Operands::BF16;
      }
      std::string half = t.value("half", "");
      if (half == "bf16" || half == "f16")
        thunk.operands = half == "bf16" ? Operands::BF16 : Operands::F16;
      else if (!half.empty())
        return planError("'" + op + "' has 16-bit operands of type '" + half +
                         "'");
      // The loss reads 16-bit logits ("in") and its gradient may write a
      // 16-bit result ("out"); a product of 16-bit operands may write one in
      // their type (cuBLAS's GemmEx takes no other pairing).
      bool loss = info->kind == Thunk::CrossEntropy ||
                  info->kind == Thunk::CrossEntropyGrad ||
                  info->kind == Thunk::CrossEntropyWithGrad;
      auto sixteen = [](const std::string &type) -> std::optional<Operands> {
        if (type == "bf16")
          return Operands::BF16;
        if (type == "f16")
          return Operands::F16;
        return std::nullopt;
      };
      // Attention on bf16 tensor cores may read and write bf16 ("in",
      // "out": bf16 only).
      bool bf16Attention = (info->kind == Thunk::Attention ||
                            info->kind == Thunk::AttentionGrad) &&
                           thunk.operands == Operands::BF16;
      // The layer and RMS norms read x ("in"), their gradients also dy
      // ("grad_in"), and write y or dx ("out"), in either 16-bit type.
      bool norm = info->kind == Thunk::LayerNorm ||
                  info->kind == Thunk::LayerNormGrad ||
                  info->kind == Thunk::RMSNorm ||
                  info->kind == Thunk::RMSNormGrad;
      if (t.contains("in")) {
        std::optional<Operands> in = sixteen(t.value("in", ""));
        bool attention = bf16Attention && in == Operands::BF16;
        if (!in || !(loss || attention || norm))
          return planError("'" + op + "' reads data of type '" +
                           t.value("in", std::string("?")) + "'");
        (loss ? thunk.operands : thunk.in) = *in;
      }
      if (t.contains("grad_in")) {
        std::optional<Operands> grad = sixteen(t.value("grad_in", ""));
        if (!grad || (info->kind != Thunk::LayerNormGrad &&
                      info->kind != Thunk::RMSNormGrad))
          return planError("'" + op + "' reads a gradient of type '" +
                           t.value("grad_in", std::string("?")) + "'");
        thunk.gradIn = *grad;
      }
      bool product =
          info->kind == Thunk::Matmul || info->kind == Thunk::MatmulBias;
      // A 16-bit product's bias, read in the operands' type where its
      // widening's source lies (cuBLASLt's epilogue takes it so).
      if (t.contains("bias")) {
        if (info->kind != Thunk::MatmulBias || half.empty() ||
            t.value("bias", "") != half)
          return planError("'" + op + "' reads a bias of type '" +
                           t.value("bias", std::string("?")) + "'");
        thunk.bias = *sixteen(half);
      }
      if (t.contains("out")) {
        std::optional<Operands> out = sixteen(t.value("out", ""));
        bool productOut = product && out && t.value("out", "") == half;
        bool attention = bf16Attention && out == Operands::BF16;
        if (!out || !(productOut || attention || norm ||
                      info->kind == Thunk::CrossEntropyGrad ||
                      info->kind == Thunk::CrossEntropyWithGrad))
          return planError("'" + op + "' writes a result of type '" +
                           t.value("out", std::string("?")) + "'");
        thunk.result = *out;
      }
      // GELU (or its gradient) in a 16-bit product's epilogue, with the
      // pre-activation as one more pointer; or a bias's gradient beside a
      // 16-bit product of A transposed, with where it goes.
      if (t.contains("epilogue")) {
        std::string epilogue = t.value("epilogue", "");
        bool gelu = epilogue == "gelu" || epilogue == "gelu_grad";
        bool biasGrad = epilogue == "bias_grad";
        if (!product || (!gelu && !biasGrad) ||
            (gelu && thunk.result == Operands::F32) ||
            (epilogue != "gelu" && info->kind != Thunk::Matmul) ||
            (biasGrad && (thunk.operands == Operands::F32 ||
                          thunk.operands == Operands::TF32 ||
                          thunk.i.size() < 5 || thunk.i[4] == 0)))
          return planError("'" + op + "' has an epilogue '" + epilogue +
                           "' it cannot have");
        thunk.epilogue = epilogue == "gelu"        ? Epilogue::Gelu
                         : epilogue == "gelu_grad" ? Epilogue::GeluGrad
                                                   : Epilogue::BiasGrad;
      }
      size_t pointers =
          info->pointers + (thunk.epilogue != Epilogue::None ? 1 : 0);
      if (thunk.p.size() != pointers || thunk.i.size() != info->ints ||
          thunk.f.size() != info->floats)
        return planError("'" + op + "' has the wrong number of arguments");
      if (t.contains("ld")) {
        // Row pitches: a product's three, the loss's one, its gradient's two.
        thunk.ld = t.value("ld", std::vector<int64_t>{});
        size_t want = info->kind == Thunk::Matmul         ? 3
                      : info->kind == Thunk::CrossEntropy ? 1
                      : info->kind == Thunk::CrossEntropyGrad ||
                              info->kind == Thunk::CrossEntropyWithGrad
                          ? 2
                          : 0;
        if (!want || thunk.ld.size() != want ||
            (info->kind == Thunk::Matmul && thunk.i[0] != 1))
          return planError("'" + op + "' has row pitches it cannot take");
        for (int64_t ld : thunk.ld)
          if (ld < 0)
            return planError("'" + op + "' has a negative row pitch");
      }
      if (t.contains("pad") || t.contains("zero")) {
        // A padded product: its extents rounded up, each operand's pitch
        // given and wide enough for them.
        thunk.pad = t.value("pad", std::vector<int64_t>{});
        thunk.zeros = t.value("zero", decltype(thunk.zeros){});
        const std::vector<int64_t> &i = thunk.i, &ld = thunk.ld;
        bool fits = info->kind == Thunk::Matmul && thunk.pad.size() == 2 &&
                    ld.size() == 3 && i[0] == 1 &&
                    (thunk.operands == Operands::BF16 ||
                     thunk.operands == Operands::F16);
        if (fits) {
          int64_t n = thunk.pad[0], k = thunk.pad[1];
          fits = n >= i[2] && k >= i[3] && ld[0] >= (i[4] ? i[1] : k) &&
                 ld[1] >= (i[5] ? k : n) && ld[2] >= n;
        }
        for (const auto &z : thunk.zeros)
          fits &= z[0] >= 0 && z[1] > 0 && z[2] > 0 && z[3] >= z[1] &&
                  z[0] + z[3] * (z[2] - 1) + z[1] <= out.arenaBytes;
        if (!fits)
          return planError("'" + op + "' has a padding it cannot take");
      }
      if (t.contains("layouts")) {
        // Strided operands: the bf16 attention kernels' only.
        thunk.layouts = t.value("layouts", decltype(thunk.layouts){});
        if (!bf16Attention || thunk.in != Operands::BF16 ||
            thunk.layouts.size() != info->pointers)
          return planError("'" + op + "' has layouts it cannot take");
      }
      describeLaunch(thunk, spans, op);
      if (info->kind >= Thunk::AllReduce)
        if (Status s = resolveCollective(thunk, t, mesh, rank, collectives,
                                         out.groups);
            !s)
          return s.error();
      thunks.push_back(std::move(thunk));
    }
    out.entries.emplace_back(name, std::move(thunks));
  }
  return out;
}

} // namespace dtrt::cuda
