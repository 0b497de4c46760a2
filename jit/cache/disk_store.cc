// On-disk kernel store; see disk_store.h for the layout and the guarantees.
#include "jit/cache/disk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/base/atomic_file.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "jit/cache/cache_key.h"
#include "jit/cache/file_lock.h"

namespace syncopate::cache {
namespace {

constexpr char kMagic[8] = {'S', 'Y', 'N', 'K', 'C', 'A', 'C', 'H'};
constexpr uint32_t kFormatVersion = 1;
// magic(8) version(4) key(64) sha256(32) metadata_size(8) payload_size(8)
constexpr size_t kHeaderSize = 8 + 4 + 64 + 32 + 8 + 8;
constexpr absl::string_view kEntrySuffix = ".kc";
constexpr absl::string_view kTempPrefix = ".tmp.";
constexpr absl::string_view kLoweredPrefix = "lowered:";
// A sanity bound so a corrupt size field cannot make us allocate absurd amounts.
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 32;

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetLe(absl::string_view s, size_t offset, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= uint64_t{static_cast<uint8_t>(s[offset + i])} << (8 * i);
  }
  return v;
}
void PutString(std::string* out, absl::string_view s) {
  PutU32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

std::string EncodeMetadata(const nvrtc::CompiledKernel& k) {
  std::string out;
  auto field = [&out](absl::string_view name, absl::string_view value) {
    PutString(&out, name);
    PutString(&out, value);
  };
  field("target", k.target);
  field("is_ptx", k.is_ptx ? "1" : "0");
  field("nvrtc_version", k.nvrtc_version);
  field("compile_ms", absl::StrCat(k.compile_ms));
  field("log", k.log);
  for (const auto& [name, lowered] : k.lowered_names) {
    field(absl::StrCat(kLoweredPrefix, name), lowered);
  }
  return out;
}

absl::Status DecodeMetadata(absl::string_view m, nvrtc::CompiledKernel* k) {
  size_t pos = 0;
  auto take = [&](absl::string_view* out) -> bool {
    if (m.size() - pos < 4) return false;
    uint64_t n = GetLe(m, pos, 4);
    pos += 4;
    if (m.size() - pos < n) return false;
    *out = m.substr(pos, n);
    pos += n;
    return true;
  };
  while (pos < m.size()) {
    absl::string_view name, value;
    if (!take(&name) || !take(&value)) {
      return absl::DataLossError(absl::StrCat("metadata is truncated at byte ", pos));
    }
    if (name == "target") {
      k->target = std::string(value);
    } else if (name == "is_ptx") {
      k->is_ptx = value == "1";
    } else if (name == "nvrtc_version") {
      k->nvrtc_version = std::string(value);
    } else if (name == "compile_ms") {
      if (!absl::SimpleAtod(value, &k->compile_ms)) k->compile_ms = 0;
    } else if (name == "log") {
      k->log = std::string(value);
    } else if (absl::StartsWith(name, kLoweredPrefix)) {
      k->lowered_names[std::string(name.substr(kLoweredPrefix.size()))] = std::string(value);
    }
    // Unknown fields are skipped, so a newer writer's extra metadata does not break readers.
  }
  return absl::OkStatus();
}

struct Header {
  std::string key;
  std::string content_sha;  // 32 raw bytes
  uint64_t metadata_size = 0;
  uint64_t payload_size = 0;
};

absl::StatusOr<Header> DecodeHeader(absl::string_view file) {
  if (file.size() < kHeaderSize) {
    return absl::DataLossError(
        absl::StrCat("entry is truncated: ", file.size(), " bytes, header alone is ", kHeaderSize));
  }
  if (std::memcmp(file.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("entry has a bad magic number");
  }
  uint32_t version = static_cast<uint32_t>(GetLe(file, 8, 4));
  if (version != kFormatVersion) {
    return absl::DataLossError(
        absl::StrCat("entry has format version ", version, ", expected ", kFormatVersion));
  }
  Header h;
  h.key = std::string(file.substr(12, 64));
  h.content_sha = std::string(file.substr(76, 32));
  h.metadata_size = GetLe(file, 108, 8);
  h.payload_size = GetLe(file, 116, 8);
  if (h.metadata_size > kMaxEntryBytes || h.payload_size > kMaxEntryBytes) {
    return absl::DataLossError("entry header has impossible sizes");
  }
  return h;
}

absl::Status ReadAll(int fd, uint64_t size, std::string* out, const std::string& path) {
  out->resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, out->data() + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot read '", path, "'"));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  out->resize(done);
  return absl::OkStatus();
}

// Modes of what the store creates (set with chmod/fchmod, so the umask changes nothing): the
// daemon's group shares the cache (ranks on the node read entries and take key locks), other
// users can neither list, read nor lock anything in it. Existing directories keep their mode:
// an operator may have chosen another.
constexpr mode_t kDirMode = 0770;
constexpr mode_t kEntryMode = 0640;

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), kDirMode) == 0) {
    ::chmod(path.c_str(), kDirMode);
    return absl::OkStatus();
  }
  if (errno == EEXIST) return absl::OkStatus();
  return absl::ErrnoToStatus(errno, absl::StrCat("cannot create cache directory '", path, "'"));
}

