// cleave_types.svh - records passed between the NIC's modules (not seen by software).
//
// Included at file scope after `default_nettype none. Byte vectors hold byte i in bits
// 8i+7..8i; multi-byte fields are numbers (host order), taken from the wire's big-endian bytes.
`ifndef CLEAVE_TYPES_SVH
`define CLEAVE_TYPES_SVH

// What the parser learnt of one frame (cleave_rx_parser -> cleave_rx_engine). The checks of
// the model's parse() are done: pdefer is its verdict (0 when it would go on), ip_csum and
// l4_csum its statuses. icrc_ok and crc32c_ok are computed as if the frame were RoCEv2 (ICRC
// over the frame up to 4 bytes before the IP end) and Solar (CRC-32C of the UDP payload after
// 32 bytes); only the engine knows whether they apply.
typedef struct packed {
  logic [15:0]  frame_len;
  logic [4:0]   pdefer;
  logic [1:0]   ip_csum;
  logic [1:0]   l4_csum;
  logic         udp;        // 17, else 6
  logic [31:0]  src_ip;
  logic [31:0]  dst_ip;
  logic [15:0]  sport;
  logic [15:0]  dport;
  logic [7:0]   pay_off;    // frame offset of the TCP/UDP payload
  logic [15:0]  pay_len;
  logic [31:0]  tcp_seq;
  logic [7:0]   tcp_flags;
  logic [5:0]   tcp_hlen;   // TCP header bytes (options included)
  logic [319:0] tcp_opt;    // TCP header bytes 20..59
  logic [255:0] l7;         // UDP payload bytes 0..31 (BTH, RETH; the Solar header)
  logic         icrc_ok;
  logic         crc32c_ok;
} rx_meta_t;

// A flow's match key (hw/fpga/docs/formats.md section 2): the 5-tuple as the packet carries it
// (src = the peer), and for a flow found by number its number in qpn, with src port 0: a RoCE
// QP's QPN (dst port 4791), a Solar connection's number (dst port 7000, below 2^24). Lookups by
// 5-tuple have numbered = 0 and match only flows found that way.
typedef struct packed {
  logic [31:0] src_ip;
  logic [31:0] dst_ip;
  logic [15:0] sport;
  logic [15:0] dport;
  logic        udp;
  logic        numbered;
  logic [23:0] qpn;
} flow_key_t;

// One placement fragment: where a run of payload bytes goes (the model's Placement) and the
// DMA address it makes (the MR's IOVA base + offset).
typedef struct packed {
  logic [15:0] mr;
  logic [47:0] off;
  logic [15:0] len;
  logic [63:0] addr;
} frag_t;

// What the engine decided for one frame (the model's RxEntry and where its bytes go):
// cleave_rx_engine -> cleave_rx_out. frags holds frag_t 0..3, fragment i in bits 144i+143..144i.
typedef struct packed {
  logic [23:0]  flow_id;      // 0xFFFFFF: no flow
  logic [2:0]   decision;
  logic [4:0]   reason;
  logic [1:0]   parser;
  logic [31:0]  seq;
  logic [15:0]  payload_len;
  logic [7:0]   header_len;
  logic [2:0]   nfrags;
  logic         ooo;
  logic [1:0]   ip_csum;
  logic [1:0]   l4_csum;
  logic [15:0]  trimmed;
  logic [15:0]  placed;
  logic [31:0]  msg_seq;
  logic [15:0]  data_off;     // frame offset of the first placed byte
  logic [575:0] frags;
} rx_dec_t;

`endif
