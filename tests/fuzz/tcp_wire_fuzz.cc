// tcp_wire_fuzz.cc - TCP header and option parsing (src/transport/tcp/tcp_wire.*) on the input
// as a TCP header with options.
//
// Invariants: parse() accepts only headers whose data offset fits the bytes given, and what it
// read builds again (build()) into a header that parses to the same values: the fields build()
// writes, every option it emits, and the SACK blocks that fit beside them, in order.
#include <cstring>

#include "fuzz_input.h"
#include "transport/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave::transport::tcp;
  Segment s;
  if (!parse(data, size, s)) return 0;
  FUZZ_CHECK(s.header_len >= kHeaderLen && s.header_len <= size && s.header_len <= kMaxHeaderLen);
  FUZZ_CHECK(s.header_len == size_t(data[12] >> 4) * 4);
  FUZZ_CHECK(s.nsack <= kMaxSackBlocks);
  FUZZ_CHECK(s.has_msg || !s.msg_data);

  BuildSpec b;
  b.src_port = s.src_port;
  b.dst_port = s.dst_port;
  b.seq = s.seq;
  b.ack = s.ack;
  b.window = s.window;
  b.flags = s.flags;
  b.mss = s.has_mss ? s.mss : 0;  // an MSS of 0 is built as no MSS option
  b.wscale_opt = s.has_wscale;
  b.wscale = s.wscale;
  b.sack_permitted = s.sack_permitted;
  b.ts = s.has_ts;
  b.ts_val = s.ts_val;
  b.ts_ecr = s.ts_ecr;
  b.nsack = s.nsack;
  b.sack = s.sack.data();
  b.msg = s.has_msg;
  b.msg_data = s.msg_data;
  b.msg_limit = s.msg_limit;
  b.msg_no = s.msg_no;
  b.msg_start = s.msg_start;
  b.msg_len = s.msg_len;

  uint8_t out[kMaxHeaderLen + 4];
  std::memset(out, 0xA5, sizeof out);
  const size_t n = build(b, out);
  FUZZ_CHECK(n >= kHeaderLen && n <= kMaxHeaderLen && n % 4 == 0);
  FUZZ_CHECK(out[kMaxHeaderLen] == 0xA5);  // nothing written past the largest header
  Segment t;
  FUZZ_CHECK(parse(out, n, t));
  FUZZ_CHECK(t.header_len == n);
  FUZZ_CHECK(t.src_port == s.src_port && t.dst_port == s.dst_port && t.seq == s.seq &&
             t.ack == s.ack && t.window == s.window && t.flags == s.flags);
  FUZZ_CHECK(t.has_mss == (b.mss != 0) && (!t.has_mss || t.mss == s.mss));
  FUZZ_CHECK(t.has_wscale == s.has_wscale && t.wscale == s.wscale);
  FUZZ_CHECK(t.sack_permitted == s.sack_permitted);
  FUZZ_CHECK(t.has_ts == s.has_ts && t.ts_val == s.ts_val && t.ts_ecr == s.ts_ecr);
  FUZZ_CHECK(t.has_msg == s.has_msg && t.msg_data == s.msg_data && t.msg_limit == s.msg_limit);
  FUZZ_CHECK(t.msg_no == s.msg_no && t.msg_start == s.msg_start && t.msg_len == s.msg_len);
  // SACK blocks that did not fit beside the other options are left out, the first ones kept.
  FUZZ_CHECK(t.nsack <= s.nsack && (t.nsack != 0 || s.nsack == 0 || n > kMaxHeaderLen - 12));
  for (uint8_t i = 0; i < t.nsack; i++)
    FUZZ_CHECK(t.sack[i].left == s.sack[i].left && t.sack[i].right == s.sack[i].right);
  return 0;
}
