// model_tx_test.cc - the NIC model's send path: TSO parsed back, checksum offload, ICRC against
// the published ICRC reference vectors, the Solar block CRC32C, completions and bad requests.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;
using test::get16;
using test::get32;
using test::pattern;

Bytes from_hex(const std::string& hex) {
  Bytes b;
  std::string digits;
  for (char c : hex) {
    if (c != ' ' && c != '\n') digits += c;
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    b.push_back(uint8_t(std::stoul(digits.substr(i, 2), nullptr, 16)));
  }
  return b;
}

class ModelTx : public ::testing::Test {
 protected:
  ModelTx() {
    NicConfig c;
    c.max_flows = 4;
    c.ms_store_entries = 64;
    c.tx_completions = 4;
    nic = std::make_unique<NicModel>(c);
    mem.assign(1 << 17, 0);
    EXPECT_EQ(nic->mr_add(3, mem.data(), mem.size(), 1), Err::kOk);
    out.resize(1 << 18);
    frames.resize(64);
  }
  TxStatus send(const TxRequest& r) { return nic->tx(r, out, frames, &n); }
  Bytes frame(size_t i) const {
    return Bytes(out.begin() + frames[i].offset, out.begin() + frames[i].offset + frames[i].len);
  }
  std::vector<TxCompletion> poll() {
    std::vector<TxCompletion> c(16);
    c.resize(nic->tx_poll(c));
    return c;
  }

  std::unique_ptr<NicModel> nic;
  std::vector<uint8_t> mem;
  std::vector<uint8_t> out;
  std::vector<TxFrame> frames;
  uint16_t n = 0;
};

// A TCP header template as a transport builds it: lengths and checksums left for the NIC.
Bytes tcp_header(uint32_t seq, uint8_t flags, uint16_t ip_id) {
  Bytes f = test::tcp_frame(seq, {}, flags);
  test::put16(&f[14 + 4], ip_id);
  test::put16(&f[14 + 2], 0);
  test::put16(&f[14 + 10], 0);
  test::put16(&f[34 + 16], 0);
  return f;
}

TEST_F(ModelTx, TsoSplitsIntoMssFramesWithCorrectHeaders) {
  Bytes data = pattern(64000, 5);
  std::copy(data.begin(), data.end(), mem.begin() + 100);
  const uint32_t seq = 0xFFFFF000;         // the sequence numbers wrap inside the burst
  Bytes h = tcp_header(seq, 0x99, 65530);  // CWR ACK PSH FIN; the IP id wraps too
  ASSERT_EQ(send({h, 3, 100, 64000, 1448, kTxTso, 77}), TxStatus::kOk);
  const uint32_t nseg = (64000 + 1447) / 1448;
  ASSERT_EQ(n, nseg);
  Bytes joined;
  for (uint32_t i = 0; i < nseg; i++) {
    Bytes f = frame(i);
    const uint8_t* ip = &f[14];
    const uint8_t* tcp = &f[34];
    uint32_t plen = i + 1 < nseg ? 1448 : 64000 - 1448 * (nseg - 1);
    ASSERT_EQ(f.size(), 54 + plen) << "frame " << i;
    EXPECT_EQ(get16(ip + 2), 40 + plen);
    EXPECT_EQ(get16(ip + 4), uint16_t(65530 + i));
    EXPECT_EQ(test::fold(test::sum16(ip, 20)), 0) << "IP checksum, frame " << i;
    EXPECT_EQ(get32(tcp + 4), seq + i * 1448);
    EXPECT_EQ(get32(tcp + 8), 1u);  // ack unchanged
    bool last = i + 1 == nseg;
    EXPECT_EQ(tcp[13] & 0x09, last ? 0x09 : 0) << "PSH/FIN only on the last frame";
    EXPECT_EQ(tcp[13] & 0x80, i == 0 ? 0x80 : 0) << "CWR only on the first frame";
    EXPECT_EQ(tcp[13] & 0x10, 0x10);
    EXPECT_EQ(test::l4_sum(ip, tcp, f.size() - 34), 0) << "TCP checksum, frame " << i;
    joined.insert(joined.end(), f.begin() + 54, f.end());
  }
  EXPECT_EQ(joined, data);
  auto c = poll();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].cookie, 77u);
  EXPECT_EQ(c[0].status, TxStatus::kOk);
  EXPECT_EQ(c[0].frames, nseg);
  EXPECT_EQ(nic->counter(Ctr::kTxFrames), nseg);
  EXPECT_EQ(nic->counter(Ctr::kTxTsoRequests), 1u);
}

