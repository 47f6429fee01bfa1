// cleave_flow_lookup.sv - the flow table's index: key -> flow id, by hash buckets and chains.
//
// BUCKETS heads of chains (a power of two, at least twice MAX_FLOWS, as the model sizes its
// hash) in one block RAM, and one entry per flow id (its key and the next id in its chain) in
// another. A flow is linked at the head of its bucket's chain. Operations, one at a time:
//   LOOKUP key     -> hit and the flow id (3 cycles when the first entry matches, +1 a hop)
//   INSERT id, key    links flow `id`; the caller has checked that the key is absent and the
//                     id unused (the engine looks the key up first, as the model's flow_add does)
//   REMOVE id         unlinks flow `id` (which must be linked)
// After reset the buckets are cleared, one a cycle (s_req_ready stays low meanwhile).
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_flow_lookup #(
    // Flow ids 0 .. MAX_FLOWS-1
    parameter int MAX_FLOWS = 1024,
    // Hash buckets: a power of two >= 2 * MAX_FLOWS
    parameter int BUCKETS = 2048,
    parameter int FW = MAX_FLOWS > 1 ? $clog2(MAX_FLOWS) : 1
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic            s_req_valid,
    output logic                 s_req_ready,
    input  wire logic [     1:0] s_req_op,     // 0 lookup, 1 insert, 2 remove
    input  wire flow_key_t       s_req_key,
    input  wire logic [FW-1:0]   s_req_id,

    output logic          m_rsp_valid,  // one cycle; no backpressure
    output logic          m_rsp_hit,
    output logic [FW-1:0] m_rsp_id
);
  `include "cleave_crc_tables.vh"

  localparam int BW = $clog2(BUCKETS);
  localparam logic [1:0] OP_INSERT = 2'd1, OP_REMOVE = 2'd2;  // else lookup

  initial begin
    if (MAX_FLOWS < 2) $error("MAX_FLOWS must be at least 2");
    if (BUCKETS < 2 * MAX_FLOWS || (BUCKETS & (BUCKETS - 1)) != 0)
      $error("BUCKETS must be a power of two >= 2 * MAX_FLOWS");
  end

  // Bucket: valid, head id. Entry: key, next valid, next id.
  typedef struct packed {
    logic v;
    logic [FW-1:0] id;
  } link_t;
  typedef struct packed {
    flow_key_t key;
    link_t next;
  } entry_t;

  // CRC-32 of the key; the buckets take its low bits.
  /* verilator lint_off UNUSEDSIGNAL */
  function automatic logic [BW-1:0] hash(input flow_key_t k);
    logic [31:0] h;
    h = crc32_beat_128(32'd0, {6'd0, k});
    hash = h[BW-1:0];
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */

  typedef enum logic [2:0] {
    INIT,
    IDLE,
    LK_BUCKET,   // bucket read issued
    LK_ENTRY,    // entry read issued
    INS_BUCKET,
    RM_ENTRY,    // the removed flow's entry read issued
    RM_BUCKET,
    RM_WALK
  } state_t;

  typedef struct packed {
    state_t st;
    logic [BW-1:0] init_addr;
    flow_key_t key;
    logic [FW-1:0] id;     // INSERT/REMOVE: the flow
    logic [FW-1:0] cur;    // walk position
    link_t rm_next;        // REMOVE: the removed flow's successor
    logic [BW-1:0] bucket;
  } regs_t;

  regs_t r, n;
  link_t bucket_rd;
  entry_t entry_rd;
  logic b_we, e_we;
  logic [BW-1:0] b_waddr, b_raddr;
  link_t b_wdata;
  logic [FW-1:0] e_waddr, e_raddr;
  entry_t e_wdata;

  cleave_ram #(
      .DEPTH(BUCKETS),
      .WIDTH(FW + 1)
  ) u_buckets (
      .clk(clk),
      .wr_en(b_we),
      .wr_addr(b_waddr),
      .wr_data(b_wdata),
      .rd_addr(b_raddr),
      .rd_data(bucket_rd)
  );
  cleave_ram #(
      .DEPTH(MAX_FLOWS),
      .WIDTH($bits(e_wdata))
  ) u_entries (
      .clk(clk),
      .wr_en(e_we),
      .wr_addr(e_waddr),
      .wr_data(e_wdata),
      .rd_addr(e_raddr),
      .rd_data(entry_rd)
  );

  // Hashes outside the state machine (Yosys infers latches for function locals in branches).
  logic [BW-1:0] req_hash, rd_hash;
  assign req_hash = hash(s_req_key);
  assign rd_hash  = hash(entry_rd.key);

  always_comb begin
    n = r;
    s_req_ready = 1'b0;
    m_rsp_valid = 1'b0;
    m_rsp_hit = 1'b0;
    m_rsp_id = '0;
    b_we = 1'b0;
    b_waddr = '0;
    b_wdata = '0;
    b_raddr = '0;
    e_we = 1'b0;
    e_waddr = '0;
    e_wdata = '0;
    e_raddr = '0;
    case (r.st)
      INIT: begin
        b_we = 1'b1;
        b_waddr = r.init_addr;
        n.init_addr = r.init_addr + 1'b1;
        if (r.init_addr == BW'(BUCKETS - 1)) n.st = IDLE;
      end
      IDLE: begin
        s_req_ready = 1'b1;
        if (s_req_valid) begin
          n.key = s_req_key;
          n.id = s_req_id;
          n.bucket = req_hash;
          b_raddr = req_hash;
          e_raddr = s_req_id;
          case (s_req_op)
            OP_INSERT: n.st = INS_BUCKET;
            OP_REMOVE: n.st = RM_ENTRY;
            default: n.st = LK_BUCKET;
          endcase
        end
      end
      LK_BUCKET: begin
        if (!bucket_rd.v) begin
          m_rsp_valid = 1'b1;
          n.st = IDLE;
        end else begin
          e_raddr = bucket_rd.id;
          n.cur = bucket_rd.id;
          n.st = LK_ENTRY;
        end
      end
      LK_ENTRY: begin
        if (entry_rd.key == r.key) begin
          m_rsp_valid = 1'b1;
          m_rsp_hit = 1'b1;
          m_rsp_id = r.cur;
          n.st = IDLE;
        end else if (!entry_rd.next.v) begin
          m_rsp_valid = 1'b1;
          n.st = IDLE;
        end else begin
          e_raddr = entry_rd.next.id;
          n.cur = entry_rd.next.id;
        end
      end
      INS_BUCKET: begin
        e_we = 1'b1;
        e_waddr = r.id;
        e_wdata.key = r.key;
        e_wdata.next = bucket_rd;
        b_we = 1'b1;
        b_waddr = r.bucket;
        b_wdata.v = 1'b1;
        b_wdata.id = r.id;
        m_rsp_valid = 1'b1;
        m_rsp_hit = 1'b1;
        m_rsp_id = r.id;
        n.st = IDLE;
      end
      RM_ENTRY: begin
        n.key = entry_rd.key;
        n.rm_next = entry_rd.next;
        n.bucket = rd_hash;
        b_raddr = rd_hash;
        n.st = RM_BUCKET;
      end
      RM_BUCKET: begin
        if (bucket_rd.v && bucket_rd.id == r.id) begin
          b_we = 1'b1;
          b_waddr = r.bucket;
          b_wdata = r.rm_next;
          m_rsp_valid = 1'b1;
          m_rsp_hit = 1'b1;
          m_rsp_id = r.id;
          n.st = IDLE;
        end else if (!bucket_rd.v) begin
          m_rsp_valid = 1'b1;  // not linked: nothing to do
          n.st = IDLE;
        end else begin
          e_raddr = bucket_rd.id;
          n.cur = bucket_rd.id;
          n.st = RM_WALK;
        end
      end
      RM_WALK: begin
        if (entry_rd.next.v && entry_rd.next.id == r.id) begin
          e_we = 1'b1;
          e_waddr = r.cur;
          e_wdata.key = entry_rd.key;
          e_wdata.next = r.rm_next;
          m_rsp_valid = 1'b1;
          m_rsp_hit = 1'b1;
          m_rsp_id = r.id;
          n.st = IDLE;
        end else if (!entry_rd.next.v) begin
          m_rsp_valid = 1'b1;
          n.st = IDLE;
        end else begin
          e_raddr = entry_rd.next.id;
          n.cur = entry_rd.next.id;
        end
      end
      default: n.st = IDLE;
    endcase
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      r <= '0;
      r.st <= INIT;
    end else begin
      r <= n;
    end
  end
endmodule

`resetall
