// tcp_wire.cc - TCP header and option parsing (untrusted input) and building.
#include "tcp_wire.h"

#include <algorithm>

#include "common/wire.h"

namespace cleave::transport::tcp {

using wire::load16;
using wire::load32;
using wire::store16;
using wire::store32;

bool parse(const uint8_t* p, size_t len, Segment& out) {
  if (len < kHeaderLen) return false;
  const size_t hlen = size_t(p[12] >> 4) * 4;
  if (hlen < kHeaderLen || hlen > len) return false;
  out = Segment{};
  out.src_port = load16(p);
  out.dst_port = load16(p + 2);
  out.seq = load32(p + 4);
  out.ack = load32(p + 8);
  out.flags = p[13];
  out.window = load16(p + 14);
  out.header_len = uint8_t(hlen);

  const uint8_t* o = p + kHeaderLen;
  const uint8_t* end = p + hlen;
  while (o < end) {
    const uint8_t kind = o[0];
    if (kind == kOptEnd) break;
    if (kind == kOptNop) {
      o++;
      continue;
    }
    if (end - o < 2) return false;
    const uint8_t olen = o[1];
    if (olen < 2 || olen > end - o) return false;
    switch (kind) {
      case kOptMss:
        if (olen != 4) return false;
        out.has_mss = true;
        out.mss = load16(o + 2);
        break;
      case kOptWscale:
        if (olen != 3) return false;
        out.has_wscale = true;
        out.wscale = o[2];
        break;
      case kOptSackPermitted:
        if (olen != 2) return false;
        out.sack_permitted = true;
        break;
      case kOptTimestamp:
        if (olen != 10) return false;
        out.has_ts = true;
        out.ts_val = load32(o + 2);
        out.ts_ecr = load32(o + 6);
        break;
      case kOptSack: {
        if ((olen - 2) % 8 != 0) return false;
        const size_t n = std::min<size_t>((olen - 2) / 8, kMaxSackBlocks);
        for (size_t i = 0; i < n; i++) {
          out.sack[i].left = load32(o + 2 + 8 * i);
          out.sack[i].right = load32(o + 6 + 8 * i);
        }
        out.nsack = uint8_t(n);
        break;
      }
      case kOptExperimental:
        // RFC 6994: only our ExID is ours; a known ExID with a length we do not know is
        // ignored like any unknown option.
        if (olen >= 4 && load16(o + 2) == kMsgExId &&
            (olen == kMsgOptLen || olen == kMsgDataOptLen)) {
          out.has_msg = true;
          out.msg_limit = load32(o + 4);
          if (olen == kMsgDataOptLen) {
            out.msg_data = true;
            out.msg_no = load32(o + 8);
            out.msg_start = load32(o + 12);
            out.msg_len = load32(o + 16);
          }
        }
        break;
      default:
        break;  // unknown options are skipped by their length
    }
    o += olen;
  }
  return true;
}

size_t build(const BuildSpec& s, uint8_t* out) {
  uint8_t* o = out + kHeaderLen;
  if (s.mss != 0) {
    o[0] = kOptMss;
    o[1] = 4;
    store16(o + 2, s.mss);
    o += 4;
  }
  if (s.sack_permitted && s.ts) {
    o[0] = kOptSackPermitted;
    o[1] = 2;
    o += 2;
  } else if (s.sack_permitted) {
    o[0] = kOptNop;
    o[1] = kOptNop;
    o[2] = kOptSackPermitted;
    o[3] = 2;
    o += 4;
  }
  if (s.ts) {
    if (!s.sack_permitted) {
      o[0] = kOptNop;
      o[1] = kOptNop;
      o += 2;
    }
    o[0] = kOptTimestamp;
    o[1] = 10;
    store32(o + 2, s.ts_val);
    store32(o + 6, s.ts_ecr);
    o += 10;
  }
  if (s.wscale_opt) {
    o[0] = kOptNop;
    o[1] = kOptWscale;
    o[2] = 3;
    o[3] = s.wscale;
    o += 4;
  }
  if (s.msg) {
    o[0] = kOptExperimental;
    o[1] = s.msg_data ? kMsgDataOptLen : kMsgOptLen;
    store16(o + 2, kMsgExId);
    store32(o + 4, s.msg_limit);
    if (s.msg_data) {
      store32(o + 8, s.msg_no);
      store32(o + 12, s.msg_start);
      store32(o + 16, s.msg_len);
    }
    o += o[1];
  }
  if (s.nsack != 0) {
    const size_t room = (kMaxHeaderLen - size_t(o - out) - 4) / 8;
    const size_t n = std::min<size_t>({s.nsack, room, kMaxSackBlocks});
    if (n != 0) {
      o[0] = kOptNop;
      o[1] = kOptNop;
      o[2] = kOptSack;
      o[3] = uint8_t(2 + 8 * n);
      o += 4;
      for (size_t i = 0; i < n; i++) {
        store32(o, s.sack[i].left);
        store32(o + 4, s.sack[i].right);
        o += 8;
      }
    }
  }
  const size_t hlen = size_t(o - out);
  store16(out, s.src_port);
  store16(out + 2, s.dst_port);
  store32(out + 4, s.seq);
  store32(out + 8, s.ack);
  out[12] = uint8_t((hlen / 4) << 4);
  out[13] = s.flags;
  store16(out + 14, s.window);
  store16(out + 16, 0);
  store16(out + 18, 0);
  return hlen;
}

}  // namespace cleave::transport::tcp
