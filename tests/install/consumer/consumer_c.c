/* The installed C ABI (syncopate/syncopate_ops.h) as a C program uses it: the ABI version, config
 * checks that name the field at fault, the path of a run, and creating an op (on a machine
 * without a GPU, UNAVAILABLE saying so). Exits 1 naming the first mismatch. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syncopate/syncopate_ops.h>

static void fail(const char* what, int32_t status) {
  fprintf(stderr, "consumer_c: FAIL: %s (status %s, last error '%s')\n", what,
          syncopate_status_name(status), syncopate_last_error());
  exit(1);
}

static void expect_invalid(const syncopate_group_config* group, const syncopate_op_config* op,
                           const char* field) {
  int32_t status = syncopate_check_config(group, op);
  if (status != SYNCOPATE_INVALID_ARGUMENT) fail("a bad config was not INVALID_ARGUMENT", status);
  if (strstr(syncopate_last_error(), field) == NULL) {
    fprintf(stderr, "consumer_c: FAIL: the error '%s' does not name %s\n", syncopate_last_error(),
            field);
    exit(1);
  }
  printf("consumer_c: bad %s: INVALID_ARGUMENT: %s\n", field, syncopate_last_error());
}

static syncopate_group_config group_config(int32_t rank, int32_t world) {
  syncopate_group_config group;
  memset(&group, 0, sizeof(group));
  group.struct_size = sizeof(group);
  group.job = "install-consumer-c";
  group.rank = rank;
  group.world = world;
  return group;
}

static syncopate_op_config op_config(int64_t max_m, int64_t n, int64_t k) {
  syncopate_op_config op;
  memset(&op, 0, sizeof(op));
  op.struct_size = sizeof(op);
  op.kind = SYNCOPATE_ALL_GATHER_MATMUL;
  op.max_m = max_m;
  op.n = n;
  op.k = k;
  return op;
}

int main(void) {
  int32_t status;
  if (syncopate_abi_version() != SYNCOPATE_ABI_VERSION) {
    fprintf(stderr, "consumer_c: FAIL: library ABI version %d, header %d\n",
            (int)syncopate_abi_version(), SYNCOPATE_ABI_VERSION);
    return 1;
  }
  if (strcmp(syncopate_status_name(SYNCOPATE_INVALID_ARGUMENT), "INVALID_ARGUMENT") != 0) {
    fail("syncopate_status_name(3) is not INVALID_ARGUMENT", SYNCOPATE_OK);
  }

  /* Config checks: the valid one passes, each bad one names its field. */
  syncopate_group_config group = group_config(0, 2);
  syncopate_op_config op = op_config(8192, 1024, 1024);
  status = syncopate_check_config(&group, &op);
  if (status != SYNCOPATE_OK) fail("a valid config was refused", status);
  if (syncopate_last_error()[0] != '\0') fail("last_error is not empty after a success", status);
  group.world = 0;
  expect_invalid(&group, &op, "group.world");
  group.world = 2;
  group.rank = 2;
  expect_invalid(&group, &op, "group.rank");
  group.rank = 0;
  op.max_m = 8191;
  expect_invalid(&group, &op, "op.max_m");
  op.max_m = 8192;
  /* A caller built against an older header passes a smaller struct: taken down to the first
   * release's fields (tile_parts came later), refused below. */
  op.struct_size = offsetof(syncopate_op_config, tile_parts);
  status = syncopate_check_config(&group, &op);
  if (status != SYNCOPATE_OK) fail("an older header's smaller op config was refused", status);
  op.struct_size = 8;
  expect_invalid(&group, &op, "struct_size");
  op.struct_size = sizeof(op);

  /* The path of a run: a bucket at least M; M not a multiple of the world is refused. */
  syncopate_path path;
  memset(&path, 0, sizeof(path));
  path.struct_size = sizeof(path);
  status = syncopate_choose_path(&op, 2, 4096, &path);
  if (status != SYNCOPATE_OK) fail("choose_path at m=4096 failed", status);
  if (path.m != 4096 || path.bucket_m < 4096 || path.bucket_m > op.max_m ||
      path.bucket_m % 2 != 0 || path.reason[0] == '\0' ||
      strcmp(path.plan, "allgather.push") != 0) {
    fprintf(stderr, "consumer_c: FAIL: path at m=4096: m %lld bucket_m %lld reason '%s'\n",
            (long long)path.m, (long long)path.bucket_m, path.reason);
    return 1;
  }
  printf("consumer_c: m=4096: bucket_m %lld, %s, %d chunk(s), plan %s: %s\n",
         (long long)path.bucket_m, path.fused ? "fused" : "unfused", (int)path.chunks, path.plan,
         path.reason);
  status = syncopate_choose_path(&op, 2, 4097, &path);
  if (status != SYNCOPATE_INVALID_ARGUMENT) fail("choose_path at m=4097 was not refused", status);
  if (strstr(syncopate_last_error(), "4097") == NULL)
    fail("the m=4097 error does not name m", status);

  /* A world-1 op: built where there is a GPU, UNAVAILABLE saying why where there is none. */
  syncopate_group_config solo = group_config(0, 1);
  syncopate_op_config small = op_config(1024, 1024, 1024);
  small.num_buckets = 1;
  small.m_buckets[0] = 1024; /* one kernel to build */
  static char sentinel;
  syncopate_op* handle = (syncopate_op*)(void*)&sentinel; /* op_create sets it either way */
  status = syncopate_op_create(&solo, &small, &handle);
  if (status == SYNCOPATE_OK) {
    if (handle == NULL || handle == (syncopate_op*)(void*)&sentinel) {
      fail("op_create returned OK and no op", status);
    }
    status = syncopate_op_path(handle, 1024, &path);
    if (status != SYNCOPATE_OK || path.bucket_m != 1024) fail("the op's path at m=1024", status);
    status = syncopate_op_error(handle);
    if (status != SYNCOPATE_OK) fail("a new op has a sticky error", status);
    syncopate_op_destroy(handle);
    printf("consumer_c: world-1 op: created and destroyed\n");
  } else if (status == SYNCOPATE_UNAVAILABLE) {
    if (handle != NULL) fail("a failed op_create did not set its output to NULL", status);
    if (strstr(syncopate_last_error(), "no usable GPU") == NULL) {
      fail("UNAVAILABLE without 'no usable GPU'", status);
    }
    printf("consumer_c: world-1 op: UNAVAILABLE: %s\n", syncopate_last_error());
  } else {
    fail("op_create was neither OK nor UNAVAILABLE", status);
  }
  syncopate_op_destroy(NULL);

  printf("consumer_c: OK\n");
  return 0;
}
