// Request validation: each malformed field is named.
#include "server/request_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace syncopate::server {
namespace {

using ::testing::HasSubstr;

v1::TemplateRequest Valid() {
  v1::TemplateRequest t;
  t.set_template_name("allgather.ring");
  t.set_world_size(8);
  t.add_shape(1024);
  t.add_shape(512);
  t.set_dtype(v1::DTYPE_BF16);
  return t;
}

std::string Message(const v1::TemplateRequest& t) {
  return std::string(CheckTemplateRequest(t, RequestLimits(), "t").message());
}

TEST(RequestChecksTest, TemplateFields) {
  EXPECT_TRUE(CheckTemplateRequest(Valid(), RequestLimits(), "t").ok());
  auto t = Valid();
  t.clear_template_name();
  EXPECT_THAT(Message(t), HasSubstr("t.template_name: is required"));
  t = Valid();
  t.set_world_size(65);
  EXPECT_THAT(Message(t), HasSubstr("t.world_size: 65 is out of range [1, 64]"));
  t = Valid();
  t.set_shape(0, 0);
  EXPECT_THAT(Message(t), HasSubstr("t.shape[0]: 0 is below 1"));
  t = Valid();
  t.set_axis(2);
  EXPECT_THAT(Message(t), HasSubstr("t.axis: 2"));
  t = Valid();
  t.set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_THAT(Message(t), HasSubstr("t.dtype: is required"));
  t = Valid();
  t.set_dtype(static_cast<v1::DType>(99));
  EXPECT_THAT(Message(t), HasSubstr("t.dtype: unknown value 99"));
  t = Valid();
  t.set_chunks_per_shard(0);
  EXPECT_THAT(Message(t), HasSubstr("t.chunks_per_shard: 0"));
  t = Valid();
  t.set_chunks_per_shard(4096);
  t.set_split(4096);
  EXPECT_THAT(Message(t), HasSubstr("transfers exceeds the limit"));
  t = Valid();
  t.add_splits()->add_rows(1);
  EXPECT_THAT(Message(t), HasSubstr("t.splits: has 1 rows, need world_size 8"));
  for (int i = 0; i < 9; ++i) t.add_shape(2);
  EXPECT_THAT(Message(t), HasSubstr("t.shape: has 11 axes"));
}

TEST(RequestChecksTest, JoinAndAgree) {
  v1::JoinRequest join;
  join.set_job_id("j");
  join.set_world_size(2);
  join.set_rank(1);
  EXPECT_TRUE(CheckJoinRequest(join, RequestLimits()).ok());
  // '#' separates a group id's job part from its generation (proto/service.proto's alphabet).
  join.set_job_id("j#1");
  EXPECT_THAT(CheckJoinRequest(join, RequestLimits()).message(), HasSubstr("job_id: may contain only"));
  join.set_job_id("j");
  join.set_node_name(std::string(300, 'n'));
  EXPECT_THAT(CheckJoinRequest(join, RequestLimits()).message(), HasSubstr("node_name"));
  v1::AgreeRequest agree;
  agree.set_group_id("j#1");
  EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(), HasSubstr("proposal: is required"));
  // A group id may hold '#' (a job id may not), but nothing outside that alphabet.
  for (std::string bad : {std::string(), std::string("bad job#1"), std::string(300, 'g')}) {
    agree.set_group_id(bad);
    EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(), HasSubstr("group_id: "))
        << bad;
  }
  agree.set_group_id("j#0a1b2c3d-7");
  EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(), HasSubstr("proposal: is required"));
  EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(), HasSubstr("proposal: is required"));
  agree.mutable_proposal()->set_kernel_hash("k");
  EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(),
              HasSubstr("proposal: needs a plan or a template_request"));
  agree.mutable_proposal()->mutable_plan()->set_world_size(2);
  EXPECT_THAT(CheckAgreeRequest(agree, RequestLimits()).message(),
              HasSubstr("proposal.plan.ranks: has 0 entries, need world_size 2"));
}

TEST(RequestChecksTest, CompilePlanByHash) {
  v1::CompileRequest request;
  request.mutable_kernel()->set_source("k");
  request.mutable_kernel()->set_spec("entry = k");
  request.set_arch("sm_90");
  request.set_plan_hash("00ffA9");
  EXPECT_TRUE(CheckCompileRequest(request, RequestLimits()).ok());
  request.set_plan_hash("not-hex");
  EXPECT_THAT(CheckCompileRequest(request, RequestLimits()).message(),
              HasSubstr("plan_hash: must be hexadecimal"));
  request.set_plan_hash(std::string(129, 'a'));
  EXPECT_THAT(CheckCompileRequest(request, RequestLimits()).message(),
              HasSubstr("plan_hash: is longer than 128 bytes"));
  request.set_plan_hash("ab");
  request.mutable_plan()->set_world_size(2);
  EXPECT_THAT(CheckCompileRequest(request, RequestLimits()).message(),
              HasSubstr("plan_hash: is set together with plan"));
}

}  // namespace
}  // namespace syncopate::server
