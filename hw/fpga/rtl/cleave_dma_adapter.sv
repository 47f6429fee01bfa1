// cleave_dma_adapter.sv - the unit's DMA transactions on Corundum's DMA interface.
//
// Corundum's DMA engine moves bytes between host memory and RAMs of the application, which it
// reaches through the segmented DMA RAM interface (*_dma_ram_*), and takes descriptors that
// name a host address, a RAM address and a length (docs/source/modules/mqnic_app_block.rst
// upstream). This adapter owns two such RAMs, DATA_WIDTH bits a row (RAM_SEG_COUNT segments):
//   write RAM: a ring the unit's DMA write data goes into, row by row; one Corundum write
//              descriptor per request names its bytes (the engine reads them with rd_cmd and
//              writes them to the host), in order; rows are free again when the last request
//              of their transaction reports its status
//   read RAM:  the engine writes a DMA read's bytes into it (wr_cmd, byte enables) from row 0;
//              on its status the rows are streamed out to the unit, byte 0 in lane 0
// Both RAMs start at RAM address 0 and the engine's RAM select is not decoded: rd_cmd only ever
// reads the write RAM and wr_cmd only ever writes the read RAM (descriptors say select 0 and 1).
// Errors in a status are counted (error_count), nothing is retried.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_dma_adapter #(
    // Unit data width = one RAM row (RAM_SEG_COUNT * RAM_SEG_DATA_WIDTH)
    parameter int DATA_WIDTH = 512,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8,
    // Corundum DMA interface geometry
    parameter int DMA_ADDR_WIDTH = 64,
    parameter int DMA_LEN_WIDTH = 16,
    parameter int DMA_TAG_WIDTH = 16,
    parameter int RAM_SEL_WIDTH = 4,
    parameter int RAM_ADDR_WIDTH = 16,
    parameter int RAM_SEG_COUNT = 2,
    parameter int RAM_SEG_DATA_WIDTH = DATA_WIDTH / RAM_SEG_COUNT,
    parameter int RAM_SEG_BE_WIDTH = RAM_SEG_DATA_WIDTH / 8,
    parameter int RAM_SEG_ADDR_WIDTH = RAM_ADDR_WIDTH - $clog2(RAM_SEG_COUNT * RAM_SEG_BE_WIDTH),
    // Rows of the write RAM (a power of two) and of the read RAM
    parameter int WR_ROWS = 256,
    parameter int RD_ROWS = 256
) (
    input wire logic clk,
    input wire logic rst,

    // The unit's DMA writes: requests, then one data packet
    input  wire logic [63:0]           s_wr_addr,
    input  wire logic [15:0]           s_wr_len,
    input  wire logic                  s_wr_last,
    input  wire logic                  s_wr_valid,
    output logic                       s_wr_ready,
    input  wire logic [DATA_WIDTH-1:0] s_axis_wr_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_wr_tkeep,
    input  wire logic                  s_axis_wr_tvalid,
    output logic                       s_axis_wr_tready,
    input  wire logic                  s_axis_wr_tlast,

    // The unit's DMA reads
    input  wire logic [63:0]      s_rd_addr,
    input  wire logic [15:0]      s_rd_len,
    input  wire logic             s_rd_valid,
    output logic                  s_rd_ready,
    output logic [DATA_WIDTH-1:0] m_axis_rd_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_rd_tkeep,
    output logic                  m_axis_rd_tvalid,
    input  wire logic             m_axis_rd_tready,
    output logic                  m_axis_rd_tlast,

    // Corundum: write descriptors and their status
    output logic [DMA_ADDR_WIDTH-1:0] m_axis_dma_write_desc_dma_addr,
    output logic [RAM_SEL_WIDTH-1:0]  m_axis_dma_write_desc_ram_sel,
    output logic [RAM_ADDR_WIDTH-1:0] m_axis_dma_write_desc_ram_addr,
    output logic [DMA_LEN_WIDTH-1:0]  m_axis_dma_write_desc_len,
    output logic [DMA_TAG_WIDTH-1:0]  m_axis_dma_write_desc_tag,
    output logic                      m_axis_dma_write_desc_valid,
    input  wire logic                 m_axis_dma_write_desc_ready,
    input  wire logic [DMA_TAG_WIDTH-1:0] s_axis_dma_write_desc_status_tag,
    input  wire logic [3:0]               s_axis_dma_write_desc_status_error,
    input  wire logic                     s_axis_dma_write_desc_status_valid,

    // Corundum: read descriptors and their status
    output logic [DMA_ADDR_WIDTH-1:0] m_axis_dma_read_desc_dma_addr,
    output logic [RAM_SEL_WIDTH-1:0]  m_axis_dma_read_desc_ram_sel,
    output logic [RAM_ADDR_WIDTH-1:0] m_axis_dma_read_desc_ram_addr,
    output logic [DMA_LEN_WIDTH-1:0]  m_axis_dma_read_desc_len,
    output logic [DMA_TAG_WIDTH-1:0]  m_axis_dma_read_desc_tag,
    output logic                      m_axis_dma_read_desc_valid,
    input  wire logic                 m_axis_dma_read_desc_ready,
    input  wire logic [DMA_TAG_WIDTH-1:0] s_axis_dma_read_desc_status_tag,
    input  wire logic [3:0]               s_axis_dma_read_desc_status_error,
    input  wire logic                     s_axis_dma_read_desc_status_valid,

    // Corundum: the DMA RAM interface (write commands fill the read RAM, read commands drain
    // the write RAM)
    input  wire logic [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0]      ram_wr_cmd_sel,
    input  wire logic [RAM_SEG_COUNT*RAM_SEG_BE_WIDTH-1:0]   ram_wr_cmd_be,
    input  wire logic [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] ram_wr_cmd_addr,
    input  wire logic [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] ram_wr_cmd_data,
    input  wire logic [RAM_SEG_COUNT-1:0]                    ram_wr_cmd_valid,
    output logic      [RAM_SEG_COUNT-1:0]                    ram_wr_cmd_ready,
    output logic      [RAM_SEG_COUNT-1:0]                    ram_wr_done,
    input  wire logic [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0]      ram_rd_cmd_sel,
    input  wire logic [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] ram_rd_cmd_addr,
    input  wire logic [RAM_SEG_COUNT-1:0]                    ram_rd_cmd_valid,
    output logic      [RAM_SEG_COUNT-1:0]                    ram_rd_cmd_ready,
    output logic      [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] ram_rd_resp_data,
    output logic      [RAM_SEG_COUNT-1:0]                    ram_rd_resp_valid,
    input  wire logic [RAM_SEG_COUNT-1:0]                    ram_rd_resp_ready,

    output logic [31:0] error_count
);
  localparam int NB = KEEP_WIDTH;
  localparam int LB = $clog2(NB);
  localparam int WRW = $clog2(WR_ROWS);
  localparam int RDW = $clog2(RD_ROWS);
  localparam int SEGB = RAM_SEG_BE_WIDTH;
  localparam int DQ = 8;  // requests of one transaction held (the unit sends at most 4)

  initial begin
    if (RAM_SEG_COUNT * RAM_SEG_DATA_WIDTH != DATA_WIDTH)
      $error("a RAM row (RAM_SEG_COUNT * RAM_SEG_DATA_WIDTH) must be DATA_WIDTH");
    if ((WR_ROWS & (WR_ROWS - 1)) != 0) $error("WR_ROWS must be a power of two");
    if (WR_ROWS * NB > (1 << RAM_ADDR_WIDTH) || RD_ROWS * NB > (1 << RAM_ADDR_WIDTH))
      $error("RAM_ADDR_WIDTH too small");
    if (RAM_SEG_ADDR_WIDTH < WRW || RAM_SEG_ADDR_WIDTH < RDW) $error("RAM_SEG_ADDR_WIDTH too small");
  end

  // ---- the RAMs, one per segment each -----------------------------------------------------
  logic wr_we;                      // a row of the write RAM from the unit
  logic [WRW-1:0] wr_waddr;
  logic [DATA_WIDTH-1:0] wr_wdata;
  logic [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] wram_rd;
  logic [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] rram_rd;
  logic [RDW-1:0] rram_raddr;

  // Read commands: one cycle to the RAM, then a two-entry queue per segment for the response.
  logic [RAM_SEG_COUNT-1:0] rc_fire, rc_inflight;
  logic [1:0] rq_n[RAM_SEG_COUNT];
  logic [RAM_SEG_DATA_WIDTH-1:0] rq_d0[RAM_SEG_COUNT];
  logic [RAM_SEG_DATA_WIDTH-1:0] rq_d1[RAM_SEG_COUNT];

  genvar g;
  generate
    for (g = 0; g < RAM_SEG_COUNT; g++) begin : g_seg
      // write RAM segment g: rows from the unit, read by the engine
      cleave_ram #(
          .DEPTH(WR_ROWS),
          .WIDTH(RAM_SEG_DATA_WIDTH)
      ) u_wram (
          .clk(clk),
          .wr_en(wr_we),
          .wr_addr(wr_waddr),
          .wr_data(wr_wdata[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH]),
          .rd_addr(ram_rd_cmd_addr[RAM_SEG_ADDR_WIDTH*g+:WRW]),
          .rd_data(wram_rd[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH])
      );
      // read RAM segment g: byte writes from the engine (one RAM per byte lane), rows read by
      // the adapter
      genvar b;
      for (b = 0; b < SEGB; b++) begin : g_byte
        cleave_ram #(
            .DEPTH(RD_ROWS),
            .WIDTH(8)
        ) u_rram (
            .clk(clk),
            .wr_en(ram_wr_cmd_valid[g] && ram_wr_cmd_be[SEGB*g+b]),
            .wr_addr(ram_wr_cmd_addr[RAM_SEG_ADDR_WIDTH*g+:RDW]),
            .wr_data(ram_wr_cmd_data[RAM_SEG_DATA_WIDTH*g+8*b+:8]),
            .rd_addr(rram_raddr),
            .rd_data(rram_rd[RAM_SEG_DATA_WIDTH*g+8*b+:8])
        );
      end
      always_ff @(posedge clk) ram_wr_done[g] <= !rst && ram_wr_cmd_valid[g];

      wire pop = ram_rd_resp_valid[g] && ram_rd_resp_ready[g];
      assign ram_rd_cmd_ready[g] = {1'b0, rq_n[g]} + {2'd0, rc_inflight[g]} - {2'd0, pop} < 3'd2;
      assign rc_fire[g] = ram_rd_cmd_valid[g] && ram_rd_cmd_ready[g];
      assign ram_rd_resp_valid[g] = rq_n[g] != 0;
      assign ram_rd_resp_data[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH] = rq_d0[g];
      always_ff @(posedge clk) begin
        if (rst) begin
          rc_inflight[g] <= 1'b0;
          rq_n[g] <= '0;
        end else begin
          rc_inflight[g] <= rc_fire[g];
          case ({rc_inflight[g], pop})
            2'b01: begin
              rq_d0[g] <= rq_d1[g];
              rq_n[g]  <= rq_n[g] - 1'b1;
            end
            2'b10: begin
              if (rq_n[g] == 0) rq_d0[g] <= wram_rd[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH];
              else rq_d1[g] <= wram_rd[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH];
              rq_n[g] <= rq_n[g] + 1'b1;
            end
            2'b11: begin
              if (rq_n[g] == 1) rq_d0[g] <= wram_rd[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH];
              else begin
                rq_d0[g] <= rq_d1[g];
                rq_d1[g] <= wram_rd[RAM_SEG_DATA_WIDTH*g+:RAM_SEG_DATA_WIDTH];
              end
            end
            default: ;
          endcase
        end
      end
    end
  endgenerate
  assign ram_wr_cmd_ready = '1;

  // ---- write path ---------------------------------------------------------------------------
  // Requests of the open transaction: address, length, offset in its data.
  logic [63:0] dq_addr[DQ];
  logic [15:0] dq_len[DQ];
  logic [15:0] dq_off[DQ];
  logic [$clog2(DQ):0] dq_n, dq_i;
  logic [15:0] tx_bytes;          // bytes of the open transaction
  logic have_last;                // all its requests are in
  logic [WRW:0] wr_head, wr_tail; // rows written, rows freed (one bit more than the ring)
  logic [WRW:0] tx_row0;          // the transaction's first row
  logic [WRW:0] tx_rows_n;        // its rows
  logic data_in;                  // its data went into the RAM
  // Transactions whose last descriptor is out: their end row, in order.
  localparam int OQ = 16;
  logic [WRW:0] oq_end[OQ];
  logic [DMA_TAG_WIDTH-1:0] oq_tag[OQ];
  logic [$clog2(OQ):0] oq_wr, oq_rd;
  logic [DMA_TAG_WIDTH-1:0] wtag;
  logic [31:0] werr, rerr;  // statuses with an error
  assign error_count = werr + rerr;

  wire [WRW:0] rows_needed = (WRW + 1)'((32'(tx_bytes) + NB - 1) >> LB);
  logic [WRW:0] wr_used;
  assign wr_used = wr_head - wr_tail;
  wire wr_room = 32'(WR_ROWS) - 32'(wr_used) >= 32'(rows_needed);
  wire oq_full = oq_wr - oq_rd == OQ[$clog2(OQ):0];

  assign s_wr_ready = !have_last && dq_n < DQ[$clog2(DQ):0];
  assign s_axis_wr_tready = have_last && !data_in && wr_room && !oq_full;
  assign wr_we = s_axis_wr_tvalid && s_axis_wr_tready;
  assign wr_waddr = wr_head[WRW-1:0];
  assign wr_wdata = s_axis_wr_tdata;

  assign m_axis_dma_write_desc_dma_addr = DMA_ADDR_WIDTH'(dq_addr[dq_i[$clog2(DQ)-1:0]]);
  assign m_axis_dma_write_desc_ram_sel = '0;
  assign m_axis_dma_write_desc_ram_addr = RAM_ADDR_WIDTH'(32'(tx_row0[WRW-1:0]) * NB +
                                                         32'(dq_off[dq_i[$clog2(DQ)-1:0]]));
  assign m_axis_dma_write_desc_len = DMA_LEN_WIDTH'(dq_len[dq_i[$clog2(DQ)-1:0]]);
  assign m_axis_dma_write_desc_tag = wtag;
  assign m_axis_dma_write_desc_valid = data_in && dq_i < dq_n;

  always_ff @(posedge clk) begin
    if (rst) begin
      dq_n <= '0;
      dq_i <= '0;
      tx_bytes <= '0;
      have_last <= 1'b0;
      wr_head <= '0;
      wr_tail <= '0;
      tx_row0 <= '0;
      tx_rows_n <= '0;
      data_in <= 1'b0;
      oq_wr <= '0;
      oq_rd <= '0;
      wtag <= '0;
      werr <= '0;
    end else begin
      if (s_wr_valid && s_wr_ready) begin
        dq_addr[dq_n[$clog2(DQ)-1:0]] <= s_wr_addr;
        dq_len[dq_n[$clog2(DQ)-1:0]] <= s_wr_len;
        dq_off[dq_n[$clog2(DQ)-1:0]] <= tx_bytes;
        dq_n <= dq_n + 1'b1;
        tx_bytes <= tx_bytes + s_wr_len;
        if (s_wr_last) begin
          have_last <= 1'b1;
          tx_row0 <= wr_head;
        end
      end
      if (wr_we) begin
        wr_head <= wr_head + 1'b1;
        if (s_axis_wr_tlast) begin
          data_in <= 1'b1;
          dq_i <= '0;
          tx_rows_n <= wr_head + 1'b1 - tx_row0;
        end
      end
      if (m_axis_dma_write_desc_valid && m_axis_dma_write_desc_ready) begin
        wtag <= wtag + 1'b1;
        dq_i <= dq_i + 1'b1;
        if (dq_i + 1'b1 == dq_n) begin
          // the transaction is out: its rows come back with its last status
          oq_end[oq_wr[$clog2(OQ)-1:0]] <= tx_row0 + tx_rows_n;
          oq_tag[oq_wr[$clog2(OQ)-1:0]] <= wtag;
          oq_wr <= oq_wr + 1'b1;
          dq_n <= '0;
          tx_bytes <= '0;
          have_last <= 1'b0;
          data_in <= 1'b0;
        end
      end
      if (s_axis_dma_write_desc_status_valid) begin
        if (s_axis_dma_write_desc_status_error != 0) werr <= werr + 1'b1;
        if (oq_wr != oq_rd && s_axis_dma_write_desc_status_tag == oq_tag[oq_rd[$clog2(OQ)-1:0]])
        begin
          wr_tail <= oq_end[oq_rd[$clog2(OQ)-1:0]];
          oq_rd <= oq_rd + 1'b1;
        end
      end
    end
  end

  // ---- read path: one read at a time into row 0 of the read RAM --------------------------------
  typedef enum logic [1:0] {
    R_IDLE,
    R_DESC,
    R_WAIT,
    R_OUT
  } rst_t;
  rst_t rs;
  logic [63:0] r_addr;
  logic [15:0] r_len, r_sent;
  logic [RDW:0] r_row;
  logic r_ev;
  logic [DMA_TAG_WIDTH-1:0] rtag;

  assign s_rd_ready = rs == R_IDLE;
  assign m_axis_dma_read_desc_dma_addr = DMA_ADDR_WIDTH'(r_addr);
  assign m_axis_dma_read_desc_ram_sel = RAM_SEL_WIDTH'(1);
  assign m_axis_dma_read_desc_ram_addr = '0;
  assign m_axis_dma_read_desc_len = DMA_LEN_WIDTH'(r_len);
  assign m_axis_dma_read_desc_tag = rtag;
  assign m_axis_dma_read_desc_valid = rs == R_DESC;

  // A row held at the output is read again while it waits.
  assign rram_raddr = RDW'(rs == R_OUT && r_ev && !m_axis_rd_tready ? r_row - 1'b1 : r_row);
  assign m_axis_rd_tdata = rram_rd;
  assign m_axis_rd_tvalid = rs == R_OUT && r_ev;
  assign m_axis_rd_tlast = r_sent + 16'(NB) >= r_len;
  always_comb
    for (int j = 0; j < NB; j++) m_axis_rd_tkeep[j] = r_sent + 16'(j) < r_len;

  always_ff @(posedge clk) begin
    if (rst) begin
      rs <= R_IDLE;
      r_addr <= '0;
      r_len <= '0;
      r_sent <= '0;
      r_row <= '0;
      r_ev <= 1'b0;
      rtag <= '0;
      rerr <= '0;
    end else begin
      case (rs)
        R_IDLE:
        if (s_rd_valid) begin
          r_addr <= s_rd_addr;
          r_len <= s_rd_len;
          rs <= R_DESC;
        end
        R_DESC: if (m_axis_dma_read_desc_ready) rs <= R_WAIT;
        R_WAIT:
        if (s_axis_dma_read_desc_status_valid && s_axis_dma_read_desc_status_tag == rtag) begin
          if (s_axis_dma_read_desc_status_error != 0) rerr <= rerr + 1'b1;
          rtag <= rtag + 1'b1;
          r_row <= '0;
          r_sent <= '0;
          r_ev <= 1'b0;
          rs <= R_OUT;
        end
        default: begin  // R_OUT
          if (!r_ev) begin
            r_row <= r_row + 1'b1;
            r_ev <= 1'b1;
          end else if (m_axis_rd_tready) begin
            r_sent <= r_sent + 16'(NB);
            if (m_axis_rd_tlast) begin
              r_ev <= 1'b0;
              rs <= R_IDLE;
            end else r_row <= r_row + 1'b1;
          end
        end
      endcase
    end
  end

  // The select lines carry nothing (see the top); a write transaction's data fills whole rows.
  // Segment addresses above the RAMs' rows are not decoded (the engine stays inside them).
  wire unused_ok = &{1'b0, ram_wr_cmd_sel, ram_rd_cmd_sel, s_axis_wr_tkeep, ram_wr_cmd_addr,
                     ram_rd_cmd_addr};
endmodule

`resetall
