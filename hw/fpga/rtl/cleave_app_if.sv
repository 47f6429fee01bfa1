// cleave_app_if.sv - the unit's streams on Corundum's interface-level streams (*_axis_if_*).
//
// Send: packets from the TX queue with stream id MERGE_TID (the TX merge queue's, a register)
// are TX requests (descriptor + header template) for the unit; every other packet passes to
// the network as it came. The unit's merged frames join the passing ones packet by packet,
// with that stream id, destination 0 and the transmit tag all ones. Corundum completes a TX
// descriptor when its packet's TX completion comes back: the completions of merged frames
// (tag all ones) are dropped, and each request packet gets one completion (timestamp 0) as
// soon as the unit has taken it, so Corundum's queue sees exactly one completion per packet it
// sent. (A TX tag of all ones must therefore not be one Corundum hands out.)
// Receive: every frame goes to the unit; the copy path comes back on m_axis_if_rx with stream
// id, destination and user bits 0 (the frame's timestamp does not survive the detour).
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_app_if #(
    parameter int DATA_WIDTH = 512,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    parameter int TX_ID_WIDTH = 12,
    parameter int TX_DEST_WIDTH = 4,
    parameter int TX_USER_WIDTH = 17,
    parameter int TX_TAG_WIDTH = 16,
    parameter int PTP_TS_WIDTH = 96,
    parameter int RX_ID_WIDTH = 1,
    parameter int RX_DEST_WIDTH = 8,
    parameter int RX_USER_WIDTH = 97
) (
    input wire logic clk,
    input wire logic rst,

    input wire logic [15:0] merge_tid,

    // From Corundum's TX queues
    input  wire logic [   DATA_WIDTH-1:0] s_axis_if_tx_tdata,
    input  wire logic [   KEEP_WIDTH-1:0] s_axis_if_tx_tkeep,
    input  wire logic                     s_axis_if_tx_tvalid,
    output logic                          s_axis_if_tx_tready,
    input  wire logic                     s_axis_if_tx_tlast,
    input  wire logic [  TX_ID_WIDTH-1:0] s_axis_if_tx_tid,
    input  wire logic [TX_DEST_WIDTH-1:0] s_axis_if_tx_tdest,
    input  wire logic [TX_USER_WIDTH-1:0] s_axis_if_tx_tuser,
    // To the network
    output logic [   DATA_WIDTH-1:0] m_axis_if_tx_tdata,
    output logic [   KEEP_WIDTH-1:0] m_axis_if_tx_tkeep,
    output logic                     m_axis_if_tx_tvalid,
    input  wire logic                m_axis_if_tx_tready,
    output logic                     m_axis_if_tx_tlast,
    output logic [  TX_ID_WIDTH-1:0] m_axis_if_tx_tid,
    output logic [TX_DEST_WIDTH-1:0] m_axis_if_tx_tdest,
    output logic [TX_USER_WIDTH-1:0] m_axis_if_tx_tuser,
    // TX completions from the network side, to Corundum's queues
    input  wire logic [PTP_TS_WIDTH-1:0] s_axis_if_tx_cpl_ts,
    input  wire logic [TX_TAG_WIDTH-1:0] s_axis_if_tx_cpl_tag,
    input  wire logic                    s_axis_if_tx_cpl_valid,
    output logic                         s_axis_if_tx_cpl_ready,
    output logic [PTP_TS_WIDTH-1:0]      m_axis_if_tx_cpl_ts,
    output logic [TX_TAG_WIDTH-1:0]      m_axis_if_tx_cpl_tag,
    output logic                         m_axis_if_tx_cpl_valid,
    input  wire logic                    m_axis_if_tx_cpl_ready,

    // The unit's send side
    output logic [DATA_WIDTH-1:0] m_axis_txd_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_txd_tkeep,
    output logic                  m_axis_txd_tvalid,
    input  wire logic             m_axis_txd_tready,
    output logic                  m_axis_txd_tlast,
    input  wire logic [DATA_WIDTH-1:0] s_axis_nic_tx_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_nic_tx_tkeep,
    input  wire logic                  s_axis_nic_tx_tvalid,
    output logic                       s_axis_nic_tx_tready,
    input  wire logic                  s_axis_nic_tx_tlast,

    // The unit's copy path, to Corundum's RX queues
    input  wire logic [DATA_WIDTH-1:0] s_axis_copy_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_copy_tkeep,
    input  wire logic                  s_axis_copy_tvalid,
    output logic                       s_axis_copy_tready,
    input  wire logic                  s_axis_copy_tlast,
    output logic [   DATA_WIDTH-1:0]   m_axis_if_rx_tdata,
    output logic [   KEEP_WIDTH-1:0]   m_axis_if_rx_tkeep,
    output logic                       m_axis_if_rx_tvalid,
    input  wire logic                  m_axis_if_rx_tready,
    output logic                       m_axis_if_rx_tlast,
    output logic [  RX_ID_WIDTH-1:0]   m_axis_if_rx_tid,
    output logic [RX_DEST_WIDTH-1:0]   m_axis_if_rx_tdest,
    output logic [RX_USER_WIDTH-1:0]   m_axis_if_rx_tuser
);
  localparam logic [TX_TAG_WIDTH-1:0] TAG_MERGED = '1;
  // Stream ids above TX_ID_WIDTH bits cannot occur.
  wire unused_ok = &{1'b0, merge_tid};

  initial begin
    if (TX_USER_WIDTH < TX_TAG_WIDTH + 1) $error("TX_USER_WIDTH must hold the bad bit and the tag");
  end

  // ---- receive: the copy path -----------------------------------------------------------
  assign m_axis_if_rx_tdata = s_axis_copy_tdata;
  assign m_axis_if_rx_tkeep = s_axis_copy_tkeep;
  assign m_axis_if_rx_tvalid = s_axis_copy_tvalid;
  assign m_axis_if_rx_tlast = s_axis_copy_tlast;
  assign m_axis_if_rx_tid = '0;
  assign m_axis_if_rx_tdest = '0;
  assign m_axis_if_rx_tuser = '0;
  assign s_axis_copy_tready = m_axis_if_rx_tready;

  // ---- send: which way the packet from the queues goes ----------------------------------
  logic in_pkt, in_merge;  // mid-packet, and where it goes
  wire first_merge = s_axis_if_tx_tid == TX_ID_WIDTH'(merge_tid);
  wire to_merge = in_pkt ? in_merge : first_merge;

  // The output: passing packets and merged frames, a packet at a time.
  logic out_busy, out_nic;
  logic pass_valid;
  assign pass_valid = s_axis_if_tx_tvalid && !to_merge;
  wire pick_nic = !out_busy && s_axis_nic_tx_tvalid && !pass_valid;
  wire cur_nic = out_busy ? out_nic : pick_nic;

  assign m_axis_if_tx_tdata = cur_nic ? s_axis_nic_tx_tdata : s_axis_if_tx_tdata;
  assign m_axis_if_tx_tkeep = cur_nic ? s_axis_nic_tx_tkeep : s_axis_if_tx_tkeep;
  assign m_axis_if_tx_tlast = cur_nic ? s_axis_nic_tx_tlast : s_axis_if_tx_tlast;
  assign m_axis_if_tx_tvalid = cur_nic ? s_axis_nic_tx_tvalid : pass_valid;
  assign m_axis_if_tx_tid = cur_nic ? TX_ID_WIDTH'(merge_tid) : s_axis_if_tx_tid;
  assign m_axis_if_tx_tdest = cur_nic ? '0 : s_axis_if_tx_tdest;
  assign m_axis_if_tx_tuser = cur_nic ? TX_USER_WIDTH'({TAG_MERGED, 1'b0}) : s_axis_if_tx_tuser;
  assign s_axis_nic_tx_tready = cur_nic && m_axis_if_tx_tready;

  // Request packets: to the unit; each one's completion is injected once the unit took it.
  localparam int CQ = 16;
  logic [TX_TAG_WIDTH-1:0] cq_tag[CQ];
  logic [$clog2(CQ):0] cq_wr, cq_rd;
  wire cq_full = cq_wr - cq_rd == CQ[$clog2(CQ):0];
  assign m_axis_txd_tdata = s_axis_if_tx_tdata;
  assign m_axis_txd_tkeep = s_axis_if_tx_tkeep;
  assign m_axis_txd_tlast = s_axis_if_tx_tlast;
  assign m_axis_txd_tvalid = s_axis_if_tx_tvalid && to_merge && !cq_full;
  assign s_axis_if_tx_tready = to_merge ? m_axis_txd_tready && !cq_full :
      !cur_nic && m_axis_if_tx_tready;
  wire in_fire = s_axis_if_tx_tvalid && s_axis_if_tx_tready;

  // Completions: the network's (but merged frames'), then the injected ones.
  wire drop = s_axis_if_tx_cpl_tag == TAG_MERGED;
  wire inject = cq_wr != cq_rd && !(s_axis_if_tx_cpl_valid && !drop);
  assign m_axis_if_tx_cpl_valid = (s_axis_if_tx_cpl_valid && !drop) || inject;
  assign m_axis_if_tx_cpl_ts = inject ? '0 : s_axis_if_tx_cpl_ts;
  assign m_axis_if_tx_cpl_tag = inject ? cq_tag[cq_rd[$clog2(CQ)-1:0]] : s_axis_if_tx_cpl_tag;
  assign s_axis_if_tx_cpl_ready = drop || m_axis_if_tx_cpl_ready;

  always_ff @(posedge clk) begin
    if (rst) begin
      in_pkt <= 1'b0;
      in_merge <= 1'b0;
      out_busy <= 1'b0;
      out_nic <= 1'b0;
      cq_wr <= '0;
      cq_rd <= '0;
    end else begin
      if (in_fire) begin
        in_pkt <= !s_axis_if_tx_tlast;
        if (!in_pkt) in_merge <= first_merge;
        if (to_merge && s_axis_if_tx_tlast) begin
          cq_tag[cq_wr[$clog2(CQ)-1:0]] <= s_axis_if_tx_tuser[TX_TAG_WIDTH:1];
          cq_wr <= cq_wr + 1'b1;
        end
      end
      if (m_axis_if_tx_tvalid && m_axis_if_tx_tready) begin
        out_busy <= !m_axis_if_tx_tlast;
        if (!out_busy) out_nic <= pick_nic;
      end
      if (inject && m_axis_if_tx_cpl_ready) cq_rd <= cq_rd + 1'b1;
    end
  end
endmodule

`resetall
