// claim_test.cc - the traffic the built-in transports claim (Transport::claim): what they take,
// how their stateless parse splits a packet and reads its flow key, and TCP's answer to a
// segment of no flow (RFC 9293 3.10.7.1). The dataplane's demultiplexing over these claims is
// tested through the dataplane (dataplane_test, management_test).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "frames.h"
#include "rdma.h"
#include "transport/rocev2/rc.h"
#include "transport/solar/solar.h"
#include "transport/tcp/tcp.h"

namespace cleave::transport {
namespace {

using test::Bytes;
using test::get16;
using test::put16;
using test::put32;

uint32_t get32(const Bytes& b, size_t off) {
  return uint32_t(get16(b, off)) << 16 | get16(b, off + 2);
}

// A TCP header: ports 40000 -> 80, seq, ack, flags, data offset `words`, then `payload` bytes.
Bytes tcp_segment(uint8_t flags, uint32_t seq, uint32_t ack, uint8_t words = 5,
                  size_t payload = 0) {
  Bytes b(size_t(words) * 4 + payload, 0);
  put16(b, 0, 40000);
  put16(b, 2, 80);
  put32(b, 4, seq);
  put32(b, 8, ack);
  b[12] = uint8_t(words << 4);
  b[13] = flags;
  return b;
}

RxL4 whole(const Bytes& b) {
  return RxL4{b.data(), uint32_t(b.size()), uint32_t(b.size()), true, 0};
}

TEST(TcpClaim, TakesIpProtocol6ByTupleAndAnswersWithARst) {
  tcp::TcpTransport t;
  const Claim c = t.claim();
  EXPECT_EQ(c.proto, 6);
  EXPECT_TRUE(c.udp_ports.empty());
  EXPECT_EQ(c.key, FlowKey::kTuple);
  EXPECT_EQ(c.nic.parser, NicParser::kTcp);
  EXPECT_TRUE(c.nic.zero_copy);
  EXPECT_TRUE(c.nic.reliable);
  EXPECT_EQ(c.min_header, 20);
  EXPECT_EQ(c.trailer, 0);
  ASSERT_NE(c.parse, nullptr);
  ASSERT_NE(c.no_flow_answer, nullptr);
}

TEST(TcpClaim, ParseReadsPortsHeaderLengthAndABareSyn) {
  const Claim c = tcp::TcpTransport().claim();
  const Bytes syn = tcp_segment(tcp::kSyn, 1000, 0, 8);  // with 12 bytes of options
  RxParsed p;
  ASSERT_TRUE(c.parse(whole(syn), &p));
  EXPECT_EQ(p.header_len, 32);
  EXPECT_EQ(p.payload_len, 0u);
  EXPECT_EQ(p.src_port, 40000);
  EXPECT_EQ(p.dst_port, 80);
  EXPECT_TRUE(p.opens);
  // Data: the payload is what follows the header, also when the NIC took it out of the frame.
  const Bytes data = tcp_segment(tcp::kAck | tcp::kPsh, 1001, 7, 5, 100);
  RxL4 cut{data.data(), 20, uint32_t(data.size()), false, 100};
  p = RxParsed{};
  ASSERT_TRUE(c.parse(cut, &p));
  EXPECT_EQ(p.header_len, 20);
  EXPECT_EQ(p.payload_len, 100u);
  EXPECT_FALSE(p.opens);
  for (uint8_t flags : {uint8_t(tcp::kSyn | tcp::kAck), uint8_t(tcp::kSyn | tcp::kRst)}) {
    ASSERT_TRUE(c.parse(whole(tcp_segment(flags, 1, 1)), &p));
    EXPECT_FALSE(p.opens) << int(flags);
  }
}

TEST(TcpClaim, ParseRefusesAHeaderThatLiesAboutItsLength) {
  const Claim c = tcp::TcpTransport().claim();
  RxParsed p;
  EXPECT_FALSE(c.parse(whole(tcp_segment(tcp::kAck, 1, 1, 4)), &p));  // below 20 bytes
  const Bytes b = tcp_segment(tcp::kAck, 1, 1, 15);                   // 60 bytes of header
  EXPECT_FALSE(c.parse(RxL4{b.data(), 40, 60, false, 0}, &p)) << "past what is readable";
  EXPECT_FALSE(c.parse(RxL4{b.data(), 60, 40, false, 0}, &p)) << "past the packet";
}

TEST(TcpClaim, AnswersASegmentOfNoFlowAsRfc9293Says) {
  const Claim c = tcp::TcpTransport().claim();
  std::array<uint8_t, kMaxL4Header> out{};
  RxParsed p;
  // No ACK: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, SYN and FIN counted in SEG.LEN.
  const Bytes syn_fin = tcp_segment(tcp::kSyn | tcp::kFin, 5000, 0, 5, 10);
  ASSERT_TRUE(c.parse(whole(syn_fin), &p));
  ASSERT_EQ(c.no_flow_answer(whole(syn_fin), p, out.data()), 20u);
  Bytes r(out.begin(), out.begin() + 20);
  EXPECT_EQ(get16(r, 0), 80);
  EXPECT_EQ(get16(r, 2), 40000);
  EXPECT_EQ(get32(r, 4), 0u);
  EXPECT_EQ(get32(r, 8), 5000u + 10 + 2);
  EXPECT_EQ(r[12], 5 << 4);
  EXPECT_EQ(r[13], tcp::kRst | tcp::kAck);
  EXPECT_EQ(get16(r, 14), 0) << "no window";
  // An ACK: <SEQ=SEG.ACK><CTL=RST>.
  const Bytes ack = tcp_segment(tcp::kAck, 5000, 777, 5, 0);
  ASSERT_TRUE(c.parse(whole(ack), &p));
  ASSERT_EQ(c.no_flow_answer(whole(ack), p, out.data()), 20u);
  r.assign(out.begin(), out.begin() + 20);
  EXPECT_EQ(get32(r, 4), 777u);
  EXPECT_EQ(get32(r, 8), 0u);
  EXPECT_EQ(r[13], tcp::kRst);
  // A RST is never answered.
  const Bytes rst = tcp_segment(tcp::kRst | tcp::kAck, 5000, 777);
  ASSERT_TRUE(c.parse(whole(rst), &p));
  EXPECT_EQ(c.no_flow_answer(whole(rst), p, out.data()), 0u);
}

TEST(TcpClaim, ConfigureSetsTheTimeWaitLimitAndRefusesWhatItDoesNotKnow) {
  tcp::TcpTransport t;
  const std::vector<Param> ok{{"max_time_wait", "12"}};
  EXPECT_EQ(t.configure(ok), "");
  const std::vector<Param> bad{{"max_time_wait", "many"}};
  EXPECT_EQ(t.configure(bad), "tcp: max_time_wait must be a number, got \"many\"");
  const std::vector<Param> unknown{{"mss", "1000"}};
  EXPECT_EQ(t.configure(unknown), "tcp: no transport-wide setting \"mss\"");
  EXPECT_EQ(t.configure({}), "");
}

// A RoCEv2 packet to 4791: UDP, a BTH for `qpn` with `opcode`, `payload` bytes, the ICRC.
Bytes roce_packet(uint8_t opcode, uint32_t qpn, size_t payload, uint8_t pad = 0) {
  Bytes b(8 + 12 + payload + pad + 4, 0);
  put16(b, 0, 49152);
  put16(b, 2, 4791);
  put16(b, 4, uint16_t(b.size()));
  b[8] = opcode;
  b[9] = uint8_t(pad << 4);
  put16(b, 10, 0xFFFF);
  b[13] = uint8_t(qpn >> 16);
  put16(b, 14, uint16_t(qpn));
  return b;
}

TEST(RoceClaim, TakesUdpTo4791ByDestinationQp) {
  roce::RcTransport t;
  const Claim c = t.claim();
  EXPECT_EQ(c.proto, 17);
  ASSERT_EQ(c.udp_ports.size(), 1u);
  EXPECT_EQ(c.udp_ports[0], 4791);
  EXPECT_EQ(c.key, FlowKey::kNumber);
  EXPECT_EQ(c.nic.parser, NicParser::kRoce);
  EXPECT_EQ(c.min_header, 8 + 12);
  EXPECT_EQ(c.trailer, 4);
  EXPECT_EQ(c.no_flow_answer, nullptr) << "a packet for no QP is dropped, unanswered";
  EXPECT_EQ(t.qp_control(), static_cast<QpControl*>(&t));
}

TEST(RoceClaim, ParseSplitsAWholePacketAndKeepsTheNicsSplitOfACutOne) {
  const Claim c = roce::RcTransport().claim();
  RxParsed p;
  const Bytes send = roce_packet(roce::kSendOnly, 0x012345, 13, 3);  // 13 bytes, pad 3
  ASSERT_TRUE(c.parse(whole(send), &p));
  EXPECT_EQ(p.header_len, 20);
  EXPECT_EQ(p.payload_len, 13u);
  EXPECT_EQ(p.number, 0x012345u);
  // Cut to its headers by the NIC: the NIC's payload length.
  RxL4 cut{send.data(), 20, uint32_t(send.size()), false, 13};
  p = RxParsed{};
  ASSERT_TRUE(c.parse(cut, &p));
  EXPECT_EQ(p.header_len, 20);
  EXPECT_EQ(p.payload_len, 13u);
  // A whole packet whose lengths disagree (its pad runs into the ICRC) is malformed.
  Bytes bad = roce_packet(roce::kSendOnly, 7, 0, 0);
  bad[9] = 3 << 4;
  EXPECT_FALSE(c.parse(whole(bad), &p));
}

TEST(SolarClaim, TakesUdpTo7000ByConnectionNumberAndSplitsTheHeaderFromTheBlock) {
  solar::SolarTransport t;
  const Claim c = t.claim();
  EXPECT_EQ(c.proto, 17);
  ASSERT_EQ(c.udp_ports.size(), 1u);
  EXPECT_EQ(c.udp_ports[0], 7000);
  EXPECT_EQ(c.key, FlowKey::kNumber);
  EXPECT_EQ(c.nic.parser, NicParser::kSolar);
  EXPECT_FALSE(c.nic.messages);
  EXPECT_EQ(c.min_header, 8 + 32);
  EXPECT_EQ(c.trailer, 0);
  Bytes pkt(8 + 32 + 100);
  put16(pkt, 0, 0xC003);
  put16(pkt, 2, 7000);
  put16(pkt, 8 + 4, 0x0012);  // conn, the receiver's number: 0x00123456
  put16(pkt, 8 + 6, 0x3456);
  RxParsed p;
  ASSERT_TRUE(c.parse({pkt.data(), uint32_t(pkt.size()), uint32_t(pkt.size()), true, 0}, &p));
  EXPECT_EQ(p.header_len, 40);
  EXPECT_EQ(p.payload_len, 100u);
  EXPECT_EQ(p.src_port, 0xC003);
  EXPECT_EQ(p.dst_port, 7000);
  EXPECT_EQ(p.number, 0x123456u);
  p = RxParsed{};
  ASSERT_TRUE(c.parse({pkt.data(), 40, uint32_t(pkt.size()), false, 100}, &p));  // cut by the NIC
  EXPECT_EQ(p.payload_len, 100u);
  EXPECT_FALSE(c.parse({pkt.data(), 39, uint32_t(pkt.size()), false, 100}, &p));
}

TEST(RoceClaim, PmtuAndTheNicFlowAtRtr) {
  roce::RcTransport t;
  // UDP 8 + BTH 12 + RETH 16 + ImmDt 4 + ICRC 4 = 44 bytes besides the payload.
  EXPECT_EQ(t.max_pmtu(1500 - 20), 1024u);
  EXPECT_EQ(t.max_pmtu(4096 + 44), 4096u);
  EXPECT_EQ(t.max_pmtu(4096 + 43), 2048u);
  EXPECT_EQ(t.max_pmtu(256 + 43), 0u);
  ASSERT_EQ(t.create_qp(3, 0x100003, QpCaps{}), 0);
  QpAttr a;
  a.rq_psn = 0xABCDEF;
  a.pmtu = 1024;
  NicFlow f = t.rtr_nic_flow(3, a, kAttrRqPsn | kAttrPmtu);
  EXPECT_EQ(f.parser, NicParser::kRoce);
  EXPECT_TRUE(f.zero_copy);
  EXPECT_TRUE(f.reliable);
  EXPECT_TRUE(f.messages);
  EXPECT_EQ(f.initial_seq, 0xABCDEFu);
  EXPECT_EQ(f.pmtu, 1024u);
  EXPECT_FALSE(f.selective_repeat) << "the QP's own (go-back-N) when the modify leaves it";
  a.selective_repeat = true;
  f = t.rtr_nic_flow(3, a, kAttrRqPsn | kAttrPmtu | kAttrSelectiveRepeat);
  EXPECT_TRUE(f.selective_repeat);
}

}  // namespace
}  // namespace cleave::transport
