// cleave_rx_engine.sv - the NIC's tables and decisions: flow lookup, placement, commands.
//
// The model's NicModel::rx() and its driver commands, one item at a time, as a state machine
// over block RAMs: the flow table (one wide entry per flow: mode, cursor, MS-list head and
// tail, the byte-stream hint, RoCE contexts, READ-sink chunk), its hash index
// (cleave_flow_lookup), the MR table, MS entries in chunks of MS_CHUNK with their chunk links,
// committed chunks per flow plus a shared store. For every frame's rx_meta_t it emits one
// rx_dec_t: the model's RxEntry (decision, reason, sequence, lengths, checksum statuses,
// trimmed, placed, message number) and up to four fragments with their DMA addresses; the
// payload bytes themselves are moved by cleave_rx_out. For every command (CMD record) it
// answers the model's Err and counts it as the model does.
//
// Where the RTL differs from the model and why it cannot be seen from outside: chunk ids are
// allocated in another order (store chunks are handed out first from a free list, then never
// used ones in order, so reset needs no walk over the store), and the model's message-lookup
// hint is not kept (a message is found by hopping chunks from the head). Flow ids are 24 bits
// wide (the RX completion's), so FLOW_ADD cannot name the model's kNoFlow.
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_rx_engine #(
    // Flow ids 0 .. MAX_FLOWS-1 (at most 2^24)
    parameter int MAX_FLOWS = 1024,
    // Hash buckets of the flow index: a power of two >= 2 * MAX_FLOWS
    parameter int BUCKETS = 2048,
    // MR ids 0 .. MAX_MRS-1 (at most 2^16)
    parameter int MAX_MRS = 256,
    // MS entries per chunk (a power of two), committed per flow and in the shared store
    // (multiples of MS_CHUNK; at least one committed chunk per flow)
    parameter int MS_CHUNK = 16,
    parameter int MS_COMMITTED = 32,
    parameter int MS_STORE = 4096,
    // Check TCP/UDP checksums, the ICRC and the Solar CRC (the model's verify_l4_checksum)
    parameter bit VERIFY_L4 = 1'b1,
    // Put the MS entries and the flow table in UltraRAM
    parameter bit ULTRA = 1'b0,
    // MR id bits the tables use
    parameter int MW = MAX_MRS > 1 ? $clog2(MAX_MRS) : 1
) (
    input wire logic clk,
    input wire logic rst,

    // Frames, as the parser saw them
    input  wire rx_meta_t s_meta,
    input  wire logic     s_meta_valid,
    output logic          s_meta_ready,

    // Decisions, one per frame, in order
    output rx_dec_t m_dec,
    output logic    m_dec_valid,
    input  wire logic m_dec_ready,

    // Commands (CMD record) and their answers
    input  wire logic         s_cmd_valid,
    output logic              s_cmd_ready,
    input  wire logic [255:0] s_cmd_data,
    output logic              m_rsp_valid,
    output logic [7:0]        m_rsp_err,
    output logic [15:0]       m_rsp_mr,
    output logic [31:0]       m_rsp_ms_count,
    output logic [31:0]       m_rsp_cursor,
    output logic [31:0]       m_rsp_read_count,

    // The MR table as the TX path reads it: used, IOVA base, length (one cycle of latency;
    // ids >= MAX_MRS read anything)
    input  wire logic [MW-1:0] tx_mr_addr,
    output logic [104:0]      tx_mr_data,

    // Counter increments from the TX path (index, amount), up to four a cycle
    input  wire logic [3:0]   tx_inc_en,
    input  wire logic [31:0]  tx_inc_idx,
    input  wire logic [127:0] tx_inc_amt,

    // Counters by index (combinational), table state
    input  wire logic [7:0]  ctr_sel,
    output logic      [63:0] ctr_value,
    output logic      [31:0] flows_in_use,
    output logic      [31:0] store_free,
    output logic             busy
);
  `include "cleave_nic_defs.vh"

  // ---- geometry --------------------------------------------------------------------------
  localparam int K = MS_CHUNK;
  localparam int KB = $clog2(K);
  localparam int KW = KB + 1;  // an index 0..K
  localparam int CPF = MS_COMMITTED / K;  // committed chunks per flow
  localparam int COMMITTED_CHUNKS = MAX_FLOWS * CPF;
  localparam int STORE_CHUNKS = MS_STORE / K;
  localparam int TOTAL_CHUNKS = COMMITTED_CHUNKS + STORE_CHUNKS;
  localparam int CW = $clog2(TOTAL_CHUNKS + 1);
  localparam int FW = MAX_FLOWS > 1 ? $clog2(MAX_FLOWS) : 1;
  localparam int INIT_N = MAX_FLOWS > MAX_MRS ? MAX_FLOWS : MAX_MRS;

  initial begin
    if (MAX_FLOWS < 2 || MAX_FLOWS > (1 << 24)) $error("MAX_FLOWS must be 2 .. 2^24");
    if (MAX_MRS < 2 || MAX_MRS > (1 << 16)) $error("MAX_MRS must be 2 .. 2^16");
    if (K < 2 || (K & (K - 1)) != 0) $error("MS_CHUNK must be a power of two >= 2");
    if (MS_COMMITTED < K || MS_COMMITTED % K != 0)
      $error("MS_COMMITTED must be a positive multiple of MS_CHUNK");
    if (MS_STORE % K != 0) $error("MS_STORE must be a multiple of MS_CHUNK");
  end

  // ---- table entries -----------------------------------------------------------------------
  typedef struct packed {
    logic [15:0] mr;
    logic [47:0] off;
    logic [31:0] len;  // 0: retired out of order (a tombstone)
    logic [31:0] msg;  // READ sinks: bit 31 live, 23..0 first PSN
  } ms_t;

  typedef struct packed {
    logic v;
    logic [CW-1:0] c;
  } link_t;

  typedef struct packed {
    logic used;
    logic [63:0] base;
    logic [39:0] len;
    logic [31:0] owner;
    logic [15:0] tag;
    logic [1:0] access;
    logic [31:0] refs;  // posted MSs and READ sinks pointing into it
  } mr_t;

  typedef struct packed {
    logic valid;
    logic chained;
    logic end_known;
    logic [23:0] first_psn;
    logic [23:0] next_psn;
    logic [23:0] end_psn;
    logic [15:0] mr;
    logic [15:0] tag;
    logic [63:0] base;
    logic [31:0] limit;
    logic [31:0] msg;
  } ctx_t;

  typedef struct packed {
    logic used;
    logic [1:0] parser;
    logic mode;
    logic reliable;
    logic messages;
    logic [3:0] pmtu_log2;
    logic [31:0] owner;
    logic [31:0] cursor;
    logic [63:0] head_pos;
    logic head_v;
    logic [CW-1:0] head_chunk;
    logic [KW-1:0] head_idx;
    logic tail_v;
    logic [CW-1:0] tail_chunk;
    logic [KW-1:0] tail_idx;
    logic [31:0] ms_count;
    logic [63:0] list_bytes;
    logic [CPF-1:0] priv_free;
    logic hint_v;
    logic [CW-1:0] hint_chunk;
    logic [KW-1:0] hint_idx;
    logic [63:0] hint_dist;
    logic msg_dense;
    ctx_t send_ctx;
    ctx_t write_ctx;
    logic next_start_known;
    logic [23:0] next_start_psn;
    logic [31:0] next_msg;
    logic selrep;  // RoCE: selective repeat; clear: go-back-N, placed only at `exp_psn`
    logic [23:0] exp_psn;  // go-back-N: the PSN of the next request the NIC may place
    logic read_v;
    logic [CW-1:0] read_chunk;
  } flow_t;

  // RoCE opcodes by their low five bits: what the packet carries (the model's kRoceOps).
  localparam logic [2:0] K_SEND = 3'd0, K_WRITE = 3'd1, K_READRESP = 3'd2, K_NODATA = 3'd3,
      K_UNSUP = 3'd4, K_READREQ = 3'd5;
  typedef struct packed {
    logic [2:0] kind;
    logic first;
    logic last;
    logic [4:0] ext;
  } rop_t;

  function automatic rop_t rc_op(input logic [4:0] opcode);
    case (opcode)
      5'h00: rc_op = {K_SEND, 1'b1, 1'b0, 5'd0};
      5'h01: rc_op = {K_SEND, 1'b0, 1'b0, 5'd0};
      5'h02: rc_op = {K_SEND, 1'b0, 1'b1, 5'd0};
      5'h03: rc_op = {K_SEND, 1'b0, 1'b1, 5'd4};
      5'h04: rc_op = {K_SEND, 1'b1, 1'b1, 5'd0};
      5'h05: rc_op = {K_SEND, 1'b1, 1'b1, 5'd4};
      5'h06: rc_op = {K_WRITE, 1'b1, 1'b0, 5'd16};
      5'h07: rc_op = {K_WRITE, 1'b0, 1'b0, 5'd0};
      5'h08: rc_op = {K_WRITE, 1'b0, 1'b1, 5'd0};
      5'h09: rc_op = {K_WRITE, 1'b0, 1'b1, 5'd4};
      5'h0A: rc_op = {K_WRITE, 1'b1, 1'b1, 5'd16};
      5'h0B: rc_op = {K_WRITE, 1'b1, 1'b1, 5'd20};
      5'h0C: rc_op = {K_READREQ, 1'b1, 1'b1, 5'd16};
      5'h0D: rc_op = {K_READRESP, 1'b1, 1'b0, 5'd4};
      5'h0E: rc_op = {K_READRESP, 1'b0, 1'b0, 5'd0};
      5'h0F: rc_op = {K_READRESP, 1'b0, 1'b1, 5'd4};
      5'h10: rc_op = {K_READRESP, 1'b1, 1'b1, 5'd4};
      5'h11: rc_op = {K_NODATA, 1'b0, 1'b0, 5'd4};
      5'h12: rc_op = {K_NODATA, 1'b0, 1'b0, 5'd12};
      // What the transport does not implement (atomics, SEND with invalidate): never placed.
      5'h13: rc_op = {K_UNSUP, 1'b1, 1'b1, 5'd28};
      5'h14: rc_op = {K_UNSUP, 1'b1, 1'b1, 5'd28};
      5'h16: rc_op = {K_UNSUP, 1'b0, 1'b1, 5'd4};
      5'h17: rc_op = {K_UNSUP, 1'b1, 1'b1, 5'd4};
      default: rc_op = {K_UNSUP, 1'b0, 1'b0, 5'd0};
    endcase
  endfunction

  // ---- state -------------------------------------------------------------------------------
  typedef enum logic [7:0] {
    S_INIT,
    S_IDLE,
    // a frame
    S_RX_START,
    S_RX_LK,
    S_RX_LK_WAIT,
    S_RX_FLOW,
    S_RX_TCP,
    S_TCP_OPT,
    S_TCP_POS,
    S_RX_UDP,
    S_RX_SOLAR,
    S_ROCE0,
    S_ROCE1,
    S_ROCE_MR1,
    S_ROCE2,
    S_ROCE3,
    S_ROCE_MR2,
    S_READ_RD,
    S_READ_CHK,
    // placement
    S_STREAM,
    S_STR_WALK,
    S_STR_WLINK,
    S_STR_FRAG,
    S_STR_FLINK,
    S_STR_FENT,
    S_MSG_GOT,
    S_UNREL,
    S_UNREL_HEAD,
    S_UNREL_GOT,
    S_WF_RD,
    S_WF_CHK,
    S_FINISH,
    S_OUT,
    // find_message
    S_FIND,
    S_FIND_HEAD,
    S_FIND_HOP,
    S_FIND_ENT,
    S_FIND_SCAN,
    S_FIND_SLINK,
    // pop_head, drop_tombstones, chunk_alloc, MR reference counts
    S_POP,
    S_POP_E,
    S_POP_MR,
    S_POP_TAIL,
    S_POP_LINK,
    S_DT,
    S_DT_E,
    S_ALLOC,
    S_ALLOC_LINK,
    S_REF,
    S_REF_W,
    // commands
    S_CMD,
    S_CMD_FLOW,
    S_CMD_GO,
    S_MRA_RD,
    S_MRA_CHK,
    S_MRR_CHK,
    S_FA_CHK,
    S_FA_LK,
    S_FA_INS,
    S_FA_INS2,
    S_FR_POP,
    S_FR_REL,
    S_FR_REL_E,
    S_FR_REL_W,
    S_FR_RM,
    S_MP_MR,
    S_MP_TAIL,
    S_MP_ALLOC,
    S_MP_WRITE,
    S_RT_WALK,
    S_RT_WLINK,
    S_RT_POP,
    S_RM_FIND,
    S_RM_REF,
    S_RP_MR,
    S_RP_SCAN,
    S_RP_SCAN_E,
    S_RP_ALLOC,
    S_RP_ZERO,
    S_RP_WRITE,
    S_RR_SCAN,
    S_RR_SCAN_E,
    S_RR_DONE,
    S_RK_MR,
    S_Q_SCAN,
    S_Q_SCAN_E,
    S_CMD_DONE,
    S_CMD_RSP
  } st_t;

  typedef struct packed {
    st_t st;
    logic [31:0] init_cnt;
    // the item
    rx_meta_t meta;
    rx_dec_t out;
    logic [255:0] cmd;
    logic [FW-1:0] fid;
    logic fid_v;
    flow_t f;
    logic [1:0] lk_step;
    // temporaries
    ms_t e;
    mr_t mr;
    logic [CW-1:0] ch;
    logic [KW-1:0] idx;
    logic [63:0] start;
    logic [63:0] sdist;
    logic [31:0] len;
    logic [31:0] left;
    logic [63:0] inn;
    logic [2:0] nfr;
    logic [2:0] wf_i;
    logic [31:0] wf_sum;
    logic x_msg;
    logic x_unrel;
    // TCP message option scan
    logic [7:0] opt_i;
    logic opt_found;
    logic [31:0] opt_num;
    logic [31:0] opt_start;
    logic [31:0] opt_len;
    logic [31:0] seq1;  // TCP seq, +1 on SYN
    // find_message
    logic [31:0] msg;
    logic [31:0] fk;
    logic [31:0] fpos;
    logic found;
    logic [CW-1:0] fch;
    logic [KW-1:0] fidx;
    // RoCE
    logic [23:0] psn;
    logic x_gbn;  // a go-back-N request: `exp_psn` passes it when placed or without payload
    logic [23:0] gbn_span;  // the PSNs it takes
    logic is_send;
    logic at_start;
    ctx_t nctx;
    logic [63:0] at;
    logic [31:0] rkey;
    logic [KW-1:0] ri;
    // loops and returns
    logic [31:0] cnt;
    logic pl_adv;  // S_POP_LINK: the head moves to the next chunk first
    logic [31:0] pos32;
    logic [15:0] ref_mr;
    logic ref_up;
    logic a_v;
    logic [CW-1:0] a_c;
    logic [KW-1:0] free_i;
    logic free_v;
    logic live;
    st_t ret_find;
    st_t ret_pop;
    st_t ret_dt;
    st_t ret_alloc;
    st_t ret_ref;
    // command answer
    logic [7:0] err;
    logic count_it;
    logic [15:0] rsp_mr;
    logic [31:0] q_ms;
    logic [31:0] q_cursor;
    logic [31:0] q_reads;
    // tables
    logic [31:0] flows_in_use;
    logic store_head_v;
    logic [CW-1:0] store_head;
    logic [CW:0] store_bump;
    logic [31:0] store_free;
  } regs_t;

  regs_t r, n;

  // ---- memories ----------------------------------------------------------------------------
  flow_t fs_rd, fs_wdata;
  logic fs_we;
  logic [FW-1:0] fs_raddr, fs_waddr;
  ms_t ms_rd, ms_wdata;
  logic ms_we;
  logic [CW+KB-1:0] ms_raddr, ms_waddr;
  link_t ln_rd, ln_wdata;
  logic ln_we;
  logic [CW-1:0] ln_raddr, ln_waddr;
  mr_t mr_rd, mr_wdata;
  logic mr_we, mrv_we;
  logic [MW-1:0] mr_raddr, mr_waddr;

  cleave_ram #(
      .DEPTH(MAX_FLOWS),
      .WIDTH($bits(fs_wdata)),
      .ULTRA(ULTRA)
  ) u_flows (
      .clk(clk),
      .wr_en(fs_we),
      .wr_addr(fs_waddr),
      .wr_data(fs_wdata),
      .rd_addr(fs_raddr),
      .rd_data(fs_rd)
  );
  cleave_ram #(
      .DEPTH(TOTAL_CHUNKS * K),
      .WIDTH($bits(ms_wdata)),
      .ULTRA(ULTRA)
  ) u_ms (
      .clk(clk),
      .wr_en(ms_we),
      .wr_addr(ms_waddr),
      .wr_data(ms_wdata),
      .rd_addr(ms_raddr),
      .rd_data(ms_rd)
  );
  cleave_ram #(
      .DEPTH(TOTAL_CHUNKS),
      .WIDTH($bits(ln_wdata))
  ) u_links (
      .clk(clk),
      .wr_en(ln_we),
      .wr_addr(ln_waddr),
      .wr_data(ln_wdata),
      .rd_addr(ln_raddr),
      .rd_data(ln_rd)
  );
  cleave_ram #(
      .DEPTH(MAX_MRS),
      .WIDTH($bits(mr_wdata))
  ) u_mrs (
      .clk(clk),
      .wr_en(mr_we),
      .wr_addr(mr_waddr),
      .wr_data(mr_wdata),
      .rd_addr(mr_raddr),
      .rd_data(mr_rd)
  );
  // The TX path's copy: used, base, length (written with the MR table's adds and removes).
  logic [104:0] mrv_rd;
  cleave_ram #(
      .DEPTH(MAX_MRS),
      .WIDTH(105)
  ) u_mr_tx (
      .clk(clk),
      .wr_en(mrv_we),
      .wr_addr(mr_waddr),
      .wr_data({mr_wdata.used, mr_wdata.base, mr_wdata.len}),
      .rd_addr(tx_mr_addr),
      .rd_data(mrv_rd)
  );
  assign tx_mr_data = mrv_rd;  // the TX path checks the id against MAX_MRS itself

  // ---- the flow index ----------------------------------------------------------------------
  logic lk_valid, lk_ready, lk_rsp_valid, lk_rsp_hit;
  logic [1:0] lk_op;
  flow_key_t lk_key;
  logic [FW-1:0] lk_id, lk_rsp_id;
  cleave_flow_lookup #(
      .MAX_FLOWS(MAX_FLOWS),
      .BUCKETS  (BUCKETS)
  ) u_lookup (
      .clk(clk),
      .rst(rst),
      .s_req_valid(lk_valid),
      .s_req_ready(lk_ready),
      .s_req_op(lk_op),
      .s_req_key(lk_key),
      .s_req_id(lk_id),
      .m_rsp_valid(lk_rsp_valid),
      .m_rsp_hit(lk_rsp_hit),
      .m_rsp_id(lk_rsp_id)
  );

  // ---- counters ----------------------------------------------------------------------------
  localparam int NINC = 6;
  logic [NINC-1:0] inc_en;
  logic [8*NINC-1:0] inc_idx;
  logic [32*NINC-1:0] inc_amt;
  logic [64*CTR_COUNT-1:0] ctr, ctr_next;

  always_comb begin
    ctr_next = ctr;
    for (int c = 0; c < CTR_COUNT; c++) begin
      for (int i = 0; i < NINC; i++)
        if (inc_en[i] && 32'(inc_idx[8*i+:8]) == c)
          ctr_next[64*c+:64] = ctr_next[64*c+:64] + {32'd0, inc_amt[32*i+:32]};
      for (int i = 0; i < 4; i++)
        if (tx_inc_en[i] && 32'(tx_inc_idx[8*i+:8]) == c)
          ctr_next[64*c+:64] = ctr_next[64*c+:64] + {32'd0, tx_inc_amt[32*i+:32]};
    end
  end
  always_ff @(posedge clk) ctr <= rst ? '0 : ctr_next;
  assign ctr_value = 32'(ctr_sel) < CTR_COUNT ? ctr[64*ctr_sel+:64] : 64'd0;

  assign flows_in_use = r.flows_in_use;
  assign store_free = r.store_free;
  assign busy = r.st != S_IDLE;

  // ---- combinational helpers (outside the state machine: no function locals in branches) --
  // RC opcodes; UC (service 1) has SEND and WRITE only; other services nothing.
  rop_t rc, op;
  assign rc = rc_op(r.meta.l7[4:0]);
  assign op = r.meta.l7[7:5] == 3'd0 || (r.meta.l7[7:5] == 3'd1 && (rc.kind == K_SEND ||
      rc.kind == K_WRITE)) ? rc : {K_UNSUP, 1'b0, 1'b0, 5'd0};

  // A 24-bit PSN difference a - b is negative.
  function automatic logic psn_neg(input logic [23:0] a, input logic [23:0] b);
    psn_neg = 1'(24'(a - b) >> 23);
  endfunction

  // The committed chunk c of flow `fid` (its bitmap bit) and the lowest free one.
  logic [CW-1:0] priv_base;
  logic [CPF-1:0] priv_low;  // lowest set bit of f.priv_free, one-hot
  logic [CW-1:0] priv_pick;
  always_comb begin
    priv_base = CW'(32'(r.fid) * CPF);
    priv_low = r.f.priv_free & (~r.f.priv_free + 1'b1);
    priv_pick = priv_base;
    for (int i = CPF - 1; i >= 0; i--) if (r.f.priv_free[i]) priv_pick = priv_base + CW'(i);
  end

  // Fields of the command being run.
  logic [7:0] c_op, c_arg8;
  logic [15:0] c_arg16;
  logic [23:0] c_flow;
  logic [1:0] c_parser;
  logic c_mode, c_reliable, c_messages, c_selrep;
  logic [31:0] c_w2, c_w3, c_w4, c_w5, c_w6, c_w7;
  logic c_numbered;  // FLOW_ADD of a flow found by number: a RoCE QP, a Solar connection
  logic [23:0] c_number;
  always_comb begin
    c_op = r.cmd[CMD_OPCODE_LSB+:CMD_OPCODE_W];
    c_arg8 = r.cmd[CMD_ARG8_LSB+:CMD_ARG8_W];
    c_arg16 = r.cmd[CMD_ARG16_LSB+:CMD_ARG16_W];
    c_flow = r.cmd[CMD_FLOW_LSB+:CMD_FLOW_W];
    c_parser = r.cmd[CMD_FPARSER_LSB+:CMD_FPARSER_W];
    c_mode = r.cmd[CMD_FMODE_LSB];
    c_reliable = r.cmd[CMD_FRELIABLE_LSB];
    c_messages = r.cmd[CMD_FMESSAGES_LSB];
    c_selrep = r.cmd[CMD_FSELREP_LSB];
    c_w2 = r.cmd[CMD_W2_LSB+:32];
    c_w3 = r.cmd[CMD_W3_LSB+:32];
    c_w4 = r.cmd[CMD_W4_LSB+:32];
    c_w5 = r.cmd[CMD_W5_LSB+:32];
    c_w6 = r.cmd[CMD_W6_LSB+:32];
    c_w7 = r.cmd[CMD_W7_LSB+:32];
    c_numbered = c_parser == PARSER_ROCE || c_parser == PARSER_SOLAR;
    c_number = c_parser == PARSER_ROCE ? c_w7[23:0] :
        c_parser == PARSER_SOLAR ? c_w5[23:0] : 24'd0;
  end

  // The TCP message option at opt_i (bytes of the header from 20 on).
  logic [7:0] opt_kind, opt_olen;
  logic [15:0] opt_exid;
  logic [31:0] opt_w8, opt_w12, opt_w16;
  always_comb begin
    opt_kind = '0;
    opt_olen = '0;
    opt_exid = '0;
    opt_w8 = '0;
    opt_w12 = '0;
    opt_w16 = '0;
    for (int i = 20; i < 60; i++) begin
      if (32'(r.opt_i) == i) begin
        opt_kind = r.meta.tcp_opt[8*(i-20)+:8];
        if (i + 1 < 60) opt_olen = r.meta.tcp_opt[8*(i-19)+:8];
        if (i + 19 < 60) begin
          opt_exid = {r.meta.tcp_opt[8*(i-18)+:8], r.meta.tcp_opt[8*(i-17)+:8]};
          opt_w8 = {r.meta.tcp_opt[8*(i-12)+:8], r.meta.tcp_opt[8*(i-11)+:8],
                    r.meta.tcp_opt[8*(i-10)+:8], r.meta.tcp_opt[8*(i-9)+:8]};
          opt_w12 = {r.meta.tcp_opt[8*(i-8)+:8], r.meta.tcp_opt[8*(i-7)+:8],
                     r.meta.tcp_opt[8*(i-6)+:8], r.meta.tcp_opt[8*(i-5)+:8]};
          opt_w16 = {r.meta.tcp_opt[8*(i-4)+:8], r.meta.tcp_opt[8*(i-3)+:8],
                     r.meta.tcp_opt[8*(i-2)+:8], r.meta.tcp_opt[8*(i-1)+:8]};
        end
      end
    end
  end

  // Bytes of the UDP payload (BTH, RETH, the Solar header), big-endian.
  function automatic logic [31:0] l7_32(input logic [255:0] v, input int at);
    l7_32 = {v[8*at+:8], v[8*(at+1)+:8], v[8*(at+2)+:8], v[8*(at+3)+:8]};
  endfunction

  // remote_ok() against the MR just read: the rkey's tag and id, the owner, the access.
  /* verilator lint_off UNUSEDSIGNAL */
  // (Yosys 0.23 takes no struct arguments: the MR's fields one by one.)
  function automatic logic remote_ok(input logic m_used, input logic [15:0] m_tag,
                                     input logic [31:0] m_owner, input logic [1:0] m_access,
                                     input logic [39:0] m_len, input logic [31:0] owner,
                                     input logic [31:0] rkey, input logic [63:0] va,
                                     input logic [63:0] ln, input logic [1:0] acc);
    remote_ok = 32'(rkey[15:0]) < MAX_MRS && m_used && m_tag == rkey[31:16] && m_owner == owner &&
        (m_access & acc) == acc && va <= {24'd0, m_len} && ln <= {24'd0, m_len} - va;
  endfunction

  // The MS entry address of (chunk, index); the index is below K here.
  function automatic logic [CW+KB-1:0] ms_at(input logic [CW-1:0] c, input logic [KW-1:0] i);
    ms_at = {c, i[KB-1:0]};
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */

  // Packets a READ of `ln` bytes takes at this flow's PMTU: max(1, ceil(ln / pmtu)).
  function automatic logic [31:0] read_packets(input logic [31:0] ln, input logic [3:0] lg);
    read_packets = ln == 0 ? 32'd1 : 32'(({32'd0, ln} + (64'd1 << lg) - 64'd1) >> lg);
  endfunction

  // ---- the state machine --------------------------------------------------------------------
`define DEFER(why) \
    begin \
      n.out.reason = why; \
      n.out.decision = DECISION_DEFERRED; \
      n.out.nfrags = 3'd0; \
      n.out.placed = 16'd0; \
      n.st = S_FINISH; \
    end
