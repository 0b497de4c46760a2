// UcxTransport, connection setup (see transport.h): Connect exchanges every rank's transport card
// (label, process identity, worker address, region table with packed remote keys) through the
// Bootstrap, checks that every rank registered the same regions, starts watching same-host peers'
// processes, creates an endpoint per peer with its remote keys and waits until each is wired up.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "runtime/ucx/transport.h"
#include "runtime/ucx/transport_internal.h"
#include "runtime/ucx/wire.h"

namespace syncopate::ucx {

namespace {

std::string LocalLabel() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  return absl::StrFormat("%s pid %d", host, getpid());
}

// This rank's card. Worker thread (it queries the worker's address).
absl::StatusOr<std::string> EncodeCard(const Worker& worker,
                                       const std::vector<LocalRegion>& regions) {
  ASSIGN_OR_RETURN(WorkerAddress address, WorkerAddress::Query(worker));
  WireWriter w;
  w.Bytes(LocalLabel());
  ProcessIdentity::Self().Encode(w);
  w.Bytes(address.bytes());
  w.U64(regions.size());
  for (const LocalRegion& r : regions) {
    w.Bytes(r.name);
    w.U64(reinterpret_cast<uint64_t>(r.memh.address()));
    w.U64(r.memh.length());
    w.Bytes(r.rkey.bytes());
  }
  return w.Take();
}

absl::StatusOr<PeerCard> DecodeCard(absl::string_view bytes, int rank) {
  PeerCard card;
  WireReader rd(bytes, absl::StrCat("rank ", rank, "'s transport card"));
  ASSIGN_OR_RETURN(absl::string_view label, rd.Bytes());
  ASSIGN_OR_RETURN(card.identity, ProcessIdentity::Decode(rd));
  ASSIGN_OR_RETURN(absl::string_view address, rd.Bytes());
  ASSIGN_OR_RETURN(uint64_t n, rd.U64());
  card.label = std::string(label);
  card.address = std::string(address);
  for (uint64_t i = 0; i < n; ++i) {
    PeerCard::Region region;
    ASSIGN_OR_RETURN(absl::string_view name, rd.Bytes());
    ASSIGN_OR_RETURN(region.address, rd.U64());
    ASSIGN_OR_RETURN(region.size, rd.U64());
    ASSIGN_OR_RETURN(absl::string_view rkey, rd.Bytes());
    region.name = std::string(name);
    region.rkey = std::string(rkey);
    card.regions.push_back(std::move(region));
  }
  return card;
}

}  // namespace

absl::Status UcxTransport::Connect(Bootstrap& bootstrap, absl::Time deadline) {
  rank_ = bootstrap.rank();
  world_size_ = bootstrap.world_size();
  {
    absl::MutexLock lock(&fail_mu_);
    peer_status_.assign(world_size_, absl::OkStatus());
  }
  // 0. One word per rank that peers set when they shut down (see PeerConn::goodbye); every
  // rank adds it here, last, so region ids the caller got stay as they were.
  if (goodbye_region_ < 0) {
    ASSIGN_OR_RETURN(goodbye_region_,
                     AllocateMemory("syncopate.goodbye", sizeof(uint64_t) * world_size_));
  }
  // 1. This rank's card: label, process identity (for same-host liveness), worker address,
  // region table.
  std::string card;
  RETURN_IF_ERROR(impl_->RunSync(
      [&]() -> absl::Status {
        ASSIGN_OR_RETURN(card, EncodeCard(impl_->worker, impl_->regions));
        return absl::OkStatus();
      },
      deadline));
  ASSIGN_OR_RETURN(std::vector<std::string> cards, bootstrap.AllGather(card, deadline));

  // 2. Parse every card, then create endpoints and unpack keys on the worker thread.
  std::vector<PeerCard> parsed(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    ASSIGN_OR_RETURN(parsed[r], DecodeCard(cards[r], r));
  }
  labels_.clear();
  for (const PeerCard& c : parsed) labels_.push_back(c.label);
  RETURN_IF_ERROR(CheckRegionTables(parsed));
  RETURN_IF_ERROR(impl_->RunSync([&] { return CreateEndpoints(parsed); }, deadline));

  // 3. A flush to every peer completes only once the endpoint is wired up.
  std::vector<Completion> flushes(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_) flushes[r] = Flush(r);
  }
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    RETURN_IF_ERROR(Wait(flushes[r], deadline, absl::StrCat("connecting to ", PeerName(r))));
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::CheckRegionTables(const std::vector<PeerCard>& cards) const {
  const std::vector<LocalRegion>& mine = impl_->regions;
  for (int r = 0; r < world_size_; ++r) {
    if (cards[r].regions.size() != mine.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          PeerName(r), " registered ", cards[r].regions.size(), " memory regions, rank ", rank_,
          " ", mine.size(), " (each count includes the transport's goodbye region)"));
    }
    for (size_t i = 0; i < mine.size(); ++i) {
      if (cards[r].regions[i].name != mine[i].name) {
        return absl::FailedPreconditionError(
            absl::StrCat(PeerName(r), " registered region ", i, " as '", cards[r].regions[i].name,
                         "', rank ", rank_, " as '", mine[i].name, "'"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status UcxTransport::CreateEndpoints(const std::vector<PeerCard>& cards) {
  // Watch same-host peers from here on, so a peer that dies while its endpoint is wired up
  // already fails the flushes Connect waits on. Opened after the exchange, a pidfd is checked
  // against the card's start time (the pid may have been reused meanwhile).
  std::vector<ProcessIdentity> identities;
  identities.reserve(cards.size());
  for (const PeerCard& c : cards) identities.push_back(c.identity);
  impl_->liveness = PeerLiveness::Watch(cards[rank_].identity, identities);
  impl_->next_liveness_check = absl::InfinitePast();
  impl_->peers.clear();
  impl_->peers.resize(world_size_);
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    ASSIGN_OR_RETURN(impl_->peers[r], ConnectPeer(r, cards[r]));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PeerConn>> UcxTransport::ConnectPeer(int peer,
                                                                    const PeerCard& card) {
  auto pc = std::make_unique<PeerConn>();
  pc->transport = this;
  pc->rank = peer;
  pc->liveness = &impl_->liveness;
  pc->goodbye = static_cast<uint64_t*>(impl_->regions[goodbye_region_].memh.address()) + peer;
  pc->closing = &impl_->closing;
  absl::StatusOr<Endpoint> ep =
      Endpoint::Create(impl_->worker, card.address,
                       options_.error_handling == ErrorHandling::kPeer ? &OnEndpointError : nullptr,
                       pc.get(), absl::StrCat("rank", rank_, "->rank", peer));
  if (!ep.ok()) {
    return absl::Status(ep.status().code(), absl::StrCat("connecting to ", PeerName(peer), ": ",
                                                         ep.status().message()));
  }
  pc->ep = *std::move(ep);
  for (const PeerCard::Region& region : card.regions) {
    RemoteRegion rr;
    rr.name = region.name;
    rr.address = region.address;
    rr.size = region.size;
    ASSIGN_OR_RETURN(rr.rkey, Rkey::Unpack(pc->ep, region.rkey));
    pc->regions.push_back(std::move(rr));
  }
  return pc;
}

}  // namespace syncopate::ucx
