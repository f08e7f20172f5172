//===- manifest.cpp - Parse and validate dt_manifest ----------------------===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// Reads the manifest JSON with nlohmann::json. Inside this file, malformed
// input is reported by throwing (nlohmann throws, and so do the small typed
// readers below, which name the JSON path of the bad value); parseManifest is
// the one edge where every exception becomes an Error.
//
//===----------------------------------------------------------------------===//

#include "dtrt/manifest.h"
#include "dtrt/layout.h"
#include "dtrt/roofline.h"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <stdexcept>

using json = nlohmann::json;

namespace dtrt {

size_t dtypeSize(DType type) {
  switch (type) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::BF16:
  case DType::F16:
    return 2;
  }
  return 0;
}

const char *dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::BF16:
    return "bf16";
  case DType::F16:
    return "f16";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType t : {DType::F32, DType::I32, DType::I64, DType::BF16, DType::F16})
    if (name == dtypeName(t))
      return t;
  return std::nullopt;
}

const char *roleName(Role role) {
  switch (role) {
  case Role::Param:
    return "param";
  case Role::Grad:
    return "grad";
  case Role::State:
    return "state";
  case Role::Input:
    return "input";
  case Role::Output:
    return "output";
  case Role::Pipe:
    return "pipe";
  }
  return "?";
}

int MeshSpec::worldSize() const {
  int n = 1;
  for (int s : sizes)
    n *= s;
  return n;
}

int64_t Manifest::callsPerStep(const std::string &entry) const {
  return entryCallsPerStep(entry, pipeline ? pipeline->microbatches
                                           : train.accumulation);
}

const BufferDesc *Manifest::find(std::string_view name) const {
  for (const BufferDesc &b : buffers)
    if (b.name == name)
      return &b;
  return nullptr;
}

