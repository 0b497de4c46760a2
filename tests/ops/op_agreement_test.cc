// What the ranks of an op compare at Create (ops/core/op_agreement.h): a rank with other buckets,
// another path at a bucket (a tuning file only it has) or another shape is named with the field
// and both values; fields a rank may set alone do not count.
#include "ops/core/op_agreement.h"

#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/scoped_env.h"

namespace syncopate::ops {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

OpConfig ReduceScatter() {
  OpConfig op;
  op.kind = OpKind::kMatmulReduceScatter;
  op.max_m = 8192;
  op.n = 4096;
  op.k = 7168;
  return op;
}

std::optional<std::string> Compare(const OpConfig& mine, const OpConfig& theirs, int world = 2) {
  auto a = AgreedFields(mine, world);
  auto b = AgreedFields(theirs, world);
  EXPECT_TRUE(a.ok() && b.ok());
  // Through the wire format, as Create sends it.
  return FirstDisagreement(DecodeAgreedFields(EncodeAgreedFields(*a)),
                           DecodeAgreedFields(EncodeAgreedFields(*b)), 1);
}

TEST(OpAgreementTest, TheSameConfigAgreesAndPerRankFieldsDoNotCount) {
  OpConfig other = ReduceScatter();
  other.timeout_ms = 9000;
  other.cache_dir = "/somewhere/else";
  EXPECT_EQ(Compare(ReduceScatter(), other), std::nullopt);
}

TEST(OpAgreementTest, TheFirstDifferenceIsNamedWithBothValues) {
  OpConfig wider = ReduceScatter();
  wider.n = 8192;
  EXPECT_THAT(Compare(ReduceScatter(), wider),
              Optional(std::string("n 4096 here, 8192 on rank 1")));
  OpConfig buckets = ReduceScatter();
  buckets.m_buckets = {4096};
  EXPECT_THAT(Compare(ReduceScatter(), buckets),
              Optional(HasSubstr("m_buckets 512,2048,8192 here, 4096,8192 on rank 1")));
}

TEST(OpAgreementTest, ABucketThatTakesAnotherPathIsNamed) {
  // What a tuning file in one rank's cache_dir does: one bucket's path changes.
  OpConfig tuned = ReduceScatter();
  tuned.bucket_paths = {{.bucket_m = 8192, .fused = false, .backend = Backend::kSm, .chunks = 1}};
  EXPECT_THAT(
      Compare(ReduceScatter(), tuned),
      Optional(HasSubstr("path@8192 fused sm 1 chunks tile parts plan reducescatter.direct here, "
                         "unfused sm 1 chunks plan reducescatter.direct")));
}

// The AllReduce's plan of a bucket is part of its path: a rank whose plan knob differs (the
// developer knob SYNCOPATE_OPS_ALLREDUCE_PLAN set on one rank only) would launch other kernels.
TEST(OpAgreementTest, ABucketWithAnotherPlanIsNamed) {
  OpConfig ar = ReduceScatter();
  ar.kind = OpKind::kMatmulAllReduce;
  auto fields_with = [&](const char* knob) {
    testing::ScopedEnv env("SYNCOPATE_OPS_ALLREDUCE_PLAN", knob);
    return AgreedFields(ar, 2);
  };
  const auto mine = fields_with(nullptr);
  const auto theirs = fields_with("allreduce.direct_out");
  ASSERT_TRUE(mine.ok() && theirs.ok());
  // Bucket 512 (4 MiB of C) takes direct by default.
  EXPECT_THAT(FirstDisagreement(*mine, *theirs, 1),
              Optional(HasSubstr("path@512 unfused sm 1 chunks plan allreduce.direct here, "
                                 "unfused sm 1 chunks plan allreduce.direct_out on rank 1")));
}

TEST(OpAgreementTest, AMessageThatIsCutShortIsADisagreement) {
  auto fields = AgreedFields(ReduceScatter(), 2);
  ASSERT_TRUE(fields.ok());
  auto cut = *fields;
  cut.pop_back();
  EXPECT_THAT(FirstDisagreement(*fields, cut, 3), Optional(HasSubstr("absent on rank 3")));
  EXPECT_THAT(FirstDisagreement(cut, *fields, 3), Optional(HasSubstr("absent here")));
}

}  // namespace
}  // namespace syncopate::ops
