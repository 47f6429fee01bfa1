// cleave_txq.sv - the TX merge queue's completions into a host ring.
//
// Each TX completion becomes an 8-byte TX_CPL record written by DMA to cpl_base + slot * 8 once
// the ring has room (producer - consumer < 2^log2) and the queue is enabled; until then the
// send side waits (the model instead refuses a request with completions_full: hardware holds
// it). Phase bit as for the RX ring: 1 on the first pass, flipping on every wrap.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_txq #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [63:0] s_txc_cookie,
    input  wire logic [7:0]  s_txc_status,
    input  wire logic [15:0] s_txc_frames,
    input  wire logic        s_txc_valid,
    output logic             s_txc_ready,

    input  wire logic [63:0] cpl_base,
    input  wire logic [4:0]  log2,
    input  wire logic [31:0] cons,
    input  wire logic        enable,
    output logic      [31:0] prod,

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

  initial begin
    if (KEEP_WIDTH * 8 != DATA_WIDTH || DATA_WIDTH < 64) $error("DATA_WIDTH must be >= 64");
  end

  typedef enum logic [1:0] {
    C_WAIT,
    C_REQ,
    C_DATA
  } st_t;
  st_t st;

  wire [31:0] slot = prod & ((32'd1 << log2) - 32'd1);
  wire room = enable && prod - cons < (32'd1 << log2);

  logic [63:0] rec;
  always_comb begin
    rec = '0;
    rec[TX_CPL_COOKIE_LSB+:TX_CPL_COOKIE_W] = s_txc_cookie[31:0];
    rec[TX_CPL_STATUS_LSB+:TX_CPL_STATUS_W] = s_txc_status;
    rec[TX_CPL_FRAMES_LSB+:TX_CPL_FRAMES_W] = s_txc_frames;
    rec[TX_CPL_PHASE_LSB] = ~prod[log2];
  end

  assign m_req_addr = cpl_base + {32'd0, slot} * 64'd8;
  assign m_req_len = 16'd8;
  assign m_req_last = 1'b1;
  assign m_req_valid = st == C_REQ;
  assign m_axis_tdata = DATA_WIDTH'(rec);
  assign m_axis_tkeep = KEEP_WIDTH'(8'hFF);
  assign m_axis_tlast = 1'b1;
  assign m_axis_tvalid = st == C_DATA;
  assign s_txc_ready = st == C_DATA && m_axis_tready;

  // The cookie's upper half is not in the record (the driver keeps it).
  wire unused_ok = &{1'b0, s_txc_cookie[63:32]};

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= C_WAIT;
      prod <= '0;
    end else begin
      case (st)
        C_WAIT: if (s_txc_valid && room) st <= C_REQ;
        C_REQ: if (m_req_ready) st <= C_DATA;
        default:
        if (m_axis_tready) begin
          prod <= prod + 32'd1;
          st <= C_WAIT;
        end
      endcase
    end
  end
endmodule

`resetall
