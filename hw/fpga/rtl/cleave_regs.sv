// cleave_regs.sv - the NIC's register blocks on an AXI-Lite slave.
//
// Corundum register blocks (type, version, next pointer, then the block's registers), back to
// back from offset 0, RB_STRIDE bytes each, in the order and with the offsets of
// hw/fpga/spec/nic_spec.py (REG_BLOCKS): NIC info, command mailbox, counters, RX split queue,
// TX merge queue, table debug. The mailbox and the debug block's flow select reach the engine
// through one request channel (m_req_*): one request at a time, answered on s_rsp_*.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_regs #(
    // AXI-Lite address width (bytes); the blocks take RB_COUNT * RB_STRIDE bytes
    parameter int AXIL_ADDR_WIDTH = 16,
    // NIC geometry, reported by the info block
    parameter int DATA_WIDTH = 512,
    parameter int MAX_FLOWS = 1024,
    parameter int MAX_MRS = 256,
    parameter int MS_COMMITTED = 32,
    parameter int MS_STORE = 4096,
    parameter int MS_CHUNK = 16
) (
    input wire logic clk,
    input wire logic rst,

    // AXI-Lite slave (32-bit data)
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

    // Requests to the engine: a command (CMD record) or a flow query (CMD_FLOW_QUERY)
    output logic         m_req_valid,
    input  wire logic    m_req_ready,
    output logic [255:0] m_req_data,
    // Its answer: Err, the MR id of RKEY_CHECK, and a query's figures
    input  wire logic        s_rsp_valid,
    input  wire logic [ 7:0] s_rsp_err,
    input  wire logic [15:0] s_rsp_mr,
    input  wire logic [31:0] s_rsp_ms_count,
    input  wire logic [31:0] s_rsp_cursor,
    input  wire logic [31:0] s_rsp_read_count,

    // Engine state for the debug block
    input wire logic [31:0] flows_in_use,
    input wire logic [31:0] store_free,
    input wire logic        engine_busy,
    input wire logic [31:0] dma_errors,

    // Counters: index out, value back (combinational)
    output logic      [ 7:0] ctr_sel,
    input  wire logic [63:0] ctr_value,

    // RX split queue
    output logic      [63:0] rxq_cpl_base,
    output logic      [63:0] rxq_hdr_base,
    output logic      [ 4:0] rxq_log2,
    output logic      [31:0] rxq_cons,
    output logic             rxq_enable,
    input  wire logic [31:0] rxq_prod,

    // TX merge queue
    output logic      [63:0] txq_cpl_base,
    output logic      [ 4:0] txq_log2,
    output logic      [31:0] txq_cons,
    output logic      [15:0] txq_merge_tid,
    output logic             txq_enable,
    input  wire logic [31:0] txq_prod
);
  `include "cleave_nic_defs.vh"

  localparam int SPACE = RB_COUNT * RB_STRIDE;

  initial begin
    if (SPACE > (1 << AXIL_ADDR_WIDTH)) $error("AXIL_ADDR_WIDTH too small for the blocks");
    if (DATA_WIDTH % 64 != 0) $error("DATA_WIDTH must be a multiple of 64");
  end

  // ---- write channel ---------------------------------------------------------------------
  logic [AXIL_ADDR_WIDTH-1:0] waddr;
  logic aw_held, w_held;
  logic [31:0] wdata;

  logic [31:0] cmd_word[8];
  logic [31:0] cmd_tag, res_tag;
  logic cmd_busy, cmd_done, req_is_query, req_pending;
  logic [7:0] res_err;
  logic [15:0] res_mr;
  logic [31:0] dbg_flow, dbg_ms_count, dbg_cursor, dbg_read_count;
  logic [31:0] ctr_hi_latch;
  logic [7:0] ctr_sel_q;

  assign ctr_sel = ctr_sel_q;

  // The request is held on m_req_* until taken; answers arrive after it was taken.
  always_comb begin
    m_req_data = '0;
    if (req_is_query) begin
      m_req_data[CMD_OPCODE_LSB+:CMD_OPCODE_W] = CMD_FLOW_QUERY;
      m_req_data[CMD_FLOW_LSB+:CMD_FLOW_W] = dbg_flow[CMD_FLOW_W-1:0];
    end else begin
      for (int i = 0; i < 8; i++) m_req_data[32*i+:32] = cmd_word[i];
    end
  end
  assign m_req_valid = req_pending;

  wire write_fire = aw_held && w_held && !s_axil_bvalid;
  integer wblk, wblk_off, rblk, roff;
  always_comb begin
    wblk = 32'(waddr) / RB_STRIDE;
    wblk_off = 32'(waddr) % RB_STRIDE;
    rblk = 32'(s_axil_araddr) / RB_STRIDE;
    roff = 32'(s_axil_araddr) % RB_STRIDE;
  end

  assign s_axil_awready = !aw_held;
  assign s_axil_wready  = !w_held;
  assign s_axil_bresp   = 2'b00;

  always_ff @(posedge clk) begin
    if (rst) begin
      aw_held <= 1'b0;
      w_held <= 1'b0;
      waddr <= '0;
      wdata <= '0;
      s_axil_bvalid <= 1'b0;
      for (int i = 0; i < 8; i++) cmd_word[i] <= '0;
      cmd_tag <= '0;
      res_tag <= '0;
      cmd_busy <= 1'b0;
      cmd_done <= 1'b0;
      req_pending <= 1'b0;
      req_is_query <= 1'b0;
      res_err <= '0;
      res_mr <= '0;
      dbg_flow <= '0;
      dbg_ms_count <= '0;
      dbg_cursor <= '0;
      dbg_read_count <= '0;
      ctr_sel_q <= '0;
      rxq_cpl_base <= '0;
      rxq_hdr_base <= '0;
      rxq_log2 <= '0;
      rxq_cons <= '0;
      rxq_enable <= 1'b0;
      txq_cpl_base <= '0;
      txq_log2 <= '0;
      txq_cons <= '0;
      txq_merge_tid <= '0;
      txq_enable <= 1'b0;
    end else begin
      if (s_axil_awvalid && s_axil_awready) begin
        aw_held <= 1'b1;
        waddr   <= s_axil_awaddr;
      end
      if (s_axil_wvalid && s_axil_wready) begin
        w_held <= 1'b1;
        wdata  <= s_axil_wdata;  // byte strobes are not honoured: 32-bit registers only
      end
      if (s_axil_bvalid && s_axil_bready) s_axil_bvalid <= 1'b0;

      if (m_req_valid && m_req_ready) req_pending <= 1'b0;
      if (s_rsp_valid) begin
        cmd_busy <= 1'b0;
        if (req_is_query) begin
          dbg_ms_count <= s_rsp_ms_count;
          dbg_cursor <= s_rsp_cursor;
          dbg_read_count <= s_rsp_read_count;
        end else begin
          cmd_done <= 1'b1;
          res_err <= s_rsp_err;
          res_mr <= s_rsp_mr;
          res_tag <= cmd_tag;
        end
      end

      if (write_fire) begin
        aw_held <= 1'b0;
        w_held <= 1'b0;
        s_axil_bvalid <= 1'b1;
        case (wblk)
          RB_CMD_BASE / RB_STRIDE: begin
            if (wblk_off >= RB_CMD_WORD0 && wblk_off <= RB_CMD_WORD7)
              cmd_word[(wblk_off-RB_CMD_WORD0)/4] <= wdata;
            if (wblk_off == RB_CMD_TAG) cmd_tag <= wdata;
            // A doorbell while busy is ignored: the driver polls the busy bit first.
            if (wblk_off == RB_CMD_DOORBELL && !cmd_busy) begin
              cmd_busy <= 1'b1;
              cmd_done <= 1'b0;
              req_pending <= 1'b1;
              req_is_query <= 1'b0;
            end
          end
          RB_COUNTERS_BASE / RB_STRIDE: if (wblk_off == RB_COUNTERS_SELECT) ctr_sel_q <= wdata[7:0];
          RB_RXQ_BASE / RB_STRIDE: begin
            case (wblk_off)
              RB_RXQ_CPL_BASE_LO: rxq_cpl_base[31:0] <= wdata;
              RB_RXQ_CPL_BASE_HI: rxq_cpl_base[63:32] <= wdata;
              RB_RXQ_LOG2_ENTRIES: rxq_log2 <= wdata[4:0];
              RB_RXQ_CPL_CONS: rxq_cons <= wdata;
              RB_RXQ_HDR_BASE_LO: rxq_hdr_base[31:0] <= wdata;
              RB_RXQ_HDR_BASE_HI: rxq_hdr_base[63:32] <= wdata;
              RB_RXQ_ENABLE: rxq_enable <= wdata[0];
              default: ;
            endcase
          end
          RB_TXQ_BASE / RB_STRIDE: begin
            case (wblk_off)
              RB_TXQ_CPL_BASE_LO: txq_cpl_base[31:0] <= wdata;
              RB_TXQ_CPL_BASE_HI: txq_cpl_base[63:32] <= wdata;
              RB_TXQ_LOG2_ENTRIES: txq_log2 <= wdata[4:0];
              RB_TXQ_CPL_CONS: txq_cons <= wdata;
              RB_TXQ_MERGE_QUEUE: txq_merge_tid <= wdata[15:0];
              RB_TXQ_ENABLE: txq_enable <= wdata[0];
              default: ;
            endcase
          end
          RB_DEBUG_BASE / RB_STRIDE: begin
            if (wblk_off == RB_DEBUG_FLOW_SELECT && !cmd_busy) begin
              dbg_flow <= wdata;
              cmd_busy <= 1'b1;
              req_pending <= 1'b1;
              req_is_query <= 1'b1;
            end
          end
          default: ;
        endcase
      end
    end
  end

  // ---- read channel ----------------------------------------------------------------------
  logic [31:0] rdata;

  function automatic logic [31:0] block_type(input int b);
    case (b)
      RB_INFO_BASE / RB_STRIDE: block_type = RB_INFO_TYPE;
      RB_CMD_BASE / RB_STRIDE: block_type = RB_CMD_TYPE;
      RB_COUNTERS_BASE / RB_STRIDE: block_type = RB_COUNTERS_TYPE;
      RB_RXQ_BASE / RB_STRIDE: block_type = RB_RXQ_TYPE;
      RB_TXQ_BASE / RB_STRIDE: block_type = RB_TXQ_TYPE;
      RB_DEBUG_BASE / RB_STRIDE: block_type = RB_DEBUG_TYPE;
      default: block_type = '0;
    endcase
  endfunction

  function automatic logic [31:0] block_version(input int b);
    case (b)
      RB_INFO_BASE / RB_STRIDE: block_version = RB_INFO_VERSION;
      RB_CMD_BASE / RB_STRIDE: block_version = RB_CMD_VERSION;
      RB_COUNTERS_BASE / RB_STRIDE: block_version = RB_COUNTERS_VERSION;
      RB_RXQ_BASE / RB_STRIDE: block_version = RB_RXQ_VERSION;
      RB_TXQ_BASE / RB_STRIDE: block_version = RB_TXQ_VERSION;
      RB_DEBUG_BASE / RB_STRIDE: block_version = RB_DEBUG_VERSION;
      default: block_version = '0;
    endcase
  endfunction

  localparam logic [31:0] CAPS = 32'h7F;  // TCP, RoCEv2, Solar, UDP, TSO, ICRC, CRC32C

  always_comb begin
    rdata = '0;
    if (rblk < RB_COUNT) begin
      case (roff)
        0: rdata = block_type(rblk);
        4: rdata = block_version(rblk);
        8: rdata = rblk + 1 < RB_COUNT ? 32'((rblk + 1) * RB_STRIDE) : 32'd0;
        default: begin
          case (rblk)
            RB_INFO_BASE / RB_STRIDE:
            case (roff)
              RB_INFO_CAPS: rdata = CAPS;
              RB_INFO_MAX_FLOWS: rdata = 32'(MAX_FLOWS);
              RB_INFO_MAX_MRS: rdata = 32'(MAX_MRS);
              RB_INFO_MS_COMMITTED: rdata = 32'(MS_COMMITTED);
              RB_INFO_MS_STORE: rdata = 32'(MS_STORE);
              RB_INFO_MS_CHUNK: rdata = 32'(MS_CHUNK);
              RB_INFO_HEADER_SLOT: rdata = C_RX_HEADER_SLOT_BYTES;
              RB_INFO_MAX_FRAGS: rdata = C_MAX_FRAGS;
              RB_INFO_DATA_WIDTH: rdata = 32'(DATA_WIDTH);
              RB_INFO_RECORD_VERSION: rdata = C_RECORD_VERSION;
              default: ;
            endcase
            RB_CMD_BASE / RB_STRIDE: begin
              if (roff >= RB_CMD_WORD0 && roff <= RB_CMD_WORD7)
                rdata = cmd_word[(roff-RB_CMD_WORD0)/4];
              case (roff)
                RB_CMD_TAG: rdata = cmd_tag;
                RB_CMD_DOORBELL: rdata = {31'd0, cmd_busy};
                RB_CMD_RESULT: rdata = {cmd_done, 7'd0, res_mr, res_err};
                RB_CMD_RESULT_TAG: rdata = res_tag;
                default: ;
              endcase
            end
            RB_COUNTERS_BASE / RB_STRIDE:
            case (roff)
              RB_COUNTERS_COUNT: rdata = 32'(CTR_COUNT);
              RB_COUNTERS_SELECT: rdata = {24'd0, ctr_sel_q};
              RB_COUNTERS_VALUE_LO: rdata = ctr_value[31:0];
              RB_COUNTERS_VALUE_HI: rdata = ctr_hi_latch;
              default: ;
            endcase
            RB_RXQ_BASE / RB_STRIDE:
            case (roff)
              RB_RXQ_CPL_BASE_LO: rdata = rxq_cpl_base[31:0];
              RB_RXQ_CPL_BASE_HI: rdata = rxq_cpl_base[63:32];
              RB_RXQ_LOG2_ENTRIES: rdata = {27'd0, rxq_log2};
              RB_RXQ_CPL_PROD: rdata = rxq_prod;
              RB_RXQ_CPL_CONS: rdata = rxq_cons;
              RB_RXQ_HDR_BASE_LO: rdata = rxq_hdr_base[31:0];
              RB_RXQ_HDR_BASE_HI: rdata = rxq_hdr_base[63:32];
              RB_RXQ_ENABLE: rdata = {31'd0, rxq_enable};
              default: ;
            endcase
            RB_TXQ_BASE / RB_STRIDE:
            case (roff)
              RB_TXQ_CPL_BASE_LO: rdata = txq_cpl_base[31:0];
              RB_TXQ_CPL_BASE_HI: rdata = txq_cpl_base[63:32];
              RB_TXQ_LOG2_ENTRIES: rdata = {27'd0, txq_log2};
              RB_TXQ_CPL_PROD: rdata = txq_prod;
              RB_TXQ_CPL_CONS: rdata = txq_cons;
              RB_TXQ_MERGE_QUEUE: rdata = {16'd0, txq_merge_tid};
              RB_TXQ_ENABLE: rdata = {31'd0, txq_enable};
              default: ;
            endcase
            RB_DEBUG_BASE / RB_STRIDE:
            case (roff)
              RB_DEBUG_FLOWS_IN_USE: rdata = flows_in_use;
              RB_DEBUG_STORE_FREE: rdata = store_free;
              RB_DEBUG_FLOW_SELECT: rdata = dbg_flow;
              RB_DEBUG_MS_COUNT: rdata = dbg_ms_count;
              RB_DEBUG_CURSOR: rdata = dbg_cursor;
              RB_DEBUG_READ_COUNT: rdata = dbg_read_count;
              RB_DEBUG_BUSY: rdata = {31'd0, engine_busy || cmd_busy};
              RB_DEBUG_DMA_ERRORS: rdata = dma_errors;
              default: ;
            endcase
            default: ;
          endcase
        end
      endcase
    end
  end

  assign s_axil_arready = !s_axil_rvalid;
  assign s_axil_rresp   = 2'b00;

  always_ff @(posedge clk) begin
    if (rst) begin
      s_axil_rvalid <= 1'b0;
      s_axil_rdata <= '0;
      ctr_hi_latch <= '0;
    end else begin
      if (s_axil_rvalid && s_axil_rready) s_axil_rvalid <= 1'b0;
      if (s_axil_arvalid && s_axil_arready) begin
        s_axil_rvalid <= 1'b1;
        s_axil_rdata  <= rdata;
        if (rblk == RB_COUNTERS_BASE / RB_STRIDE && roff == RB_COUNTERS_VALUE_LO)
          ctr_hi_latch <= ctr_value[63:32];
      end
    end
  end

  // The protection bits carry nothing here.
  wire unused_ok = &{1'b0, s_axil_awprot, s_axil_arprot, s_axil_wstrb};
endmodule

`resetall