TEST_F(ModelTx, PerFrameBuffersGetTheSameFrames) {
  Bytes data = pattern(5000, 9);
  std::copy(data.begin(), data.end(), mem.begin());
  Bytes h = tcp_header(100, 0x19, 1);
  TxRequest r{h, 3, 0, 5000, 1448, kTxTso, 5};
  ASSERT_EQ(NicModel::tx_frames(r), 4u);
  ASSERT_EQ(NicModel::tx_frame_room(r), 54u + 1448);
  ASSERT_EQ(send(r), TxStatus::kOk);
  std::vector<Bytes> store(4, Bytes(NicModel::tx_frame_room(r)));
  std::vector<std::span<uint8_t>> bufs(store.begin(), store.end());
  std::vector<uint32_t> lens(4);
  uint16_t got = 0;
  ASSERT_EQ(nic->tx(r, bufs, lens, &got), TxStatus::kOk);
  ASSERT_EQ(got, 4);
  for (size_t i = 0; i < 4; i++) {
    EXPECT_EQ(Bytes(store[i].begin(), store[i].begin() + lens[i]), frame(i)) << "frame " << i;
  }
  EXPECT_EQ(lens[3], 54u + 5000 - 3 * 1448);
  // The last frame may be short, the others may not.
  store[1].resize(100);
  bufs.assign(store.begin(), store.end());
  EXPECT_EQ(nic->tx(r, bufs, lens, &got), TxStatus::kNoRoom);
  bufs.resize(3);
  EXPECT_EQ(nic->tx(r, bufs, lens, &got), TxStatus::kNoRoom);
  // RoCE: room for pad and ICRC.
  Bytes roce = test::roce_frame(0x04, 1, {}, {});
  roce.resize(roce.size() - 4);  // the header template ends with the BTH
  roce[42 + 1] = 0x30;           // PadCnt 3
  EXPECT_EQ(NicModel::tx_frame_room({roce, 3, 0, 9, 0, kTxIcrc, 1}), roce.size() + 9 + 3 + 4);
}

TEST_F(ModelTx, TsoOfExactMultipleAndOfOneByte) {
  Bytes h = tcp_header(1, 0x18, 1);
  ASSERT_EQ(send({h, 3, 0, 2896, 1448, kTxTso, 1}), TxStatus::kOk);
  ASSERT_EQ(n, 2);
  EXPECT_EQ(frame(1).size(), 54u + 1448);
  EXPECT_EQ(frame(0)[34 + 13] & 0x08, 0);
  EXPECT_EQ(frame(1)[34 + 13] & 0x08, 0x08);
  ASSERT_EQ(send({h, 3, 0, 1, 1448, kTxTso, 2}), TxStatus::kOk);
  ASSERT_EQ(n, 1);
  EXPECT_EQ(test::l4_sum(&frame(0)[14], &frame(0)[34], 21), 0);  // odd length
}

TEST_F(ModelTx, ChecksumOffloadOnlyWhenAsked) {
  Bytes data = pattern(333);
  std::copy(data.begin(), data.end(), mem.begin());
  Bytes h = tcp_header(5, 0x18, 9);
  ASSERT_EQ(send({h, 3, 0, 333, 0, 0, 1}), TxStatus::kOk);
  Bytes f = frame(0);
  EXPECT_EQ(get16(&f[14 + 2]), 20 + 20 + 333);  // lengths always filled
  EXPECT_EQ(get16(&f[14 + 10]), 0);
  EXPECT_EQ(get16(&f[34 + 16]), 0);
  ASSERT_EQ(send({h, 3, 0, 333, 0, kTxIpCsum | kTxL4Csum, 2}), TxStatus::kOk);
  f = frame(0);
  EXPECT_EQ(test::fold(test::sum16(&f[14], 20)), 0);
  EXPECT_EQ(test::l4_sum(&f[14], &f[34], 20 + 333), 0);
  // The same frame built independently.
  Bytes want = test::tcp_frame(5, data);
  test::put16(&want[14 + 4], 9);
  test::put16(&want[14 + 10], 0);
  test::put16(&want[14 + 10], test::fold(test::sum16(&want[14], 20)));
  EXPECT_EQ(f, want);

  Bytes u = test::udp_frame(1000, 2000, {});
  test::put16(&u[34 + 4], 0);
  test::put16(&u[34 + 6], 0);
  ASSERT_EQ(send({u, 3, 0, 333, 0, kTxIpCsum | kTxL4Csum, 3}), TxStatus::kOk);
  f = frame(0);
  EXPECT_EQ(get16(&f[34 + 4]), 8 + 333);
  EXPECT_EQ(f, test::udp_frame(1000, 2000, data));
}