absl::Status FsyncDir(const std::string& path) {
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() || ::fsync(fd.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot fsync directory '", path, "'"));
  }
  return absl::OkStatus();
}

std::chrono::system_clock::time_point MtimeOf(const struct stat& st) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
}

// Every regular file directly inside `dir`, as (name, stat).
std::vector<std::pair<std::string, struct stat>> FilesIn(const std::string& dir) {
  std::vector<std::pair<std::string, struct stat>> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::stat((dir + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      out.emplace_back(std::move(name), st);
    }
  }
  ::closedir(d);
  return out;
}

std::vector<std::string> SubdirsOf(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() == 2 && name != "..") out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

absl::StatusOr<std::string> DefaultCacheDir() {
  if (const char* dir = std::getenv("SYNCOPATE_CACHE_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return absl::StrCat(xdg, "/syncopate");
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return absl::StrCat(home, "/.cache/syncopate");
  }
  return absl::FailedPreconditionError(
      "no kernel cache directory: set SYNCOPATE_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

std::string EncodeEntry(const std::string& key, const nvrtc::CompiledKernel& kernel) {
  std::string metadata = EncodeMetadata(kernel);
  Sha256 hasher;
  hasher.Update(metadata);
  hasher.Update(kernel.binary);
  std::array<uint8_t, 32> digest = hasher.Finish();

  std::string out;
  out.reserve(kHeaderSize + metadata.size() + kernel.binary.size());
  out.append(kMagic, sizeof(kMagic));
  PutU32(&out, kFormatVersion);
  std::string padded_key = key;
  padded_key.resize(64, ' ');
  out.append(padded_key);
  out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  PutU64(&out, metadata.size());
  PutU64(&out, kernel.binary.size());
  out.append(metadata);
  out.append(kernel.binary);
  return out;
}

absl::StatusOr<nvrtc::CompiledKernel> DecodeEntry(const std::string& key, absl::string_view file) {
  ASSIGN_OR_RETURN(Header h, DecodeHeader(file));
  if (h.key != key) {
    return absl::DataLossError(absl::StrCat("entry holds key ", h.key, ", not ", key));
  }
  uint64_t expected = kHeaderSize + h.metadata_size + h.payload_size;
  if (file.size() != expected) {
    return absl::DataLossError(absl::StrCat("entry is ", file.size(), " bytes, header says ",
                                            expected,
                                            file.size() < expected ? " (truncated)" : ""));
  }
  absl::string_view body = file.substr(kHeaderSize);
  Sha256 hasher;
  hasher.Update(body.data(), body.size());
  std::array<uint8_t, 32> digest = hasher.Finish();
  if (std::memcmp(digest.data(), h.content_sha.data(), digest.size()) != 0) {
    return absl::DataLossError("entry content does not match its SHA-256");
  }
  nvrtc::CompiledKernel kernel;
  RETURN_IF_ERROR(DecodeMetadata(body.substr(0, h.metadata_size), &kernel));
  kernel.binary = std::string(body.substr(h.metadata_size));
  return kernel;
}

absl::StatusOr<std::unique_ptr<DiskStore>> DiskStore::Open(const std::string& dir,
                                                           uint64_t budget_bytes) {
  if (dir.empty()) return absl::InvalidArgumentError("kernel cache directory is empty");
  std::error_code ec;
  const bool created = std::filesystem::create_directories(dir, ec);
  if (!ec && created) ::chmod(dir.c_str(), kDirMode);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create kernel cache directory '", dir, "': ", ec.message()));
  }
  RETURN_IF_ERROR(MakeDir(dir + "/entries"));
  RETURN_IF_ERROR(MakeDir(dir + "/locks"));
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("kernel cache directory '", dir, "' is not writable"));
  }
  std::unique_ptr<DiskStore> store(new DiskStore(dir, budget_bytes));
  uint64_t bytes = 0, entries = 0;
  for (const std::string& shard : SubdirsOf(dir + "/entries")) {
    for (const auto& [name, st] : FilesIn(shard)) {
      if (absl::EndsWith(name, kEntrySuffix)) {
        bytes += st.st_size;
        ++entries;
      }
    }
  }
  store->approx_bytes_ = bytes;
  store->approx_entries_ = entries;
  return store;
}

