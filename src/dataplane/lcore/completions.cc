// completions.cc - transport events become completions on the apps' completion pipes, whose room
// flows reserve in advance through CompletionRoom (apps.h), so none is ever dropped (flows.h).
#include "lcore/flows_impl.h"

#include <cleave/cleave.h>

#include <cerrno>

#include "errors.h"

namespace cleave::dp {

namespace {

uint8_t event_code(EventKind k) {
  switch (k) {
    case EventKind::kConnected:
      return abi::kEvConnected;
    case EventKind::kAccepted:
      return abi::kEvAccepted;
    case EventKind::kPeerClosed:
      return abi::kEvPeerClosed;
    case EventKind::kClosed:
      return abi::kEvClosed;
    default:
      return abi::kEvRefused;
  }
}

}  // namespace

// Room on the completion pipe for n more owed entries, beyond those already owed.
bool FlowPath::reserve(DpApp& a, uint16_t cq, uint32_t n) {
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return false;
  return CompletionRoom(a.pipes[cq]).reserve(n);
}

void FlowPath::release(Flow& f, uint32_t n) {
  if (f.app == nullptr) return;
  CompletionRoom(f.app->pipes[f.cq]).release(n);
}

void FlowPath::deliver(std::span<const transport::Event> events) {
  for (const transport::Event& e : events) {
    if (e.flow >= flows_.size()) continue;
    Flow& f = flows_[e.flow];
    if (f.app == nullptr) {
      stats_.events_dropped++;
      continue;
    }
    abi::Completion c{};
    c.flow = e.flow;
    // Negative errno values are CL_E* codes as they are (errors.h), but for a message longer
    // than its receive buffer (CL_ETRUNC, and imm carries the message's length).
    c.status = completion_status(e.status, e.kind == EventKind::kRecvDone);
    c.length = e.len;
    c.imm = e.kind == EventKind::kRecvDone ? e.aux : 0;
    c.wr_id = e.wr_id;
    switch (e.kind) {
      case EventKind::kSendDone:
      case EventKind::kWriteDone:
      case EventKind::kReadDone:
      case EventKind::kRecvDone:
        c.opcode = e.kind == EventKind::kRecvDone    ? abi::kOpFlowRecv
                   : e.kind == EventKind::kWriteDone ? abi::kOpRdmaWrite
                   : e.kind == EventKind::kReadDone  ? abi::kOpRdmaRead
                                                     : abi::kOpFlowSend;
        if (f.qp && e.kind == EventKind::kRecvDone) {
          // A QP's receive: the peer's immediate data, and whether a WRITE consumed it.
          c.flags |= abi::kCompRecv;
          c.imm = (e.flags & transport::kEvImm) != 0 ? e.imm : 0;
          if ((e.flags & transport::kEvImm) != 0) c.flags |= abi::kCompImm;
          if ((e.flags & transport::kEvWrite) != 0) c.flags |= abi::kCompRdmaWrite;
        }
        if (f.outstanding != 0) {
          f.outstanding--;
          release(f, 1);
        }
        break;
      case EventKind::kRecvData:
        f.data_pending += e.len;
        post_data(f);
        continue;
      case EventKind::kAccepted:
        established(f);
        [[fallthrough]];
      case EventKind::kConnected:
      case EventKind::kPeerClosed:
      case EventKind::kClosed:
      case EventKind::kRefused: {
        c.flags = abi::kCompEvent;
        c.opcode = event_code(e.kind);
        c.wr_id = e.kind == EventKind::kAccepted ? e.aux : 0;
        if (f.events_left != 0) {
          f.events_left--;
          release(f, 1);
        }
        if (e.kind == EventKind::kClosed || e.kind == EventKind::kRefused) {
          // Deliver any data event still waiting first, then nothing more for the app.
          if (f.data_pending != 0) post_data(f);
          f.app_done = true;
          release(f, f.events_left);
          f.events_left = 0;
          if (!f.qp) {
            // What the transport keeps of the flow now (TIME-WAIT) is its own: not in the app's
            // quota, and nothing the NIC places into the app's memory.
            uncharge(f);
            nic_off(f, e.flow);
          }
        }
        break;
      }
    }
    c.pipe = f.cq;
    stats_.events++;
    completions_->post(*f.app, f.cq, &c, 1);
  }
}

// A data event goes out when the pipe has room beyond what it owes; else it waits (poll()).
void FlowPath::post_data(Flow& f) {
  if (CompletionRoom(f.app->pipes[f.cq]).free() == 0) {
    stats_.data_coalesced++;
    if (!f.data_listed) {
      f.data_listed = true;
      data_waiting_.push_back(uint32_t(&f - flows_.data()));
    }
    return;
  }
  abi::Completion c{};
  c.flow = uint32_t(&f - flows_.data());
  c.flags = abi::kCompEvent;
  c.opcode = abi::kEvData;
  c.length = f.data_pending;
  c.pipe = f.cq;
  f.data_pending = 0;
  stats_.events++;
  completions_->post(*f.app, f.cq, &c, 1);
}

void FlowPath::fail_connect(uint32_t id, int32_t status) {
  Flow& f = flows_[id];
  if (f.app != nullptr) {
    abi::Completion c{};
    c.flow = id;
    c.flags = abi::kCompEvent;
    c.opcode = abi::kEvRefused;
    c.status = status;
    c.pipe = f.cq;
    release(f, f.events_left);
    f.events_left = 0;
    stats_.events++;
    completions_->post(*f.app, f.cq, &c, 1);
  }
  stats_.flows_closed++;
  free_flow(id);
}

}  // namespace cleave::dp