namespace {

/// A malformed manifest; only ever thrown inside this file.
struct Bad : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void bad(const std::string &msg) { throw Bad(msg); }

const json &member(const json &obj, const char *key, const std::string &where) {
  if (!obj.is_object())
    bad(fmt::format("{} must be an object", where));
  auto it = obj.find(key);
  if (it == obj.end())
    bad(fmt::format("{} has no \"{}\"", where, key));
  return *it;
}

int64_t getInt(const json &v, const std::string &where) {
  if (!v.is_number_integer())
    bad(fmt::format("{} must be an integer, not {}", where, v.dump()));
  return v.get<int64_t>();
}

int64_t getPositive(const json &v, const std::string &where) {
  int64_t n = getInt(v, where);
  if (n <= 0)
    bad(fmt::format("{} must be positive, not {}", where, n));
  return n;
}

double getNumber(const json &v, const std::string &where) {
  if (!v.is_number())
    bad(fmt::format("{} must be a number, not {}", where, v.dump()));
  return v.get<double>();
}

std::string getString(const json &v, const std::string &where) {
  if (!v.is_string())
    bad(fmt::format("{} must be a string, not {}", where, v.dump()));
  return v.get<std::string>();
}

/// `obj[key]` when present and not null.
const json *optional(const json &obj, const char *key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

PretrainedSpec parsePretrained(const json &j) {
  PretrainedSpec p;
  p.path = getString(member(j, "path", "init"), "init.path");
  for (const json &g : member(j, "ignore", "init"))
    p.ignore.push_back(getString(g, "init.ignore[]"));
  return p;
}

std::vector<CheckpointName> parseCheckpointNames(const json &j,
                                                 const Manifest &m) {
  std::vector<CheckpointName> names;
  const std::string where = "checkpoint_names[]";
  for (const json &t : j) {
    CheckpointName n;
    n.param = getString(member(t, "param", where), where + ".param");
    n.name = getString(member(t, "name", where), where + ".name");
    const json &tr = member(t, "transposed", where);
    if (!tr.is_boolean())
      bad(where + ".transposed must be a boolean");
    n.transposed = tr.get<bool>();
    const BufferDesc *b = m.find(n.param);
    if (!b || b->role != Role::Param)
      bad(fmt::format("checkpoint_names names '{}', which is no parameter",
                      n.param));
    if (n.transposed && b->globalShape.size() != 2)
      bad(fmt::format("checkpoint_names transposes '{}', which is not a "
                      "matrix",
                      n.param));
    names.push_back(std::move(n));
  }
  return names;
}

AdapterSpec parseAdapters(const json &j, const Manifest &m) {
  AdapterSpec a;
  const std::string where = "adapters";
  a.rank = getInt(member(j, "rank", where), "adapters.rank");
  a.alpha = getNumber(member(j, "alpha", where), "adapters.alpha");
  a.scale = getNumber(member(j, "scale", where), "adapters.scale");
  a.peftPrefix = getString(member(j, "peft_prefix", where),
                           "adapters.peft_prefix");
  a.peftConfig = getString(member(j, "peft_config", where),
                           "adapters.peft_config");
  if (a.rank < 1)
    bad("adapters.rank must be positive");
  for (const json &l : member(j, "layers", where)) {
    AdapterSpec::Layer layer;
    layer.weight = getString(member(l, "weight", where), "adapters.weight");
    layer.a = getString(member(l, "a", where), "adapters.a");
    layer.b = getString(member(l, "b", where), "adapters.b");
    // W [out, in], A [rank, in], B [out, rank].
    const BufferDesc *w = m.find(layer.weight), *fa = m.find(layer.a),
                     *fb = m.find(layer.b);
    if (!w || !fa || !fb || w->globalShape.size() != 2 ||
        fa->globalShape != std::vector<int64_t>{a.rank, w->globalShape[1]} ||
        fb->globalShape != std::vector<int64_t>{w->globalShape[0], a.rank})
      bad(fmt::format("adapters: '{}' with '{}' and '{}' are no LoRA layer "
                      "of rank {}",
                      layer.weight, layer.a, layer.b, a.rank));
    a.layers.push_back(std::move(layer));
  }
  return a;
}

InitSpec parseInit(const json &j, const std::string &where) {
  InitSpec init;
  std::string kind = getString(member(j, "kind", where), where + ".kind");
  if (kind == "uniform") {
    init.kind = InitSpec::Kind::Uniform;
    init.a = getNumber(member(j, "low", where), where + ".low");
    init.b = getNumber(member(j, "high", where), where + ".high");
    if (!(init.a <= init.b))
      bad(fmt::format("{}: low {} is above high {}", where, init.a, init.b));
  } else if (kind == "normal") {
    init.kind = InitSpec::Kind::Normal;
    init.a = getNumber(member(j, "mean", where), where + ".mean");
    init.b = getNumber(member(j, "std", where), where + ".std");
    if (init.b < 0)
      bad(fmt::format("{}: std {} is negative", where, init.b));
  } else if (kind == "constant") {
    init.kind = InitSpec::Kind::Constant;
    init.a = getNumber(member(j, "value", where), where + ".value");
  } else {
    bad(fmt::format("{}.kind \"{}\" is not uniform, normal or constant", where,
                    kind));
  }
  if (const json *from = optional(j, "from"))
    init.from = getString(*from, where + ".from");
  return init;
}

BufferDesc parseBuffer(const json &j, size_t index) {
  std::string where = fmt::format("buffers[{}]", index);
  BufferDesc b;
  b.name = getString(member(j, "name", where), where + ".name");
  where = fmt::format("buffer \"{}\"", b.name);

  std::string role = getString(member(j, "role", where), where + ".role");
  static const Role roles[] = {Role::Param, Role::Grad,   Role::State,
                               Role::Input, Role::Output, Role::Pipe};
  auto r = std::find_if(std::begin(roles), std::end(roles),
                        [&](Role x) { return role == roleName(x); });
  if (r == std::end(roles))
    bad(fmt::format("{} has unknown role \"{}\"", where, role));
  b.role = *r;
  if (j.contains("buffer")) {
    if (!j["buffer"].is_boolean())
      bad(fmt::format("{}.buffer must be a boolean", where));
    b.buffer = j["buffer"].get<bool>();
  }

  std::string dtype = getString(member(j, "dtype", where), where + ".dtype");
  std::optional<DType> t = parseDType(dtype);
  if (!t)
    bad(fmt::format("{} has unknown dtype \"{}\"", where, dtype));
  b.dtype = *t;

  const json &shape = member(j, "shape", where);
  if (!shape.is_array())
    bad(fmt::format("{}.shape must be an array", where));
  for (const json &d : shape) {
    int64_t n = getInt(d, where + ".shape");
    if (n < 0)
      bad(fmt::format("{} has a negative dimension {}", where, n));
    if (n > 0 && b.elements > (int64_t(1) << 50) / n)
      bad(fmt::format("{} is impossibly large", where));
    b.shape.push_back(n);
    b.elements *= n;
  }
  b.bytes = size_t(b.elements) * dtypeSize(b.dtype);

  int64_t offset = getInt(member(j, "offset", where), where + ".offset");
  if (offset < 0)
    bad(fmt::format("{} has a negative offset", where));
  b.offset = size_t(offset);

  b.globalShape = b.shape;
  if (const json *g = optional(j, "global_shape")) {
    if (!g->is_array() || g->size() != b.shape.size())
      bad(fmt::format("{}.global_shape must list one size per dimension",
                      where));
    for (size_t d = 0; d < g->size(); ++d) {
      b.globalShape[d] = getInt((*g)[d], where + ".global_shape");
      if (b.globalShape[d] < 0)
        bad(fmt::format("{} has a negative global dimension", where));
    }
  }
  if (const json *l = optional(j, "sharding")) {
    Layout layout;
    const json &dims = member(*l, "dims", where + ".sharding");
    if (!dims.is_array() || dims.size() != b.shape.size())
      bad(fmt::format("{}.sharding must lay out every dimension", where));
    auto axes = [&](const json &list, const std::string &what) {
      if (!list.is_array())
        bad(fmt::format("{} must be an array of mesh axes", what));
      std::vector<int> out;
      for (const json &a : list)
        out.push_back(int(getInt(a, what)));
      return out;
    };
    for (const json &d : dims) {
      DimLayout dim;
      dim.axes = axes(member(d, "axes", where + ".sharding.dims"),
                      where + ".sharding.dims[].axes");
      if (const json *bl = optional(d, "blocks"))
        dim.blocks = getPositive(*bl, where + ".sharding.dims[].blocks");
      layout.dims.push_back(std::move(dim));
    }
    if (const json *p = optional(*l, "partial"))
      layout.partial = axes(*p, where + ".sharding.partial");
    b.layout = std::move(layout);
  }

  if (const json *r = optional(j, "pp_rank"))
    b.ppRank = int(getInt(*r, where + ".pp_rank"));
  if (b.role == Role::Param) {
    if (const json *init = optional(j, "init"))
      b.init = parseInit(*init, where + ".init");
    else
      bad(fmt::format("{} is a param without \"init\"", where));
  }
  return b;
}

DataSpec parseData(const json &j, const std::string &where) {
  DataSpec d;
  std::string kind = getString(member(j, "kind", where), where + ".kind");
  if (kind == "idx") {
    d.kind = DataKind::Idx;
    d.images = getString(member(j, "images", where), where + ".images");
    d.labels = getString(member(j, "labels", where), where + ".labels");
    if (const json *s = optional(j, "scale"))
      d.scale = getNumber(*s, where + ".scale");
    if (const json *image = optional(j, "image")) {
      if (!image->is_boolean())
        bad(where + ".image must be a boolean");
      d.image = image->get<bool>();
    }
  } else if (kind == "tokens") {
    d.kind = DataKind::Tokens;
    d.path = getString(member(j, "path", where), where + ".path");
    d.seq = getPositive(member(j, "seq", where), where + ".seq");
  } else if (kind == "token_classes") {
    d.kind = DataKind::TokenClasses;
    d.path = getString(member(j, "path", where), where + ".path");
    d.seq = getPositive(member(j, "seq", where), where + ".seq");
  } else if (kind == "synthetic") {
    d.kind = DataKind::Synthetic;
    d.features = getPositive(member(j, "features", where), where + ".features");
    d.classes = getPositive(member(j, "classes", where), where + ".classes");
    d.count = getPositive(member(j, "count", where), where + ".count");
    int64_t seed = getInt(member(j, "seed", where), where + ".seed");
    if (seed < 0)
      bad(fmt::format("{}.seed must not be negative", where));
    d.seed = uint64_t(seed);
  } else {
    bad(fmt::format("{}.kind \"{}\" is not idx, tokens, token_classes or synthetic", where,
                    kind));
  }
  return d;
}

TrainSpec parseTrain(const json &j) {
  const std::string where = "train";
  TrainSpec t;
  t.batch = getPositive(member(j, "batch", where), "train.batch");
  t.microBatch = t.batch;
  if (const json *mb = optional(j, "micro_batch"))
    t.microBatch = getPositive(*mb, "train.micro_batch");
  if (const json *dp = optional(j, "data_parallel"))
    t.dataParallel = getPositive(*dp, "train.data_parallel");
  t.accumulation = t.batch / (t.microBatch * t.dataParallel);
  if (const json *acc = optional(j, "accumulation"))
    t.accumulation = getPositive(*acc, "train.accumulation");
  if (t.microBatch * t.accumulation * t.dataParallel != t.batch)
    bad(fmt::format("train: batch {} is not micro_batch {} x accumulation {} "
                    "x data_parallel {}",
                    t.batch, t.microBatch, t.accumulation, t.dataParallel));

  if (const json *s = optional(j, "steps"))
    t.steps = getPositive(*s, "train.steps");
  if (const json *e = optional(j, "epochs"))
    t.epochs = getPositive(*e, "train.epochs");
  if (t.steps.has_value() == t.epochs.has_value())
    bad("train: exactly one of \"steps\" and \"epochs\" must be non-null");

  if (const json *s = optional(j, "seed")) {
    int64_t seed = getInt(*s, "train.seed");
    if (seed < 0)
      bad("train.seed must not be negative");
    t.seed = uint64_t(seed);
  }
  if (const json *e = optional(j, "eval_every")) {
    t.evalEvery = getInt(*e, "train.eval_every");
    if (t.evalEvery < 0)
      bad("train.eval_every must not be negative");
  }
  if (const json *p = optional(j, "eval_partial")) {
    std::string mode = getString(*p, "train.eval_partial");
    if (mode != "pad" && mode != "drop")
      bad(fmt::format("train.eval_partial \"{}\" is not pad or drop", mode));
    t.evalPad = mode == "pad";
  }
  if (const json *c = optional(j, "classifier")) {
    if (!c->is_boolean())
      bad("train.classifier must be a boolean");
    t.classifier = c->get<bool>();
  }
  if (const json *log = optional(j, "log")) {
    LogSpec l;
    if (const json *e = optional(*log, "every"))
      l.every = getPositive(*e, "train.log.every");
    if (const json *d = optional(*log, "dir"))
      l.dir = getString(*d, "train.log.dir");
    t.log = l;
  }
  if (const json *ck = optional(j, "checkpoint")) {
    CheckpointSpec c;
    if (const json *e = optional(*ck, "every")) {
      c.every = getInt(*e, "train.checkpoint.every");
      if (c.every < 0)
        bad("train.checkpoint.every must not be negative");
    }
    c.dir = getString(member(*ck, "dir", "train.checkpoint"),
                      "train.checkpoint.dir");
    if (const json *k = optional(*ck, "keep")) {
      c.keep = getInt(*k, "train.checkpoint.keep");
      if (c.keep < 0)
        bad("train.checkpoint.keep must not be negative");
    }
    t.checkpoint = c;
  }
  return t;
}

void requireScalar(const Manifest &m, const char *name, Role role,
                   std::initializer_list<DType> dtypes) {
  const BufferDesc *b = m.find(name);
  if (!b)
    bad(fmt::format("there is no \"{}\" buffer", name));
  if (b->role != role || !b->shape.empty() ||
      std::find(dtypes.begin(), dtypes.end(), b->dtype) == dtypes.end())
    bad(fmt::format("buffer \"{}\" must be a scalar of role {} (it is a {} "
                    "{} of {} elements)",
                    name, roleName(role), roleName(b->role),
                    dtypeName(b->dtype), b->elements));
}

ArenaRanges parseRanges(const json &j, const std::string &where, int64_t from,
                        int64_t to) {
  if (!j.is_array())
    bad(fmt::format("{} must be an array", where));
  ArenaRanges ranges;
  int64_t end = from;
  for (const json &r : j) {
    if (!r.is_array() || r.size() != 2)
      bad(fmt::format("{} holds {}, not [offset, bytes]", where, r.dump()));
    int64_t offset = getInt(r[0], where), bytes = getPositive(r[1], where);
    // In order, apart, and inside [from, to).
    if (offset < end || offset > to || bytes > to - offset)
      bad(fmt::format("{} has [{}, {}), which is out of order or outside "
                      "[{}, {})",
                      where, offset, offset + bytes, from, to));
    ranges.push_back({offset, bytes});
    end = offset + bytes;
  }
  return ranges;
}

void parseOffload(const json &o, Manifest &m) {
  std::string what = getString(member(o, "what", "offload"), "offload.what");
  if (what != "optimizer")
    bad(fmt::format("offload is \"{}\"; this runtime offloads only "
                    "\"optimizer\"",
                    what));
  m.offloadOptimizer = true;
  if (!optional(o, "host_bytes"))
    return; // a pipeline's: no split
  OffloadSplit split;
  split.hostBytes = getInt(o["host_bytes"], "offload.host_bytes");
  int64_t arena = int64_t(m.arenaBytes);
  if (split.hostBytes < 0 || split.hostBytes > arena ||
      split.hostBytes % int64_t(m.arenaAlign) != 0)
    bad(fmt::format("offload.host_bytes {} is not an aligned offset in the "
                    "arena of {} bytes",
                    split.hostBytes, arena));
  auto ranges = [&](const char *key) {
    return parseRanges(member(o, key, "offload"),
                       fmt::format("offload.{}", key), split.hostBytes, arena);
  };
  split.mirrored = ranges("mirrored");
  split.down = ranges("down");
  split.up = ranges("up");
  if (optional(o, "zero"))
    split.zero = ranges("zero");
  // What the host copies to or from the device, or clears there, it
  // mirrors.
  for (const ArenaRanges *part : {&split.down, &split.up, &split.zero})
    for (const std::pair<int64_t, int64_t> &copy : *part)
      if (std::none_of(split.mirrored.begin(), split.mirrored.end(),
                       [&](const std::pair<int64_t, int64_t> &r) {
                         return r.first <= copy.first &&
                                copy.first + copy.second <= r.first + r.second;
                       }))
        bad(fmt::format(
            "offload copies or clears [{}, {}), which it does not mirror",
            copy.first, copy.first + copy.second));
  m.offloadSplit = std::move(split);
}

void validateLayout(const Manifest &m) {
  if (m.arenaAlign < 64 || (m.arenaAlign & (m.arenaAlign - 1)) != 0)
    bad(fmt::format("arena.align {} is not a power of two >= 64",
                    m.arenaAlign));
  std::vector<const BufferDesc *> sorted;
  for (const BufferDesc &b : m.buffers) {
    if (b.offset % m.arenaAlign != 0)
      bad(fmt::format("buffer \"{}\" has offset {}, not a multiple of {}",
                      b.name, b.offset, m.arenaAlign));
    if (b.offset > m.arenaBytes || b.bytes > m.arenaBytes - b.offset)
      bad(fmt::format("buffer \"{}\" ([{}, {})) lies outside the arena of {} "
                      "bytes",
                      b.name, b.offset, b.offset + b.bytes, m.arenaBytes));
    if (m.find(b.name) != &b)
      bad(fmt::format("buffer \"{}\" is declared twice", b.name));
    if (b.bytes > 0)
      sorted.push_back(&b);
  }
  // Named buffers never overlap (docs/abi.md), whatever their roles, but
  // those of different pipeline ranks: each rank's view is checked.
  std::sort(sorted.begin(), sorted.end(),
            [](auto *a, auto *b) { return a->offset < b->offset; });
  int owners = 0;
  for (const BufferDesc *b : sorted)
    owners = std::max(owners, b->ppRank + 1);
  for (int view = 0; view < std::max(owners, 1); ++view) {
    const BufferDesc *previous = nullptr;
    for (const BufferDesc *b : sorted) {
      if (b->ppRank >= 0 && b->ppRank != view)
        continue;
      if (previous && previous->offset + previous->bytes > b->offset)
        bad(fmt::format("buffers \"{}\" and \"{}\" overlap", previous->name,
                        b->name));
      previous = b;
    }
  }

  requireScalar(m, "step", Role::State, {DType::I64});
  requireScalar(m, "out/loss", Role::Output, {DType::F32});
  if (m.find("in/total_steps"))
    requireScalar(m, "in/total_steps", Role::Input, {DType::I64});
  if (m.find("in/micro_index"))
    requireScalar(m, "in/micro_index", Role::Input, {DType::I64});
  for (const BufferDesc &b : m.buffers) {
    bool isIn = b.name.rfind("in/", 0) == 0,
         isOut = b.name.rfind("out/", 0) == 0;
    if ((b.role == Role::Input) != isIn || (b.role == Role::Output) != isOut)
      bad(fmt::format("buffer \"{}\" has role {}, but inputs are named in/... "
                      "and outputs out/...",
                      b.name, roleName(b.role)));
    if (b.role == Role::Output &&
        (!b.shape.empty() || b.dtype == DType::BF16 || b.dtype == DType::F16))
      bad(fmt::format("output \"{}\" must be an f32, i32 or i64 scalar",
                      b.name));
    if (b.role == Role::Param && b.dtype != DType::F32)
      bad(fmt::format("param \"{}\" is {}; parameters are f32 master copies",
                      b.name, dtypeName(b.dtype)));
  }
}

MeshSpec parseMesh(const json &j) {
  MeshSpec mesh;
  const json &axes = member(j, "axes", "mesh");
  if (!axes.is_array() || axes.empty() || axes.size() > 16)
    bad("mesh.axes must list 1 to 16 axes");
  for (const json &a : axes) {
    std::string name = getString(member(a, "name", "mesh.axes[]"),
                                 "mesh.axes[].name");
    if (std::find(mesh.names.begin(), mesh.names.end(), name) !=
        mesh.names.end())
      bad(fmt::format("mesh axis \"{}\" is named twice", name));
    mesh.names.push_back(name);
    mesh.sizes.push_back(
        int(getPositive(member(a, "size", "mesh.axes[]"), "mesh.axes[].size")));
  }
  return mesh;
}

/// The layouts agree with the mesh and with the shards' shapes: the runtime
/// and the compiler compute shards alike.
void validateShards(const Manifest &m) {
  for (const BufferDesc &b : m.buffers) {
    if (!b.layout) {
      if (b.globalShape != b.shape)
        bad(fmt::format("buffer \"{}\" has a global shape but no layout",
                        b.name));
      continue;
    }
    std::vector<bool> used(m.mesh.sizes.size(), false);
    auto use = [&](int a) {
      if (a < 0 || size_t(a) >= used.size() || used[size_t(a)])
        bad(fmt::format("buffer \"{}\" names mesh axis {} out of range or "
                        "twice",
                        b.name, a));
      used[size_t(a)] = true;
    };
    for (size_t d = 0; d < b.shape.size(); ++d) {
      const DimLayout &dim = b.layout->dims[d];
      for (int a : dim.axes)
        use(a);
      if (b.globalShape[d] % dim.blocks != 0)
        bad(fmt::format("buffer \"{}\": {} blocks do not divide dimension {} "
                        "({})",
                        b.name, dim.blocks, d, b.globalShape[d]));
      if (localDimSize(b.globalShape[d], dim, m.mesh) != b.shape[d])
        bad(fmt::format("buffer \"{}\": dimension {} is {} per rank, but its "
                        "layout gives {}",
                        b.name, d, b.shape[d],
                        localDimSize(b.globalShape[d], dim, m.mesh)));
    }
    for (int a : b.layout->partial)
      use(a);
  }
}

PipelineSpec parsePipeline(const json &j, const Manifest &m) {
  PipelineSpec p;
  const std::string where = "pipeline";
  p.axis = getString(member(j, "axis", where), where + ".axis");
  auto axis = std::find(m.mesh.names.begin(), m.mesh.names.end(), p.axis);
  if (axis == m.mesh.names.end())
    bad(fmt::format("pipeline.axis \"{}\" is not an axis of the mesh", p.axis));
  int ranks = m.mesh.sizes[size_t(axis - m.mesh.names.begin())];
  p.schedule = getString(member(j, "schedule", where), where + ".schedule");
  p.microbatches = getPositive(member(j, "microbatches", where),
                               where + ".microbatches");
  p.chunks = getPositive(member(j, "chunks", where), where + ".chunks");
  p.slots = getInt(member(j, "slots", where), where + ".slots");
  auto names = [&](const json &stage, const char *key, const std::string &at) {
    std::vector<std::string> out;
    const json &list = member(stage, key, at);
    if (!list.is_array())
      bad(fmt::format("{}.{} must be an array", at, key));
    for (const json &n : list) {
      out.push_back(getString(n, at + "." + key));
      if (!m.find(out.back()))
        bad(fmt::format("{}.{} names \"{}\", which is not a buffer", at, key,
                        out.back()));
    }
    return out;
  };
  const json &stages = member(j, "stages", where);
  if (!stages.is_array() || stages.size() != size_t(ranks * p.chunks))
    bad(fmt::format("pipeline.stages must list {} stages", ranks * p.chunks));
  for (size_t s = 0; s < stages.size(); ++s) {
    std::string at = fmt::format("pipeline.stages[{}]", s);
    PipelineStage st;
    st.forward = getString(member(stages[s], "forward", at), at + ".forward");
    st.backward =
        getString(member(stages[s], "backward", at), at + ".backward");
    const json &reads = member(stages[s], "reads_batch", at);
    if (!reads.is_boolean())
      bad(at + ".reads_batch must be a boolean");
    st.readsBatch = reads.get<bool>();
    st.send = names(stages[s], "send", at);
    st.recv = names(stages[s], "recv", at);
    st.gradSend = names(stages[s], "grad_send", at);
    st.gradRecv = names(stages[s], "grad_recv", at);
    st.stash = names(stages[s], "stash", at);
    st.stashSlots = getInt(member(stages[s], "stash_slots", at),
                           at + ".stash_slots");
    if (const json *index = optional(stages[s], "slot_index"))
      st.slotIndex = getString(*index, at + ".slot_index");
    if (const json *e = optional(stages[s], "eval")) {
      st.eval = getString(*e, at + ".eval");
      const json &reads = member(stages[s], "eval_reads_batch", at);
      if (!reads.is_boolean())
        bad(at + ".eval_reads_batch must be a boolean");
      st.evalReadsBatch = reads.get<bool>();
      st.evalSend = names(stages[s], "eval_send", at);
      st.evalRecv = names(stages[s], "eval_recv", at);
    }
    p.stages.push_back(std::move(st));
  }
  // A stage sends what the next receives, buffer for buffer.
  for (size_t s = 0; s + 1 < p.stages.size(); ++s) {
    auto same = [&](const std::vector<std::string> &a,
                    const std::vector<std::string> &b) {
      if (a.size() != b.size())
        return false;
      for (size_t i = 0; i < a.size(); ++i)
        if (m.find(a[i])->bytes != m.find(b[i])->bytes)
          return false;
      return true;
    };
    if (!same(p.stages[s].send, p.stages[s + 1].recv) ||
        !same(p.stages[s + 1].gradSend, p.stages[s].gradRecv) ||
        !same(p.stages[s].evalSend, p.stages[s + 1].evalRecv))
      bad(fmt::format("pipeline stages {} and {} do not send what the other "
                      "receives",
                      s, s + 1));
  }
  const json &apply = member(j, "apply", where);
  const json &actions = member(j, "actions", where);
  if (!apply.is_array() || apply.size() != size_t(ranks) ||
      !actions.is_array() || actions.size() != size_t(ranks))
    bad(fmt::format("pipeline.apply and pipeline.actions must have one entry "
                    "per rank of axis \"{}\"",
                    p.axis));
  for (const json &a : apply)
    p.apply.push_back(getString(a, "pipeline.apply[]"));
  for (const json &list : actions) {
    std::vector<PipelineAction> mine;
    if (!list.is_array())
      bad("pipeline.actions[] must be an array");
    for (const json &a : list) {
      if (!a.is_array() || a.size() != 4)
        bad("a pipeline action is [\"F\" or \"B\", micro-batch, stage, slot]");
      PipelineAction act;
      act.forward = getString(a[0], "pipeline.actions") == "F";
      act.microbatch = getInt(a[1], "pipeline.actions");
      act.stage = getInt(a[2], "pipeline.actions");
      act.slot = getInt(a[3], "pipeline.actions");
      if (act.microbatch < 0 || act.microbatch >= p.microbatches ||
          act.stage < 0 || act.stage >= int64_t(p.stages.size()))
        bad("a pipeline action names a micro-batch or stage out of range");
      mine.push_back(act);
    }
    p.actions.push_back(std::move(mine));
  }
  return p;
}

Manifest parse(std::string_view text) {
  json j = json::parse(text.begin(), text.end());
  Manifest m;
  m.abi = int(getInt(member(j, "abi", "the manifest"), "abi"));
  if (m.abi != kAbiVersion)
    bad(fmt::format("ABI version {} is not the runtime's {}: rebuild the "
                    "program with the dtc that matches this libdtrt",
                    m.abi, kAbiVersion));
  m.name = getString(member(j, "name", "the manifest"), "name");
  if (const json *s = optional(j, "source"))
    m.source = getString(*s, "source");
  const json &arena = member(j, "arena", "the manifest");
  m.arenaBytes =
      size_t(getPositive(member(arena, "bytes", "arena"), "arena.bytes"));
  if (const json *a = optional(arena, "align"))
    m.arenaAlign = size_t(getPositive(*a, "arena.align"));
  if (const json *o = optional(j, "offload"))
    parseOffload(*o, m);

  if (const json *cost = optional(j, "cost")) {
    if (const json *f = optional(*cost, "flops_per_step"); f && f->is_number())
      m.flopsPerStep = f->get<double>();
    m.modelFlopsPerStep = m.flopsPerStep;
    if (const json *f = optional(*cost, "model_flops_per_step");
        f && f->is_number())
      m.modelFlopsPerStep = f->get<double>();
    if (const json *p = optional(*cost, "precision"))
      m.precision = getString(*p, "cost.precision");
  }
  if (const json *mesh = optional(j, "mesh"))
    m.mesh = parseMesh(*mesh);
  const json &buffers = member(j, "buffers", "the manifest");
  if (!buffers.is_array())
    bad("buffers must be an array");
  for (size_t i = 0; i < buffers.size(); ++i)
    m.buffers.push_back(parseBuffer(buffers[i], i));
  validateLayout(m);
  validateShards(m);
  if (const json *cs = optional(j, "collectives")) {
    if (!cs->is_array())
      bad("collectives must be an array");
    for (const json &c : *cs) {
      CollectiveDesc d;
      d.id = getInt(member(c, "id", "collectives[]"), "collectives[].id");
      if (d.id != int64_t(m.collectives.size()))
        bad("collectives must be listed by id, from 0");
      d.kind = getString(member(c, "kind", "collectives[]"),
                         "collectives[].kind");
      d.what = getString(member(c, "what", "collectives[]"),
                         "collectives[].what");
      d.entry = getString(member(c, "entry", "collectives[]"),
                          "collectives[].entry");
      d.bytes = getInt(member(c, "bytes", "collectives[]"),
                       "collectives[].bytes");
      if (const json *e = optional(c, "elements"))
        d.elements = getInt(*e, "collectives[].elements");
      if (const json *t = optional(c, "dtype"))
        d.dtype = getString(*t, "collectives[].dtype");
      for (const json &a : member(c, "axes", "collectives[]"))
        d.axes.push_back(getString(a, "collectives[].axes"));
      m.collectives.push_back(std::move(d));
    }
  }

  if (const json *spans = optional(j, "spans")) {
    if (!spans->is_array())
      bad("spans must be an array");
    for (const json &s : *spans) {
      SpanDesc d;
      d.id = getInt(member(s, "id", "spans[]"), "spans[].id");
      if (d.id != int64_t(m.spans.size()))
        bad("spans must be listed by id, from 0");
      d.entry = getString(member(s, "entry", "spans[]"), "spans[].entry");
      d.op = getString(member(s, "op", "spans[]"), "spans[].op");
      if (const json *layer = optional(s, "layer"))
        d.layer = getString(*layer, "spans[].layer");
      d.flops = getNumber(member(s, "flops", "spans[]"), "spans[].flops");
      d.bytes = getNumber(member(s, "bytes", "spans[]"), "spans[].bytes");
      if (const json *k = optional(s, "kernel")) {
        KernelCall call;
        call.kernel = getString(member(*k, "name", "spans[].kernel"),
                                "spans[].kernel.name");
        const json &args = member(*k, "args", "spans[].kernel");
        if (!args.is_array())
          bad("spans[].kernel.args must be an array");
        for (const json &a : args)
          call.args.push_back(getInt(a, "spans[].kernel.args[]"));
        d.kernel = std::move(call);
      }
      if (const json *c = optional(s, "collective")) {
        d.collective = getInt(*c, "spans[].collective");
        if (d.collective < 0 || size_t(d.collective) >= m.collectives.size())
          bad(fmt::format("span {} names collective {}, which the manifest "
                          "does not list",
                          d.id, d.collective));
      }
      m.spans.push_back(std::move(d));
    }
  }
  if (const json *p = optional(j, "pipeline"))
    m.pipeline = parsePipeline(*p, m);
  m.train = parseTrain(member(j, "train", "the manifest"));
  if (const json *init = optional(j, "init"))
    m.pretrained = parsePretrained(*init);
  if (const json *names = optional(j, "checkpoint_names"))
    m.checkpointNames = parseCheckpointNames(*names, m);
  if (const json *skip = optional(j, "checkpoint_skip"))
    for (const json &name : *skip)
      m.checkpointSkip.push_back(getString(name, "checkpoint_skip[]"));
  if (const json *config = optional(j, "hf_config"))
    m.hfConfig = getString(*config, "hf_config");
  if (const json *adapters = optional(j, "adapters"))
    m.adapters = parseAdapters(*adapters, m);
  const json &data = member(j, "data", "the manifest");
  m.trainData = parseData(member(data, "train", "data"), "data.train");
  if (const json *e = optional(data, "eval"))
    m.evalData = parseData(*e, "data.eval");
  return m;
}

} // namespace

int Manifest::pipelineAxis() const {
  if (!pipeline)
    return -1;
  for (size_t a = 0; a < mesh.names.size(); ++a)
    if (mesh.names[a] == pipeline->axis)
      return int(a);
  return -1;
}

bool Manifest::holds(const BufferDesc &b,
                     const std::vector<int> &coords) const {
  int axis = pipelineAxis();
  return b.ppRank < 0 || axis < 0 || size_t(axis) >= coords.size() ||
         coords[size_t(axis)] == b.ppRank;
}

Expected<Manifest> parseManifest(std::string_view text) {
  try {
    return parse(text);
  } catch (const std::exception &e) {
    return Error(fmt::format("the program's manifest is invalid ({}); this is "
                             "a bug in dtc or libdtrt, please report it",
                             e.what()));
  }
}

} // namespace dtrt