TEST_F(ModelTx, IcrcMatchesCapturedConnectX4Cnp) {
  Bytes want = from_hex(
      "e41d2dab2bc2 7cfe90643b32 0800 45c2003c718c40004011 9161 0a001101 0a001201 000012b7 0028 "
      "0000 8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a");
  ASSERT_EQ(want.size(), 74u);
  Bytes h(want.begin(), want.begin() + 54);
  test::put16(&h[14 + 10], 0);  // the NIC computes the IP checksum
  std::fill(mem.begin(), mem.begin() + 16, 0);
  ASSERT_EQ(send({h, 3, 0, 16, 0, kTxIcrc | kTxIpCsum, 1}), TxStatus::kOk);
  EXPECT_EQ(frame(0), want);
}

TEST_F(ModelTx, IcrcAndUdpChecksumMatchScapyUcSendOnly) {
  Bytes h = from_hex(
      "248a07a8fa22 248a07a8fa22 0800 4501 0000 0478 4000 4011 0000 c0a80007 c0a80007 "
      "c000 12b7 0000 0000 2460ffff 000000d3 00cf1710");
  Bytes payload = from_hex("4630818be28935d90e9a95505401be885e50");
  std::copy(payload.begin(), payload.end(), mem.begin() + 7);
  ASSERT_EQ(send({h, 3, 7, 18, 0, kTxIcrc | kTxIpCsum | kTxL4Csum, 1}), TxStatus::kOk);
  Bytes f = frame(0);
  ASSERT_EQ(f.size(), 14u + 64);
  EXPECT_EQ(get16(&f[14 + 2]), 64);
  EXPECT_EQ(get16(&f[14 + 10]), 0xB4D5);
  EXPECT_EQ(get16(&f[34 + 4]), 44);
  EXPECT_EQ(get16(&f[34 + 6]), 0xACA2);
  EXPECT_EQ(f[72], 0);  // two pad bytes (PadCnt 2)
  EXPECT_EQ(f[73], 0);
  EXPECT_EQ(Bytes(f.end() - 4, f.end()), from_hex("78f353f3"));
  EXPECT_EQ(test::icrc_ref(f), 0xF353F378u);
}

TEST_F(ModelTx, ReceiveSideVerifiesTheReferenceVectors) {
  // Both vectors, received: the ICRC verifies and vector 2's payload lands in its receive.
  Bytes cnp = from_hex(
      "e41d2dab2bc2 7cfe90643b32 0800 45c2003c718c40004011 9161 0a001101 0a001201 000012b7 0028 "
      "0000 8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a");
  FlowSpec s;
  s.key = {0x0A001101, 0x0A001201, 0, 4791, 17};
  s.parser = Parser::kRoce;
  s.qpn = 0x118;  // the CNP's DestQP
  ASSERT_EQ(nic->flow_add(0, s), Err::kOk);
  RxEntry e;
  EXPECT_EQ(nic->rx(cnp, e), Decision::kNoPayload);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  cnp[19] ^= 1;  // a bit of the IP id: covered by the ICRC (IP checksum fixed up below)
  cnp[14 + 10] = cnp[14 + 11] = 0;
  test::put16(&cnp[14 + 10], test::fold(test::sum16(&cnp[14], 20)));
  EXPECT_EQ(nic->rx(cnp, e), Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kBadIcrc);

  Bytes v2 = from_hex(
      "248a07a8fa22 248a07a8fa22 0800 4501 0040 0478 4000 4011 b4d5 c0a80007 c0a80007 "
      "c000 12b7 002c aca2 2460ffff 000000d3 00cf1710 4630818be28935d90e9a95505401be885e50 0000 "
      "78f353f3");
  s.key = {0xC0A80007, 0xC0A80007, 0, 4791, 17};
  s.initial_seq = 13571856;
  s.qpn = 211;
  s.reliable = false;  // UC
  ASSERT_EQ(nic->flow_add(1, s), Err::kOk);
  ASSERT_EQ(nic->ms_post(1, {3, 0x1000, 64, 0}), Err::kOk);
  EXPECT_EQ(nic->rx(v2, e), Decision::kPlaced);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  EXPECT_EQ(e.payload_len, 18u);
  EXPECT_EQ(Bytes(mem.begin() + 0x1000, mem.begin() + 0x1000 + 18),
            from_hex("4630818be28935d90e9a95505401be885e50"));
}

