// Test helpers: gRPC calls with hand-made bytes (GenericStub), for requests no typed stub can
// send (junk, invalid UTF-8) and for services without installed stubs (health, reflection), and
// the daemon's resident memory.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <utility>

namespace syncopate::testing {

inline grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

inline std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  if (!buffer.TrySingleSlice(&slice).ok() && !buffer.DumpToSingleSlice(&slice).ok()) return "";
  return std::string(reinterpret_cast<const char*>(slice.begin()), slice.size());
}

// A unary call of `method` with `bytes` as the serialized request; the status and the raw reply.
inline std::pair<grpc::Status, std::string> RawUnary(const std::shared_ptr<grpc::Channel>& channel,
                                                     const std::string& method,
                                                     const std::string& bytes,
                                                     const std::string& token = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (!token.empty()) ctx.AddMetadata("x-syncopate-token", token);
  const grpc::ByteBuffer request = ToBuffer(bytes);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  return {status, FromBuffer(response)};
}

// grpc.reflection.v1alpha list_services over one bidi stream; the stream's status.
inline grpc::Status ReflectionListServices(const std::shared_ptr<grpc::Channel>& channel,
                                           const std::string& token = "") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx.AddMetadata("x-syncopate-token", token);
  grpc::CompletionQueue cq;
  auto call =
      stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&cq](void* want) {
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok) && tag != want) {
    }
    return ok;
  };
  int tags[5];
  call->StartCall(&tags[0]);
  step(&tags[0]);
  // ServerReflectionRequest{list_services: ""}: field 7, length-delimited, empty.
  call->Write(ToBuffer(std::string("\x3a\x00", 2)), &tags[1]);
  step(&tags[1]);
  call->WritesDone(&tags[2]);
  step(&tags[2]);
  grpc::ByteBuffer reply;
  call->Read(&reply, &tags[3]);
  const bool got_reply = step(&tags[3]);
  grpc::Status status;
  call->Finish(&status, &tags[4]);
  step(&tags[4]);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (status.ok() && !got_reply) return grpc::Status(grpc::StatusCode::UNKNOWN, "no reply");
  return status;
}

// VmRSS of process `pid` in bytes (0 when unreadable).
inline int64_t RssBytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace syncopate::testing
