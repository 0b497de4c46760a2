// Import of MSCCL algorithms (the msccl-tools XML format) into the chunk-plan model.
//
// Accepted input: one <algo ngpus= nchunksperloop= coll= inplace= [name= proto= nchannels=
// redop=]> with one <gpu id= i_chunks= o_chunks= s_chunks=> per rank, each holding thread blocks
// <tb id= send= recv= chan=> of steps <step s= type= srcbuf= srcoff= dstbuf= dstoff= cnt= depid=
// deps= hasdep=/>, step types s, r, rcs, rrc, rrs, rrcs, cpy, re, nop.
//
// Mapping (MSCCL semantics as the msccl-tools lowering and the MSCCL executor define them):
// - A chunk is a slab of a buffer along axis 0 (options.shape, see ImportOptions). Buffers i, o, s
//   become "input", "output", "scratch", except that in-place collectives follow templates.h:
//   allgather/allreduce -> one buffer "data" (allgather input chunk k of rank r is data chunk
//   r * i_chunks + k); in-place reduce_scatter keeps "input" with the output inside it.
// - Each thread block of a rank becomes that rank's channel with the same index (tb id).
// - The k-th sending step of rank A's tb with send=B on MSCCL channel c is paired with the k-th
//   receiving step of rank B's tb with recv=A on channel c: together one PUSH executed by A on A's
//   channel, source from A's step, destination from B's step. Reducing receives (rrc, rrs, rrcs)
//   make it a reduction (the algorithm's redop, default sum) into B's source slot (srcbuf/srcoff),
//   in place; where dstbuf/dstoff differs (rrc, rrcs) a LOCAL_COPY on B moves the result there.
//   Unlike MSCCL, the source slot ends up holding the partial result.
// - cpy/re become LOCAL_COPY (re with the reduce op). nop carries its dependency to the next step.
// - Dependencies: a step waits for the previous step of its tb (MSCCL runs a tb's steps in order)
//   and for the step named by depid/deps; a forwarding step (rcs, rrcs, rrs) sends after it
//   received. A receive half (executed by the sender) waits for the receiver's depid step and for
//   the receiver's earlier steps of the same tb that touch the landing slot (MSCCL buffers sends
//   in a FIFO; our push writes the slot directly, so only data hazards order it) - as far as the
//   sender can observe them (transfers it executes or that land on it). Swapping two slots in
//   place without scratch therefore becomes a dependency cycle, which ValidatePlan reports.
// - Initial regions and the postcondition come from coll= (allgather, reduce_scatter, allreduce,
//   alltoall; "custom" gets every rank's whole input as initial data and no postcondition).
//
// Errors name the element and its line: "line 12: <gpu id=1> <tb id=0> <step s=3>: ...".
//
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "absl/status/statusor.h"
#include "core/plan/plan.h"

namespace syncopate::plan {

struct ImportOptions {
  // Shape of the collective's full tensor as in templates.h: the gathered tensor (allgather), the
  // per-rank input (reduce_scatter, alltoall) or the data (allreduce). shape[0] must divide into
  // that buffer's chunk count; each chunk is shape[0] / chunks rows. Empty: one row of 16
  // elements per chunk.
  Shape shape;
  DType dtype = DType::kBF16;
};

absl::StatusOr<Plan> ImportMscclXml(std::string_view xml, const ImportOptions& options);

}  // namespace syncopate::plan