// kTxCrc32c: the block's CRC32C lands in the Solar header (bytes 28..31 of the UDP payload)
// before the UDP checksum is computed over it; the frame equals the tests' own Solar frame (a
// bitwise CRC32C) and the receive side verifies and places it. Without the flag the template's
// CRC field goes out as it was and the receiver defers the block.
TEST_F(ModelTx, SolarCrc32cIsWrittenIntoTheHeader) {
  Bytes data = pattern(1000, 8);
  std::copy(data.begin(), data.end(), mem.begin() + 50);
  Bytes h = test::solar_frame(1, 10, 0, 5, {}, 2);  // the header alone
  ASSERT_EQ(h.size(), 14u + 20 + 8 + 32);
  test::put32(&h[42 + 28], 0xAAAAAAAA);  // a stale CRC the NIC must replace
  ASSERT_EQ(send({h, 3, 50, 1000, 0, kTxCrc32c | kTxIpCsum | kTxL4Csum, 1}), TxStatus::kOk);
  ASSERT_EQ(n, 1);
  const Bytes sent = frame(0);
  EXPECT_EQ(get32(&sent[42 + 28]), test::crc32c_ref(data.data(), data.size()));
  EXPECT_EQ(sent, test::solar_frame(1, 10, 0, 5, data, 2));

  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 7000, 17};
  s.parser = Parser::kSolar;
  s.qpn = test::kSolarConn;
  ASSERT_EQ(nic->flow_add(0, s), Err::kOk);
  ASSERT_EQ(nic->ms_post(0, {3, 0x10000, 2000, 0}), Err::kOk);
  RxEntry e;
  EXPECT_EQ(nic->rx(sent, e), Decision::kPlaced);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  EXPECT_EQ(Bytes(mem.begin() + 0x10000, mem.begin() + 0x10000 + 1000), data);

  ASSERT_EQ(send({h, 3, 50, 1000, 0, kTxIpCsum | kTxL4Csum, 2}), TxStatus::kOk);
  EXPECT_EQ(get32(&frame(0)[42 + 28]), 0xAAAAAAAAu);
  EXPECT_EQ(nic->rx(frame(0), e), Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kBadCrc32c);
  EXPECT_EQ(poll().size(), 2u);

  // A header that is not exactly Ethernet/IPv4/UDP/Solar, or the ICRC as well: refused.
  EXPECT_EQ(send({tcp_header(1, 0x18, 1), 3, 0, 10, 0, kTxCrc32c, 3}), TxStatus::kBadHeader);
  EXPECT_EQ(send({Bytes(h.begin(), h.end() - 1), 3, 0, 10, 0, kTxCrc32c, 4}), TxStatus::kBadHeader);
  Bytes longer = h;
  longer.push_back(0);
  EXPECT_EQ(send({longer, 3, 0, 10, 0, kTxCrc32c, 5}), TxStatus::kBadHeader);
  EXPECT_EQ(poll().size(), 3u);
  EXPECT_EQ(send({h, 3, 0, 10, 0, kTxCrc32c | kTxIcrc, 6}), TxStatus::kBadHeader);
}

TEST_F(ModelTx, BadRequestsFailWithACompletion) {
  Bytes h = tcp_header(1, 0x18, 1);
  EXPECT_EQ(send({h, 3, (1 << 17) - 10, 11, 0, 0, 1}), TxStatus::kDmaFault);
  EXPECT_EQ(send({h, 9, 0, 1, 0, 0, 2}), TxStatus::kDmaFault);
  EXPECT_EQ(send({Bytes(h.begin(), h.begin() + 40), 3, 0, 1, 0, 0, 3}), TxStatus::kBadHeader);
  auto c = poll();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].cookie, 1u);
  EXPECT_EQ(c[2].status, TxStatus::kBadHeader);
  EXPECT_EQ(send({h, 3, 0, 65537, 1448, kTxTso, 4}), TxStatus::kTooLong);
  EXPECT_EQ(send({h, 3, 0, 20000, 9200, kTxTso, 5}), TxStatus::kTooLong);  // frame over MTU
  EXPECT_EQ(send({h, 3, 0, 10000, 0, 0, 6}), TxStatus::kTooLong);
  EXPECT_EQ(send({h, 3, 0, 100, 0, kTxTso, 7}), TxStatus::kBadHeader);  // TSO without MSS
  EXPECT_EQ(send({h, 3, 0, 100, 0, kTxIcrc, 8}), TxStatus::kCompletionsFull);
  EXPECT_EQ(poll().size(), 4u);
  EXPECT_EQ(send({h, 3, 0, 100, 0, kTxIcrc, 8}), TxStatus::kBadHeader);  // ICRC over TCP
  EXPECT_EQ(nic->tx(TxRequest{h, 3, 0, 4000, 100, kTxTso, 9}, std::span<uint8_t>(out).first(100),
                    frames, &n),
            TxStatus::kNoRoom);
  EXPECT_EQ(nic->tx_status_count(TxStatus::kCompletionsFull), 1u);
  EXPECT_EQ(nic->tx_status_count(TxStatus::kDmaFault), 2u);
  EXPECT_EQ(nic->counter(Ctr::kTxErrors), 10u);
}

}  // namespace
}  // namespace cleave::nic
