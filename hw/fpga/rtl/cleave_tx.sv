// cleave_tx.sv - the send side: a header template plus a payload reference merged into frames.
//
// Each request arrives on s_axis_txd as one packet: the 32-byte TX descriptor (TX_DESC record)
// and the header template after it (header_len bytes: Ethernet, IPv4, TCP or UDP, for RoCEv2
// the BTH and what follows it). As the model's tx() does, the request is checked (the header,
// the payload's MR bounds, the frame size), then cut into segments (TSO: MSS bytes each, else
// one); per segment the payload is fetched with a DMA read (m_dma_rd_*, data back on
// s_axis_rd), the frame assembled in a segment buffer with IPv4 total length and UDP length
// filled in (under TSO also IP id + i, seq + i * MSS, PSH/FIN cleared on all but the last and
// CWR on all but the first), the RoCEv2 pad added, and the IPv4 header sum, TCP/UDP sum and
// ICRC computed over the assembled bytes; the frame then leaves on m_axis_tx with the
// checksums and the ICRC in place. One completion per request on m_txc (cookie, TxStatus,
// frames, bytes) and the model's TX counters, through the engine's counter file.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_tx #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // MR ids 0 .. MAX_MRS-1
    parameter int MAX_MRS = 256,
    parameter int MW = MAX_MRS > 1 ? $clog2(MAX_MRS) : 1,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    // Requests: descriptor + header template
    input  wire logic [DATA_WIDTH-1:0] s_axis_txd_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_txd_tkeep,
    input  wire logic                  s_axis_txd_tvalid,
    output logic                       s_axis_txd_tready,
    input  wire logic                  s_axis_txd_tlast,

    // The MR table (the engine's TX copy): used, base, length, one cycle after the address
    output logic [MW-1:0] mr_addr,
    input  wire logic [104:0] mr_data,

    // Payload reads: address and length; the bytes come back as one packet, byte 0 in lane 0
    output logic [63:0] m_dma_rd_addr,
    output logic [15:0] m_dma_rd_len,
    output logic        m_dma_rd_valid,
    input  wire logic   m_dma_rd_ready,
    input  wire logic [DATA_WIDTH-1:0] s_axis_rd_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_rd_tkeep,
    input  wire logic                  s_axis_rd_tvalid,
    output logic                       s_axis_rd_tready,
    input  wire logic                  s_axis_rd_tlast,

    // Frames
    output logic [DATA_WIDTH-1:0] m_axis_tx_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_tx_tkeep,
    output logic                  m_axis_tx_tvalid,
    input  wire logic             m_axis_tx_tready,
    output logic                  m_axis_tx_tlast,

    // Completions
    output logic [63:0] m_txc_cookie,
    output logic [7:0]  m_txc_status,
    output logic [15:0] m_txc_frames,
    output logic [31:0] m_txc_bytes,
    output logic        m_txc_valid,
    input  wire logic   m_txc_ready,

    // Counter increments (index, amount), four a cycle
    output logic [3:0]   inc_en,
    output logic [31:0]  inc_idx,
    output logic [127:0] inc_amt
);
  `include "cleave_nic_defs.vh"

  localparam int NB = KEEP_WIDTH;
  localparam int LB = $clog2(NB);
  localparam int HB = 256;              // header template bytes kept
  localparam int CAP = 32 + HB;         // request bytes captured
  localparam int SEG_BEATS = 16384 / NB;  // segment buffer: the largest frame and more
  localparam int SW = $clog2(SEG_BEATS);

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512)
      $error("DATA_WIDTH must be 64, 128, 256 or 512");
    if (KEEP_WIDTH * 8 != DATA_WIDTH) $error("KEEP_WIDTH must be DATA_WIDTH / 8");
  end

  // ---- the request ---------------------------------------------------------------------------
  logic [8*CAP-1:0] req_v;  // descriptor, then the template
  logic [15:0] req_len;     // bytes received
  logic [15:0] req_beat;
  logic [7:0] h[HB];        // the template by index
  always_comb for (int k = 0; k < HB; k++) h[k] = req_v[8*(32+k)+:8];

  logic [7:0] d_hlen, d_flags;
  logic [15:0] d_mss, d_mr;
  logic [47:0] d_off;
  logic [31:0] d_len;
  logic [63:0] d_cookie;
  always_comb begin
    d_hlen = req_v[TX_DESC_HEADER_LEN_LSB+:8];
    d_flags = req_v[TX_DESC_FLAGS_LSB+:8];
    d_mss = req_v[TX_DESC_MSS_LSB+:16];
    d_mr = req_v[TX_DESC_MR_LSB+:16];
    d_off = req_v[TX_DESC_OFFSET_LSB+:48];
    d_len = req_v[TX_DESC_LEN_LSB+:32];
    d_cookie = req_v[TX_DESC_COOKIE_LSB+:64];
  end

  // Header facts the checks and the assembly use.
  logic [7:0] ip_hl, l4;
  logic [7:0] proto;
  logic tso, icrc, ipc, l4c;
  logic [1:0] pad;
  logic [7:0] tail;
  logic bad_header;
  logic [31:0] seg, nseg, minseg;
  logic too_long;
  always_comb begin
    ip_hl = {2'd0, h[14][3:0], 2'd0};
    l4 = 8'd14 + ip_hl;
    proto = h[23];
    tso = d_flags[2];
    icrc = d_flags[3];
    ipc = tso || d_flags[0];
    l4c = tso || d_flags[1];
    bad_header = 1'b0;
    if (d_hlen < 8'd34 || {h[12], h[13]} != 16'h0800 || h[14][7:4] != 4'd4 || h[14][3:0] < 4'd5)
      bad_header = 1'b1;
    else begin
      if (proto == 8'd6) begin
        if ({8'd0, d_hlen} < {8'd0, l4} + 16'd20 || h[l4+8'd12][7:4] < 4'd5 ||
            {8'd0, d_hlen} != {8'd0, l4} + {8'd0, 2'd0, h[l4+8'd12][7:4], 2'd0})
          bad_header = 1'b1;
      end else if (proto == 8'd17) begin
        if ({8'd0, d_hlen} < {8'd0, l4} + 16'd8) bad_header = 1'b1;
      end else if (tso || l4c) bad_header = 1'b1;
      if ((tso && (proto != 8'd6 || d_mss == 0)) ||
          (icrc && (proto != 8'd17 || {8'd0, d_hlen} < {8'd0, l4} + 16'd20)))
        bad_header = 1'b1;
    end
    pad = icrc ? h[l4+8'd9][5:4] : 2'd0;
    tail = {6'd0, pad} + (icrc ? 8'd4 : 8'd0);
    seg = tso ? {16'd0, d_mss} : d_len;
    nseg = tso ? (d_len == 0 ? 32'd1 : (d_len + {16'd0, d_mss} - 32'd1) / {16'd0, d_mss}) : 32'd1;
    minseg = seg < d_len ? seg : d_len;
    too_long = (tso && d_len > 32'd65536) ||
        {24'd0, d_hlen} - 32'd14 + minseg + {24'd0, tail} > C_MAX_MTU;
  end

  // ---- the state machine ---------------------------------------------------------------------
  typedef enum logic [3:0] {
    T_RECV,     // the request streams in
    T_CHECK,    // header and size checks; the MR read issued
    T_MR,       // the MR answers
    T_SEG,      // a segment starts: the DMA read
    T_HDR,      // header beats into the segment buffer
    T_PAY,      // the beats with payload (and pad)
    T_SUM1,     // the ICRC settles
    T_SUM2,
    T_EMIT,     // the frame leaves
    T_INC,
    T_CPL
  } st_t;
  st_t st;

  logic [7:0] status;
  logic [31:0] i_seg;       // segment index
  logic [31:0] sent;        // payload bytes sent before this segment
  logic [31:0] plen;        // payload bytes of this segment
  logic [15:0] alen;        // assembled bytes (without the ICRC)
  logic [15:0] flen;        // frame bytes
  logic [31:0] bytes;
  logic [63:0] mr_base;
  logic [SW:0] wbeat, rbeat, nbeats_r;
  logic [DATA_WIDTH-1:0] carry;
  logic [31:0] ip_sum, l4_sum;
  logic [15:0] ip_fold, l4_fold;

  // The header with this segment's lengths and TSO fields, and the summed fields zeroed.
  logic [7:0] hp[HB];
  logic [15:0] ip_id;
  logic [31:0] tcp_seq;
  always_comb begin
    ip_id = {h[18], h[19]} + i_seg[15:0];
    tcp_seq = {h[l4+8'd4], h[l4+8'd5], h[l4+8'd6], h[l4+8'd7]} + i_seg * seg;
    for (int k = 0; k < HB; k++) begin
      hp[k] = h[k];
      if (k == 16) hp[k] = 8'((flen - 16'd14) >> 8);
      if (k == 17) hp[k] = 8'(flen - 16'd14);
      if (ipc && (k == 24 || k == 25)) hp[k] = 8'd0;
      if (tso && k == 18) hp[k] = ip_id[15:8];
      if (tso && k == 19) hp[k] = ip_id[7:0];
      if (proto == 8'd17 && k == 32'(l4) + 4) hp[k] = 8'((flen - {8'd0, l4}) >> 8);
      if (proto == 8'd17 && k == 32'(l4) + 5) hp[k] = 8'(flen - {8'd0, l4});
      if (proto == 8'd17 && l4c && (k == 32'(l4) + 6 || k == 32'(l4) + 7)) hp[k] = 8'd0;
      if (proto == 8'd6) begin
        if (tso && k == 32'(l4) + 4) hp[k] = tcp_seq[31:24];
        if (tso && k == 32'(l4) + 5) hp[k] = tcp_seq[23:16];
        if (tso && k == 32'(l4) + 6) hp[k] = tcp_seq[15:8];
        if (tso && k == 32'(l4) + 7) hp[k] = tcp_seq[7:0];
        if (tso && k == 32'(l4) + 13) begin
          if (i_seg + 1 < nseg) hp[k] = hp[k] & ~8'h09;  // PSH, FIN
          if (i_seg > 0) hp[k] = hp[k] & ~8'h80;  // CWR
        end
        if (l4c && (k == 32'(l4) + 16 || k == 32'(l4) + 17)) hp[k] = 8'd0;
      end
    end
  end

  // ---- the segment's beats -------------------------------------------------------------------
  localparam int HBEATS = HB / NB;
  wire [LB-1:0] s_lane = d_hlen[LB-1:0];       // where the payload starts in its first beat
  wire [15:0] k0 = {8'd0, d_hlen} >> LB;       // the beat it starts in
  logic [DATA_WIDTH-1:0] wdata;
  logic [KEEP_WIDTH-1:0] wkeep;
  logic [15:0] wbase;
  logic wfire;
  logic need_dma;                               // this beat takes a DMA beat
  logic [SW:0] dma_beats, dma_got;

  // Beat `wbeat` of the frame: header bytes below hlen, then payload (the DMA beat in lanes
  // s_lane and up, the carry below), zero pad up to alen.
  always_comb begin
    logic [2*DATA_WIDTH-1:0] sh;
    wbase = 16'(32'(wbeat) * NB);
    // lanes below s_lane from the carry (the previous DMA beat's top), the rest from this one
    sh = {s_axis_rd_tdata, carry} >> {(NB[LB:0] - {1'b0, s_lane}), 3'd0};
    for (int j = 0; j < NB; j++) begin
      logic [15:0] off;
      off = wbase + 16'(j);
      wkeep[j] = off < alen;
      if (off < {8'd0, d_hlen}) begin
        wdata[8*j+:8] = 8'd0;
        for (int b = 0; b < HBEATS; b++) if (32'(wbeat) == b) wdata[8*j+:8] = hp[b*NB+j];
      end else if ({16'd0, off} < 32'(d_hlen) + plen) wdata[8*j+:8] = sh[8*j+:8];
      else wdata[8*j+:8] = 8'd0;
    end
  end

  // Sums of the beat: IPv4 header words and TCP/UDP words, at even frame offsets.
  logic [20:0] ip_bsum, l4_bsum;
  logic [DATA_WIDTH-1:0] crc_data;
  logic crc_last;
  logic [5:0] crc_tail;
  always_comb begin
    ip_bsum = '0;
    l4_bsum = '0;
    crc_last = 1'b0;
    crc_tail = '0;
    for (int j = 0; j < NB; j += 2) begin
      logic [15:0] off;
      logic [15:0] w;
      off = wbase + 16'(j);
      w = {wkeep[j] ? wdata[8*j+:8] : 8'd0, wkeep[j+1] ? wdata[8*(j+1)+:8] : 8'd0};
      if (off >= 16'd14 && off < 16'd14 + {8'd0, ip_hl}) ip_bsum = ip_bsum + {5'd0, w};
      if (off >= {8'd0, l4}) l4_bsum = l4_bsum + {5'd0, w};
    end
    for (int j = 0; j < NB; j++) begin
      logic [15:0] off;
      logic [7:0] b;
      off = wbase + 16'(j);
      b = wkeep[j] ? wdata[8*j+:8] : 8'd0;
      if (off < 16'd6) b = 8'd0;
      else if (off < 16'd14) b = 8'hFF;
      else if (off == 16'd15 || off == 16'd22 || off == 16'd24 || off == 16'd25) b = 8'hFF;
      else if (off == {8'd0, l4} + 16'd6 || off == {8'd0, l4} + 16'd7 ||
               off == {8'd0, l4} + 16'd12) b = 8'hFF;
      crc_data[8*j+:8] = b;
      if (off + 16'd1 == alen) begin
        crc_last = 1'b1;
        crc_tail = 6'(NB - 1 - j);
      end
    end
  end

  logic [31:0] icrc_v;
  cleave_crc #(
      .DATA_WIDTH(DATA_WIDTH),
      .CASTAGNOLI(1'b0)
  ) u_icrc (
      .clk(clk),
      .rst(rst),
      .in_valid(wfire),
      .in_restart(wbeat == 0),
      .in_data(crc_data),
      .in_first(wbeat == 0),
      .in_first_lane(6'd6),
      .in_last(crc_last),
      .in_tail(crc_tail),
      .out_crc(icrc_v)
  );

  // The segment buffer.
  logic [DATA_WIDTH-1:0] sb_rd;
  cleave_ram #(
      .DEPTH(SEG_BEATS),
      .WIDTH(DATA_WIDTH)
  ) u_seg (
      .clk(clk),
      .wr_en(wfire),
      .wr_addr(wbeat[SW-1:0]),
      .wr_data(wdata),
      .rd_addr(rd_beat[SW-1:0]),
      .rd_data(sb_rd)
  );

  // ---- emission: the buffer's beats with the sums and the ICRC put in -------------------------
  logic [15:0] l4_csum_at, ebase;
  logic [15:0] l4_final;
  logic ev;           // a beat read last cycle is at the output
  logic [DATA_WIDTH-1:0] e_data;
  logic [KEEP_WIDTH-1:0] e_keep;
  always_comb begin
    l4_csum_at = {8'd0, l4} + (proto == 8'd6 ? 16'd16 : 16'd6);
    l4_final = proto == 8'd17 && l4_fold == 16'hFFFF ? 16'hFFFF : ~l4_fold;  // UDP: 0 sent as FFFF
    ebase = 16'({{(31 - SW) {1'b0}}, rbeat} * NB - NB);  // the beat at the output
    for (int j = 0; j < NB; j++) begin
      logic [15:0] off;
      off = ebase + 16'(j);
      e_keep[j] = off < flen;
      e_data[8*j+:8] = sb_rd[8*j+:8];
      if (ipc && off == 16'd24) e_data[8*j+:8] = ~ip_fold[15:8];
      if (ipc && off == 16'd25) e_data[8*j+:8] = ~ip_fold[7:0];
      if (l4c && off == l4_csum_at) e_data[8*j+:8] = l4_final[15:8];
      if (l4c && off == l4_csum_at + 16'd1) e_data[8*j+:8] = l4_final[7:0];
      if (icrc && off == alen) e_data[8*j+:8] = icrc_v[7:0];
      if (icrc && off == alen + 16'd1) e_data[8*j+:8] = icrc_v[15:8];
      if (icrc && off == alen + 16'd2) e_data[8*j+:8] = icrc_v[23:16];
      if (icrc && off == alen + 16'd3) e_data[8*j+:8] = icrc_v[31:24];
      if (!e_keep[j]) e_data[8*j+:8] = 8'd0;
    end
  end
  assign m_axis_tx_tdata = e_data;
  assign m_axis_tx_tkeep = e_keep;
  assign m_axis_tx_tlast = ebase + 16'(NB) >= flen;
  assign m_axis_tx_tvalid = st == T_EMIT && ev;
  // A beat held at the output is read again: the RAM's output changes every cycle.
  logic [SW:0] rd_beat;
  assign rd_beat = st == T_EMIT && ev && !m_axis_tx_tready ? rbeat - 1'b1 : rbeat;

  assign m_txc_cookie = d_cookie;
  assign m_txc_status = status;
  assign m_txc_frames = status == TXSTATUS_OK ? nseg[15:0] : 16'd0;
  assign m_txc_bytes = status == TXSTATUS_OK ? bytes : 32'd0;
  assign m_txc_valid = st == T_CPL;

  assign mr_addr = d_mr[MW-1:0];
  assign m_dma_rd_addr = mr_base + {16'd0, d_off} + {32'd0, sent};
  assign m_dma_rd_len = plen[15:0];
  assign m_dma_rd_valid = st == T_SEG && plen != 0;

  assign s_axis_txd_tready = st == T_RECV;
  // The DMA read returns exactly the bytes asked for: its keep and last carry nothing new; the
  // flag bits above the four the model knows are ignored, as the model ignores them.
  wire unused_ok = &{1'b0, s_axis_rd_tkeep, s_axis_rd_tlast, d_flags[7:4], rd_beat[SW]};
  wire rfire = s_axis_txd_tvalid && s_axis_txd_tready;

  // The payload beats are taken while assembling.
  assign need_dma = st == T_PAY && dma_got < dma_beats;
  assign s_axis_rd_tready = need_dma;
  assign wfire = st == T_HDR || (st == T_PAY && (!need_dma || s_axis_rd_tvalid));

  // Counter increments: the request when it arrives, the rest when it completes.
  always_comb begin
    inc_en = '0;
    inc_idx = '0;
    inc_amt = '0;
    if (st == T_CHECK) begin
      inc_en[0] = 1'b1;
      inc_idx[7:0] = CTR_TX_REQUESTS;
      inc_amt[31:0] = 32'd1;
    end
    if (st == T_INC) begin
      inc_en[0] = 1'b1;
      inc_idx[7:0] = 8'(32'(CTR_BASE_TXSTATUS) + 32'(status));
      inc_amt[31:0] = 32'd1;
      if (status == TXSTATUS_OK) begin
        inc_en[3:1] = {tso, 2'b11};
        inc_idx[31:8] = {CTR_TX_TSO_REQUESTS, CTR_TX_BYTES, CTR_TX_FRAMES};
        inc_amt[127:32] = {32'd1, bytes, nseg};
      end else begin
        inc_en[1] = 1'b1;
        inc_idx[15:8] = CTR_TX_ERRORS;
        inc_amt[63:32] = 32'd1;
      end
    end
  end

  logic [15:0] keep_count;
  always_comb begin
    keep_count = '0;
    for (int j = 0; j < NB; j++) keep_count = keep_count + 16'(s_axis_txd_tkeep[j]);
  end

  // The sums folded: the TCP/UDP one with the pseudo header and, for RoCEv2, the ICRC bytes
  // (at frame offset alen: a high byte where the offset is even).
  logic [15:0] ip_fold_n, l4_fold_n;
  always_comb begin
    logic [31:0] s1, s2;
    logic [15:0] l4len;
    l4len = flen - {8'd0, l4};
    s1 = ip_sum;
    s1 = {16'd0, s1[15:0]} + {16'd0, s1[31:16]};
    s1 = {16'd0, s1[15:0]} + {16'd0, s1[31:16]};
    ip_fold_n = s1[15:0];
    s2 = l4_sum + {16'd0, h[26], h[27]} + {16'd0, h[28], h[29]} + {16'd0, h[30], h[31]} +
        {16'd0, h[32], h[33]} + {24'd0, proto} + {16'd0, l4len};
    if (icrc) begin
      if (alen[0])
        s2 = s2 + {24'd0, icrc_v[7:0]} + {16'd0, icrc_v[15:8], 8'd0} + {24'd0, icrc_v[23:16]} +
            {16'd0, icrc_v[31:24], 8'd0};
      else
        s2 = s2 + {16'd0, icrc_v[7:0], 8'd0} + {24'd0, icrc_v[15:8]} +
            {16'd0, icrc_v[23:16], 8'd0} + {24'd0, icrc_v[31:24]};
    end
    s2 = {16'd0, s2[15:0]} + {16'd0, s2[31:16]};
    s2 = {16'd0, s2[15:0]} + {16'd0, s2[31:16]};
    l4_fold_n = s2[15:0];
  end

  logic [15:0] seg_flen;
  always_comb begin
    logic [31:0] p;
    p = d_len - sent < seg ? d_len - sent : seg;
    seg_flen = 16'({24'd0, d_hlen} + p + {24'd0, tail});
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      st <= T_RECV;
      req_len <= '0;
      req_beat <= '0;
      status <= '0;
      i_seg <= '0;
      sent <= '0;
      plen <= '0;
      alen <= '0;
      flen <= '0;
      bytes <= '0;
      mr_base <= '0;
      wbeat <= '0;
      rbeat <= '0;
      nbeats_r <= '0;
      carry <= '0;
      ip_sum <= '0;
      l4_sum <= '0;
      ip_fold <= '0;
      l4_fold <= '0;
      ev <= 1'b0;
      dma_beats <= '0;
      dma_got <= '0;
    end else begin
      case (st)
        T_RECV: begin
          if (rfire) begin
            // byte k arrives in beat k / NB, lane k % NB (constant indices: no shifter)
            for (int k = 0; k < CAP; k++) begin
              if (32'(req_beat) == k / NB && s_axis_txd_tkeep[k%NB])
                req_v[8*k+:8] <= s_axis_txd_tdata[8*(k%NB)+:8];
            end
            req_len <= req_len + keep_count;
            req_beat <= req_beat + 1'b1;
            if (s_axis_txd_tlast) st <= T_CHECK;
          end
        end
        T_CHECK: begin
          req_beat <= '0;
          req_len <= '0;
          i_seg <= '0;
          sent <= '0;
          bytes <= '0;
          // The header: the template must hold header_len bytes.
          if (bad_header || req_len < 16'd32 + {8'd0, d_hlen}) begin
            status <= TXSTATUS_BAD_HEADER;
            st <= T_INC;
          end else st <= T_MR;
        end
        T_MR: begin
          // the MR read was issued in T_CHECK (mr_addr follows the descriptor)
          if (d_len != 0 && (32'(d_mr) >= MAX_MRS || !mr_data[104] ||
                             {16'd0, d_off} > {24'd0, mr_data[39:0]} ||
                             {32'd0, d_len} > {24'd0, mr_data[39:0]} - {16'd0, d_off})) begin
            status <= TXSTATUS_DMA_FAULT;
            st <= T_INC;
          end else if (too_long) begin
            status <= TXSTATUS_TOO_LONG;
            st <= T_INC;
          end else begin
            mr_base <= mr_data[103:40];
            status <= TXSTATUS_OK;
            st <= T_SEG;
            plen <= d_len < seg ? d_len : seg;
            flen <= seg_flen;
            alen <= seg_flen - (icrc ? 16'd4 : 16'd0);
          end
        end
        T_SEG: begin
          if (plen == 0 || m_dma_rd_ready) begin
            wbeat <= '0;
            ip_sum <= '0;
            l4_sum <= '0;
            carry <= '0;
            dma_got <= '0;
            dma_beats <= (SW + 1)'((plen + 32'(NB) - 32'd1) >> LB);
            st <= k0 == 0 ? T_PAY : T_HDR;
          end
        end
        T_HDR, T_PAY: begin
          if (wfire) begin
            wbeat <= wbeat + 1'b1;
            ip_sum <= ip_sum + {11'd0, ip_bsum};
            l4_sum <= l4_sum + {11'd0, l4_bsum};
            if (st == T_PAY && need_dma) begin
              carry <= s_axis_rd_tdata;
              dma_got <= dma_got + 1'b1;
            end
            if (st == T_HDR && 32'(wbeat) + 32'd1 == {16'd0, k0}) st <= T_PAY;
            if (wbase + 16'(NB) >= alen) begin
              st <= T_SUM1;
            end
          end
        end
        T_SUM1: st <= T_SUM2;
        T_SUM2: begin
          ip_fold <= ip_fold_n;
          l4_fold <= l4_fold_n;
          rbeat <= '0;
          ev <= 1'b0;
          nbeats_r <= (SW + 1)'((32'(flen) + NB - 1) >> LB);
          st <= T_EMIT;
        end
        T_EMIT: begin
          // a beat is read one cycle ahead and held at the output until taken
          if (!ev) begin
            rbeat <= rbeat + 1'b1;
            ev <= 1'b1;
          end else if (m_axis_tx_tready) begin
            if (rbeat == nbeats_r) begin
              ev <= 1'b0;
              bytes <= bytes + {16'd0, flen};
              sent <= sent + plen;
              i_seg <= i_seg + 1;
              if (i_seg + 1 == nseg) st <= T_INC;
              else begin
                plen <= d_len - sent - plen < seg ? d_len - sent - plen : seg;
                flen <= 16'({24'd0, d_hlen} + (d_len - sent - plen < seg ? d_len - sent - plen : seg)
                            + {24'd0, tail});
                alen <= 16'({24'd0, d_hlen} + (d_len - sent - plen < seg ? d_len - sent - plen : seg)
                            + {24'd0, tail}) - (icrc ? 16'd4 : 16'd0);
                st <= T_SEG;
              end
            end else rbeat <= rbeat + 1'b1;
          end
        end
        T_INC: st <= T_CPL;  // the counters, then the completion
        default: if (m_txc_ready) st <= T_RECV;  // T_CPL
      endcase
    end
  end
endmodule

`resetall
