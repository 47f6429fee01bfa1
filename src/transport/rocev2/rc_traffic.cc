// rc_traffic.cc - what RoCEv2 RC tells its owner about its traffic: the claim (UDP to 4791, each
// packet found by its destination QP), the NIC flow of a QP moving to RTR, and the largest PMTU
// an IP MTU carries.
//
// parse_rx() runs on the owner's receive path before any QP is found, on untrusted bytes, with
// no instance of the transport: it reads only what RxL4 says is there, and allocates nothing.
#include "rc.h"
#include "roce_wire.h"

namespace cleave::transport::roce {

namespace {

constexpr uint16_t kPorts[] = {kUdpPort};

// A whole packet (the copy path, or one the NIC did not cut) is split here: the opcode's headers,
// then the payload without pad and ICRC. One the NIC cut to its headers keeps what the NIC said.
bool parse_rx(const RxL4& in, RxParsed* out) {
  size_t hdr_len = in.avail;
  uint32_t payload_len = in.nic_payload;
  if (in.whole && !split(in.l4, in.total, &hdr_len, &payload_len)) return false;
  out->header_len = uint16_t(hdr_len);
  out->payload_len = payload_len;
  out->number = dest_qp(in.l4);
  return true;
}

}  // namespace

Claim RcTransport::claim() const {
  Claim c;
  c.proto = 17;
  c.udp_ports = kPorts;
  c.key = FlowKey::kNumber;
  c.nic.parser = NicParser::kRoce;
  c.nic.messages = true;
  c.min_header = uint16_t(kUdpLen + kBthLen);
  c.trailer = uint8_t(kIcrcLen);
  c.parse = parse_rx;
  return c;
}

// With the longest RC headers (UDP, BTH, RETH, ImmDt) and the ICRC.
uint32_t RcTransport::max_pmtu(uint32_t l4_mtu) const {
  constexpr uint32_t kOverhead = kMaxHeader + kIcrcLen;
  uint32_t pmtu = 4096;
  while (pmtu >= 256 && pmtu + kOverhead > l4_mtu)
    pmtu /= 2;
  return pmtu >= 256 ? pmtu : 0;
}

// The NIC places a go-back-N QP's requests in order only: it must know which way it recovers.
NicFlow RcTransport::rtr_nic_flow(FlowId flow, const QpAttr& attr, uint32_t mask) const {
  NicFlow f;
  f.parser = NicParser::kRoce;
  f.messages = true;
  f.initial_seq = attr.rq_psn & kPsnMask;
  f.pmtu = attr.pmtu;
  QpAttr cur;
  const bool sr = (mask & kAttrSelectiveRepeat) != 0 ? attr.selective_repeat
                  : query_qp(flow, &cur) == 0        ? cur.selective_repeat
                                                     : false;
  f.selective_repeat = sr;
  return f;
}

}  // namespace cleave::transport::roce
