// nic_rx_ops.h - the operations of nic_rx_fuzz.cc's input, which seeds.cc writes too.
#pragma once

#include <cstdint>

namespace cleave::fuzz::nic_rx {

// One byte each, then the operand bytes nic_rx_fuzz.cc reads for it.
enum Op : uint8_t {
  kMrAdd,
  kMrRemove,
  // id, parser, flag bits, src and dst port, initial seq, PMTU code, initial offset, number (a
  // RoCE QPN or a Solar connection number, which frames find the flow by), owner
  kFlowAdd,
  kFlowRemove,
  kFlowMode,
  kMsPost,
  kCursor,
  kMsRetire,
  kMsRetireMsg,
  kRoceResync,
  kReadPost,
  kReadRetire,
  kFrame,
  kTx,
  kOpCount
};

// Frame fix-ups (the byte after a frame's bytes).
enum Fix : uint8_t {
  kFixLengths = 1,  // IPv4 total length and UDP length to the frame's size
  kFixL4 = 2,       // Solar CRC32C, RoCE ICRC, TCP/UDP checksum
  kFixIp = 4,       // IPv4 header checksum
};

// Flow keys take their addresses from these (two bits each), so a frame's can match.
inline constexpr uint32_t kIps[4] = {0x0A000001, 0x0A000002, 0x0A000003, 0xC0A80001};

}  // namespace cleave::fuzz::nic_rx
