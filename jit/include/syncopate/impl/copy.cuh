// CTA-collective chunk movement: copies (16-byte vectors where alignment allows) and reductions
// (system-scope atomics, because several ranks may reduce into one element concurrently; plain
// loads and stores, on request, where the host proved no other write can race) over a list of 2D
// copy segments. Element conversions use PTX/bit tricks, not cuda_fp16.h/cuda_bf16.h,
// so the device headers need no include path.
// Header-only, compiled by NVRTC and nvcc. Every thread of the CTA must call these.
#ifndef SYNCOPATE_IMPL_COPY_CUH_
#define SYNCOPATE_IMPL_COPY_CUH_

#include <syncopate/impl/types.cuh>

namespace syncopate {
namespace detail {

SYNCOPATE_DEVICE float Bf16BitsToFloat(unsigned bits) { return __uint_as_float(bits << 16); }

SYNCOPATE_DEVICE unsigned FloatToBf16Bits(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN stays a quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);                                 // round to nearest even
  return u >> 16;
}

SYNCOPATE_DEVICE float F16BitsToFloat(unsigned bits) {
  float f;
  unsigned short h = static_cast<unsigned short>(bits);
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

SYNCOPATE_DEVICE unsigned FloatToF16Bits(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

SYNCOPATE_DEVICE float Combine(float a, float b, int reduce) {
  return reduce == kDevReduceMax ? fmaxf(a, b) : a + b;
}

// Reduces `value` (a 1- or 2-byte element's bits) into the element at `p` with a CAS loop on the
// aligned 32-bit word that holds it: the portable way to get system-scope atomicity for small
// types on every architecture.
SYNCOPATE_DEVICE void AtomicReduceSmall(char* p, unsigned value, int width, int dtype,
                                        int reduce) {
  unsigned* word = reinterpret_cast<unsigned*>(reinterpret_cast<unsigned long long>(p) & ~3ull);
  const unsigned shift = static_cast<unsigned>(reinterpret_cast<unsigned long long>(p) & 3ull) * 8u;
  const unsigned mask = (width == 1 ? 0xffu : 0xffffu) << shift;
  unsigned old = *reinterpret_cast<volatile unsigned*>(word);
  for (;;) {
    const unsigned cur = (old & mask) >> shift;
    unsigned next;
    if (dtype == kDevBF16) {
      next = FloatToBf16Bits(Combine(Bf16BitsToFloat(cur), Bf16BitsToFloat(value), reduce));
    } else if (dtype == kDevF16) {
      next = FloatToF16Bits(Combine(F16BitsToFloat(cur), F16BitsToFloat(value), reduce));
    } else if (dtype == kDevI8) {
      const int a = static_cast<signed char>(cur), b = static_cast<signed char>(value);
      next = static_cast<unsigned>(reduce == kDevReduceMax ? (a > b ? a : b) : a + b) & 0xffu;
    } else {  // kDevU8
      next = (reduce == kDevReduceMax ? (cur > value ? cur : value) : cur + value) & 0xffu;
    }
    const unsigned desired = (old & ~mask) | ((next << shift) & mask);
    const unsigned seen = atomicCAS_system(word, old, desired);
    if (seen == old) return;
    old = seen;
  }
}

SYNCOPATE_DEVICE void AtomicReduceF32(float* p, float v, int reduce) {
  if (reduce == kDevReduceSum) {
    atomicAdd_system(p, v);
    return;
  }
  unsigned* w = reinterpret_cast<unsigned*>(p);
  unsigned old = *reinterpret_cast<volatile unsigned*>(w);
  while (__uint_as_float(old) < v) {
    const unsigned seen = atomicCAS_system(w, old, __float_as_uint(v));
    if (seen == old) return;
    old = seen;
  }
}

SYNCOPATE_DEVICE void AtomicReduceF64(double* p, double v, int reduce) {
  if (reduce == kDevReduceSum) {
    atomicAdd_system(p, v);
    return;
  }
  unsigned long long* w = reinterpret_cast<unsigned long long*>(p);
  unsigned long long old = *reinterpret_cast<volatile unsigned long long*>(w);
  while (__longlong_as_double(static_cast<long long>(old)) < v) {
    const unsigned long long seen =
        atomicCAS_system(w, old, static_cast<unsigned long long>(__double_as_longlong(v)));
    if (seen == old) return;
    old = seen;
  }
}

// Reduces one pair of 16-bit floats (4-byte aligned) into dst.
SYNCOPATE_DEVICE void AtomicReducePair16(char* dst, unsigned src_pair, int dtype, int reduce) {
  if (reduce == kDevReduceSum && dtype == kDevF16) {
    asm volatile("red.relaxed.sys.global.add.noftz.f16x2 [%0], %1;" ::"l"(dst), "r"(src_pair)
                 : "memory");
    return;
  }
#if __CUDA_ARCH__ >= 900
  if (reduce == kDevReduceSum && dtype == kDevBF16) {
    asm volatile("red.relaxed.sys.global.add.noftz.bf16x2 [%0], %1;" ::"l"(dst), "r"(src_pair)
                 : "memory");
    return;
  }
#endif
  AtomicReduceSmall(dst, src_pair & 0xffffu, 2, dtype, reduce);
  AtomicReduceSmall(dst + 2, src_pair >> 16, 2, dtype, reduce);
}

SYNCOPATE_DEVICE int DTypeBytes(int dtype) {
  switch (dtype) {
    case kDevF16:
    case kDevBF16: return 2;
    case kDevF64:
    case kDevI64: return 8;
    case kDevI8:
    case kDevU8: return 1;
    default: return 4;
  }
}

// dst op= src for one element of `dtype`.
SYNCOPATE_DEVICE void AtomicReduceElement(char* dst, const char* src, int dtype, int reduce) {
  switch (dtype) {
    case kDevF32:
      AtomicReduceF32(reinterpret_cast<float*>(dst), *reinterpret_cast<const float*>(src), reduce);
      return;
    case kDevF64:
      AtomicReduceF64(reinterpret_cast<double*>(dst), *reinterpret_cast<const double*>(src),
                      reduce);
      return;
    case kDevI32: {
      const int v = *reinterpret_cast<const int*>(src);
      if (reduce == kDevReduceSum) {
        atomicAdd_system(reinterpret_cast<int*>(dst), v);
      } else {
        atomicMax_system(reinterpret_cast<int*>(dst), v);
      }
      return;
    }
    case kDevI64: {
      const long long v = *reinterpret_cast<const long long*>(src);
      if (reduce == kDevReduceSum) {
        atomicAdd_system(reinterpret_cast<unsigned long long*>(dst),
                         static_cast<unsigned long long>(v));
      } else {
        atomicMax_system(reinterpret_cast<long long*>(dst), v);
      }
      return;
    }
    case kDevF16:
    case kDevBF16:
      AtomicReduceSmall(dst, *reinterpret_cast<const unsigned short*>(src), 2, dtype, reduce);
      return;
    default:
      AtomicReduceSmall(dst, *reinterpret_cast<const unsigned char*>(src), 1, dtype, reduce);
      return;
  }
}

// Sums 16 bytes of f16 or bf16 pairs into `to`: one packed vector reduction on sm_90 (a quarter
// of the reduction operations of one per pair, which held GEMM+ReduceScatter's SM path to
// 2.4 GB/s per rank), four pair reductions on older GPUs.
SYNCOPATE_DEVICE void ReduceSum16Bytes(char* to, uint4 v, int dtype) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (dtype == kDevBF16) {
    asm volatile("red.relaxed.sys.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(to),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  } else {
    asm volatile("red.relaxed.sys.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(to),
                 "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
  }
#else
  AtomicReducePair16(to, v.x, dtype, kDevReduceSum);
  AtomicReducePair16(to + 4, v.y, dtype, kDevReduceSum);
  AtomicReducePair16(to + 8, v.z, dtype, kDevReduceSum);
  AtomicReducePair16(to + 12, v.w, dtype, kDevReduceSum);
#endif
}

// What CopyRows does with each unit: `put(to, v, old)`, where `old` is the destination's value
// when the unit reads it first (kReadsDst), else unset.
struct StoreUnit {
  static constexpr bool kReadsDst = false;
  template <class V>
  SYNCOPATE_DEVICE void operator()(V* to, const V& v, const V&) const {
    *to = v;
  }
};

struct SumUnit16Bit {
  static constexpr bool kReadsDst = false;
  int dtype;
  SYNCOPATE_DEVICE void operator()(uint4* to, const uint4& v, const uint4&) const {
    ReduceSum16Bytes(reinterpret_cast<char*>(to), v, dtype);
  }
};

// One 32-bit word of two 16-bit floats (or one f32) combined with `reduce`: sums by one packed
// add (as the atomic path's vector reduction adds), anything else through f32.
SYNCOPATE_DEVICE unsigned CombineWord(unsigned a, unsigned b, int dtype, int reduce) {
  if (dtype == kDevF32) {
    return __float_as_uint(Combine(__uint_as_float(a), __uint_as_float(b), reduce));
  }
  unsigned out = 0;
#if defined(__CUDA_ARCH__)
  if (reduce == kDevReduceSum && dtype == kDevF16) {
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
    return out;
  }
#if __CUDA_ARCH__ >= 900
  if (reduce == kDevReduceSum && dtype == kDevBF16) {
    asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(out) : "r"(a), "r"(b));
    return out;
  }
#elif __CUDA_ARCH__ >= 800
  if (reduce == kDevReduceSum && dtype == kDevBF16) {  // a * 1.0 + b
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(out) : "r"(a), "r"(0x3f803f80u), "r"(b));
    return out;
  }
#endif
#endif
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const unsigned x = (a >> (16 * half)) & 0xffffu, y = (b >> (16 * half)) & 0xffffu;
    const unsigned r =
        dtype == kDevBF16 ? FloatToBf16Bits(Combine(Bf16BitsToFloat(x), Bf16BitsToFloat(y), reduce))
                          : FloatToF16Bits(Combine(F16BitsToFloat(x), F16BitsToFloat(y), reduce));
    out |= (r & 0xffffu) << (16 * half);
  }
  return out;
}

// A plain reduction (kDevReducePlain, with SYNCOPATE_PLAIN_REDUCE): nothing else writes these
// bytes meanwhile, so load the destination with the source (CopyRows keeps both in flight),
// combine and store.
struct PlainCombineUnit {
  static constexpr bool kReadsDst = true;
  int dtype;  // kDevF16, kDevBF16 or kDevF32
  int reduce;
  SYNCOPATE_DEVICE void operator()(uint4* to, const uint4& v, const uint4& old) const {
    *to =
        make_uint4(CombineWord(old.x, v.x, dtype, reduce), CombineWord(old.y, v.y, dtype, reduce),
                   CombineWord(old.z, v.z, dtype, reduce), CombineWord(old.w, v.w, dtype, reduce));
  }
};

// Units [lo, hi) of a segment, unit u at row u / per_row, each handed to `put` (a store, or a
// reduction into dst). Each thread keeps kUnroll loads in flight before it puts: a copy is
// latency-bound, and one vector per thread per round leaves a CTA far below what the memory
// system takes (Little's law: bytes in flight / latency).
// -DSYNCOPATE_COPY_UNROLL=N (SYNCOPATE_NVRTC_OPTIONS) sets the 16-byte loads in flight, for A/B.
#ifndef SYNCOPATE_COPY_UNROLL
#define SYNCOPATE_COPY_UNROLL 4
#endif
static_assert(SYNCOPATE_COPY_UNROLL > 0, "SYNCOPATE_COPY_UNROLL must be positive");
template <class V, class Put = StoreUnit>
SYNCOPATE_DEVICE void CopyRows(const char* src, char* dst, const CopySegment& s, long long lo,
                               long long hi, int tid, int nthreads, Put put = Put()) {
  constexpr int kUnroll = sizeof(V) >= 16 ? SYNCOPATE_COPY_UNROLL : 8;
  const long long per_row = s.row_bytes / static_cast<long long>(sizeof(V));
  const bool flat = s.rows == 1 || (s.src_pitch == s.row_bytes && s.dst_pitch == s.row_bytes);
  const char* sbase = src + s.src_offset;
  char* dbase = dst + s.dst_offset;
  auto src_at = [&](long long i) {
    if (flat) return reinterpret_cast<const V*>(sbase) + i;
    const long long r = i / per_row;
    return reinterpret_cast<const V*>(sbase + r * s.src_pitch) + (i - r * per_row);
  };
  auto dst_at = [&](long long i) {
    if (flat) return reinterpret_cast<V*>(dbase) + i;
    const long long r = i / per_row;
    return reinterpret_cast<V*>(dbase + r * s.dst_pitch) + (i - r * per_row);
  };
  long long i = lo + tid;
  const long long step = static_cast<long long>(nthreads);
  for (; i + (kUnroll - 1) * step < hi; i += kUnroll * step) {
    V v[kUnroll];
    V old[Put::kReadsDst ? kUnroll : 1];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = *src_at(i + u * step);
    if constexpr (Put::kReadsDst) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) old[u] = *dst_at(i + u * step);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) put(dst_at(i + u * step), v[u], old[Put::kReadsDst ? u : 0]);
  }
  for (; i < hi; i += step) {
    V old[1];
    if constexpr (Put::kReadsDst) old[0] = *dst_at(i);
    put(dst_at(i), *src_at(i), old[0]);
  }
}

