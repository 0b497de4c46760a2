// See op_agreement.h.
#include "ops/core/op_agreement.h"

#include <cstdint>
#include <sstream>

#include "ops/core/op_names.h"

namespace syncopate::ops {
namespace {

std::string Join(const std::vector<int64_t>& values) {
  std::string out;
  for (int64_t v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

}  // namespace

Result<std::vector<std::pair<std::string, std::string>>> AgreedFields(const OpConfig& op,
                                                                      int world) {
  Result<std::vector<int64_t>> buckets = BucketsFor(op, world);
  if (!buckets.ok()) return buckets.status();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"kind", OpKindName(op.kind)},
      {"world", std::to_string(world)},
      {"max_m", std::to_string(op.max_m)},
      {"n", std::to_string(op.n)},
      {"k", std::to_string(op.k)},
      {"dtype", DTypeName(op.dtype)},
      {"backend", BackendName(op.backend)},
      {"path", PathPreferenceName(op.path)},
      {"comm_ctas", std::to_string(op.comm_ctas)},
      {"m_buckets", Join(*buckets)},
  };
  for (int64_t bucket : *buckets) {
    Result<PathChoice> path = ChoosePath(op, world, bucket);
    if (!path.ok()) return path.status();
    fields.emplace_back("path@" + std::to_string(bucket),
                        std::string(path->fused ? "fused " : "unfused ") +
                            BackendName(path->backend) + " " + std::to_string(path->chunks) +
                            " chunks" + (path->tile_parts ? " tile parts" : "") + " plan " +
                            path->plan);
  }
  return fields;
}

std::string EncodeAgreedFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [name, value] : fields) out.append(name).append("=").append(value).append("\n");
  return out;
}

std::vector<std::pair<std::string, std::string>> DecodeAgreedFields(const std::string& message) {
  std::vector<std::pair<std::string, std::string>> fields;
  std::istringstream lines(message);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      fields.emplace_back(line, "");
    } else {
      fields.emplace_back(line.substr(0, eq), line.substr(eq + 1));
    }
  }
  return fields;
}

std::optional<std::string> FirstDisagreement(
    const std::vector<std::pair<std::string, std::string>>& mine,
    const std::vector<std::pair<std::string, std::string>>& theirs, int peer) {
  const std::string there = " on rank " + std::to_string(peer);
  for (size_t i = 0; i < mine.size() || i < theirs.size(); ++i) {
    if (i >= theirs.size()) return mine[i].first + " " + mine[i].second + " here, absent" + there;
    if (i >= mine.size()) return theirs[i].first + " absent here, " + theirs[i].second + there;
    if (mine[i].first != theirs[i].first) {
      return "field " + mine[i].first + " here where rank " + std::to_string(peer) + " has " +
             theirs[i].first + " (different buckets)";
    }
    if (mine[i].second != theirs[i].second) {
      return mine[i].first + " " + mine[i].second + " here, " + theirs[i].second + there;
    }
  }
  return std::nullopt;
}

}  // namespace syncopate::ops
