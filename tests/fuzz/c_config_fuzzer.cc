// libFuzzer target for the C ABI's pure entry points (syncopate_ops.h): syncopate_check_config
// and syncopate_choose_path over hostile struct bytes, as a ctypes or C caller can pass them
// (any struct_size, enum, count, size and M; string fields pointing at arbitrary bytes). Any
// crash, sanitizer report (an overflow in the bucket or byte arithmetic, a read past a struct
// the caller sized smaller) or unbounded work is a library bug: these calls promise an error
// code naming the field, never an abort.
//
// Input: the group config's, op config's and path's struct_size, world and m, the two structs'
// bytes, then the text the string fields point at (the job, a NUL, the folder).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "syncopate/syncopate_ops.h"

namespace {

// Takes bytes off the front of the input.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  // Fills `out` from the input (zeros where it runs out).
  void Fill(void* out, size_t bytes) {
    const size_t n = bytes < size_ ? bytes : size_;
    std::memset(out, 0, bytes);
    std::memcpy(out, data_, n);
    data_ += n;
    size_ -= n;
  }
  template <class T>
  T Take() {
    T v;
    Fill(&v, sizeof(v));
    return v;
  }
  std::string Rest() { return std::string(reinterpret_cast<const char*>(data_), size_); }

 private:
  const uint8_t* data_;
  size_t size_;
};

// `full` as a caller passes it: struct_size `size_word` capped at this header's size, and only
// that many bytes allocated (at least the struct_size word), so a read or write past them is a
// heap overflow ASan reports.
template <class T>
std::unique_ptr<unsigned char[]> CallerSized(T full, uint32_t size_word) {
  const uint32_t bytes = size_word % (sizeof(T) + 1);
  full.struct_size = bytes;
  const size_t allocated = bytes < sizeof(uint32_t) ? sizeof(uint32_t) : bytes;
  auto caller = std::make_unique<unsigned char[]>(allocated);
  std::memcpy(caller.get(), &full, allocated);
  return caller;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const auto group_size = in.Take<uint32_t>();
  const auto op_size = in.Take<uint32_t>();
  const auto path_size = in.Take<uint32_t>();
  const auto world = in.Take<int32_t>();
  const auto m = in.Take<int64_t>();
  // Pointer fields: no real caller passes random addresses (the library cannot check those);
  // the strings point at input bytes, the callback stays NULL.
  syncopate_group_config group_full{};
  in.Fill(&group_full, sizeof(group_full));
  syncopate_op_config op_full{};
  in.Fill(&op_full, sizeof(op_full));
  // The job, then after the first NUL the folder (the rendezvous's and the cache's).
  const std::string text = in.Rest();
  const size_t nul = text.find('\0');
  const std::string job = text.substr(0, nul);
  const std::string dir = nul == std::string::npos ? "" : text.substr(nul + 1);
  group_full.job = (group_size & 1) != 0 ? nullptr : job.c_str();
  group_full.rendezvous_dir = (group_size & 2) != 0 ? nullptr : dir.c_str();
  group_full.bootstrap = nullptr;
  group_full.bootstrap_user_data = nullptr;
  op_full.cache_dir = (op_size & 1) != 0 ? nullptr : dir.c_str();

  std::unique_ptr<unsigned char[]> group = CallerSized(group_full, group_size);
  std::unique_ptr<unsigned char[]> op = CallerSized(op_full, op_size);
  std::unique_ptr<unsigned char[]> path = CallerSized(syncopate_path{}, path_size);
  const auto* g = reinterpret_cast<const syncopate_group_config*>(group.get());
  const auto* c = reinterpret_cast<const syncopate_op_config*>(op.get());
  auto* p = reinterpret_cast<syncopate_path*>(path.get());
  const uint32_t path_bytes = p->struct_size;  // what the caller says it allocated
  (void)syncopate_check_config(g, c);
  (void)syncopate_last_error();
  if (syncopate_choose_path(c, world, m, p) == SYNCOPATE_OK) {
    // A path that was written is NUL-terminated within the caller's struct.
    if (path_bytes >= offsetof(syncopate_path, tile_parts) &&
        std::memchr(p->reason, '\0', sizeof(p->reason)) == nullptr) {
      __builtin_trap();
    }
    if (path_bytes >= offsetof(syncopate_path, plan) + sizeof(p->plan) &&
        std::memchr(p->plan, '\0', sizeof(p->plan)) == nullptr) {
      __builtin_trap();
    }
  }
  (void)syncopate_status_name(world);
  return 0;
}