// Part `part` of `parts` of a range of `total` units: [lo, hi).
SYNCOPATE_DEVICE void PartRange(long long total, int part, int parts, long long& lo,
                                long long& hi) {
  lo = total * part / parts;
  hi = total * (part + 1) / parts;
}

SYNCOPATE_DEVICE bool Aligned(const char* src, const char* dst, const CopySegment& s,
                              long long a) {
  const unsigned long long bits = reinterpret_cast<unsigned long long>(src + s.src_offset) |
                                  reinterpret_cast<unsigned long long>(dst + s.dst_offset) |
                                  static_cast<unsigned long long>(s.row_bytes) |
                                  static_cast<unsigned long long>(s.src_pitch) |
                                  static_cast<unsigned long long>(s.dst_pitch);
  return (bits & static_cast<unsigned long long>(a - 1)) == 0ull;
}

}  // namespace detail

// Threads tid = 0 .. nthreads-1 of a group (the whole CTA, or e.g. the consumer warpgroups of a
// warp-specialised kernel whose producer warps run ahead elsewhere): moves part `part` of
// `parts` (every segment split evenly; the parts are run by different CTAs of a channel) of
// segments [begin, end) from `src` to `dst` (byte offsets relative to the two base pointers),
// replacing or, with `reduce`, reducing element-wise. Returns after the group's stores are
// issued. Not inlined: its five copy loops and the reductions were compiled again at every call
// site (comm CTAs, direct moves); compiling them once took about a fifth off the fused wgmma
// kernel's NVRTC time (bench/RESULTS.md, 2026-12-06). It takes no FusedLaunchArgs reference,
// which a call would force into local memory. Out of line, the step's dtype and reduce are no
// longer constants folded into the loops; -DSYNCOPATE_MOVER_INLINE=1 (SYNCOPATE_NVRTC_OPTIONS)
// inlines it again, to measure what that costs at run time.
// Plain reductions (kDevReducePlain) run as atomics unless -DSYNCOPATE_PLAIN_REDUCE=1
// (SYNCOPATE_NVRTC_OPTIONS): on an H100 under MPS the ring's hops took 1.36-1.4x longer as plain
// read-modify-writes than as atomics (bench/RESULTS.md, thirteenth session). A hop's few CTAs
// wait for both loads before they store, where a vector reduction is posted and the L2 does the
// rest; the path stays for A/B runs on other machines (a pull into local memory, real GPUs).
#ifndef SYNCOPATE_PLAIN_REDUCE
#define SYNCOPATE_PLAIN_REDUCE 0
#endif
#if defined(SYNCOPATE_MOVER_INLINE) && SYNCOPATE_MOVER_INLINE
SYNCOPATE_DEVICE
#else
__device__ __noinline__
#endif
void GroupMoveSegments(const CopySegment* segments, int begin, int end, const void* src_base,
                       void* dst_base, int dtype, int reduce, int tid, int nthreads, int part = 0,
                       int parts = 1) {
  const char* src = static_cast<const char*>(src_base);
  char* dst = static_cast<char*>(dst_base);
  const bool plain = SYNCOPATE_PLAIN_REDUCE && (reduce & kDevReducePlain) != 0;
  reduce &= ~kDevReducePlain;
  for (int i = begin; i < end; ++i) {
    const CopySegment s = segments[i];
    long long lo = 0, hi = 0;
    if (plain && reduce != kDevReduceNone &&
        (dtype == kDevF16 || dtype == kDevBF16 || dtype == kDevF32) &&
        detail::Aligned(src, dst, s, 16)) {
      detail::PartRange(s.row_bytes / 16 * s.rows, part, parts, lo, hi);
      detail::CopyRows<uint4>(src, dst, s, lo, hi, tid, nthreads,
                              detail::PlainCombineUnit{dtype, reduce});
      continue;  // other dtypes and alignments take the atomic paths below: same result
    }
    if (reduce == kDevReduceNone) {
      if (detail::Aligned(src, dst, s, 16)) {
        detail::PartRange(s.row_bytes / 16 * s.rows, part, parts, lo, hi);
        detail::CopyRows<uint4>(src, dst, s, lo, hi, tid, nthreads);
      } else if (detail::Aligned(src, dst, s, 8)) {
        detail::PartRange(s.row_bytes / 8 * s.rows, part, parts, lo, hi);
        detail::CopyRows<unsigned long long>(src, dst, s, lo, hi, tid, nthreads);
      } else if (detail::Aligned(src, dst, s, 4)) {
        detail::PartRange(s.row_bytes / 4 * s.rows, part, parts, lo, hi);
        detail::CopyRows<unsigned>(src, dst, s, lo, hi, tid, nthreads);
      } else {
        detail::PartRange(s.row_bytes * s.rows, part, parts, lo, hi);
        detail::CopyRows<unsigned char>(src, dst, s, lo, hi, tid, nthreads);
      }
      continue;
    }
    if (reduce == kDevReduceSum && (dtype == kDevF16 || dtype == kDevBF16) &&
        detail::Aligned(src, dst, s, 16)) {
      detail::PartRange(s.row_bytes / 16 * s.rows, part, parts, lo, hi);
      detail::CopyRows<uint4>(src, dst, s, lo, hi, tid, nthreads, detail::SumUnit16Bit{dtype});
      continue;
    }
    const int esize = detail::DTypeBytes(dtype);
    const bool pairs = esize == 2 && detail::Aligned(src, dst, s, 4);
    const long long unit = pairs ? 4 : esize;
    const long long per_row = s.row_bytes / unit;
    detail::PartRange(per_row * s.rows, part, parts, lo, hi);
    for (long long k = lo + tid; k < hi; k += nthreads) {
      const long long r = s.rows == 1 ? 0 : k / per_row;
      const long long u = k - r * per_row;
      const char* from = src + s.src_offset + r * s.src_pitch + u * unit;
      char* to = dst + s.dst_offset + r * s.dst_pitch + u * unit;
      if (pairs) {
        detail::AtomicReducePair16(to, *reinterpret_cast<const unsigned*>(from), dtype, reduce);
      } else {
        detail::AtomicReduceElement(to, from, dtype, reduce);
      }
    }
  }
}

// All threads of the CTA: moves segments [begin, end) from `src` to `dst` (byte offsets relative
// to the two base pointers), replacing or, with `reduce`, reducing element-wise. Returns after
// this CTA's stores are issued; the caller fences and publishes.
SYNCOPATE_DEVICE void CtaMoveSegments(const CopySegment* segments, int begin, int end,
                                      const void* src_base, void* dst_base, int dtype,
                                      int reduce, int part = 0, int parts = 1) {
  GroupMoveSegments(segments, begin, end, src_base, dst_base, dtype, reduce, FlatThreadIdx(),
                    FlatBlockDim(), part, parts);
}

}  // namespace syncopate

#endif  // SYNCOPATE_IMPL_COPY_CUH_