std::string DiskStore::EntryPath(const std::string& key) const {
  return absl::StrCat(dir_, "/entries/", key.substr(0, 2), "/", key, kEntrySuffix);
}

std::string DiskStore::LockPath(const std::string& key) const {
  return absl::StrCat(dir_, "/locks/", key, ".lock");
}

void DiskStore::RemoveCorrupt(const std::string& path, uint64_t ino) {
  // Only unlink if the path still names the file we read: another process may already have
  // replaced the corrupt entry with a good one.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && st.st_ino == ino) {
    if (::unlink(path.c_str()) == 0) {
      approx_bytes_ -= std::min<uint64_t>(approx_bytes_.load(), st.st_size);
      if (approx_entries_ > 0) --approx_entries_;
    }
  }
  ++corrupt_entries_;
}

absl::StatusOr<nvrtc::CompiledKernel> DiskStore::Get(const std::string& key) {
  if (!IsValidKeyHex(key))
    return absl::InvalidArgumentError(absl::StrCat("bad cache key '", key, "'"));
  std::string path = EntryPath(key);
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat("no cache entry ", key));
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open cache entry '", path, "'"));
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat cache entry '", path, "'"));
  }
  std::string file;
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes + kHeaderSize) {
    RemoveCorrupt(path, st.st_ino);
    return absl::DataLossError(
        absl::StrCat("cache entry '", path, "' is impossibly large; removed"));
  }
  RETURN_IF_ERROR(ReadAll(fd.get(), st.st_size, &file, path));
  absl::StatusOr<nvrtc::CompiledKernel> kernel = DecodeEntry(key, file);
  if (!kernel.ok()) {
    RemoveCorrupt(path, st.st_ino);
    return absl::DataLossError(absl::StrCat(
        "cache entry '", path, "' is corrupt and was removed: ", kernel.status().message()));
  }
  // Recency for LRU eviction; failing to record it only makes eviction less precise.
  struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ::futimens(fd.get(), now);
  return kernel;
}

absl::Status DiskStore::Put(const std::string& key, const nvrtc::CompiledKernel& kernel) {
  if (!IsValidKeyHex(key))
    return absl::InvalidArgumentError(absl::StrCat("bad cache key '", key, "'"));
  std::string shard = absl::StrCat(dir_, "/entries/", key.substr(0, 2));
  RETURN_IF_ERROR(MakeDir(shard));
  std::string path = EntryPath(key);
  std::string temp =
      absl::StrCat(shard, "/", kTempPrefix, key, ".", ::getpid(), ".", temp_counter_.fetch_add(1));
  std::string data = EncodeEntry(key, kernel);
  RETURN_IF_ERROR(WriteNewFileDurably(temp, data, kEntryMode, /*exact_mode=*/true));
  struct stat old;
  bool replaced = ::stat(path.c_str(), &old) == 0;
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status status =
        absl::ErrnoToStatus(errno, absl::StrCat("cannot rename '", temp, "' to '", path, "'"));
    ::unlink(temp.c_str());
    return status;
  }
  RETURN_IF_ERROR(FsyncDir(shard));
  if (replaced) {
    approx_bytes_ -= std::min<uint64_t>(approx_bytes_.load(), old.st_size);
  } else {
    ++approx_entries_;
  }
  approx_bytes_ += data.size();
  if (budget_bytes_ > 0 && approx_bytes_.load() > budget_bytes_) {
    RETURN_IF_ERROR(GarbageCollect(budget_bytes_ / 100 * kGcLowWatermarkPercent, key).status());
  }
  return absl::OkStatus();
}

absl::Status DiskStore::Touch(const std::string& key) {
  if (!IsValidKeyHex(key))
    return absl::InvalidArgumentError(absl::StrCat("bad cache key '", key, "'"));
  const std::string path = EntryPath(key);
  if (::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot mark '", path, "' used"));
  }
  return absl::OkStatus();
}

