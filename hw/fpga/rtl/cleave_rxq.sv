// cleave_rxq.sv - the RX split queue: each frame's header slot and completion into host rings.
//
// For each frame, in order: its header bytes (when it has any) arrive on s_axis_hdr and are
// held; its decision (rx_dec_t) arrives on s_cpl after its payload writes have left. Then, once
// the completion ring has room (producer - consumer < 2^log2) and the queue is enabled, two DMA
// write transactions: the header bytes to hdr_base + slot * 256, then the 32-byte RX completion
// (RX_CPL record) to cpl_base + slot * 32, slot = producer mod 2^log2. The completion's phase
// bit is 1 on the first pass through the ring and flips on every wrap (the driver zeroes the
// ring first), and it carries the slot and whether the frame took the copy path.
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_rxq #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [DATA_WIDTH-1:0] s_axis_hdr_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_hdr_tkeep,
    input  wire logic                  s_axis_hdr_tvalid,
    output logic                       s_axis_hdr_tready,
    input  wire logic                  s_axis_hdr_tlast,

    input  wire rx_dec_t s_cpl,
    input  wire logic    s_cpl_valid,
    output logic         s_cpl_ready,

    // The ring (the RX split queue block)
    input  wire logic [63:0] cpl_base,
    input  wire logic [63:0] hdr_base,
    input  wire logic [4:0]  log2,
    input  wire logic [31:0] cons,
    input  wire logic        enable,
    output logic      [31:0] prod,

    // DMA writes
    output logic [63:0]           m_req_addr,
    output logic [15:0]           m_req_len,
    output logic                  m_req_last,
    output logic                  m_req_valid,
    input  wire logic             m_req_ready,
    output logic [DATA_WIDTH-1:0] m_axis_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
    output logic                  m_axis_tvalid,
    input  wire logic             m_axis_tready,
    output logic                  m_axis_tlast
);
  `include "cleave_nic_defs.vh"

  localparam int NB = KEEP_WIDTH;
  localparam int HBEATS = 256 / NB;

  initial begin
    if (KEEP_WIDTH * 8 != DATA_WIDTH || DATA_WIDTH < 64) $error("DATA_WIDTH must be >= 64");
  end

  typedef enum logic [2:0] {
    Q_WAIT,
    Q_HREQ,
    Q_HDATA,
    Q_CREQ,
    Q_CDATA
  } st_t;
  st_t st;

  logic [DATA_WIDTH-1:0] hbuf[HBEATS];
  logic [$clog2(HBEATS):0] hin;  // header beats held
  logic have_hdr;
  logic [$clog2(HBEATS):0] hout;
  logic [15:0] cout;             // completion bytes sent

  assign s_axis_hdr_tready = !have_hdr;
  always_ff @(posedge clk) begin
    if (s_axis_hdr_tvalid && s_axis_hdr_tready && 32'(hin) < HBEATS) hbuf[hin[$clog2(HBEATS)-1:0]] <= s_axis_hdr_tdata;
  end

  wire [31:0] used = prod - cons;
  wire room = enable && used < (32'd1 << log2);
  wire [31:0] slot = prod & ((32'd1 << log2) - 32'd1);
  wire [15:0] hlen = {8'd0, s_cpl.header_len};

  // The completion record, and what of it the beat at `cout` carries.
  logic [255:0] rec;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [255:0] rec_sh;  // a beat narrower than the record takes its low bytes
  /* verilator lint_on UNUSEDSIGNAL */
  assign rec_sh = rec >> (8 * 32'(cout));
  frag_t f0;
  always_comb begin
    f0 = s_cpl.frags[0+:144];
    rec = '0;
    rec[RX_CPL_FLOW_ID_LSB+:RX_CPL_FLOW_ID_W] = s_cpl.flow_id;
    rec[RX_CPL_DECISION_LSB+:RX_CPL_DECISION_W] = s_cpl.decision;
    rec[RX_CPL_REASON_LSB+:RX_CPL_REASON_W] = s_cpl.reason;
    rec[RX_CPL_SEQ_LSB+:RX_CPL_SEQ_W] = s_cpl.seq;
    rec[RX_CPL_PAYLOAD_LEN_LSB+:RX_CPL_PAYLOAD_LEN_W] = s_cpl.payload_len;
    rec[RX_CPL_HEADER_LEN_LSB+:RX_CPL_HEADER_LEN_W] = s_cpl.header_len;
    rec[RX_CPL_NFRAGS_LSB+:RX_CPL_NFRAGS_W] = s_cpl.nfrags;
    rec[RX_CPL_OUT_OF_ORDER_LSB] = s_cpl.ooo;
    rec[RX_CPL_IP_CSUM_LSB+:RX_CPL_IP_CSUM_W] = s_cpl.ip_csum;
    rec[RX_CPL_L4_CSUM_LSB+:RX_CPL_L4_CSUM_W] = s_cpl.l4_csum;
    rec[RX_CPL_TRIMMED_LSB+:RX_CPL_TRIMMED_W] = s_cpl.trimmed;
    rec[RX_CPL_PLACED_LSB+:RX_CPL_PLACED_W] = s_cpl.placed;
    rec[RX_CPL_MSG_SEQ_LSB+:RX_CPL_MSG_SEQ_W] = s_cpl.msg_seq;
    if (s_cpl.nfrags != 0) begin
      rec[RX_CPL_MR_LSB+:RX_CPL_MR_W] = f0.mr;
      rec[RX_CPL_OFFSET_LSB+:RX_CPL_OFFSET_W] = f0.off;
    end
    rec[RX_CPL_PARSER_LSB+:RX_CPL_PARSER_W] = s_cpl.parser;
    rec[RX_CPL_SLOT_LSB+:RX_CPL_SLOT_W] = slot[15:0];
    rec[RX_CPL_COPY_LSB] = s_cpl.decision == DECISION_DEFERRED;
    rec[RX_CPL_PHASE_LSB] = ~prod[log2];
  end

  always_comb begin
    m_req_valid = st == Q_HREQ || st == Q_CREQ;
    m_req_last = 1'b1;
    m_req_addr = st == Q_HREQ ? hdr_base + {32'd0, slot} * 64'd256 : cpl_base + {32'd0, slot} * 64'd32;
    m_req_len = st == Q_HREQ ? hlen : 16'd32;
    m_axis_tvalid = st == Q_HDATA || st == Q_CDATA;
    m_axis_tdata = st == Q_HDATA ? hbuf[hout[$clog2(HBEATS)-1:0]] : DATA_WIDTH'(rec_sh);
    m_axis_tkeep = '0;
    for (int j = 0; j < NB; j++)
      m_axis_tkeep[j] = st == Q_HDATA ? {16'd0, 16'(32'(hout) * NB + j)} < {16'd0, hlen} :
                                        cout + 16'(j) < 16'd32;
    m_axis_tlast = st == Q_HDATA ? (32'(hout) + 1) * NB >= 32'(hlen) : cout + 16'(NB) >= 16'd32;
  end
  assign s_cpl_ready = st == Q_CDATA && m_axis_tready && m_axis_tlast;

  // The header packet's keep is implied by header_len; the decision's data offset and the
  // fragments after the first are not in the record (the driver rebuilds them).
  wire unused_ok = &{1'b0, s_axis_hdr_tkeep, s_cpl.data_off, f0.len, f0.addr};

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= Q_WAIT;
      prod <= '0;
      hin <= '0;
      have_hdr <= 1'b0;
      hout <= '0;
      cout <= '0;
    end else begin
      if (s_axis_hdr_tvalid && s_axis_hdr_tready) begin
        hin <= hin + 1'b1;
        if (s_axis_hdr_tlast) have_hdr <= 1'b1;
      end
      case (st)
        Q_WAIT:
        if (s_cpl_valid && room && (s_cpl.header_len == 0 || have_hdr))
          st <= s_cpl.header_len != 0 ? Q_HREQ : Q_CREQ;
        Q_HREQ: if (m_req_ready) begin
          hout <= '0;
          st <= Q_HDATA;
        end
        Q_HDATA: if (m_axis_tready) begin
          hout <= hout + 1'b1;
          if (m_axis_tlast) st <= Q_CREQ;
        end
        Q_CREQ: if (m_req_ready) begin
          cout <= '0;
          st <= Q_CDATA;
        end
        default: if (m_axis_tready) begin  // Q_CDATA
          cout <= cout + 16'(NB);
          if (m_axis_tlast) begin
            prod <= prod + 32'd1;
            have_hdr <= 1'b0;
            hin <= '0;
            st <= Q_WAIT;
          end
        end
      endcase
    end
  end
endmodule

`resetall
