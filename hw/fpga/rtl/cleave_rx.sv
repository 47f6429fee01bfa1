// cleave_rx.sv - the receive side: parser, engine (tables, decisions, commands), frame buffer
// and outputs (header bytes, copy-path frames, DMA write requests with their payload, the
// decision per frame). See cleave_rx_parser, cleave_rx_engine and cleave_rx_out.
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_rx #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // Table geometry (see cleave_rx_engine)
    parameter int MAX_FLOWS = 1024,
    parameter int BUCKETS = 2048,
    parameter int MAX_MRS = 256,
    parameter int MS_CHUNK = 16,
    parameter int MS_COMMITTED = 32,
    parameter int MS_STORE = 4096,
    // Frame buffer in beats (a power of two)
    parameter int FBUF_BEATS = 4096,
    // Check TCP/UDP checksums, the ICRC and the Solar CRC
    parameter bit VERIFY_L4 = 1'b1,
    // Big tables in UltraRAM
    parameter bit ULTRA = 1'b0,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int MW = MAX_MRS > 1 ? $clog2(MAX_MRS) : 1
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire logic                  s_axis_tvalid,
    output logic                       s_axis_tready,
    input  wire logic                  s_axis_tlast,

    input  wire logic         s_cmd_valid,
    output logic              s_cmd_ready,
    input  wire logic [255:0] s_cmd_data,
    output logic              m_rsp_valid,
    output logic [7:0]        m_rsp_err,
    output logic [15:0]       m_rsp_mr,
    output logic [31:0]       m_rsp_ms_count,
    output logic [31:0]       m_rsp_cursor,
    output logic [31:0]       m_rsp_read_count,

    output logic [DATA_WIDTH-1:0] m_axis_hdr_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_hdr_tkeep,
    output logic                  m_axis_hdr_tvalid,
    input  wire logic             m_axis_hdr_tready,
    output logic                  m_axis_hdr_tlast,

    output logic [DATA_WIDTH-1:0] m_axis_copy_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_copy_tkeep,
    output logic                  m_axis_copy_tvalid,
    input  wire logic             m_axis_copy_tready,
    output logic                  m_axis_copy_tlast,

    output frag_t     m_desc,
    output logic      m_desc_last,
    output logic      m_desc_valid,
    input  wire logic m_desc_ready,

    output logic [DATA_WIDTH-1:0] m_axis_pay_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_pay_tkeep,
    output logic                  m_axis_pay_tvalid,
    input  wire logic             m_axis_pay_tready,
    output logic                  m_axis_pay_tlast,

    output rx_dec_t   m_cpl,
    output logic      m_cpl_valid,
    input  wire logic m_cpl_ready,

    input  wire logic [MW-1:0]  tx_mr_addr,
    output logic      [104:0]   tx_mr_data,
    input  wire logic [3:0]     tx_inc_en,
    input  wire logic [31:0]    tx_inc_idx,
    input  wire logic [127:0]   tx_inc_amt,
    input  wire logic [7:0]     ctr_sel,
    output logic      [63:0]    ctr_value,
    output logic      [31:0]    flows_in_use,
    output logic      [31:0]    store_free,
    output logic                busy
);
  logic [DATA_WIDTH-1:0] p_tdata;
  logic [KEEP_WIDTH-1:0] p_tkeep;
  logic p_tvalid, p_tready, p_tlast;
  rx_meta_t meta;
  logic meta_valid, meta_ready;
  rx_dec_t dec;
  logic dec_valid, dec_ready;

  cleave_rx_parser #(
      .DATA_WIDTH(DATA_WIDTH),
      .VERIFY_L4 (VERIFY_L4)
  ) u_parser (
      .clk(clk),
      .rst(rst),
      .s_axis_tdata(s_axis_tdata),
      .s_axis_tkeep(s_axis_tkeep),
      .s_axis_tvalid(s_axis_tvalid),
      .s_axis_tready(s_axis_tready),
      .s_axis_tlast(s_axis_tlast),
      .m_axis_tdata(p_tdata),
      .m_axis_tkeep(p_tkeep),
      .m_axis_tvalid(p_tvalid),
      .m_axis_tready(p_tready),
      .m_axis_tlast(p_tlast),
      .m_meta(meta),
      .m_meta_valid(meta_valid),
      .m_meta_ready(meta_ready)
  );

  cleave_rx_engine #(
      .MAX_FLOWS(MAX_FLOWS),
      .BUCKETS(BUCKETS),
      .MAX_MRS(MAX_MRS),
      .MS_CHUNK(MS_CHUNK),
      .MS_COMMITTED(MS_COMMITTED),
      .MS_STORE(MS_STORE),
      .VERIFY_L4(VERIFY_L4),
      .ULTRA(ULTRA)
  ) u_engine (
      .clk(clk),
      .rst(rst),
      .s_meta(meta),
      .s_meta_valid(meta_valid),
      .s_meta_ready(meta_ready),
      .m_dec(dec),
      .m_dec_valid(dec_valid),
      .m_dec_ready(dec_ready),
      .s_cmd_valid(s_cmd_valid),
      .s_cmd_ready(s_cmd_ready),
      .s_cmd_data(s_cmd_data),
      .m_rsp_valid(m_rsp_valid),
      .m_rsp_err(m_rsp_err),
      .m_rsp_mr(m_rsp_mr),
      .m_rsp_ms_count(m_rsp_ms_count),
      .m_rsp_cursor(m_rsp_cursor),
      .m_rsp_read_count(m_rsp_read_count),
      .tx_mr_addr(tx_mr_addr),
      .tx_mr_data(tx_mr_data),
      .tx_inc_en(tx_inc_en),
      .tx_inc_idx(tx_inc_idx),
      .tx_inc_amt(tx_inc_amt),
      .ctr_sel(ctr_sel),
      .ctr_value(ctr_value),
      .flows_in_use(flows_in_use),
      .store_free(store_free),
      .busy(busy)
  );

  cleave_rx_out #(
      .DATA_WIDTH(DATA_WIDTH),
      .FBUF_BEATS(FBUF_BEATS)
  ) u_out (
      .clk(clk),
      .rst(rst),
      .s_axis_tdata(p_tdata),
      .s_axis_tkeep(p_tkeep),
      .s_axis_tvalid(p_tvalid),
      .s_axis_tready(p_tready),
      .s_axis_tlast(p_tlast),
      .s_dec(dec),
      .s_dec_valid(dec_valid),
      .s_dec_ready(dec_ready),
      .m_axis_hdr_tdata(m_axis_hdr_tdata),
      .m_axis_hdr_tkeep(m_axis_hdr_tkeep),
      .m_axis_hdr_tvalid(m_axis_hdr_tvalid),
      .m_axis_hdr_tready(m_axis_hdr_tready),
      .m_axis_hdr_tlast(m_axis_hdr_tlast),
      .m_axis_copy_tdata(m_axis_copy_tdata),
      .m_axis_copy_tkeep(m_axis_copy_tkeep),
      .m_axis_copy_tvalid(m_axis_copy_tvalid),
      .m_axis_copy_tready(m_axis_copy_tready),
      .m_axis_copy_tlast(m_axis_copy_tlast),
      .m_desc(m_desc),
      .m_desc_last(m_desc_last),
      .m_desc_valid(m_desc_valid),
      .m_desc_ready(m_desc_ready),
      .m_axis_pay_tdata(m_axis_pay_tdata),
      .m_axis_pay_tkeep(m_axis_pay_tkeep),
      .m_axis_pay_tvalid(m_axis_pay_tvalid),
      .m_axis_pay_tready(m_axis_pay_tready),
      .m_axis_pay_tlast(m_axis_pay_tlast),
      .m_cpl(m_cpl),
      .m_cpl_valid(m_cpl_valid),
      .m_cpl_ready(m_cpl_ready)
  );
endmodule

`resetall