absl::Status DiskStore::Remove(const std::string& key) {
  if (!IsValidKeyHex(key))
    return absl::InvalidArgumentError(absl::StrCat("bad cache key '", key, "'"));
  std::string path = EntryPath(key);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat("no cache entry ", key));
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot remove '", path, "'"));
  }
  approx_bytes_ -= std::min<uint64_t>(approx_bytes_.load(), st.st_size);
  if (approx_entries_ > 0) --approx_entries_;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DiskStore::EntryInfo>> DiskStore::List() const {
  std::vector<EntryInfo> out;
  for (const std::string& shard : SubdirsOf(dir_ + "/entries")) {
    for (const auto& [name, st] : FilesIn(shard)) {
      if (!absl::EndsWith(name, kEntrySuffix) || absl::StartsWith(name, kTempPrefix)) continue;
      EntryInfo info;
      info.key = name.substr(0, name.size() - kEntrySuffix.size());
      info.path = shard + "/" + name;
      info.size_bytes = st.st_size;
      info.last_used = MtimeOf(st);
      // Read header + metadata only; the payload is not needed to describe the entry.
      ScopedFd fd(::open(info.path.c_str(), O_RDONLY | O_CLOEXEC));
      std::string head;
      absl::Status read = fd.valid() ? ReadAll(fd.get(), kHeaderSize, &head, info.path)
                                     : absl::NotFoundError("entry vanished");
      absl::StatusOr<Header> header = read.ok() ? DecodeHeader(head) : absl::StatusOr<Header>(read);
      if (!header.ok()) {
        info.problem = std::string(header.status().message());
      } else if (header->key != info.key) {
        info.problem = "header names a different key";
      } else {
        std::string metadata;
        nvrtc::CompiledKernel k;
        if (header->metadata_size > static_cast<uint64_t>(st.st_size)) {
          info.problem = "truncated";
        } else {
          metadata.resize(header->metadata_size);
          ssize_t n = ::pread(fd.get(), metadata.data(), metadata.size(), kHeaderSize);
          if (n != static_cast<ssize_t>(metadata.size()) || !DecodeMetadata(metadata, &k).ok()) {
            info.problem = "metadata unreadable";
          } else {
            info.target = k.target;
            info.is_ptx = k.is_ptx;
            info.nvrtc_version = k.nvrtc_version;
          }
        }
      }
      out.push_back(std::move(info));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const EntryInfo& a, const EntryInfo& b) { return a.last_used < b.last_used; });
  return out;
}

absl::StatusOr<DiskStore::GcResult> DiskStore::GarbageCollect(uint64_t budget_bytes,
                                                              const std::string& keep) {
  GcResult result;
  auto now = std::chrono::system_clock::now();
  struct Candidate {
    std::string path;
    std::string key;
    uint64_t size;
    std::chrono::system_clock::time_point mtime;
  };
  std::vector<Candidate> entries;
  uint64_t total = 0;
  for (const std::string& shard : SubdirsOf(dir_ + "/entries")) {
    for (const auto& [name, st] : FilesIn(shard)) {
      std::string path = shard + "/" + name;
      if (absl::StartsWith(name, kTempPrefix)) {
        if (now - MtimeOf(st) > kStaleTempAge && ::unlink(path.c_str()) == 0) ++result.removed_temp;
        continue;
      }
      if (!absl::EndsWith(name, kEntrySuffix)) continue;
      entries.push_back(Candidate{path, name.substr(0, name.size() - kEntrySuffix.size()),
                                  static_cast<uint64_t>(st.st_size), MtimeOf(st)});
      total += st.st_size;
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const Candidate& a, const Candidate& b) { return a.mtime < b.mtime; });
  // Entries whose header does not even parse are removed whatever the budget: they can never
  // be loaded. (Content hashes are checked on load, not here: GC must stay cheap.)
  std::vector<Candidate> kept;
  for (Candidate& c : entries) {
    std::string head;
    ScopedFd fd(::open(c.path.c_str(), O_RDONLY | O_CLOEXEC));
    bool bad = !fd.valid() || !ReadAll(fd.get(), kHeaderSize, &head, c.path).ok() ||
               !DecodeHeader(head).ok();
    if (bad && fd.valid()) {
      if (::unlink(c.path.c_str()) == 0) {
        ++result.removed_invalid;
        result.freed_bytes += c.size;
        total -= c.size;
      }
      continue;
    }
    if (fd.valid())
      kept.push_back(std::move(c));
    else
      total -= c.size;  // vanished meanwhile
  }
  if (budget_bytes > 0) {
    for (const Candidate& c : kept) {
      if (total <= budget_bytes) break;
      if (c.key == keep) continue;
      if (::unlink(c.path.c_str()) == 0) {
        ++result.removed_entries;
        ++evictions_;
        result.freed_bytes += c.size;
      }
      total -= c.size;  // removed by us or by someone else
    }
  }
  // Lock files nobody holds and nobody has used for a while. Taking the lock before unlinking
  // (and FileLock's re-check after locking) keeps this safe against a concurrent compile.
  for (const auto& [name, st] : FilesIn(dir_ + "/locks")) {
    if (now - MtimeOf(st) <= kStaleTempAge) continue;
    std::string path = dir_ + "/locks/" + name;
    absl::StatusOr<FileLock> lock = FileLock::TryAcquire(path);
    if (lock.ok() && lock->held() && ::unlink(path.c_str()) == 0) ++result.removed_locks;
  }
  result.remaining_bytes = total;
  result.remaining_entries = static_cast<int>(kept.size()) - result.removed_entries;
  approx_bytes_ = total;
  approx_entries_ = result.remaining_entries;
  return result;
}

}  // namespace syncopate::cache