`define FINISH(d) \
    begin \
      n.out.decision = d; \
      n.st = S_FINISH; \
    end
`define INC(i, idx, amt) \
    begin \
      inc_en[i] = 1'b1; \
      inc_idx[8*(i)+:8] = 8'(idx); \
      inc_amt[32*(i)+:32] = 32'(amt); \
    end
`define CMD_ERR(e) \
    begin \
      n.err = e; \
      n.st = S_CMD_DONE; \
    end

  // Scratch values of the state machine (module level: Yosys takes no struct locals in blocks).
  logic [31:0] t32;
  logic [31:0] pmtu32;
  logic [63:0] t64;
  logic [63:0] u64;
  logic [31:0] take;
  logic [KW-1:0] nidx;
  ctx_t c;
  logic [23:0] psn;
  logic [15:0] hl;
  flow_t nf;
  frag_t fr;
  ms_t me;
  mr_t mm;

  always_comb begin
    // every scratch value assigned here first
    t32 = '0;
    pmtu32 = '0;
    t64 = '0;
    u64 = '0;
    take = '0;
    nidx = '0;
    c = '0;
    psn = '0;
    hl = '0;
    nf = '0;
    fr = '0;
    me = '0;
    mm = '0;

    n = r;
    s_meta_ready = 1'b0;
    s_cmd_ready = 1'b0;
    m_dec_valid = 1'b0;
    m_dec = r.out;
    m_rsp_valid = 1'b0;
    m_rsp_err = r.err;
    m_rsp_mr = r.rsp_mr;
    m_rsp_ms_count = r.q_ms;
    m_rsp_cursor = r.q_cursor;
    m_rsp_read_count = r.q_reads;
    fs_we = 1'b0;
    fs_waddr = r.fid;
    fs_wdata = r.f;
    fs_raddr = '0;
    ms_we = 1'b0;
    ms_waddr = '0;
    ms_wdata = '0;
    ms_raddr = '0;
    ln_we = 1'b0;
    ln_waddr = '0;
    ln_wdata = '0;
    ln_raddr = '0;
    mr_we = 1'b0;
    mrv_we = 1'b0;
    mr_waddr = '0;
    mr_wdata = '0;
    mr_raddr = '0;
    lk_valid = 1'b0;
    lk_op = 2'd0;
    lk_key = '0;
    lk_id = '0;
    inc_en = '0;
    inc_idx = '0;
    inc_amt = '0;

    case (r.st)
      // ---- reset: no flow and no MR in use -------------------------------------------------
      S_INIT: begin
        if (r.init_cnt < MAX_FLOWS) begin
          fs_we = 1'b1;
          fs_waddr = FW'(r.init_cnt);
          fs_wdata = '0;
        end
        if (r.init_cnt < MAX_MRS) begin
          mr_we = 1'b1;
          mrv_we = 1'b1;
          mr_waddr = MW'(r.init_cnt);
          mr_wdata = '0;
        end
        n.init_cnt = r.init_cnt + 1;
        if (r.init_cnt + 1 == INIT_N) n.st = S_IDLE;
      end

      S_IDLE: begin
        n.fid_v = 1'b0;
        n.x_msg = 1'b0;
        n.x_unrel = 1'b0;
        n.x_gbn = 1'b0;
        if (s_cmd_valid) begin
          s_cmd_ready = 1'b1;
          n.cmd = s_cmd_data;
          n.err = ERR_OK;
          n.count_it = 1'b1;
          n.rsp_mr = '0;
          n.q_ms = '0;
          n.q_cursor = '0;
          n.q_reads = '0;
          n.st = S_CMD;
        end else if (s_meta_valid) begin
          s_meta_ready = 1'b1;
          n.meta = s_meta;
          n.st = S_RX_START;
        end
      end

      // ---- a frame: NicModel::rx() ------------------------------------------------------------
      S_RX_START: begin
        `INC(0, CTR_RX_FRAMES, 1)
        n.out = '0;
        n.out.flow_id = 24'hFFFFFF;
        n.out.ip_csum = r.meta.ip_csum;
        n.out.l4_csum = r.meta.l4_csum;
        n.lk_step = 2'd0;
        if (r.meta.pdefer != DEFERREASON_NONE) `DEFER(r.meta.pdefer)
        else begin
          // A RoCE QP is found by the BTH DestQP first, a Solar connection by the number in
          // its header's bytes 4..7 (one of 2^24 or more names none), whatever the source port.
          n.lk_step = r.meta.udp && ((r.meta.dport == C_ROCE_PORT[15:0] &&
              r.meta.pay_len >= 16'd12) || (r.meta.dport == C_SOLAR_PORT[15:0] &&
              r.meta.pay_len >= 16'd8 && r.meta.l7[8*4+:8] == 8'd0)) ? 2'd0 : 2'd1;
          n.st = S_RX_LK;
        end
      end
      S_RX_LK: begin
        lk_valid = 1'b1;
        lk_op = 2'd0;
        lk_key.src_ip = r.meta.src_ip;
        lk_key.dst_ip = r.meta.dst_ip;
        lk_key.udp = r.meta.udp;
        case (r.lk_step)
          2'd0: begin  // 4791 or 7000; DestQP and a connection number below 2^24: bytes 5..7
            lk_key.dport = r.meta.dport;
            lk_key.numbered = 1'b1;
            lk_key.qpn = {r.meta.l7[8*5+:8], r.meta.l7[8*6+:8], r.meta.l7[8*7+:8]};
          end
          2'd1: begin
            lk_key.sport = r.meta.sport;
            lk_key.dport = r.meta.dport;
          end
          default: lk_key.dport = r.meta.dport;  // the UDP wildcard: source port 0
        endcase
        if (lk_ready) n.st = S_RX_LK_WAIT;
      end
      S_RX_LK_WAIT: begin
        if (lk_rsp_valid) begin
          if (lk_rsp_hit) begin
            n.fid = lk_rsp_id;
            fs_raddr = lk_rsp_id;
            n.st = S_RX_FLOW;
          end else if (r.lk_step == 2'd0 || (r.lk_step == 2'd1 && r.meta.udp)) begin
            n.lk_step = r.lk_step + 2'd1;
            n.st = S_RX_LK;
          end else if (r.meta.udp && ((r.meta.dport == C_ROCE_PORT[15:0] &&
                       r.meta.pay_len < 16'd12) || (r.meta.dport == C_SOLAR_PORT[15:0] &&
                       r.meta.pay_len < 16'd8)))
            `DEFER(DEFERREASON_TRUNCATED)  // too short to name a QP or a connection
          else `DEFER(DEFERREASON_FLOW_MISS)
        end
      end
      S_RX_FLOW: begin
        n.f = fs_rd;
        n.fid_v = 1'b1;
        n.out.flow_id = 24'(r.fid);
        n.out.parser = fs_rd.parser;
        if (fs_rd.mode == FLOWMODE_COPY) `DEFER(DEFERREASON_COPY_MODE)
        else begin
          case (fs_rd.parser)
            PARSER_TCP: n.st = S_RX_TCP;
            PARSER_ROCE: n.st = S_ROCE0;
            PARSER_SOLAR: n.st = S_RX_SOLAR;
            default: n.st = S_RX_UDP;
          endcase
        end
      end

      S_RX_UDP: begin
        n.out.header_len = r.meta.pay_off < 8'd192 ? r.meta.pay_off : 8'd192;
        n.out.payload_len = r.meta.pay_len;
        n.out.data_off = {8'd0, r.meta.pay_off};
        if (r.meta.pay_len == 0) `FINISH(DECISION_NO_PAYLOAD)
        else begin
          n.ret_dt = S_UNREL_HEAD;
          n.st = S_DT;
        end
      end

      // ---- TCP ----------------------------------------------------------------------------
      S_RX_TCP: begin
        n.out.seq = r.meta.tcp_seq;
        n.out.header_len = r.meta.pay_off < 8'd192 ? r.meta.pay_off : 8'd192;
        n.out.payload_len = r.meta.pay_len;
        n.out.data_off = {8'd0, r.meta.pay_off};
        n.seq1 = r.meta.tcp_seq + {31'd0, r.meta.tcp_flags[1]};  // SYN takes a number
        if (r.meta.pay_len == 0 || r.meta.tcp_flags[2]) `FINISH(DECISION_NO_PAYLOAD)
        else if (!r.f.reliable) begin
          n.ret_dt = S_UNREL_HEAD;
          n.st = S_DT;
        end else if (r.f.messages) begin
          n.opt_i = 8'd20;
          n.st = S_TCP_OPT;
        end else n.st = S_TCP_POS;
      end
      // find_msg_option(): one option a cycle.
      S_TCP_OPT: begin
        if (r.opt_i >= {2'd0, r.meta.tcp_hlen} || opt_kind == 8'd0)
          `DEFER(DEFERREASON_NO_MESSAGE)
        else if (opt_kind == 8'd1) n.opt_i = r.opt_i + 8'd1;
        else if (r.opt_i + 8'd1 >= {2'd0, r.meta.tcp_hlen} || opt_olen < 8'd2 ||
                 opt_olen > {2'd0, r.meta.tcp_hlen} - r.opt_i)
          `DEFER(DEFERREASON_BAD_L4_HEADER)
        else if (opt_kind == 8'd253 && opt_olen == 8'd20 && opt_exid == 16'hC1EA) begin
          n.opt_num = opt_w8;
          n.opt_start = opt_w12;
          n.opt_len = opt_w16;
          n.st = S_TCP_POS;
        end else n.opt_i = r.opt_i + opt_olen;
      end
      S_TCP_POS: begin
        // rel = seq - cursor, end = rel + payload: (b) drop, (c) trim, (d) past a hole.
        t32 = r.seq1 - r.f.cursor;
        t64 = {{32{t32[31]}}, t32} + {48'd0, r.meta.pay_len};
        if (t64[63] || t64 == 0) `FINISH(DECISION_DROPPED)
        else begin
          take = t32[31] ? 32'd0 - t32 : 32'd0;  // trim
          n.out.trimmed = take[15:0];
          n.out.ooo = !t32[31] && t32 != 0;
          if (r.f.messages) begin
            // The option must cover the payload: start <= seq, seq + payload <= start + length.
            u64 = {32'd0, r.seq1 - r.opt_start};
            if (r.opt_len == 0 || u64[31] || u64 + {48'd0, r.meta.pay_len} > {32'd0, r.opt_len})
              `DEFER(DEFERREASON_BAD_L4_HEADER)
            else begin
              n.msg = r.opt_num;
              n.at = u64 + {32'd0, take};
              n.len = {16'd0, r.meta.pay_len} - take;
              n.ret_find = S_MSG_GOT;
              n.st = S_FIND;
            end
          end else begin
            n.sdist = {32'd0, r.seq1 + take - r.f.head_pos[31:0]};
            n.len = {16'd0, r.meta.pay_len} - take;
            n.st = S_STREAM;
          end
        end
      end

      // ---- Solar ----------------------------------------------------------------------------
      S_RX_SOLAR: begin
        if (!r.meta.udp) `DEFER(DEFERREASON_BAD_L4_HEADER)
        else if (r.meta.pay_len < 16'd32) `DEFER(DEFERREASON_TRUNCATED)
        else begin
          n.out.seq = l7_32(r.meta.l7, 8);
          hl = {8'd0, r.meta.pay_off} + 16'd32;
          n.out.header_len = hl < 16'd192 ? hl[7:0] : 8'd192;
          n.out.payload_len = r.meta.pay_len - 16'd32;
          n.out.data_off = hl;
          n.len = {16'd0, r.meta.pay_len - 16'd32};
          n.at = {l7_32(r.meta.l7, 16), l7_32(r.meta.l7, 20)};
          n.msg = l7_32(r.meta.l7, 12);
          if (r.meta.l7[7:0] < 8'd1 || r.meta.l7[7:0] > 8'd5) `DEFER(DEFERREASON_BAD_L4_HEADER)
          else if (r.meta.l7[7:0] != 8'd1 && r.meta.l7[7:0] != 8'd3) begin
            if (r.meta.pay_len == 16'd32) `FINISH(DECISION_NO_PAYLOAD)
            else `DEFER(DEFERREASON_BAD_L4_HEADER)
          end else begin
            if (VERIFY_L4) n.out.l4_csum = r.meta.crc32c_ok ? CSUMSTATUS_GOOD : CSUMSTATUS_BAD;
            if (VERIFY_L4 && !r.meta.crc32c_ok) `DEFER(DEFERREASON_BAD_CRC32C)
            else if (r.meta.pay_len == 16'd32) `FINISH(DECISION_NO_PAYLOAD)
            else if (!r.f.reliable) begin
              n.ret_dt = S_UNREL_HEAD;
              n.st = S_DT;
            end else if (r.f.messages) begin
              n.ret_find = S_MSG_GOT;
              n.st = S_FIND;
            end else begin
              // A byte stream placed by offset: bytes before the oldest MS were retired.
              u64 = {l7_32(r.meta.l7, 16), l7_32(r.meta.l7, 20)};
              t64 = u64 + {48'd0, r.meta.pay_len - 16'd32};
              if (t64 < u64) `DEFER(DEFERREASON_BAD_L4_HEADER)  // the offset wraps
              else if (t64 <= r.f.head_pos) `FINISH(DECISION_DROPPED)
              else begin
                take = u64 < r.f.head_pos ? 32'(r.f.head_pos - u64) : 32'd0;
                n.out.trimmed = take[15:0];
                n.sdist = u64 + {32'd0, take} - r.f.head_pos;
                n.len = {16'd0, r.meta.pay_len - 16'd32} - take;
                n.st = S_STREAM;
              end
            end
          end
        end
      end

      // ---- RoCEv2 ---------------------------------------------------------------------------
      S_ROCE0: begin
        psn = {r.meta.l7[8*9+:8], r.meta.l7[8*10+:8], r.meta.l7[8*11+:8]};
        n.psn = psn;
        if (!r.meta.udp || r.meta.dport != C_ROCE_PORT[15:0]) `DEFER(DEFERREASON_BAD_L4_HEADER)
        else if (r.meta.pay_len < 16'd16) `DEFER(DEFERREASON_TRUNCATED)
        else begin
          n.out.seq = {8'd0, psn};
          if (r.meta.l7[8+:4] != 4'd0) `DEFER(DEFERREASON_BAD_L4_HEADER)
          else begin
            if (VERIFY_L4) n.out.l4_csum = r.meta.icrc_ok ? CSUMSTATUS_GOOD : CSUMSTATUS_BAD;
            if (VERIFY_L4 && !r.meta.icrc_ok) `DEFER(DEFERREASON_BAD_ICRC)
            // The partition (IBTA 10.9.3): the default one, 0xFFFF, whatever the membership bit.
            else if (r.meta.l7[8*2+:7] != 7'h7F || r.meta.l7[8*3+:8] != 8'hFF)
              `DEFER(DEFERREASON_BAD_PKEY)
            else if (r.meta.l7[7:0] == 8'h81) begin  // CNP: header only
              hl = {8'd0, r.meta.pay_off} + r.meta.pay_len;
              n.out.header_len = hl < 16'd192 ? hl[7:0] : 8'd192;
              `FINISH(DECISION_NO_PAYLOAD)
            end else if (r.f.reliable && r.meta.l7[7:5] != 3'd0)
              `DEFER(DEFERREASON_UNSUPPORTED)  // an RC QP takes RC opcodes only
            else if (r.meta.pay_len < 16'd16 + {11'd0, op.ext} + {14'd0, r.meta.l7[13:12]})
              `DEFER(DEFERREASON_BAD_L4_HEADER)
            else begin
              hl = {8'd0, r.meta.pay_off} + 16'd12 + {11'd0, op.ext};
              n.out.header_len = hl < 16'd192 ? hl[7:0] : 8'd192;
              n.out.data_off = hl;
              t32 = {16'd0, r.meta.pay_len} - 32'd16 - {27'd0, op.ext} - {30'd0, r.meta.l7[13:12]};
              n.out.payload_len = t32[15:0];
              n.len = t32;
              if (op.kind == K_NODATA) `FINISH(DECISION_NO_PAYLOAD)
              else if (op.kind == K_UNSUP) begin
                if (t32 == 0) `FINISH(DECISION_NO_PAYLOAD)
                else `DEFER(DEFERREASON_UNSUPPORTED)
              end else if (op.kind == K_READRESP) begin
                if (t32 == 0) `FINISH(DECISION_NO_PAYLOAD)
                else if (!r.f.read_v) `DEFER(DEFERREASON_NO_MESSAGE)
                else begin
                  n.ri = '0;
                  n.st = S_READ_RD;
                end
              end else if (r.f.reliable && psn_neg(psn, r.f.cursor[23:0]))
                `FINISH(DECISION_DROPPED)  // (b): a duplicate
              // Go-back-N: a request only at the PSN the NIC expects next, else unwritten.
              else if (!r.f.selrep && psn != r.f.exp_psn) `DEFER(DEFERREASON_OUT_OF_SEQUENCE)
              else begin
                n.out.ooo = r.f.selrep && psn != r.f.cursor[23:0];
                n.x_gbn = !r.f.selrep;
                n.gbn_span = op.kind == K_READREQ ?
                    24'(read_packets(l7_32(r.meta.l7, 24), r.f.pmtu_log2)) : 24'd1;
                n.is_send = op.kind == K_SEND;
                n.at_start = r.f.next_start_known && r.f.next_start_psn == psn;
                n.st = S_ROCE1;
              end
            end
          end
        end
      end
      // The context: a first packet opens one (or meets its own retransmission).
      S_ROCE1: begin
        c = r.is_send ? r.f.send_ctx : r.f.write_ctx;
        pmtu32 = 32'd1 << r.f.pmtu_log2;
        if (op.kind == K_READREQ) begin
          // Nothing to place. Begun where a message was known to begin, the next begins past
          // the PSNs its responses take.
          if (l7_32(r.meta.l7, 24) > 32'h80000000) `DEFER(DEFERREASON_BAD_LENGTH)
          else begin
            if (r.at_start) n.f.next_start_psn = r.psn + r.gbn_span;
            `FINISH(DECISION_NO_PAYLOAD)
          end
        end
        // IBTA's lengths, before a byte is written: payload and pad whole words; a first or
        // middle packet carries one PMTU, a last one 1..PMTU, an only one 0..PMTU.
        else if (((r.len + {30'd0, r.meta.l7[13:12]}) & 32'd3) != 0)
          `DEFER(DEFERREASON_BAD_L4_HEADER)
        else if (op.first ? (op.last ? r.len > pmtu32 : r.len != pmtu32) :
                 (op.last ? r.len == 0 || r.len > pmtu32 : r.len != pmtu32))
          `DEFER(DEFERREASON_BAD_LENGTH)
        else begin
          if (op.first) begin
            if (c.valid && c.first_psn == r.psn) begin
              // A retransmitted first packet. A WRITE first seen off the chain joins it now.
              if (r.at_start && !c.chained) begin
                c.chained = 1'b1;
                n.f.next_start_known = 1'b0;
              end
              if (r.is_send) n.f.send_ctx = c;
              else n.f.write_ctx = c;
              n.st = S_ROCE3;
            end else if (((r.is_send || !r.f.selrep) && !r.at_start) ||
                         (r.is_send && ((c.valid && !psn_neg(c.end_psn, r.f.cursor[23:0])) ||
                           (r.f.write_ctx.valid && psn_neg(r.f.write_ctx.end_psn, r.psn) &&
                            !psn_neg(r.f.write_ctx.end_psn, r.f.cursor[23:0])))))
              // A SEND (go-back-N: any message) opens only where a message is known to begin.
              `DEFER(DEFERREASON_NO_MESSAGE)
            else begin
              n.nctx = '0;
              n.nctx.valid = 1'b1;
              n.nctx.chained = r.at_start;
              n.nctx.first_psn = r.psn;
              n.nctx.next_psn = r.psn + 24'd1;
              if (r.is_send) begin
                n.nctx.msg = r.f.next_msg;
                n.f.next_msg = r.f.next_msg + 32'd1;
                n.nctx.end_known = op.last;
                n.nctx.end_psn = r.psn;
                n.st = S_ROCE2;
              end else begin
                n.rkey = l7_32(r.meta.l7, 20);
                n.nctx.mr = {r.meta.l7[8*22+:8], r.meta.l7[8*23+:8]};
                n.nctx.tag = {r.meta.l7[8*20+:8], r.meta.l7[8*21+:8]};
                n.nctx.base = {l7_32(r.meta.l7, 12), l7_32(r.meta.l7, 16)};
                n.nctx.limit = l7_32(r.meta.l7, 24);
                t32 = read_packets(l7_32(r.meta.l7, 24), r.f.pmtu_log2);
                n.nctx.end_known = 1'b1;
                n.nctx.end_psn = r.psn + t32[23:0] - 24'd1;
                // The RETH's length: at most 2^31; a WRITE cut into packets is longer than one
                // PMTU, a WRITE only carries all of it.
                if (l7_32(r.meta.l7, 24) > 32'h80000000 ||
                    (!op.last && l7_32(r.meta.l7, 24) <= pmtu32) ||
                    (op.last && r.len != l7_32(r.meta.l7, 24)))
                  `DEFER(DEFERREASON_BAD_LENGTH)
                // The whole extent the RETH claims, once; a zero-length WRITE needs no key.
                else if (l7_32(r.meta.l7, 24) != 0) begin
                  mr_raddr = MW'(l7_32(r.meta.l7, 20));
                  n.st = S_ROCE_MR1;
                end else n.st = S_ROCE2;
              end
            end
          end else begin
            if (!c.valid || psn_neg(r.psn, c.first_psn) || r.psn == c.first_psn)
              `DEFER(DEFERREASON_NO_MESSAGE)
            else if (c.end_known) begin
              // Within the message; its last packet exactly at its end.
              if (psn_neg(c.end_psn, r.psn) || (op.last != (c.end_psn == r.psn)))
                `DEFER(DEFERREASON_NO_MESSAGE)
              else n.st = S_ROCE3;
            end else begin
              if (!psn_neg(r.psn, c.next_psn) && r.psn != c.next_psn)
                `DEFER(DEFERREASON_NO_MESSAGE)
              else begin
                if (r.psn == c.next_psn) c.next_psn = r.psn + 24'd1;
                if (op.last) begin
                  c.end_known = 1'b1;
                  c.end_psn = r.psn;
                end
                if (r.is_send) n.f.send_ctx = c;
                else n.f.write_ctx = c;
                n.st = S_ROCE3;
              end
            end
          end
        end
      end
      S_ROCE_MR1: begin
        if (!remote_ok(mr_rd.used, mr_rd.tag, mr_rd.owner, mr_rd.access, mr_rd.len, r.f.owner,
                       r.rkey, r.nctx.base, {32'd0, r.nctx.limit}, 2'd1))
          `DEFER(DEFERREASON_REMOTE_ACCESS)
        else n.st = S_ROCE2;
      end
      // A new context: pass the chain start; a later WRITE does not evict one still needed.
      S_ROCE2: begin
        c = r.f.write_ctx;
        if (r.at_start) n.f.next_start_known = 1'b0;
        // (Selective repeat only: go-back-N places in order, the earlier one is behind the NIC.)
        if (r.f.selrep && !r.is_send && c.valid && !psn_neg(c.end_psn, r.f.cursor[23:0]) &&
            !psn_neg(r.psn, c.first_psn) && r.psn != c.first_psn) begin
          // keep: place this first packet without a context (IBTA's lengths keep it inside)
          if (r.nctx.chained) begin
            n.f.next_start_psn = r.nctx.end_psn + 24'd1;
            n.f.next_start_known = 1'b1;
          end
          if (r.len == 0) `FINISH(DECISION_NO_PAYLOAD)
          else begin
            fr = '0;
            fr.mr = r.nctx.mr;
            fr.off = r.nctx.base[47:0];
            fr.len = r.len[15:0];
            n.out.frags[0+:144] = fr;
            n.out.nfrags = 3'd1;
            n.wf_i = '0;
            n.wf_sum = '0;
            n.st = S_WF_RD;
          end
        end else begin
          if (r.is_send) n.f.send_ctx = r.nctx;
          else n.f.write_ctx = r.nctx;
          n.st = S_ROCE3;
        end
      end
      // The message's end, if now known, passes the chain on; then place.
      S_ROCE3: begin
        nf = r.f;
        c = r.is_send ? r.f.send_ctx : r.f.write_ctx;
        t64 = {40'd0, 24'(r.psn - c.first_psn)} << r.f.pmtu_log2;
        n.at = t64;
        // A WRITE's last packet ends it exactly where its RETH said.
        if (!r.is_send && op.last && t64 + {32'd0, r.len} != {32'd0, c.limit})
          `DEFER(DEFERREASON_BAD_LENGTH)
        else begin
          if (c.chained && c.end_known) begin
            nf.next_start_psn = c.end_psn + 24'd1;
            nf.next_start_known = 1'b1;
            c.chained = 1'b0;
            if (r.is_send) nf.send_ctx = c;
            else nf.write_ctx = c;
            if (nf.write_ctx.valid && !nf.write_ctx.chained &&
                nf.write_ctx.first_psn == nf.next_start_psn)
              nf.next_start_psn = nf.write_ctx.end_psn + 24'd1;
          end
          n.f = nf;
          if (r.len == 0) `FINISH(DECISION_NO_PAYLOAD)
          else if (r.is_send) begin
            n.msg = c.msg;
            n.ret_find = S_MSG_GOT;
            n.st = S_FIND;
          end else if (t64 > {32'd0, c.limit} || {32'd0, r.len} > {32'd0, c.limit} - t64)
            `DEFER(DEFERREASON_MS_OVERFLOW)
          else begin
            // Again per packet: the MR may have been removed, or re-registered under another tag.
            n.rkey = {c.tag, c.mr};
            n.nctx = c;
            mr_raddr = c.mr[MW-1:0];
            n.st = S_ROCE_MR2;
          end
        end
      end
      S_ROCE_MR2: begin
        u64 = r.nctx.base + r.at;
        if (!remote_ok(mr_rd.used, mr_rd.tag, mr_rd.owner, mr_rd.access, mr_rd.len, r.f.owner,
                       r.rkey, u64, {32'd0, r.len}, 2'd1))
          `DEFER(DEFERREASON_REMOTE_ACCESS)
        else begin
          fr = '0;
          fr.mr = r.nctx.mr;
          fr.off = u64[47:0];
          fr.len = r.len[15:0];
          n.out.frags[0+:144] = fr;
          n.out.nfrags = 3'd1;
          n.wf_i = '0;
          n.wf_sum = '0;
          n.st = S_WF_RD;
        end
      end
      // place_read(): the sink whose PSN range holds the packet.
      S_READ_RD: begin
        ms_raddr = ms_at(r.f.read_chunk, r.ri);
        n.st = S_READ_CHK;
      end
      S_READ_CHK: begin
        me = ms_rd;
        t32 = {8'd0, 24'(r.psn - me.msg[23:0])};  // k
        u64 = {32'd0, read_packets(me.len, r.f.pmtu_log2)};  // n
        if (me.msg[31] && {32'd0, t32} < u64) begin
          if (op.first != (t32 == 0) || op.last != ({32'd0, t32} == u64 - 64'd1))
            `DEFER(DEFERREASON_NO_MESSAGE)
          else begin
            n.out.msg_seq = {8'd0, me.msg[23:0]};
            t64 = {32'd0, t32} << r.f.pmtu_log2;
            if (t64 > {32'd0, me.len} || {32'd0, r.len} > {32'd0, me.len} - t64)
              `DEFER(DEFERREASON_MS_OVERFLOW)
            else begin
              fr = '0;
              fr.mr = me.mr;
              fr.off = me.off + t64[47:0];
              fr.len = r.len[15:0];
              n.out.frags[0+:144] = fr;
              n.out.nfrags = 3'd1;
              n.wf_i = '0;
              n.wf_sum = '0;
              n.st = S_WF_RD;
            end
          end
        end else if (32'(r.ri) + 1 == K) `DEFER(DEFERREASON_NO_MESSAGE)
        else begin
          n.ri = r.ri + 1'b1;
          n.st = S_READ_RD;
        end
      end

      // ---- place_stream(sdist, len) ------------------------------------------------------------
      S_STREAM: begin
        if (r.sdist >= r.f.list_bytes || {32'd0, r.len} > r.f.list_bytes - r.sdist)
          `DEFER(DEFERREASON_NO_MS)
        else begin
          // From the MS the last placement ended in when the payload lies at or beyond it.
          if (r.f.hint_v && r.sdist >= r.f.hint_dist) begin
            n.ch = r.f.hint_chunk;
            n.idx = r.f.hint_idx;
            n.start = r.f.hint_dist;
            ms_raddr = ms_at(r.f.hint_chunk, r.f.hint_idx);
          end else begin
            n.ch = r.f.head_chunk;
            n.idx = r.f.head_idx;
            n.start = '0;
            ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
          end
          n.st = S_STR_WALK;
        end
      end
      S_STR_WALK: begin
        me = ms_rd;
        if (r.sdist - r.start < {32'd0, me.len}) begin
          n.e = me;
          n.inn = r.sdist - r.start;
          n.nfr = '0;
          n.left = r.len;
          n.st = S_STR_FRAG;
        end else begin
          n.start = r.start + {32'd0, me.len};
          nidx = r.idx + 1'b1;
          if (32'(nidx) == K) begin
            ln_raddr = r.ch;
            n.st = S_STR_WLINK;
          end else begin
            n.idx = nidx;
            ms_raddr = ms_at(r.ch, nidx);
          end
        end
      end
      S_STR_WLINK: begin
        n.ch = ln_rd.c;
        n.idx = '0;
        ms_raddr = ms_at(ln_rd.c, '0);
        n.st = S_STR_WALK;
      end
      S_STR_FRAG: begin
        // r.e is the MS (ch, idx), r.inn bytes into it.
        if (32'(r.nfr) == C_MAX_FRAGS) `DEFER(DEFERREASON_TOO_MANY_FRAGS)
        else begin
          t64 = {32'd0, r.e.len} - r.inn;
          take = {32'd0, r.left} < t64 ? r.left : t64[31:0];
          fr = '0;
          fr.mr = r.e.mr;
          fr.off = r.e.off + r.inn[47:0];
          fr.len = take[15:0];
          // constant slices: a variable one shifts all of `n` in Yosys
          for (int i = 0; i < 4; i++) if (32'(r.nfr) == i) n.out.frags[144*i+:144] = fr;
          n.nfr = r.nfr + 3'd1;
          n.left = r.left - take;
          if (r.left == take) begin
            n.f.hint_v = 1'b1;
            n.f.hint_chunk = r.ch;
            n.f.hint_idx = r.idx;
            n.f.hint_dist = r.start;
            n.out.nfrags = r.nfr + 3'd1;
            n.wf_i = '0;
            n.wf_sum = '0;
            n.st = S_WF_RD;
          end else begin
            n.inn = '0;
            n.start = r.start + {32'd0, r.e.len};
            nidx = r.idx + 1'b1;
            if (32'(nidx) == K) begin
              ln_raddr = r.ch;
              n.st = S_STR_FLINK;
            end else begin
              n.idx = nidx;
              ms_raddr = ms_at(r.ch, nidx);
              n.st = S_STR_FENT;
            end
          end
        end
      end
      S_STR_FLINK: begin
        n.ch = ln_rd.c;
        n.idx = '0;
        ms_raddr = ms_at(ln_rd.c, '0);
        n.st = S_STR_FENT;
      end
      S_STR_FENT: begin
        n.e = ms_rd;
        n.st = S_STR_FRAG;
      end

      // ---- place_message(msg, at, len): after find_message ------------------------------------
      S_MSG_GOT: begin
        n.out.msg_seq = r.msg;
        n.x_msg = 1'b1;
        if (!r.found) `DEFER(DEFERREASON_NO_MESSAGE)
        else if (r.at > {32'd0, r.e.len} || {32'd0, r.len} > {32'd0, r.e.len} - r.at)
          `DEFER(DEFERREASON_MS_OVERFLOW)
        else begin
          fr = '0;
          fr.mr = r.e.mr;
          fr.off = r.e.off + r.at[47:0];
          fr.len = r.len[15:0];
          n.out.frags[0+:144] = fr;
          n.out.nfrags = 3'd1;
          n.wf_i = '0;
          n.wf_sum = '0;
          n.st = S_WF_RD;
        end
      end

      // ---- place_unreliable(): after drop_tombstones ----------------------------------------
      S_UNREL_HEAD: begin
        if (r.f.ms_count == 0) `DEFER(DEFERREASON_NO_MS)
        else begin
          ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
          n.st = S_UNREL_GOT;
        end
      end
      S_UNREL_GOT: begin
        me = ms_rd;
        if ({16'd0, r.out.payload_len} > me.len) `DEFER(DEFERREASON_MS_OVERFLOW)
        else begin
          fr = '0;
          fr.mr = me.mr;
          fr.off = me.off;
          fr.len = r.out.payload_len;
          n.out.frags[0+:144] = fr;
          n.out.nfrags = 3'd1;
          n.out.msg_seq = me.msg;
          n.x_unrel = 1'b1;
          n.wf_i = '0;
          n.wf_sum = '0;
          n.st = S_WF_RD;
        end
      end

      // ---- write_frags(): every fragment's MR checked before anything is written ------------
      S_WF_RD: begin
        fr = r.out.frags[144*r.wf_i+:144];
        mr_raddr = fr.mr[MW-1:0];
        n.st = S_WF_CHK;
      end
      S_WF_CHK: begin
        fr = r.out.frags[144*r.wf_i+:144];
        mm = mr_rd;
        if (32'(fr.mr) >= MAX_MRS || !mm.used || {16'd0, fr.off} > {24'd0, mm.len} ||
            {48'd0, fr.len} > {24'd0, mm.len} - {16'd0, fr.off})
          `DEFER(DEFERREASON_DMA_FAULT)
        else begin
          fr.addr = mm.base + {16'd0, fr.off};
          for (int i = 0; i < 4; i++) if (32'(r.wf_i) == i) n.out.frags[144*i+:144] = fr;
          n.wf_sum = r.wf_sum + {16'd0, fr.len};
          if (r.wf_i + 3'd1 == r.out.nfrags) begin
            n.out.placed = 16'(r.wf_sum + {16'd0, fr.len});
            n.out.data_off = r.out.data_off + r.out.trimmed;
            `FINISH(r.out.trimmed != 0 ? DECISION_TRIMMED : DECISION_PLACED)
          end else begin
            n.wf_i = r.wf_i + 3'd1;
            n.st = S_WF_RD;
          end
        end
      end

      // ---- finish(): the counters, then the entry -----------------------------------------
      S_FINISH: begin
        case (r.out.decision)
          DECISION_PLACED: `INC(0, r.out.ooo ? CTR_RX_PAST_HOLE : CTR_RX_IN_ORDER, 1)
          DECISION_TRIMMED: begin
            `INC(0, CTR_RX_TRIMMED, 1)
            `INC(1, CTR_RX_TRIMMED_BYTES, r.out.trimmed)
          end
          DECISION_DROPPED: `INC(0, CTR_RX_DROPPED, 1)
          DECISION_DEFERRED: begin
            `INC(0, CTR_RX_DEFERRED, 1)
            `INC(1, 32'(CTR_BASE_DEFERREASON) + 32'(r.out.reason), 1)
          end
          default: `INC(0, CTR_RX_NO_PAYLOAD, 1)
        endcase
        if (r.out.decision == DECISION_PLACED || r.out.decision == DECISION_TRIMMED) begin
          `INC(2, CTR_RX_PLACED_BYTES, r.out.placed)
          `INC(3, CTR_RX_FRAGMENTS, r.out.nfrags)
        end
        if (r.x_msg && r.out.decision != DECISION_DEFERRED) `INC(4, CTR_RX_MESSAGE, 1)
        // Go-back-N: past a request placed in order or that had nothing to place.
        if (r.x_gbn && (r.out.decision == DECISION_PLACED ||
                        r.out.decision == DECISION_NO_PAYLOAD))
          n.f.exp_psn = r.psn + r.gbn_span;
        if (r.x_unrel && r.out.decision == DECISION_PLACED) begin
          `INC(5, CTR_RX_UNRELIABLE, 1)
          n.ret_pop = S_OUT;
          n.st = S_POP;
        end else n.st = S_OUT;
        // A deferred or unplaced frame moves no payload.
        if (r.out.decision != DECISION_PLACED && r.out.decision != DECISION_TRIMMED) begin
          n.out.nfrags = '0;
          n.out.placed = '0;
        end
      end
      S_OUT: begin
        m_dec_valid = 1'b1;
        if (m_dec_ready) begin
          if (r.fid_v) begin
            fs_we = 1'b1;
            fs_waddr = r.fid;
            fs_wdata = r.f;
          end
          n.st = S_IDLE;
        end
      end

      // ---- find_message(msg) -> found, (fch, fidx), e ---------------------------------------
      S_FIND: begin
        n.found = 1'b0;
        if (r.f.ms_count == 0) n.st = r.ret_find;
        else begin
          ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
          n.ch = r.f.head_chunk;
          n.idx = r.f.head_idx;
          n.cnt = '0;
          n.st = r.f.msg_dense ? S_FIND_HEAD : S_FIND_SCAN;
        end
      end
      S_FIND_HEAD: begin
        // Dense: message m is entry m - (head's number), one hop per chunk from the head.
        me = ms_rd;
        t32 = r.msg - me.msg;
        if (t32 >= r.f.ms_count) n.st = r.ret_find;
        else begin
          n.fpos = {{(32 - KW) {1'b0}}, r.f.head_idx} + t32;
          n.ch = r.f.head_chunk;
          n.st = S_FIND_HOP;
        end
      end
      S_FIND_HOP: begin
        if (r.fpos >= K) begin
          ln_raddr = r.ch;
          n.fpos = r.fpos - K;
          n.cnt = 32'd1;  // a link is on its way
          n.st = S_FIND_ENT;
        end else begin
          ms_raddr = ms_at(r.ch, KW'(r.fpos));
          n.cnt = 32'd0;
          n.st = S_FIND_ENT;
        end
      end
      S_FIND_ENT: begin
        if (r.cnt == 32'd1) begin
          n.ch = ln_rd.c;
          n.st = S_FIND_HOP;
        end else begin
          me = ms_rd;
          n.e = me;
          n.fch = r.ch;
          n.fidx = KW'(r.fpos);
          n.found = me.len != 0 && me.msg == r.msg;
          n.st = r.ret_find;
        end
      end
      S_FIND_SCAN: begin
        // Numbers posted out of order: look at every entry from the head.
        me = ms_rd;
        if (me.len != 0 && me.msg == r.msg) begin
          n.found = 1'b1;
          n.e = me;
          n.fch = r.ch;
          n.fidx = r.idx;
          n.st = r.ret_find;
        end else if (r.cnt + 1 == r.f.ms_count) n.st = r.ret_find;
        else begin
          n.cnt = r.cnt + 1;
          nidx = r.idx + 1'b1;
          if (32'(nidx) == K) begin
            ln_raddr = r.ch;
            n.st = S_FIND_SLINK;
          end else begin
            n.idx = nidx;
            ms_raddr = ms_at(r.ch, nidx);
          end
        end
      end
      S_FIND_SLINK: begin
        n.ch = ln_rd.c;
        n.idx = '0;
        ms_raddr = ms_at(ln_rd.c, '0);
        n.st = S_FIND_SCAN;
      end

      // ---- pop_head() ------------------------------------------------------------------------
      S_POP: begin
        ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
        n.st = S_POP_E;
      end
      S_POP_E: begin
        me = ms_rd;
        nf = r.f;
        if (nf.hint_v && nf.hint_chunk == nf.head_chunk && nf.hint_idx == nf.head_idx)
          nf.hint_v = 1'b0;
        else if (nf.hint_v) nf.hint_dist = nf.hint_dist - {32'd0, me.len};
        if (me.len != 0) begin
          nf.head_pos = nf.head_pos + {32'd0, me.len};
          nf.list_bytes = nf.list_bytes - {32'd0, me.len};
        end
        nf.head_idx = nf.head_idx + 1'b1;
        nf.ms_count = nf.ms_count - 32'd1;
        n.f = nf;
        n.ch = r.f.head_chunk;  // the chunk the entry was in
        if (me.len != 0) begin
          n.ref_mr = me.mr;
          n.ref_up = 1'b0;
          n.ret_ref = S_POP_TAIL;
          n.st = S_REF;
        end else n.st = S_POP_TAIL;
      end
      S_POP_TAIL: begin
        if (r.f.ms_count == 0) begin
          // chunk_free(head), the list empty
          n.f.head_v = 1'b0;
          n.f.tail_v = 1'b0;
          n.f.head_idx = '0;
          n.f.tail_idx = '0;
          n.f.msg_dense = 1'b1;
          n.a_c = r.ch;
          n.st = S_POP_LINK;
          n.pl_adv = 1'b0;  // free only
        end else if (32'(r.f.head_idx) == K) begin
          ln_raddr = r.ch;
          n.pl_adv = 1'b1;  // then advance the head
          n.a_c = r.ch;
          n.st = S_POP_LINK;
        end else n.st = r.ret_pop;
      end
      S_POP_LINK: begin
        // chunk_free(a_c): a committed chunk back to the flow's bitmap, a store chunk to the
        // shared free list.
        if (r.pl_adv) begin
          n.f.head_chunk = ln_rd.c;
          n.f.head_idx = '0;
        end
        if (32'(r.a_c) < COMMITTED_CHUNKS) begin
          for (int i = 0; i < CPF; i++) if (r.a_c == priv_base + CW'(i)) n.f.priv_free[i] = 1'b1;
        end else begin
          ln_we = 1'b1;
          ln_waddr = r.a_c;
          ln_wdata.v = r.store_head_v;
          ln_wdata.c = r.store_head;
          n.store_head_v = 1'b1;
          n.store_head = r.a_c;
          n.store_free = r.store_free + 32'd1;
        end
        n.st = r.ret_pop;
      end

      // ---- drop_tombstones(): pop while the head entry is retired -----------------------------
      S_DT: begin
        if (r.f.ms_count == 0) n.st = r.ret_dt;
        else begin
          ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
          n.st = S_DT_E;
        end
      end
      S_DT_E: begin
        if (ms_rd.len == 0) begin
          n.ret_pop = S_DT;
          n.st = S_POP;
        end else n.st = r.ret_dt;
      end

      // ---- chunk_alloc() -> a_v, a_c -----------------------------------------------------------
      S_ALLOC: begin
        n.a_v = 1'b1;
        if (r.f.priv_free != 0) begin
          n.a_c = priv_pick;
          n.f.priv_free = r.f.priv_free & ~priv_low;
          ln_we = 1'b1;
          ln_waddr = priv_pick;
          ln_wdata = '0;
          n.st = r.ret_alloc;
        end else if (r.store_head_v) begin
          n.a_c = r.store_head;
          ln_raddr = r.store_head;
          n.st = S_ALLOC_LINK;
        end else if (32'(r.store_bump) < TOTAL_CHUNKS) begin
          n.a_c = r.store_bump[CW-1:0];
          n.store_bump = r.store_bump + 1'b1;
          n.store_free = r.store_free - 32'd1;
          ln_we = 1'b1;
          ln_waddr = r.store_bump[CW-1:0];
          ln_wdata = '0;
          n.st = r.ret_alloc;
        end else begin
          n.a_v = 1'b0;
          n.st = r.ret_alloc;
        end
      end
      S_ALLOC_LINK: begin
        n.store_head_v = ln_rd.v;
        n.store_head = ln_rd.c;
        n.store_free = r.store_free - 32'd1;
        ln_we = 1'b1;
        ln_waddr = r.a_c;
        ln_wdata = '0;
        n.st = r.ret_alloc;
      end

      // ---- an MR's reference count up or down -----------------------------------------------
      S_REF: begin
        mr_raddr = r.ref_mr[MW-1:0];
        n.st = S_REF_W;
      end
      S_REF_W: begin
        mm = mr_rd;
        mm.refs = r.ref_up ? mm.refs + 32'd1 : mm.refs - 32'd1;
        mr_we = 1'b1;
        mr_waddr = r.ref_mr[MW-1:0];
        mr_wdata = mm;
        n.st = r.ret_ref;
      end

      // ---- commands -----------------------------------------------------------------------------
      S_CMD: begin
        n.fid = FW'(c_flow);
        case (c_op)
          CMD_MR_ADD, CMD_MR_REMOVE: begin
            n.st = S_MRA_RD;
          end
          CMD_FLOW_ADD: begin
            if (32'(c_flow) >= MAX_FLOWS) `CMD_ERR(ERR_FLOW_TABLE_FULL)
            else begin
              fs_raddr = FW'(c_flow);
              n.st = S_FA_CHK;
            end
          end
          CMD_RKEY_CHECK, CMD_FLOW_QUERY: begin
            n.count_it = 1'b0;  // queries are not counted
            if (32'(c_flow) >= MAX_FLOWS) begin
              if (c_op == CMD_FLOW_QUERY) n.st = S_CMD_DONE;
              else `CMD_ERR(ERR_UNKNOWN_FLOW)
            end else begin
              fs_raddr = FW'(c_flow);
              n.st = S_CMD_FLOW;
            end
          end
          CMD_FLOW_REMOVE, CMD_FLOW_MODE, CMD_MS_POST, CMD_CURSOR, CMD_MS_RETIRE,
          CMD_MS_RETIRE_MSG, CMD_ROCE_RESYNC, CMD_READ_POST, CMD_READ_RETIRE: begin
            if (32'(c_flow) >= MAX_FLOWS) `CMD_ERR(ERR_UNKNOWN_FLOW)
            else begin
              fs_raddr = FW'(c_flow);
              n.st = S_CMD_FLOW;
            end
          end
          default: `CMD_ERR(ERR_BAD_ARGUMENT)
        endcase
      end
      S_CMD_FLOW: begin
        n.f = fs_rd;
        if (!fs_rd.used) begin
          if (c_op == CMD_FLOW_QUERY) n.st = S_CMD_DONE;
          else `CMD_ERR(ERR_UNKNOWN_FLOW)
        end else begin
          n.fid_v = 1'b1;
          n.st = S_CMD_GO;
        end
      end
      S_CMD_GO: begin
        case (c_op)
          CMD_FLOW_REMOVE: begin
            n.st = S_FR_POP;
          end
          CMD_FLOW_MODE: begin
            if (c_arg8 > 8'd1) `CMD_ERR(ERR_BAD_ARGUMENT)
            else begin
              n.f.mode = c_arg8[0];
              n.st = S_CMD_DONE;
            end
          end
          CMD_MS_POST: begin
            if (32'(c_arg16) >= MAX_MRS) `CMD_ERR(ERR_UNKNOWN_MR)
            else begin
              mr_raddr = c_arg16[MW-1:0];
              n.st = S_MP_MR;
            end
          end
          CMD_CURSOR: begin
            if (r.f.parser == PARSER_ROCE &&
                (c_w2 > 32'hFFFFFF || psn_neg(c_w2[23:0], r.f.cursor[23:0])))
              `CMD_ERR(ERR_BAD_ARGUMENT)
            else if (r.f.parser == PARSER_TCP && 1'(32'(c_w2 - r.f.cursor) >> 31))
              `CMD_ERR(ERR_BAD_ARGUMENT)
            else begin
              n.f.cursor = c_w2;
              // RoCE: the transport accepted up to here; placing goes on from there at the
              // earliest.
              if (r.f.parser == PARSER_ROCE && c_w2[23:0] != r.f.exp_psn &&
                  !psn_neg(c_w2[23:0], r.f.exp_psn))
                n.f.exp_psn = c_w2[23:0];
              n.st = S_CMD_DONE;
            end
          end
          CMD_MS_RETIRE: begin
            if (c_w2 > r.f.ms_count) `CMD_ERR(ERR_NOT_CONSUMED)
            else begin
              n.cnt = '0;
              n.ch = r.f.head_chunk;
              n.idx = r.f.head_idx;
              n.pos32 = r.f.head_pos[31:0];
              if (r.f.parser == PARSER_TCP && r.f.reliable && c_w2 != 0) begin
                ms_raddr = ms_at(r.f.head_chunk, r.f.head_idx);
                n.st = S_RT_WALK;
              end else n.st = S_RT_POP;
            end
          end
          CMD_MS_RETIRE_MSG: begin
            if (!r.f.messages && r.f.parser != PARSER_ROCE) `CMD_ERR(ERR_BAD_ARGUMENT)
            else begin
              n.msg = c_w2;
              n.ret_find = S_RM_FIND;
              n.st = S_FIND;
            end
          end
          CMD_ROCE_RESYNC: begin
            if (r.f.parser != PARSER_ROCE || c_w2 > 32'hFFFFFF) `CMD_ERR(ERR_BAD_ARGUMENT)
            else begin
              n.f.next_start_psn = c_w2[23:0];
              n.f.next_start_known = 1'b1;
              n.f.next_msg = c_w3;
              n.f.send_ctx = '0;
              n.f.write_ctx = '0;
              n.st = S_CMD_DONE;
            end
          end
          CMD_READ_POST: begin
            if (r.f.parser != PARSER_ROCE || c_w2 > 32'hFFFFFF) `CMD_ERR(ERR_BAD_ARGUMENT)
            else if (32'(c_arg16) >= MAX_MRS) `CMD_ERR(ERR_UNKNOWN_MR)
            else begin
              mr_raddr = c_arg16[MW-1:0];
              n.st = S_RP_MR;
            end
          end
          CMD_READ_RETIRE: begin
            if (r.f.parser != PARSER_ROCE || c_w2 > 32'hFFFFFF) `CMD_ERR(ERR_BAD_ARGUMENT)
            else if (!r.f.read_v) `CMD_ERR(ERR_NO_SUCH_MESSAGE)
            else begin
              n.ri = '0;
              n.found = 1'b0;
              n.live = 1'b0;
              n.st = S_RR_SCAN;
            end
          end
          CMD_RKEY_CHECK: begin
            if (r.f.parser != PARSER_ROCE || c_arg8 == 0 || c_arg8[7:2] != 0)
              `CMD_ERR(ERR_BAD_ARGUMENT)
            else begin
              mr_raddr = c_w2[MW-1:0];
              n.st = S_RK_MR;
            end
          end
          CMD_FLOW_QUERY: begin
            n.q_ms = r.f.ms_count;
            n.q_cursor = r.f.cursor;
            n.q_reads = '0;
            n.ri = '0;
            n.fid_v = 1'b0;  // nothing changes
            if (r.f.read_v) n.st = S_Q_SCAN;
            else n.st = S_CMD_DONE;
          end
          default: `CMD_ERR(ERR_BAD_ARGUMENT)
        endcase
      end

      // MR_ADD and MR_REMOVE
      S_MRA_RD: begin
        if (32'(c_arg16) >= MAX_MRS) begin
          if (c_op == CMD_MR_ADD) `CMD_ERR(ERR_MR_TABLE_FULL)
          else `CMD_ERR(ERR_UNKNOWN_MR)
        end else begin
          mr_raddr = c_arg16[MW-1:0];
          n.st = c_op == CMD_MR_ADD ? S_MRA_CHK : S_MRR_CHK;
        end
      end
      S_MRA_CHK: begin
        u64 = {c_w6, c_w5};  // length
        if ({c_w4, c_w3} == 0 || u64 == 0 || u64 >= 64'h100_0000_0000) `CMD_ERR(ERR_OUT_OF_BOUNDS)
        else if (c_arg8[7:2] != 0) `CMD_ERR(ERR_BAD_ARGUMENT)
        else if (mr_rd.used) `CMD_ERR(ERR_MR_EXISTS)
        else begin
          mm = '0;
          mm.used = 1'b1;
          mm.base = {c_w4, c_w3};
          mm.len = u64[39:0];
          mm.owner = c_w2;
          mm.tag = c_w7[15:0];
          mm.access = c_arg8[1:0];
          mr_we = 1'b1;
          mrv_we = 1'b1;
          mr_waddr = c_arg16[MW-1:0];
          mr_wdata = mm;
          n.st = S_CMD_DONE;
        end
      end
      S_MRR_CHK: begin
        if (!mr_rd.used) `CMD_ERR(ERR_UNKNOWN_MR)
        else if (mr_rd.refs != 0) `CMD_ERR(ERR_MR_IN_USE)
        else begin
          mr_we = 1'b1;
          mrv_we = 1'b1;
          mr_waddr = c_arg16[MW-1:0];
          mr_wdata = '0;
          n.st = S_CMD_DONE;
        end
      end

      // FLOW_ADD
      S_FA_CHK: begin
        if (fs_rd.used) `CMD_ERR(ERR_FLOW_EXISTS)
        else if (r.flows_in_use >= MAX_FLOWS) `CMD_ERR(ERR_FLOW_TABLE_FULL)
        else if (c_arg8 != 8'd6 && c_arg8 != 8'd17) `CMD_ERR(ERR_BAD_ARGUMENT)
        else if ((c_parser == PARSER_TCP) != (c_arg8 == 8'd6)) `CMD_ERR(ERR_BAD_ARGUMENT)
        else if (c_parser == PARSER_ROCE &&
                 (c_arg16 < 16'd256 || c_arg16 > 16'd4096 || (c_arg16 & (c_arg16 - 16'd1)) != 0 ||
                  c_w5 > 32'hFFFFFF || c_w7 > 32'hFFFFFF || c_w4[31:16] != C_ROCE_PORT[15:0]))
          `CMD_ERR(ERR_BAD_ARGUMENT)
        else if (c_parser == PARSER_SOLAR &&
                 (c_w5 > 32'hFFFFFF || c_w4[31:16] != C_SOLAR_PORT[15:0]))
          `CMD_ERR(ERR_BAD_ARGUMENT)
        else n.st = S_FA_LK;
      end
      S_FA_LK: begin
        lk_valid = 1'b1;
        lk_op = 2'd0;
        lk_key.src_ip = c_w2;
        lk_key.dst_ip = c_w3;
        lk_key.sport = c_numbered ? 16'd0 : c_w4[15:0];
        lk_key.dport = c_w4[31:16];
        lk_key.udp = c_arg8 == 8'd17;
        lk_key.numbered = c_numbered;
        lk_key.qpn = c_number;
        if (lk_ready) n.st = S_FA_INS;
      end
      S_FA_INS: begin
        if (lk_rsp_valid) begin
          if (lk_rsp_hit) `CMD_ERR(ERR_FLOW_EXISTS)
          else n.st = S_FA_INS2;
        end
      end
      S_FA_INS2: begin
        lk_valid = 1'b1;
        lk_op = 2'd1;
        lk_id = FW'(c_flow);
        lk_key.src_ip = c_w2;
        lk_key.dst_ip = c_w3;
        lk_key.sport = c_numbered ? 16'd0 : c_w4[15:0];
        lk_key.dport = c_w4[31:16];
        lk_key.udp = c_arg8 == 8'd17;
        lk_key.numbered = c_numbered;
        lk_key.qpn = c_number;
        if (lk_ready) begin
          nf = '0;
          nf.used = 1'b1;
          nf.parser = c_parser;
          nf.mode = c_mode;
          nf.reliable = c_reliable;
          nf.messages = c_messages;
          nf.pmtu_log2 = 4'd8;
          for (int i = 9; i <= 12; i++) if (c_arg16 == 16'(1 << i)) nf.pmtu_log2 = 4'(i);
          nf.owner = c_w6;
          nf.cursor = c_parser == PARSER_SOLAR ? 32'd0 : c_w5;  // Solar: w5 is its number
          nf.head_pos = c_parser == PARSER_SOLAR ? {c_w7, c_w6} : {32'd0, c_w5};
          nf.priv_free = '1;
          nf.msg_dense = 1'b1;
          nf.next_start_known = 1'b1;
          nf.next_start_psn = c_w5[23:0];
          nf.selrep = c_selrep;
          nf.exp_psn = c_w5[23:0];
          n.f = nf;
          n.fid_v = 1'b1;
          n.flows_in_use = r.flows_in_use + 32'd1;
          n.st = S_CMD_DONE;
        end
      end

      // FLOW_REMOVE: pop every MS, release the READ sinks, unlink, clear.
      S_FR_POP: begin
        if (r.f.ms_count != 0) begin
          n.ret_pop = S_FR_POP;
          n.st = S_POP;
        end else if (r.f.read_v) begin
          n.ri = '0;
          n.st = S_FR_REL;
        end else n.st = S_FR_RM;
      end
      S_FR_REL: begin
        ms_raddr = ms_at(r.f.read_chunk, r.ri);
        n.st = S_FR_REL_E;
      end
      S_FR_REL_E: begin
        n.e = ms_rd;
        if (ms_rd.msg[31]) begin
          ms_we = 1'b1;
          ms_waddr = ms_at(r.f.read_chunk, r.ri);
          ms_wdata = '0;
          n.ref_mr = ms_rd.mr;
          n.ref_up = 1'b0;
          n.ret_ref = S_FR_REL_W;
          n.st = S_REF;
        end else n.st = S_FR_REL_W;
      end
      S_FR_REL_W: begin
        if (32'(r.ri) + 1 == K) begin
          // chunk_free(read chunk)
          n.f.read_v = 1'b0;
          n.a_c = r.f.read_chunk;
          n.pl_adv = 1'b0;
          n.ret_pop = S_FR_RM;
          n.st = S_POP_LINK;
        end else begin
          n.ri = r.ri + 1'b1;
          n.st = S_FR_REL;
        end
      end
      S_FR_RM: begin
        lk_valid = 1'b1;
        lk_op = 2'd2;
        lk_id = r.fid;
        if (lk_ready) begin
          n.f = '0;
          n.flows_in_use = r.flows_in_use - 32'd1;
          n.st = S_CMD_DONE;
        end
      end

      // MS_POST
      S_MP_MR: begin
        mm = mr_rd;
        n.mr = mm;
        if (!mm.used) `CMD_ERR(ERR_UNKNOWN_MR)
        else if (c_w4 == 0) `CMD_ERR(ERR_BAD_ARGUMENT)
        else if ({16'd0, c_w3[15:0], c_w2} > {24'd0, mm.len} ||
                 {32'd0, c_w4} > {24'd0, mm.len} - {16'd0, c_w3[15:0], c_w2})
          `CMD_ERR(ERR_OUT_OF_BOUNDS)
        else begin
          // The newest entry's number tells whether the numbers stay consecutive.
          ms_raddr = ms_at(r.f.tail_chunk, r.f.tail_idx - 1'b1);
          n.st = S_MP_TAIL;
        end
      end
      S_MP_TAIL: begin
        n.live = r.f.ms_count == 0 || (r.f.msg_dense && c_w5 == ms_rd.msg + 32'd1);  // dense
        if (!r.f.tail_v || 32'(r.f.tail_idx) == K) begin
          n.ret_alloc = S_MP_ALLOC;
          n.st = S_ALLOC;
        end else n.st = S_MP_WRITE;
      end
      S_MP_ALLOC: begin
        if (!r.a_v) `CMD_ERR(ERR_MS_FULL)
        else begin
          if (!r.f.tail_v) begin
            n.f.head_v = 1'b1;
            n.f.head_chunk = r.a_c;
            n.f.head_idx = '0;
            // An empty byte-stream list starts again at the cursor.
            if (r.f.parser == PARSER_TCP) n.f.head_pos = {32'd0, r.f.cursor};
          end else begin
            ln_we = 1'b1;
            ln_waddr = r.f.tail_chunk;
            ln_wdata.v = 1'b1;
            ln_wdata.c = r.a_c;
          end
          n.f.tail_v = 1'b1;
          n.f.tail_chunk = r.a_c;
          n.f.tail_idx = '0;
          n.st = S_MP_WRITE;
        end
      end
      S_MP_WRITE: begin
        me.mr = c_arg16;
        me.off = {c_w3[15:0], c_w2};
        me.len = c_w4;
        me.msg = c_w5;
        ms_we = 1'b1;
        ms_waddr = ms_at(r.f.tail_chunk, r.f.tail_idx);
        ms_wdata = me;
        n.f.msg_dense = r.live;
        n.f.tail_idx = r.f.tail_idx + 1'b1;
        n.f.ms_count = r.f.ms_count + 32'd1;
        n.f.list_bytes = r.f.list_bytes + {32'd0, c_w4};
        n.ref_mr = c_arg16;
        n.ref_up = 1'b1;
        n.ret_ref = S_CMD_DONE;
        n.st = S_REF;
      end

      // MS_RETIRE: TCP streams first check that the cursor passed every MS retired.
      S_RT_WALK: begin
        t32 = r.pos32 + ms_rd.len;
        if (1'(32'(r.f.cursor - t32) >> 31)) `CMD_ERR(ERR_NOT_CONSUMED)
        else if (r.cnt + 1 == c_w2) begin
          n.cnt = '0;
          n.st = S_RT_POP;
        end else begin
          n.pos32 = t32;
          n.cnt = r.cnt + 1;
          nidx = r.idx + 1'b1;
          if (32'(nidx) == K) begin
            ln_raddr = r.ch;
            n.st = S_RT_WLINK;
          end else begin
            n.idx = nidx;
            ms_raddr = ms_at(r.ch, nidx);
          end
        end
      end
      S_RT_WLINK: begin
        n.ch = ln_rd.c;
        n.idx = '0;
        ms_raddr = ms_at(ln_rd.c, '0);
        n.st = S_RT_WALK;
      end
      S_RT_POP: begin
        if (r.cnt < c_w2) begin
          n.cnt = r.cnt + 1;
          n.ret_pop = S_RT_POP;
          n.st = S_POP;
        end else begin
          n.ret_dt = S_CMD_DONE;
          n.st = S_DT;
        end
      end

      // MS_RETIRE_MSG: the entry becomes a tombstone.
      S_RM_FIND: begin
        if (!r.found) `CMD_ERR(ERR_NO_SUCH_MESSAGE)
        else begin
          me = r.e;
          me.len = '0;
          ms_we = 1'b1;
          ms_waddr = ms_at(r.fch, r.fidx);
          ms_wdata = me;
          n.f.list_bytes = r.f.list_bytes - {32'd0, r.e.len};
          n.ref_mr = r.e.mr;
          n.ref_up = 1'b0;
          n.ret_ref = S_RM_REF;
          n.st = S_REF;
        end
      end
      S_RM_REF: begin
        n.ret_dt = S_CMD_DONE;
        n.st = S_DT;
      end

      // READ_POST
      S_RP_MR: begin
        mm = mr_rd;
        n.mr = mm;
        n.len = read_packets(c_w5, r.f.pmtu_log2);  // PSNs the READ takes
        if (!mm.used) `CMD_ERR(ERR_UNKNOWN_MR)
        else if ({16'd0, c_w4[15:0], c_w3} > {24'd0, mm.len} ||
                 {32'd0, c_w5} > {24'd0, mm.len} - {16'd0, c_w4[15:0], c_w3})
          `CMD_ERR(ERR_OUT_OF_BOUNDS)
        else if (mm.owner != r.f.owner) `CMD_ERR(ERR_ACCESS_DENIED)
        else if (read_packets(c_w5, r.f.pmtu_log2) > 32'h800000) `CMD_ERR(ERR_BAD_ARGUMENT)
        else if (r.f.read_v) begin
          n.ri = '0;
          n.free_v = 1'b0;
          n.st = S_RP_SCAN;
        end else begin
          n.ret_alloc = S_RP_ALLOC;
          n.st = S_ALLOC;
        end
      end
      S_RP_SCAN: begin
        ms_raddr = ms_at(r.f.read_chunk, r.ri);
        n.st = S_RP_SCAN_E;
      end
      S_RP_SCAN_E: begin
        me = ms_rd;
        // A response must name one sink: PSN ranges stay disjoint.
        if (me.msg[31] && ({8'd0, 24'(me.msg[23:0] - c_w2[23:0])} < r.len ||
                           {8'd0, 24'(c_w2[23:0] - me.msg[23:0])} <
                           read_packets(me.len, r.f.pmtu_log2)))
          `CMD_ERR(ERR_BAD_ARGUMENT)
        else begin
          if (!me.msg[31] && !r.free_v) begin
            n.free_v = 1'b1;
            n.free_i = r.ri;
          end
          if (32'(r.ri) + 1 == K) begin
            if (!r.free_v && me.msg[31]) `CMD_ERR(ERR_MS_FULL)
            else begin
              n.free_i = r.free_v ? r.free_i : r.ri;
              n.st = S_RP_WRITE;
            end
          end else begin
            n.ri = r.ri + 1'b1;
            n.st = S_RP_SCAN;
          end
        end
      end
      S_RP_ALLOC: begin
        if (!r.a_v) `CMD_ERR(ERR_MS_FULL)
        else begin
          n.f.read_v = 1'b1;
          n.f.read_chunk = r.a_c;
          n.ri = '0;
          n.st = S_RP_ZERO;
        end
      end
      S_RP_ZERO: begin
        ms_we = 1'b1;
        ms_waddr = ms_at(r.f.read_chunk, r.ri);
        ms_wdata = '0;
        if (32'(r.ri) + 1 == K) begin
          n.free_i = '0;
          n.st = S_RP_WRITE;
        end else n.ri = r.ri + 1'b1;
      end
      S_RP_WRITE: begin
        me.mr = c_arg16;
        me.off = {c_w4[15:0], c_w3};
        me.len = c_w5;
        me.msg = {8'h80, c_w2[23:0]};
        ms_we = 1'b1;
        ms_waddr = ms_at(r.f.read_chunk, r.free_i);
        ms_wdata = me;
        n.ref_mr = c_arg16;
        n.ref_up = 1'b1;
        n.ret_ref = S_CMD_DONE;
        n.st = S_REF;
      end

      // READ_RETIRE
      S_RR_SCAN: begin
        ms_raddr = ms_at(r.f.read_chunk, r.ri);
        n.st = S_RR_SCAN_E;
      end
      S_RR_SCAN_E: begin
        me = ms_rd;
        if (me.msg[31]) begin
          if (!r.found && me.msg == {8'h80, c_w2[23:0]}) begin
            n.found = 1'b1;
            ms_we = 1'b1;
            ms_waddr = ms_at(r.f.read_chunk, r.ri);
            ms_wdata = '0;
            n.ref_mr = me.mr;
            n.ref_up = 1'b0;
            n.ret_ref = S_RR_DONE;
            n.st = S_REF;
          end else begin
            n.live = 1'b1;
            n.st = S_RR_DONE;
          end
        end else n.st = S_RR_DONE;
      end
      S_RR_DONE: begin
        if (32'(r.ri) + 1 != K) begin
          n.ri = r.ri + 1'b1;
          n.st = S_RR_SCAN;
        end else if (!r.found) `CMD_ERR(ERR_NO_SUCH_MESSAGE)
        else if (!r.live) begin
          n.f.read_v = 1'b0;
          n.a_c = r.f.read_chunk;
          n.pl_adv = 1'b0;
          n.ret_pop = S_CMD_DONE;
          n.st = S_POP_LINK;
        end else n.st = S_CMD_DONE;
      end

      // RKEY_CHECK
      S_RK_MR: begin
        if (!remote_ok(mr_rd.used, mr_rd.tag, mr_rd.owner, mr_rd.access, mr_rd.len, r.f.owner,
                       c_w2, {c_w4, c_w3}, {c_w6, c_w5}, c_arg8[1:0]))
          `CMD_ERR(ERR_ACCESS_DENIED)
        else begin
          n.rsp_mr = c_w2[15:0];
          n.fid_v = 1'b0;
          n.st = S_CMD_DONE;
        end
      end

      // FLOW_QUERY: count the live READ sinks.
      S_Q_SCAN: begin
        ms_raddr = ms_at(r.f.read_chunk, r.ri);
        n.st = S_Q_SCAN_E;
      end
      S_Q_SCAN_E: begin
        if (ms_rd.msg[31]) n.q_reads = r.q_reads + 32'd1;
        if (32'(r.ri) + 1 == K) n.st = S_CMD_DONE;
        else begin
          n.ri = r.ri + 1'b1;
          n.st = S_Q_SCAN;
        end
      end

      S_CMD_DONE: begin
        if (r.count_it) begin
          if (r.err == ERR_OK) `INC(0, CTR_CMD_OK, 1)
          else begin
            `INC(0, CTR_CMD_ERRORS, 1)
            `INC(1, 32'(CTR_BASE_ERR) + 32'(r.err), 1)
          end
        end
        // The flow back (unchanged by a command that failed: none fails after a change).
        if (r.fid_v) begin
          fs_we = 1'b1;
          fs_waddr = r.fid;
          fs_wdata = r.f;
        end
        n.st = S_CMD_RSP;
      end
      S_CMD_RSP: begin
        m_rsp_valid = 1'b1;
        n.st = S_IDLE;
      end

      default: n.st = S_IDLE;
    endcase
  end

`undef DEFER
`undef FINISH
`undef INC
`undef CMD_ERR

  always_ff @(posedge clk) begin
    if (rst) begin
      r <= '0;
      r.st <= S_INIT;
      r.store_bump <= (CW + 1)'(COMMITTED_CHUNKS);
      r.store_free <= 32'(STORE_CHUNKS);
    end else begin
      r <= n;
    end
  end
endmodule

`resetall
