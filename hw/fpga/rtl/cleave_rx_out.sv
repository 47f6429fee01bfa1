// cleave_rx_out.sv - the frame buffer and what leaves the NIC for each received frame.
//
// Frames from the parser are written into a circular buffer of FBUF_BEATS beats; the engine's
// decision for each frame (rx_dec_t, in frame order) says what to take out of it:
//   m_axis_hdr   the frame's first header_len bytes (the RX header slot), when header_len > 0
//   m_axis_copy  the whole frame, when the decision is "deferred" (the copy path)
//   m_desc       one DMA write request per placement fragment (address, length; `last` on
//                the frame's last fragment), then
//   m_axis_pay   the placed payload bytes as one packet, byte 0 in lane 0: the fragments back
//                to back, in their order (a DMA engine writes fragment i's bytes to its address)
//   m_cpl        the decision itself, after the frame's bytes have left
// A frame is read at most twice: its header beats (or all of it for the copy path), then the
// beats holding the placed bytes, realigned to lane 0. The buffer's space is back when the
// decision has left. Frames longer than the buffer cannot be stored (Corundum's MAX_RX_SIZE
// is far below the default 32 KB).
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_rx_out #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // Frame buffer size in beats (a power of two)
    parameter int FBUF_BEATS = 4096,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    // Frames in, as the parser passed them
    input  wire logic [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire logic                  s_axis_tvalid,
    output logic                       s_axis_tready,
    input  wire logic                  s_axis_tlast,

    // Decisions, one per frame, in order
    input  wire rx_dec_t s_dec,
    input  wire logic    s_dec_valid,
    output logic         s_dec_ready,

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
    input  wire logic m_cpl_ready
);
  `include "cleave_nic_defs.vh"

  localparam int NB = KEEP_WIDTH;
  localparam int LB = $clog2(NB);
  localparam int BW = $clog2(FBUF_BEATS);
  localparam int RW = DATA_WIDTH + KEEP_WIDTH + 1;
  localparam int FQ = 16;  // frames buffered at most

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512)
      $error("DATA_WIDTH must be 64, 128, 256 or 512");
    if (KEEP_WIDTH * 8 != DATA_WIDTH) $error("KEEP_WIDTH must be DATA_WIDTH / 8");
    if (FBUF_BEATS < 64 || (FBUF_BEATS & (FBUF_BEATS - 1)) != 0)
      $error("FBUF_BEATS must be a power of two >= 64");
  end

  // ---- write side: beats into the ring, one record per whole frame ------------------------
  logic [BW:0] wptr, fstart, rel_ptr;  // beat counters (one bit more than the ring)
  logic [BW:0] fi_start[FQ];
  logic [BW:0] fi_beats[FQ];
  logic [$clog2(FQ):0] fi_wr, fi_rd;
  wire fi_full = fi_wr - fi_rd == FQ[$clog2(FQ):0];
  wire fi_empty = fi_wr == fi_rd;
  wire ring_full = wptr - rel_ptr == FBUF_BEATS[BW:0];

  assign s_axis_tready = !ring_full && !fi_full;
  wire wfire = s_axis_tvalid && s_axis_tready;

  logic [BW-1:0] ram_raddr;
  logic [RW-1:0] ram_rd;
  cleave_ram #(
      .DEPTH(FBUF_BEATS),
      .WIDTH(RW)
  ) u_ring (
      .clk(clk),
      .wr_en(wfire),
      .wr_addr(wptr[BW-1:0]),
      .wr_data({s_axis_tlast, s_axis_tkeep, s_axis_tdata}),
      .rd_addr(ram_raddr),
      .rd_data(ram_rd)
  );

  always_ff @(posedge clk) begin
    if (rst) begin
      wptr <= '0;
      fstart <= '0;
      fi_wr <= '0;
    end else if (wfire) begin
      wptr <= wptr + 1'b1;
      if (s_axis_tlast) begin
        fi_start[fi_wr[$clog2(FQ)-1:0]] <= fstart;
        fi_beats[fi_wr[$clog2(FQ)-1:0]] <= wptr + 1'b1 - fstart;
        fi_wr <= fi_wr + 1'b1;
        fstart <= wptr + 1'b1;
      end
    end
  end

  // ---- read side: a beat fetcher with a two-entry skid buffer -------------------------------
  logic [BW:0] rd_next, rd_left;  // beats still to fetch for this pass
  logic inflight;
  logic [RW-1:0] q0, q1;
  logic [1:0] qn;
  logic pop;  // the state machine takes q0 this cycle
  wire issue = rd_left != 0 && ({1'b0, qn} + {2'd0, inflight} - {2'd0, pop}) < 3'd2;
  assign ram_raddr = rd_next[BW-1:0];

  // ---- the per-frame state machine --------------------------------------------------------
  typedef enum logic [2:0] {
    F_IDLE,
    F_PASS1,
    F_DESC,
    F_PASS2,
    F_CPL
  } fst_t;
  fst_t st;
  rx_dec_t dec;
  logic [BW:0] f_start, f_beats;
  logic [BW:0] p1_beats;     // beats pass 1 reads
  logic [15:0] p1_off;       // frame offset of the beat at q0 in pass 1
  logic [15:0] p2_left;
  logic [LB-1:0] p2_ps;  // lane of the first placed byte
  logic [2:0] d_i;
  logic have_prev;
  logic [DATA_WIDTH-1:0] prev;
  logic [BW:0] p2_in_left;   // input beats of pass 2 not yet taken from q0
  logic start_pass;
  logic [BW:0] start_next, start_left;

  wire deferred = dec.decision == DECISION_DEFERRED;
  wire [15:0] hlen = {8'd0, dec.header_len};
  wire q_have = qn != 0;
  wire [DATA_WIDTH-1:0] q_data = q0[DATA_WIDTH-1:0];
  wire [KEEP_WIDTH-1:0] q_keep = q0[DATA_WIDTH+:KEEP_WIDTH];
  wire q_last = q0[RW-1];

  // Pass 1: header bytes of this beat (keep masked at header_len) and the whole beat to copy.
  logic [KEEP_WIDTH-1:0] h_keep;
  logic h_act, h_last;
  always_comb begin
    h_act = p1_off < hlen;
    h_last = p1_off + 16'(NB) >= hlen;
    for (int j = 0; j < NB; j++) h_keep[j] = q_keep[j] && p1_off + 16'(j) < hlen;
  end
  assign m_axis_hdr_tdata = q_data;
  assign m_axis_hdr_tkeep = h_keep;
  assign m_axis_hdr_tlast = h_last;
  assign m_axis_copy_tdata = q_data;
  assign m_axis_copy_tkeep = q_keep;
  assign m_axis_copy_tlast = q_last;
  // A beat for both outputs is offered to each on its own (valid never waits for a ready) and
  // leaves the buffer once both took it.
  logic h_sent, c_sent;
  assign m_axis_hdr_tvalid = st == F_PASS1 && q_have && h_act && !h_sent;
  assign m_axis_copy_tvalid = st == F_PASS1 && q_have && deferred && !c_sent;
  wire h_done = !h_act || h_sent || m_axis_hdr_tready;
  wire c_done = !deferred || c_sent || m_axis_copy_tready;
  wire p1_go = st == F_PASS1 && q_have && h_done && c_done;

  // Pass 2: {q0, prev} shifted down by the payload's lane; the last beat from prev alone.
  logic [LB-1:0] sh;
  assign sh = p2_ps[LB-1:0];
  /* verilator lint_off UNUSEDSIGNAL */
  logic [2*DATA_WIDTH-1:0] win;  // its upper half is what the shift left behind
  /* verilator lint_on UNUSEDSIGNAL */
  logic [DATA_WIDTH-1:0] p_data;
  logic [KEEP_WIDTH-1:0] p_keep;
  wire p_can = st == F_PASS2 && have_prev && (p2_in_left == 0 || q_have);
  always_comb begin
    win = {(p2_in_left != 0 ? q_data : {DATA_WIDTH{1'b0}}), prev} >> {sh, 3'd0};
    p_data = win[DATA_WIDTH-1:0];
    for (int j = 0; j < NB; j++) p_keep[j] = 16'(j) < p2_left;
  end
  assign m_axis_pay_tdata = p_data;
  assign m_axis_pay_tkeep = p_keep;
  assign m_axis_pay_tlast = p2_left <= 16'(NB);
  assign m_axis_pay_tvalid = p_can;

  assign m_desc = dec.frags[144*d_i+:144];
  assign m_desc_last = d_i + 3'd1 == dec.nfrags;
  assign m_desc_valid = st == F_DESC;
  assign m_cpl = dec;
  assign m_cpl_valid = st == F_CPL;
  assign s_dec_ready = st == F_IDLE && !fi_empty;

  always_comb begin
    pop = 1'b0;
    if (p1_go) pop = 1'b1;
    if (st == F_PASS2) begin
      if (!have_prev && q_have) pop = 1'b1;
      else if (p_can && m_axis_pay_tready && p2_in_left != 0) pop = 1'b1;
    end
  end

  // Where pass 1 and pass 2 start reading.
  always_comb begin
    start_pass = 1'b0;
    start_next = '0;
    start_left = '0;
    if (st == F_IDLE && s_dec_valid && !fi_empty) begin
      start_next = fi_start[fi_rd[$clog2(FQ)-1:0]];
      // deferred: every beat; else the header's
      start_left = s_dec.decision == DECISION_DEFERRED ? fi_beats[fi_rd[$clog2(FQ)-1:0]] :
          (BW + 1)'(({8'd0, s_dec.header_len} + 16'(NB - 1)) >> LB);
      start_pass = 1'b1;
    end else if (st == F_DESC && m_desc_ready && m_desc_last) begin
      start_next = f_start + (BW + 1)'(dec.data_off >> LB);
      start_left = (BW + 1)'(((dec.data_off + dec.placed - 16'd1) >> LB) - (dec.data_off >> LB) + 16'd1);
      start_pass = 1'b1;
    end
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= F_IDLE;
      fi_rd <= '0;
      rel_ptr <= '0;
      rd_next <= '0;
      rd_left <= '0;
      inflight <= 1'b0;
      qn <= '0;
      have_prev <= 1'b0;
      h_sent <= 1'b0;
      c_sent <= 1'b0;
      d_i <= '0;
      p1_beats <= '0;
      p1_off <= '0;
      p2_ps <= '0;
      p2_left <= '0;
      p2_in_left <= '0;
      dec <= '0;
      f_start <= '0;
      f_beats <= '0;
      prev <= '0;
      q0 <= '0;
      q1 <= '0;
    end else begin
      // fetcher
      if (issue) begin
        rd_next <= rd_next + 1'b1;
        rd_left <= rd_left - 1'b1;
      end
      if (start_pass) begin
        rd_next <= start_next;
        rd_left <= start_left;
      end
      inflight <= issue;
      // skid buffer: pop from q0, push the arriving beat
      case ({inflight, pop})
        2'b01: begin
          q0 <= q1;
          qn <= qn - 1'b1;
        end
        2'b10: begin
          if (qn == 0) q0 <= ram_rd;
          else q1 <= ram_rd;
          qn <= qn + 1'b1;
        end
        2'b11: begin
          if (qn == 1) q0 <= ram_rd;
          else begin
            q0 <= q1;
            q1 <= ram_rd;
          end
        end
        default: ;
      endcase

      case (st)
        F_IDLE: begin
          if (s_dec_valid && !fi_empty) begin
            dec <= s_dec;
            f_start <= fi_start[fi_rd[$clog2(FQ)-1:0]];
            f_beats <= fi_beats[fi_rd[$clog2(FQ)-1:0]];
            p1_beats <= start_left;
            p1_off <= '0;
            fi_rd <= fi_rd + 1'b1;
            st <= F_PASS1;
          end
        end
        F_PASS1: begin
          if (p1_go) begin
            p1_beats <= p1_beats - 1'b1;
            p1_off <= p1_off + 16'(NB);
            h_sent <= 1'b0;
            c_sent <= 1'b0;
          end else begin
            if (m_axis_hdr_tvalid && m_axis_hdr_tready) h_sent <= 1'b1;
            if (m_axis_copy_tvalid && m_axis_copy_tready) c_sent <= 1'b1;
          end
          // Every beat of pass 1 taken: nothing is left in flight.
          if (p1_beats == 0) begin
            d_i <= '0;
            st <= dec.placed == 0 ? F_CPL : F_DESC;
          end
        end
        F_DESC: begin
          if (m_desc_ready) begin
            d_i <= d_i + 3'd1;
            if (m_desc_last) begin
              p2_ps <= dec.data_off[LB-1:0];
              p2_left <= dec.placed;
              p2_in_left <= start_left;
              have_prev <= 1'b0;
              st <= F_PASS2;
            end
          end
        end
        F_PASS2: begin
          if (!have_prev && q_have) begin
            prev <= q_data;
            have_prev <= 1'b1;
            p2_in_left <= p2_in_left - 1'b1;
          end else if (p_can && m_axis_pay_tready) begin
            p2_left <= p2_left <= 16'(NB) ? 16'd0 : p2_left - 16'(NB);
            if (p2_in_left != 0) begin
              prev <= q_data;
              p2_in_left <= p2_in_left - 1'b1;
            end else have_prev <= 1'b0;
            if (p2_left <= 16'(NB)) st <= F_CPL;
          end
        end
        default: begin  // F_CPL
          if (m_cpl_ready) begin
            rel_ptr <= f_start + f_beats;
            st <= F_IDLE;
          end
        end
      endcase
    end
  end
endmodule

`resetall
