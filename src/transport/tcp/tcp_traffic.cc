// tcp_traffic.cc - the traffic TCP claims (Transport::claim): IP protocol 6, split and keyed by
// its owner with parse_rx(), and the RST that answers a segment of no flow (RFC 9293 3.10.7.1).
//
// Both run on the owner's receive path before any flow is found, on untrusted bytes, with no
// instance of the transport: they read only what RxL4 says is there, and allocate nothing.
#include "tcp.h"
#include "tcp_wire.h"

namespace cleave::transport::tcp {

namespace {

uint16_t be16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}
uint32_t be32(const uint8_t* p) {
  return uint32_t(be16(p)) << 16 | be16(p + 2);
}

// The header's length from its data offset, the ports, and whether it is a bare SYN (a new
// connection: its listener is named even when a flow, TIME-WAIT's among them, has the tuple).
// Options are the transport's to parse.
bool parse_rx(const RxL4& in, RxParsed* out) {
  const uint32_t thl = (in.l4[12] >> 4) * 4u;
  if (thl < kHeaderLen || thl > in.avail || thl > in.total) return false;
  out->header_len = uint16_t(thl);
  out->payload_len = in.total - thl;
  out->src_port = be16(in.l4);
  out->dst_port = be16(in.l4 + 2);
  out->opens = (in.l4[13] & (kSyn | kAck | kRst)) == kSyn;
  return true;
}

// A segment for no connection gets a RST, unless it is one: <SEQ=SEG.ACK><CTL=RST> when it
// carried an ACK, else <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
size_t answer_rst(const RxL4& in, const RxParsed& p, uint8_t* out) {
  const uint8_t flags = in.l4[13];
  if ((flags & kRst) != 0) return 0;
  BuildSpec b;
  b.src_port = p.dst_port;
  b.dst_port = p.src_port;
  if ((flags & kAck) != 0) {
    b.seq = be32(in.l4 + 8);
    b.flags = kRst;
  } else {
    b.ack = be32(in.l4 + 4) + p.payload_len + ((flags & kSyn) != 0 ? 1 : 0) +
            ((flags & kFin) != 0 ? 1 : 0);
    b.flags = kRst | kAck;
  }
  return build(b, out);
}

}  // namespace

Claim TcpTransport::claim() const {
  Claim c;
  c.proto = 6;
  c.key = FlowKey::kTuple;
  c.nic.parser = NicParser::kTcp;
  c.min_header = kHeaderLen;
  c.parse = parse_rx;
  c.no_flow_answer = answer_rst;
  return c;
}

}  // namespace cleave::transport::tcp
