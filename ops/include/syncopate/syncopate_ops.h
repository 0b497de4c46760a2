/* The C ABI of Syncopate's ops (syncopate/ops.h), for callers that are not C++ (the Python
 * package loads it with ctypes) or that want a stable ABI. Every struct starts with its own
 * size (struct_size = sizeof the struct the caller was compiled with), so later fields can be
 * added at its end: the library takes a struct from a caller built against an older header of
 * the same SYNCOPATE_ABI_VERSION as long as it holds the fields marked "required" (headers from
 * before those fields were all there are refused, INVALID_ARGUMENT naming struct_size); the
 * later fields that caller's struct lacks take their defaults (inputs) or are not written
 * (outputs).
 * Functions return a status code (the gRPC canonical codes, as syncopate/status.h); the
 * message of the calling thread's last failure is syncopate_last_error().
 *
 * Thread-safety: one thread at a time per op; the pure functions are thread-safe. */
#ifndef SYNCOPATE_OPS_H_
#define SYNCOPATE_OPS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYNCOPATE_ABI_VERSION 1

typedef enum {
  SYNCOPATE_OK = 0,
  SYNCOPATE_INVALID_ARGUMENT = 3,
  SYNCOPATE_DEADLINE_EXCEEDED = 4,
  SYNCOPATE_NOT_FOUND = 5,
  SYNCOPATE_RESOURCE_EXHAUSTED = 8,
  SYNCOPATE_FAILED_PRECONDITION = 9,
  SYNCOPATE_ABORTED = 10,
  SYNCOPATE_UNIMPLEMENTED = 12,
  SYNCOPATE_INTERNAL = 13,
  SYNCOPATE_UNAVAILABLE = 14
  /* any other gRPC canonical code may come back too */
} syncopate_status;

typedef enum {
  SYNCOPATE_ALL_GATHER_MATMUL = 0,
  SYNCOPATE_MATMUL_REDUCE_SCATTER = 1,
  SYNCOPATE_MATMUL_ALL_REDUCE = 2
} syncopate_op_kind;

typedef enum { SYNCOPATE_BF16 = 0, SYNCOPATE_FP16 = 1 } syncopate_dtype;
typedef enum {
  SYNCOPATE_BACKEND_AUTO = 0,
  SYNCOPATE_BACKEND_COPY_ENGINE = 1,
  SYNCOPATE_BACKEND_SM = 2
} syncopate_backend;
typedef enum {
  SYNCOPATE_PATH_AUTO = 0,
  SYNCOPATE_PATH_FUSED = 1,
  SYNCOPATE_PATH_UNFUSED = 2
} syncopate_path_preference;

/* Inside a bootstrap allgather: hands rank `rank`'s message to the library (copied). */
typedef void (*syncopate_deliver_fn)(void* deliver_ctx, int32_t rank, const char* data,
                                     uint64_t length);
/* The caller's allgather (e.g. over torch.distributed): sends `mine` to every rank, then calls
 * deliver(deliver_ctx, r, ...) once for every rank r (its own too); returns SYNCOPATE_OK or an
 * error code. Called during syncopate_op_create only, by every rank in the same order. */
typedef int32_t (*syncopate_allgather_fn)(void* user_data, const char* mine, uint64_t length,
                                          syncopate_deliver_fn deliver, void* deliver_ctx);

/* Every field: required. */
typedef struct {
  uint32_t struct_size;
  const char* job; /* unique per group on the node */
  int32_t rank;
  int32_t world;
  int32_t device;
  int64_t rendezvous_timeout_ms; /* 0: 30000 */
  const char* rendezvous_dir;    /* NULL or "": abstract socket names (one network namespace) */
  /* NULL: the Unix-socket rendezvous; else the caller's allgather (syncopate::ops::GroupConfig::
   * bootstrap: the workspace's handles then travel by pidfd_getfd) */
  syncopate_allgather_fn bootstrap;
  void* bootstrap_user_data;
} syncopate_group_config;

#define SYNCOPATE_MAX_BUCKETS 16

/* One bucket's path, set by the caller (syncopate::ops::BucketPath). */
typedef struct {
  int64_t bucket_m; /* one of the op's buckets */
  int32_t fused;    /* 1: the fused kernel; 0: the local GEMM then the transfers */
  int32_t backend;  /* syncopate_backend; AUTO: the heuristic's */
  int32_t chunks;   /* 0: the op's */
  int32_t reserved; /* 0 */
} syncopate_bucket_path;

