// cleave_dma_wr_mux.sv - several DMA write sources onto one DMA write port.
//
// A DMA write transaction is one or more requests (address, length; `last` on the final one)
// followed by one data packet with all their bytes back to back, byte 0 in lane 0: a DMA engine
// writes request i's bytes at its address. Transactions are granted whole, lowest port first
// among those waiting, and pass through without a buffer: a source's transaction has reached
// the output when it was taken, so a source that writes a completion after its data writes
// keeps them in order.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_dma_wr_mux #(
    // Sources
    parameter int PORTS = 3,
    // AXI-Stream data width in bits
    parameter int DATA_WIDTH = 64,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [64*PORTS-1:0]         s_req_addr,
    input  wire logic [16*PORTS-1:0]         s_req_len,
    input  wire logic [PORTS-1:0]            s_req_last,
    input  wire logic [PORTS-1:0]            s_req_valid,
    output logic      [PORTS-1:0]            s_req_ready,
    input  wire logic [DATA_WIDTH*PORTS-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH*PORTS-1:0] s_axis_tkeep,
    input  wire logic [PORTS-1:0]            s_axis_tvalid,
    output logic      [PORTS-1:0]            s_axis_tready,
    input  wire logic [PORTS-1:0]            s_axis_tlast,

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
  localparam int PW = PORTS > 1 ? $clog2(PORTS) : 1;

  initial begin
    if (PORTS < 1) $error("PORTS must be at least 1");
    if (KEEP_WIDTH * 8 != DATA_WIDTH) $error("KEEP_WIDTH must be DATA_WIDTH / 8");
  end

  typedef enum logic [1:0] {
    M_IDLE,
    M_REQ,
    M_DATA
  } st_t;
  st_t st;
  logic [PW-1:0] sel;

  logic [PW-1:0] pick;
  logic any;
  always_comb begin
    pick = '0;
    any = 1'b0;
    for (int i = PORTS - 1; i >= 0; i--) begin
      if (s_req_valid[i]) begin
        pick = PW'(i);
        any = 1'b1;
      end
    end
  end

  always_comb begin
    m_req_addr = s_req_addr[64*sel+:64];
    m_req_len = s_req_len[16*sel+:16];
    m_req_last = s_req_last[sel];
    m_req_valid = st == M_REQ && s_req_valid[sel];
    m_axis_tdata = s_axis_tdata[DATA_WIDTH*sel+:DATA_WIDTH];
    m_axis_tkeep = s_axis_tkeep[KEEP_WIDTH*sel+:KEEP_WIDTH];
    m_axis_tlast = s_axis_tlast[sel];
    m_axis_tvalid = st == M_DATA && s_axis_tvalid[sel];
    s_req_ready = '0;
    s_axis_tready = '0;
    if (st == M_REQ) s_req_ready[sel] = m_req_ready;
    if (st == M_DATA) s_axis_tready[sel] = m_axis_tready;
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st  <= M_IDLE;
      sel <= '0;
    end else begin
      case (st)
        M_IDLE:
        if (any) begin
          sel <= pick;
          st  <= M_REQ;
        end
        M_REQ: if (m_req_valid && m_req_ready && m_req_last) st <= M_DATA;
        default: if (m_axis_tvalid && m_axis_tready && m_axis_tlast) st <= M_IDLE;
      endcase
    end
  end
endmodule

`resetall
