// cleave_nic.sv - the header-split NIC as one unit: registers, receive side, send side, host
// rings, behind plain streams and a generic DMA interface.
//
//   s_axil_*          the register blocks (cleave_regs)
//   s_axis_rx_*       frames from the network
//   m_axis_copy_*     deferred frames, whole (the copy path: a normal RX queue)
//   s_axis_txd_*      TX requests: descriptor + header template per packet
//   m_axis_tx_*       frames to the network
//   m_dma_wr_*        DMA write transactions: one or more requests (address, length, last),
//   m_axis_dma_wr_*     then one packet with their bytes back to back
//   m_dma_rd_*        DMA reads (address, length); the bytes come back on s_axis_dma_rd_*
// Host memory receives placed payloads, RX header slots, RX completions and TX completions,
// in that order per frame. mqnic_app_block.v maps this onto Corundum's application block.
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_nic #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 512,
    // Table geometry (see cleave_rx_engine)
    parameter int MAX_FLOWS = 10240,
    parameter int BUCKETS = 32768,
    parameter int MAX_MRS = 4096,
    parameter int MS_CHUNK = 16,
    parameter int MS_COMMITTED = 32,
    parameter int MS_STORE = 65536,
    // RX frame buffer in beats (a power of two)
    parameter int FBUF_BEATS = 512,
    // Check TCP/UDP checksums, the ICRC and the Solar CRC
    parameter bit VERIFY_L4 = 1'b1,
    // Big tables in UltraRAM
    parameter bit ULTRA = 1'b1,
    // AXI-Lite address width of the register blocks
    parameter int AXIL_ADDR_WIDTH = 16,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [AXIL_ADDR_WIDTH-1:0] s_axil_awaddr,
    input  wire logic [                2:0] s_axil_awprot,
    input  wire logic                       s_axil_awvalid,
    output logic                            s_axil_awready,
    input  wire logic [               31:0] s_axil_wdata,
    input  wire logic [                3:0] s_axil_wstrb,
    input  wire logic                       s_axil_wvalid,
    output logic                            s_axil_wready,
    output logic      [                1:0] s_axil_bresp,
    output logic                            s_axil_bvalid,
    input  wire logic                       s_axil_bready,
    input  wire logic [AXIL_ADDR_WIDTH-1:0] s_axil_araddr,
    input  wire logic [                2:0] s_axil_arprot,
    input  wire logic                       s_axil_arvalid,
    output logic                            s_axil_arready,
    output logic      [               31:0] s_axil_rdata,
    output logic      [                1:0] s_axil_rresp,
    output logic                            s_axil_rvalid,
    input  wire logic                       s_axil_rready,

    input  wire logic [DATA_WIDTH-1:0] s_axis_rx_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_rx_tkeep,
    input  wire logic                  s_axis_rx_tvalid,
    output logic                       s_axis_rx_tready,
    input  wire logic                  s_axis_rx_tlast,

    output logic [DATA_WIDTH-1:0] m_axis_copy_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_copy_tkeep,
    output logic                  m_axis_copy_tvalid,
    input  wire logic             m_axis_copy_tready,
    output logic                  m_axis_copy_tlast,

    input  wire logic [DATA_WIDTH-1:0] s_axis_txd_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_txd_tkeep,
    input  wire logic                  s_axis_txd_tvalid,
    output logic                       s_axis_txd_tready,
    input  wire logic                  s_axis_txd_tlast,

    output logic [DATA_WIDTH-1:0] m_axis_tx_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_tx_tkeep,
    output logic                  m_axis_tx_tvalid,
    input  wire logic             m_axis_tx_tready,
    output logic                  m_axis_tx_tlast,

    output logic [63:0]           m_dma_wr_addr,
    output logic [15:0]           m_dma_wr_len,
    output logic                  m_dma_wr_last,
    output logic                  m_dma_wr_valid,
    input  wire logic             m_dma_wr_ready,
    output logic [DATA_WIDTH-1:0] m_axis_dma_wr_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_dma_wr_tkeep,
    output logic                  m_axis_dma_wr_tvalid,
    input  wire logic             m_axis_dma_wr_tready,
    output logic                  m_axis_dma_wr_tlast,

    output logic [63:0]                m_dma_rd_addr,
    output logic [15:0]                m_dma_rd_len,
    output logic                       m_dma_rd_valid,
    input  wire logic                  m_dma_rd_ready,
    input  wire logic [DATA_WIDTH-1:0] s_axis_dma_rd_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_dma_rd_tkeep,
    input  wire logic                  s_axis_dma_rd_tvalid,
    output logic                       s_axis_dma_rd_tready,
    input  wire logic                  s_axis_dma_rd_tlast,

    // The TX merge queue's stream id (TX merge queue block), for the stream demultiplexer
    output logic [15:0] merge_tid,
    // DMA transfers the host side failed (the debug block shows it)
    input wire logic [31:0] dma_errors
);
  localparam int MW = MAX_MRS > 1 ? $clog2(MAX_MRS) : 1;

  // ---- registers --------------------------------------------------------------------------
  logic req_valid, req_ready, rsp_valid;
  logic [255:0] req_data;
  logic [7:0] rsp_err;
  logic [15:0] rsp_mr;
  logic [31:0] rsp_ms, rsp_cursor, rsp_reads, flows_in_use, store_free;
  logic busy;
  logic [7:0] ctr_sel;
  logic [63:0] ctr_value;
  logic [63:0] rxq_cpl_base, rxq_hdr_base, txq_cpl_base;
  logic [4:0] rxq_log2, txq_log2;
  logic [31:0] rxq_cons, rxq_prod, txq_cons, txq_prod;
  logic rxq_enable, txq_enable;
  logic [15:0] txq_merge_tid;

  cleave_regs #(
      .AXIL_ADDR_WIDTH(AXIL_ADDR_WIDTH),
      .DATA_WIDTH(DATA_WIDTH),
      .MAX_FLOWS(MAX_FLOWS),
      .MAX_MRS(MAX_MRS),
      .MS_COMMITTED(MS_COMMITTED),
      .MS_STORE(MS_STORE),
      .MS_CHUNK(MS_CHUNK)
  ) u_regs (
      .clk(clk),
      .rst(rst),
      .s_axil_awaddr(s_axil_awaddr),
      .s_axil_awprot(s_axil_awprot),
      .s_axil_awvalid(s_axil_awvalid),
      .s_axil_awready(s_axil_awready),
      .s_axil_wdata(s_axil_wdata),
      .s_axil_wstrb(s_axil_wstrb),
      .s_axil_wvalid(s_axil_wvalid),
      .s_axil_wready(s_axil_wready),
      .s_axil_bresp(s_axil_bresp),
      .s_axil_bvalid(s_axil_bvalid),
      .s_axil_bready(s_axil_bready),
      .s_axil_araddr(s_axil_araddr),
      .s_axil_arprot(s_axil_arprot),
      .s_axil_arvalid(s_axil_arvalid),
      .s_axil_arready(s_axil_arready),
      .s_axil_rdata(s_axil_rdata),
      .s_axil_rresp(s_axil_rresp),
      .s_axil_rvalid(s_axil_rvalid),
      .s_axil_rready(s_axil_rready),
      .m_req_valid(req_valid),
      .m_req_ready(req_ready),
      .m_req_data(req_data),
      .s_rsp_valid(rsp_valid),
      .s_rsp_err(rsp_err),
      .s_rsp_mr(rsp_mr),
      .s_rsp_ms_count(rsp_ms),
      .s_rsp_cursor(rsp_cursor),
      .s_rsp_read_count(rsp_reads),
      .flows_in_use(flows_in_use),
      .store_free(store_free),
      .engine_busy(busy),
      .dma_errors(dma_errors),
      .ctr_sel(ctr_sel),
      .ctr_value(ctr_value),
      .rxq_cpl_base(rxq_cpl_base),
      .rxq_hdr_base(rxq_hdr_base),
      .rxq_log2(rxq_log2),
      .rxq_cons(rxq_cons),
      .rxq_enable(rxq_enable),
      .rxq_prod(rxq_prod),
      .txq_cpl_base(txq_cpl_base),
      .txq_log2(txq_log2),
      .txq_cons(txq_cons),
      .txq_merge_tid(txq_merge_tid),
      .txq_enable(txq_enable),
      .txq_prod(txq_prod)
  );
  assign merge_tid = txq_merge_tid;
  // A DMA write request takes the fragment's address and length; the MR and offset are the
  // completion's business.
  wire unused_desc = &{1'b0, desc.mr, desc.off};

  // ---- receive ------------------------------------------------------------------------------
  logic [DATA_WIDTH-1:0] hdr_tdata, pay_tdata;
  logic [KEEP_WIDTH-1:0] hdr_tkeep, pay_tkeep;
  logic hdr_tvalid, hdr_tready, hdr_tlast, pay_tvalid, pay_tready, pay_tlast;
  frag_t desc;
  logic desc_last, desc_valid, desc_ready;
  rx_dec_t cpl;
  logic cpl_valid, cpl_ready;
  logic [MW-1:0] tx_mr_addr;
  logic [104:0] tx_mr_data;
  logic [3:0] tx_inc_en;
  logic [31:0] tx_inc_idx;
  logic [127:0] tx_inc_amt;

  cleave_rx #(
      .DATA_WIDTH(DATA_WIDTH),
      .MAX_FLOWS(MAX_FLOWS),
      .BUCKETS(BUCKETS),
      .MAX_MRS(MAX_MRS),
      .MS_CHUNK(MS_CHUNK),
      .MS_COMMITTED(MS_COMMITTED),
      .MS_STORE(MS_STORE),
      .FBUF_BEATS(FBUF_BEATS),
      .VERIFY_L4(VERIFY_L4),
      .ULTRA(ULTRA)
  ) u_rx (
      .clk(clk),
      .rst(rst),
      .s_axis_tdata(s_axis_rx_tdata),
      .s_axis_tkeep(s_axis_rx_tkeep),
      .s_axis_tvalid(s_axis_rx_tvalid),
      .s_axis_tready(s_axis_rx_tready),
      .s_axis_tlast(s_axis_rx_tlast),
      .s_cmd_valid(req_valid),
      .s_cmd_ready(req_ready),
      .s_cmd_data(req_data),
      .m_rsp_valid(rsp_valid),
      .m_rsp_err(rsp_err),
      .m_rsp_mr(rsp_mr),
      .m_rsp_ms_count(rsp_ms),
      .m_rsp_cursor(rsp_cursor),
      .m_rsp_read_count(rsp_reads),
      .m_axis_hdr_tdata(hdr_tdata),
      .m_axis_hdr_tkeep(hdr_tkeep),
      .m_axis_hdr_tvalid(hdr_tvalid),
      .m_axis_hdr_tready(hdr_tready),
      .m_axis_hdr_tlast(hdr_tlast),
      .m_axis_copy_tdata(m_axis_copy_tdata),
      .m_axis_copy_tkeep(m_axis_copy_tkeep),
      .m_axis_copy_tvalid(m_axis_copy_tvalid),
      .m_axis_copy_tready(m_axis_copy_tready),
      .m_axis_copy_tlast(m_axis_copy_tlast),
      .m_desc(desc),
      .m_desc_last(desc_last),
      .m_desc_valid(desc_valid),
      .m_desc_ready(desc_ready),
      .m_axis_pay_tdata(pay_tdata),
      .m_axis_pay_tkeep(pay_tkeep),
      .m_axis_pay_tvalid(pay_tvalid),
      .m_axis_pay_tready(pay_tready),
      .m_axis_pay_tlast(pay_tlast),
      .m_cpl(cpl),
      .m_cpl_valid(cpl_valid),
      .m_cpl_ready(cpl_ready),
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

  logic [63:0] rq_addr, tq_addr;
  logic [15:0] rq_len, tq_len;
  logic rq_last, rq_valid, rq_ready, tq_last, tq_valid, tq_ready;
  logic [DATA_WIDTH-1:0] rq_tdata, tq_tdata;
  logic [KEEP_WIDTH-1:0] rq_tkeep, tq_tkeep;
  logic rq_tvalid, rq_tready, rq_tlast, tq_tvalid, tq_tready, tq_tlast;

  cleave_rxq #(
      .DATA_WIDTH(DATA_WIDTH)
  ) u_rxq (
      .clk(clk),
      .rst(rst),
      .s_axis_hdr_tdata(hdr_tdata),
      .s_axis_hdr_tkeep(hdr_tkeep),
      .s_axis_hdr_tvalid(hdr_tvalid),
      .s_axis_hdr_tready(hdr_tready),
      .s_axis_hdr_tlast(hdr_tlast),
      .s_cpl(cpl),
      .s_cpl_valid(cpl_valid),
      .s_cpl_ready(cpl_ready),
      .cpl_base(rxq_cpl_base),
      .hdr_base(rxq_hdr_base),
      .log2(rxq_log2),
      .cons(rxq_cons),
      .enable(rxq_enable),
      .prod(rxq_prod),
      .m_req_addr(rq_addr),
      .m_req_len(rq_len),
      .m_req_last(rq_last),
      .m_req_valid(rq_valid),
      .m_req_ready(rq_ready),
      .m_axis_tdata(rq_tdata),
      .m_axis_tkeep(rq_tkeep),
      .m_axis_tvalid(rq_tvalid),
      .m_axis_tready(rq_tready),
      .m_axis_tlast(rq_tlast)
  );

  // ---- send ---------------------------------------------------------------------------------
  logic [63:0] txc_cookie;
  logic [7:0] txc_status;
  logic [15:0] txc_frames;
  logic [31:0] txc_bytes;
  logic txc_valid, txc_ready;

  cleave_tx #(
      .DATA_WIDTH(DATA_WIDTH),
      .MAX_MRS(MAX_MRS)
  ) u_tx (
      .clk(clk),
      .rst(rst),
      .s_axis_txd_tdata(s_axis_txd_tdata),
      .s_axis_txd_tkeep(s_axis_txd_tkeep),
      .s_axis_txd_tvalid(s_axis_txd_tvalid),
      .s_axis_txd_tready(s_axis_txd_tready),
      .s_axis_txd_tlast(s_axis_txd_tlast),
      .mr_addr(tx_mr_addr),
      .mr_data(tx_mr_data),
      .m_dma_rd_addr(m_dma_rd_addr),
      .m_dma_rd_len(m_dma_rd_len),
      .m_dma_rd_valid(m_dma_rd_valid),
      .m_dma_rd_ready(m_dma_rd_ready),
      .s_axis_rd_tdata(s_axis_dma_rd_tdata),
      .s_axis_rd_tkeep(s_axis_dma_rd_tkeep),
      .s_axis_rd_tvalid(s_axis_dma_rd_tvalid),
      .s_axis_rd_tready(s_axis_dma_rd_tready),
      .s_axis_rd_tlast(s_axis_dma_rd_tlast),
      .m_axis_tx_tdata(m_axis_tx_tdata),
      .m_axis_tx_tkeep(m_axis_tx_tkeep),
      .m_axis_tx_tvalid(m_axis_tx_tvalid),
      .m_axis_tx_tready(m_axis_tx_tready),
      .m_axis_tx_tlast(m_axis_tx_tlast),
      .m_txc_cookie(txc_cookie),
      .m_txc_status(txc_status),
      .m_txc_frames(txc_frames),
      .m_txc_bytes(txc_bytes),
      .m_txc_valid(txc_valid),
      .m_txc_ready(txc_ready),
      .inc_en(tx_inc_en),
      .inc_idx(tx_inc_idx),
      .inc_amt(tx_inc_amt)
  );
  wire unused_bytes = &{1'b0, txc_bytes};  // counted; the ring record has no room for it

  cleave_txq #(
      .DATA_WIDTH(DATA_WIDTH)
  ) u_txq (
      .clk(clk),
      .rst(rst),
      .s_txc_cookie(txc_cookie),
      .s_txc_status(txc_status),
      .s_txc_frames(txc_frames),
      .s_txc_valid(txc_valid),
      .s_txc_ready(txc_ready),
      .cpl_base(txq_cpl_base),
      .log2(txq_log2),
      .cons(txq_cons),
      .enable(txq_enable),
      .prod(txq_prod),
      .m_req_addr(tq_addr),
      .m_req_len(tq_len),
      .m_req_last(tq_last),
      .m_req_valid(tq_valid),
      .m_req_ready(tq_ready),
      .m_axis_tdata(tq_tdata),
      .m_axis_tkeep(tq_tkeep),
      .m_axis_tvalid(tq_tvalid),
      .m_axis_tready(tq_tready),
      .m_axis_tlast(tq_tlast)
  );

  // ---- DMA writes: payload first, then header slots and RX completions, then TX completions --
  cleave_dma_wr_mux #(
      .PORTS(3),
      .DATA_WIDTH(DATA_WIDTH)
  ) u_wr_mux (
      .clk(clk),
      .rst(rst),
      .s_req_addr({tq_addr, rq_addr, desc.addr}),
      .s_req_len({tq_len, rq_len, desc.len}),
      .s_req_last({tq_last, rq_last, desc_last}),
      .s_req_valid({tq_valid, rq_valid, desc_valid}),
      .s_req_ready({tq_ready, rq_ready, desc_ready}),
      .s_axis_tdata({tq_tdata, rq_tdata, pay_tdata}),
      .s_axis_tkeep({tq_tkeep, rq_tkeep, pay_tkeep}),
      .s_axis_tvalid({tq_tvalid, rq_tvalid, pay_tvalid}),
      .s_axis_tready({tq_tready, rq_tready, pay_tready}),
      .s_axis_tlast({tq_tlast, rq_tlast, pay_tlast}),
      .m_req_addr(m_dma_wr_addr),
      .m_req_len(m_dma_wr_len),
      .m_req_last(m_dma_wr_last),
      .m_req_valid(m_dma_wr_valid),
      .m_req_ready(m_dma_wr_ready),
      .m_axis_tdata(m_axis_dma_wr_tdata),
      .m_axis_tkeep(m_axis_dma_wr_tkeep),
      .m_axis_tvalid(m_axis_dma_wr_tvalid),
      .m_axis_tready(m_axis_dma_wr_tready),
      .m_axis_tlast(m_axis_dma_wr_tlast)
  );
endmodule

`resetall