typedef struct {
  uint32_t struct_size;
  int32_t kind; /* syncopate_op_kind */
  int64_t max_m;
  int64_t n;
  int64_t k;
  int32_t dtype;       /* syncopate_dtype */
  int32_t backend;     /* syncopate_backend */
  int32_t path;        /* syncopate_path_preference */
  int32_t num_buckets; /* 0: the default buckets */
  int64_t m_buckets[SYNCOPATE_MAX_BUCKETS];
  int32_t chunks;        /* 0: heuristic */
  int32_t comm_ctas;     /* 0: default */
  int64_t timeout_ms;    /* 0: 2000 */
  const char* cache_dir; /* NULL or "": no kernel cache */
  int32_t num_bucket_paths; /* 0..SYNCOPATE_MAX_BUCKETS */
  syncopate_bucket_path bucket_paths[SYNCOPATE_MAX_BUCKETS];
  /* Every field above: required; the ones below came later. */
  /* A fused GEMM+ReduceScatter reduces each tile's part of a chunk as soon as it is written
   * (OpConfig::tile_parts). 0: the default (on); 1: on; -1: off (whole chunks). */
  int32_t tile_parts;
  int32_t reserved;
} syncopate_op_config;

typedef struct {
  uint32_t struct_size;
  int64_t m;
  int64_t bucket_m;
  int32_t fused;   /* 1: the fused kernel; 0: the local GEMM then the transfers */
  int32_t backend; /* syncopate_backend: what moves the chunks */
  int32_t chunks;
  char reason[256]; /* NUL-terminated, truncated */
  /* Every field above: required; the ones below came later. */
  int32_t tile_parts; /* 1: a fused ReduceScatter that moves tile parts */
  /* The chunk plan template the bucket's kernels run (allgather.push, reducescatter.direct,
   * allreduce.direct or allreduce.direct_out), NUL-terminated; the reason ends with it too, but
   * a long reason is truncated. */
  char plan[64];
} syncopate_path;

typedef struct syncopate_op syncopate_op;

/* C names (snake_case, syncopate_ prefix), not the C++ code's style. */
/* NOLINTBEGIN(readability-identifier-naming) */

/* The message of this thread's last failed call ("" after a success). Valid until the thread's
 * next call into the library. */
const char* syncopate_last_error(void);
/* SYNCOPATE_ABI_VERSION of the library loaded. */
int32_t syncopate_abi_version(void);
/* "INVALID_ARGUMENT", ... */
const char* syncopate_status_name(int32_t status);

/* Pure: no GPU touched. */
int32_t syncopate_check_config(const syncopate_group_config* group,
                               const syncopate_op_config* config);
int32_t syncopate_choose_path(const syncopate_op_config* config, int32_t world, int64_t m,
                              syncopate_path* out);

/* Collective (every rank of the group, same config); *out is NULL on failure. The calls below
 * take only a handle this returned and syncopate_op_destroy has not destroyed: any other (NULL,
 * destroyed, made up) is INVALID_ARGUMENT naming it, never a use after free. */
int32_t syncopate_op_create(const syncopate_group_config* group, const syncopate_op_config* config,
                            syncopate_op** out);
/* Pointers are device addresses; stream is a CUstream (NULL: the legacy default stream).
 * a_gathered may be 0 (all_gather_matmul only). Capturable in the caller's CUDA graph on either
 * backend, a bucket's first run too (Op::Run in ops.h says more). */
int32_t syncopate_op_run(syncopate_op* op, int64_t m, uint64_t a, uint64_t b, uint64_t c,
                         uint64_t a_gathered, void* stream);
int32_t syncopate_op_synchronize(syncopate_op* op, void* stream);
int32_t syncopate_op_error(const syncopate_op* op); /* the sticky error, or SYNCOPATE_OK */
int32_t syncopate_op_path(const syncopate_op* op, int64_t m, syncopate_path* out);
/* 0 when m has no input workspace (syncopate_last_error() says why: m out of range, or not a
 * multiple of the world size). */
uint64_t syncopate_op_input_workspace(const syncopate_op* op, int64_t m);
/* NULL, or a handle already destroyed, is fine: nothing happens. */
void syncopate_op_destroy(syncopate_op* op);
/* NOLINTEND(readability-identifier-naming) */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SYNCOPATE_OPS_H_ */
