//===- dtrt/collectives.h - Collectives for generated code ------*- C++ -*-===//
//
// Part of dt, a compiler for declarative distributed training.
//
//===----------------------------------------------------------------------===//
//
// The C functions a partitioned program calls on arena buffers. They run on
// the communicator the runtime installed before the first entry-point call;
// generated code cannot handle an error, so a failed collective prints its
// message and aborts the whole job (every rank exits non-zero).
//
// `dtype` is dtrt::DType (0 f32, 1 i32, 2 i64, 3 bf16, 4 f16); `axes` is the
// group's axis mask (dtrt/comm.h); `group` the group size the program was
// compiled for (checked against the mesh); `id` the collective's index in the
// manifest's "collectives", which names it in messages.
//
//===----------------------------------------------------------------------===//

#ifndef DTRT_COLLECTIVES_H
#define DTRT_COLLECTIVES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// dst = sum over the group of src (`count` elements; src may equal dst).
void dtrt_all_reduce(const void *src, void *dst, int64_t count, int32_t dtype,
                     int32_t axes, int32_t id);
/// src holds `group` blocks of `count`; dst (`count` elements) = sum over the
/// group of block indexInGroup.
void dtrt_reduce_scatter(const void *src, void *dst, int64_t count,
                         int64_t group, int32_t dtype, int32_t axes,
                         int32_t id);
/// dst (`group` blocks of `count`) = the src of every group member, in order.
void dtrt_all_gather(const void *src, void *dst, int64_t count, int64_t group,
                     int32_t dtype, int32_t axes, int32_t id);
/// src and dst hold `group` blocks of `count`: block j of dst = block
/// indexInGroup of the src of the group's member j.
void dtrt_all_to_all(const void *src, void *dst, int64_t count, int64_t group,
                     int32_t dtype, int32_t axes, int32_t id);
/// This rank's block of a replicated tensor of `total` elements, cut in blocks
/// of `count`: dst = src[i*count, min(total, (i+1)*count)) with i its index in
/// the group over `axes`, zero-filled past `total` (shards are padded, never
/// uneven). No communication.
void dtrt_take_shard(const void *src, void *dst, int64_t total, int64_t count,
                     int32_t dtype, int32_t axes, int32_t id);

/// The asynchronous forms (dt.async): the same arguments; the collective
/// starts now, runs beside the rank's work in issue order, and has finished
/// when dtrt_wait(id) returns. Until then the program neither reads dst nor
/// writes src.
void dtrt_all_reduce_start(const void *src, void *dst, int64_t count,
                           int32_t dtype, int32_t axes, int32_t id);
void dtrt_reduce_scatter_start(const void *src, void *dst, int64_t count,
                               int64_t group, int32_t dtype, int32_t axes,
                               int32_t id);
void dtrt_all_gather_start(const void *src, void *dst, int64_t count,
                           int64_t group, int32_t dtype, int32_t axes,
                           int32_t id);
void dtrt_all_to_all_start(const void *src, void *dst, int64_t count,
                           int64_t group, int32_t dtype, int32_t axes,
                           int32_t id);
/// Returns once the last started collective `id` has finished.
void dtrt_wait(int32_t id);

/// This rank's coordinate along mesh axis `axis` (dt.shard_start).
int64_t dtrt_mesh_coord(int32_t axis);

#ifdef __cplusplus
} // extern "C"

#include "dtrt/error.h"

#include <string>
#include <vector>

namespace dtrt {
class Communicator;
/// Installs the communicator the functions above use (not owned; null
/// uninstalls) and the names of the program's collectives by id (from the
/// manifest). The runtime calls it once before the first step.
void setProgramCommunicator(Communicator *comm,
                            std::vector<std::string> names = {});
/// The communicator installed (null: none), for code that must end every
/// rank on a failure it cannot recover from.
Communicator *programCommunicator();
/// Seconds the rank's thread has spent in the program's collectives, or
/// waiting for asynchronous ones, since the communicator was installed (time
/// waiting for other ranks included): the communication its steps exposed.
double programCollectiveSeconds();
/// Adds collectives' time that another engine measured: a GPU plan's, run
/// on the device's stream rather than through the functions above.
void addProgramCollectiveSeconds(double seconds);
/// An error when asynchronous collectives are still running after entry point
/// `entry` returned (every dtrt_*_start has its dtrt_wait in the same call).
Status checkCollectivesDone(const char *entry);
} // namespace dtrt
#endif

#endif // DTRT_COLLECTIVES_H
