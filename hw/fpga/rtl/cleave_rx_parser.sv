// cleave_rx_parser.sv - parses each received frame while it streams through.
//
// Frames pass from s_axis to m_axis unchanged (into the frame buffer); one rx_meta_t per frame
// leaves on m_meta after its last beat. The meta carries the model's parse() verdict
// (Ethernet, IPv4 and TCP/UDP header checks, IPv4 and TCP/UDP checksums, in the model's order),
// the flow key, the payload's place, the TCP header fields and options, the first 32 bytes of a
// UDP payload, and two CRCs computed as if the frame were RoCEv2 (ICRC) and Solar (CRC-32C).
// The first HDR_BYTES bytes are captured for the header fields; the checksums and CRCs run
// over the whole frame a beat per cycle. After a frame's last beat the input pauses for two
// cycles while the CRCs settle and the meta is built (and longer while m_meta is full).
`resetall
`timescale 1ns / 1ps
`default_nettype none
`include "cleave_types.svh"

module cleave_rx_parser #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // Check TCP/UDP checksums, the ICRC and the Solar CRC (the model's verify_l4_checksum)
    parameter bit VERIFY_L4 = 1'b1,
    parameter int KEEP_WIDTH = DATA_WIDTH / 8
) (
    input wire logic clk,
    input wire logic rst,

    input  wire logic [DATA_WIDTH-1:0] s_axis_tdata,
    input  wire logic [KEEP_WIDTH-1:0] s_axis_tkeep,
    input  wire logic                  s_axis_tvalid,
    output logic                       s_axis_tready,
    input  wire logic                  s_axis_tlast,

    output logic [DATA_WIDTH-1:0] m_axis_tdata,
    output logic [KEEP_WIDTH-1:0] m_axis_tkeep,
    output logic                  m_axis_tvalid,
    input  wire logic             m_axis_tready,
    output logic                  m_axis_tlast,

    output rx_meta_t        m_meta,
    output logic            m_meta_valid,
    input  wire logic       m_meta_ready
);
  `include "cleave_nic_defs.vh"

  localparam int NB = KEEP_WIDTH;
  localparam int HDR_BYTES = 136;  // Ethernet, IPv4 with options, TCP with options
  localparam int HB_BEATS = (HDR_BYTES + NB - 1) / NB;

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512)
      $error("DATA_WIDTH must be 64, 128, 256 or 512");
    if (KEEP_WIDTH * 8 != DATA_WIDTH) $error("KEEP_WIDTH must be DATA_WIDTH / 8");
  end

  // ---- beat acceptance -------------------------------------------------------------------
  typedef enum logic [1:0] {
    RUN,
    FIN1,
    FIN2
  } state_t;
  state_t state;

  wire accept = state == RUN;
  assign s_axis_tready = accept && m_axis_tready;
  assign m_axis_tvalid = accept && s_axis_tvalid;
  assign m_axis_tdata = s_axis_tdata;
  assign m_axis_tkeep = s_axis_tkeep;
  assign m_axis_tlast = s_axis_tlast;
  wire fire = s_axis_tvalid && s_axis_tready;

  logic [15:0] beat;  // beat index in the frame
  logic [15:0] frame_len;
  logic [8*HDR_BYTES-1:0] hdr_v;  // captured bytes
  logic [7:0] hdr[HDR_BYTES];  // the same, by index
  always_comb for (int k = 0; k < HDR_BYTES; k++) hdr[k] = hdr_v[8*k+:8];
  logic [31:0] l4_sum;

  // Bytes of this beat.
  logic [7:0] lane[NB];
  always_comb for (int j = 0; j < NB; j++) lane[j] = s_axis_tkeep[j] ? s_axis_tdata[8*j+:8] : 8'd0;

  // IHL (byte 14) and total length (bytes 16, 17): from this beat when it holds them, else as
  // captured; before that beat they are unknown (no region below needs them yet).
  localparam int B14 = 14 / NB;
  localparam int B16 = 16 / NB;
  logic [3:0] ihl_q;
  logic [15:0] total_q;
  logic ihl_known, total_known;
  logic [3:0] ihl_cur;
  logic [15:0] total_cur;
  always_comb begin
    ihl_known = 32'(beat) + 1 > B14;
    total_known = 32'(beat) + 1 > B16;
    ihl_cur = 32'(beat) == B14 ? lane[14%NB][3:0] : ihl_q;
    total_cur = 32'(beat) == B16 ? {lane[16%NB], lane[17%NB]} : total_q;
  end

  // ---- per-byte regions ------------------------------------------------------------------
  logic [15:0] l4_off, l4_end, icrc_end, c32_start;
  logic [DATA_WIDTH-1:0] icrc_data, c32_data;
  logic [NB-1:0] in_l4;
  logic icrc_last, c32_first, c32_last;
  logic [5:0] icrc_tail, c32_first_lane, c32_tail;
  logic [20:0] beat_sum;
  logic [15:0] base;

  always_comb begin
    base = 16'(32'(beat) * NB);
    l4_off = 16'd14 + {10'd0, ihl_cur, 2'd0};
    l4_end = 16'd14 + total_cur;
    icrc_end = 16'd10 + total_cur;  // up to the ICRC: the IP end minus 4
    c32_start = l4_off + 16'd40;  // UDP header 8, Solar header 32
    icrc_last = 1'b0;
    icrc_tail = '0;
    c32_first = 1'b0;
    c32_first_lane = '0;
    c32_last = 1'b0;
    c32_tail = '0;
    beat_sum = '0;
    for (int j = 0; j < NB; j++) begin
      logic [15:0] off;
      logic [7:0] b;
      off = base + 16'(j);
      // TCP/UDP checksum: words at even frame offsets, from the L4 header to the IP end.
      in_l4[j] = ihl_known && total_known && off >= l4_off && off < l4_end;
      // ICRC: 8 bytes of ones in place of bytes 6..13, then the IP packet up to the ICRC with
      // TOS, TTL, IP checksum, UDP checksum and BTH byte 4 as ones.
      b = lane[j];
      if (off < 16'd6) b = 8'd0;
      else if (off < 16'd14) b = 8'hFF;
      else if (off == 16'd15 || off == 16'd22 || off == 16'd24 || off == 16'd25) b = 8'hFF;
      else if (ihl_known && (off == l4_off + 16'd6 || off == l4_off + 16'd7 ||
                             off == l4_off + 16'd12)) b = 8'hFF;
      if (total_known && off >= icrc_end) b = 8'd0;
      icrc_data[8*j+:8] = b;
      if (total_known && off + 16'd1 == icrc_end) begin
        icrc_last = 1'b1;
        icrc_tail = 6'(NB - 1 - j);
      end
      // Solar CRC-32C: the UDP payload after the 32-byte Solar header.
      c32_data[8*j+:8] = ihl_known && total_known && off >= c32_start && off < l4_end ?
          lane[j] : 8'd0;
      if (ihl_known && off == c32_start) begin
        c32_first = 1'b1;
        c32_first_lane = 6'(j);
      end
      if (ihl_known && total_known && off + 16'd1 == l4_end && l4_end > c32_start) begin
        c32_last = 1'b1;
        c32_tail = 6'(NB - 1 - j);
      end
    end
    for (int j = 0; j < NB; j += 2)
      beat_sum = beat_sum + 21'({in_l4[j] ? lane[j] : 8'd0, in_l4[j+1] ? lane[j+1] : 8'd0});
  end

  logic [31:0] icrc, crc32c;
  cleave_crc #(
      .DATA_WIDTH(DATA_WIDTH),
      .CASTAGNOLI(1'b0)
  ) u_icrc (
      .clk(clk),
      .rst(rst),
      .in_valid(fire),
      .in_restart(beat == 0),
      .in_data(icrc_data),
      .in_first(beat == 0),
      .in_first_lane(6'd6),
      .in_last(icrc_last),
      .in_tail(icrc_tail),
      .out_crc(icrc)
  );
  cleave_crc #(
      .DATA_WIDTH(DATA_WIDTH),
      .CASTAGNOLI(1'b1)
  ) u_crc32c (
      .clk(clk),
      .rst(rst),
      .in_valid(fire),
      .in_restart(beat == 0),
      .in_data(c32_data),
      .in_first(c32_first),
      .in_first_lane(c32_first_lane),
      .in_last(c32_last),
      .in_tail(c32_tail),
      .out_crc(crc32c)
  );

  // Keep bytes in this beat (contiguous from lane 0).
  logic [15:0] keep_count;
  always_comb begin
    keep_count = '0;
    for (int j = 0; j < NB; j++) keep_count = keep_count + 16'(s_axis_tkeep[j]);
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      beat <= '0;
      frame_len <= '0;
      l4_sum <= '0;
      ihl_q <= '0;
      total_q <= '0;
    end else if (fire) begin
      beat <= s_axis_tlast ? 16'd0 : beat + 16'd1;
      frame_len <= (beat == 0 ? 16'd0 : frame_len) + keep_count;
      l4_sum <= (beat == 0 ? 32'd0 : l4_sum) + 32'(beat_sum);
      if (32'(beat) == B14) ihl_q <= ihl_cur;
      if (32'(beat) == B16) total_q <= total_cur;
    end
  end

  // Header capture: byte k arrives in beat k / NB, lane k % NB.
  always_ff @(posedge clk) begin
    if (fire && 32'(beat) < HB_BEATS) begin
      for (int k = 0; k < HDR_BYTES; k++) if (32'(beat) == k / NB) hdr_v[8*k+:8] <= lane[k%NB];
    end
  end

  // ---- the verdict, from the captured header -------------------------------------------
  function automatic logic [15:0] h16(input int at);
    h16 = {hdr[at], hdr[at+1]};
  endfunction
  function automatic logic [31:0] h32(input int at);
    h32 = {hdr[at], hdr[at+1], hdr[at+2], hdr[at+3]};
  endfunction

  rx_meta_t meta;
  logic [15:0] flen;
  always_comb begin
    logic [3:0] ihl;
    logic [7:0] iphl, doff;
    logic [15:0] total, l4len, udplen;
    logic [31:0] s;
    logic [7:0] l4;
    logic [15:0] fold;
    logic [31:0] psum;
    flen = frame_len;
    meta = '0;
    meta.frame_len = flen;
    ihl = hdr[14][3:0];
    iphl = {2'd0, ihl, 2'd0};
    total = h16(16);
    l4 = 8'd14 + iphl;
    l4len = total - {8'd0, iphl};
    // IPv4 header checksum over IHL words.
    s = '0;
    for (int w = 0; w < 30; w++) if (w < 2 * 32'(ihl)) s = s + {16'd0, h16(14 + 2 * w)};
    s = {16'd0, s[15:0]} + {16'd0, s[31:16]};
    s = {16'd0, s[15:0]} + {16'd0, s[31:16]};
    // Fields at the L4 header, wherever IHL puts it.
    meta.src_ip = h32(26);
    meta.dst_ip = h32(30);
    meta.udp = hdr[23] == 8'd17;
    meta.sport = '0;
    meta.dport = '0;
    meta.tcp_seq = '0;
    meta.tcp_flags = '0;
    doff = '0;
    udplen = '0;
    for (int i = 5; i <= 15; i++) begin
      if (32'(ihl) == i) begin
        meta.sport = h16(14 + 4 * i);
        meta.dport = h16(16 + 4 * i);
        meta.tcp_seq = h32(18 + 4 * i);
        meta.tcp_flags = hdr[27+4*i];
        doff = {2'd0, hdr[26+4*i][7:4], 2'd0};
        udplen = h16(18 + 4 * i);
        for (int k = 0; k < 40; k++) meta.tcp_opt[8*k+:8] = hdr[34+4*i+k];
        for (int k = 0; k < 32; k++) meta.l7[8*k+:8] = hdr[22+4*i+k];
      end
    end
    meta.tcp_hlen = doff[5:0];
    // The pseudo header, then fold: the sum over a good segment folds to 0xFFFF.
    psum = l4_sum + {16'd0, h16(26)} + {16'd0, h16(28)} + {16'd0, h16(30)} + {16'd0, h16(32)} +
        {24'd0, hdr[23]} + {16'd0, l4len};
    psum = {16'd0, psum[15:0]} + {16'd0, psum[31:16]};
    psum = {16'd0, psum[15:0]} + {16'd0, psum[31:16]};
    fold = psum[15:0];
    // The model's parse(), in its order.
    meta.ip_csum = CSUMSTATUS_NOT_CHECKED;
    meta.l4_csum = CSUMSTATUS_NOT_CHECKED;
    if (flen < 16'd14) meta.pdefer = DEFERREASON_TRUNCATED;
    else if (h16(12) != 16'h0800) meta.pdefer = DEFERREASON_NOT_IPV4;
    else if (flen < 16'd34) meta.pdefer = DEFERREASON_TRUNCATED;
    else if (hdr[14][7:4] != 4'd4 || ihl < 4'd5) meta.pdefer = DEFERREASON_BAD_IP_HEADER;
    else if (flen < 16'd14 + {8'd0, iphl}) meta.pdefer = DEFERREASON_TRUNCATED;
    else if (total < {8'd0, iphl}) meta.pdefer = DEFERREASON_BAD_IP_HEADER;
    else if ({1'b0, flen} < 17'd14 + {1'b0, total}) meta.pdefer = DEFERREASON_TRUNCATED;  // no wrap
    else if ((h16(20) & 16'h3FFF) != 16'd0) meta.pdefer = DEFERREASON_IP_FRAGMENT;
    else if (s[15:0] != 16'hFFFF) begin
      meta.ip_csum = CSUMSTATUS_BAD;
      meta.pdefer = DEFERREASON_BAD_IP_CHECKSUM;
    end else begin
      meta.ip_csum = CSUMSTATUS_GOOD;
      if (hdr[23] == 8'd6) begin
        if (l4len < 16'd20) meta.pdefer = DEFERREASON_TRUNCATED;
        else if (doff < 8'd20 || {8'd0, doff} > l4len) meta.pdefer = DEFERREASON_BAD_L4_HEADER;
        else begin
          meta.pay_off = l4 + doff;
          meta.pay_len = l4len - {8'd0, doff};
        end
      end else if (hdr[23] == 8'd17) begin
        if (l4len < 16'd8) meta.pdefer = DEFERREASON_TRUNCATED;
        else if (udplen != l4len) meta.pdefer = DEFERREASON_BAD_L4_HEADER;
        else begin
          meta.pay_off = l4 + 8'd8;
          meta.pay_len = l4len - 16'd8;
        end
      end else begin
        meta.pdefer = DEFERREASON_NOT_L4;
      end
      if (meta.pdefer == DEFERREASON_NONE && VERIFY_L4 &&
          (hdr[23] == 8'd6 || h16(20 + 32'(iphl)) != 16'd0)) begin
        meta.l4_csum = fold == 16'hFFFF ? CSUMSTATUS_GOOD : CSUMSTATUS_BAD;
        if (fold != 16'hFFFF) meta.pdefer = DEFERREASON_BAD_L4_CHECKSUM;
      end
    end
    // The CRCs against the values the frame carries: the ICRC is the 4 bytes before the IP end,
    // least-significant byte first; the Solar CRC is Solar header bytes 28..31, big-endian.
    meta.icrc_ok = 1'b0;
    meta.crc32c_ok = 1'b0;
  end

  // The carried ICRC and Solar CRC sit beyond the header capture: take them from the stream.
  logic [31:0] icrc_got, c32_got;
  always_ff @(posedge clk) begin
    if (fire) begin
      for (int j = 0; j < NB; j++) begin
        logic [15:0] off;
        off = base + 16'(j);
        if (total_known) begin
          if (off == icrc_end) icrc_got[7:0] <= lane[j];
          if (off == icrc_end + 16'd1) icrc_got[15:8] <= lane[j];
          if (off == icrc_end + 16'd2) icrc_got[23:16] <= lane[j];
          if (off == icrc_end + 16'd3) icrc_got[31:24] <= lane[j];
        end
      end
    end
  end
  always_comb begin
    c32_got = {meta.l7[8*28+:8], meta.l7[8*29+:8], meta.l7[8*30+:8], meta.l7[8*31+:8]};
  end

  always_ff @(posedge clk) begin
    if (rst) begin
      state <= RUN;
      m_meta_valid <= 1'b0;
      m_meta <= '0;
    end else begin
      if (m_meta_valid && m_meta_ready) m_meta_valid <= 1'b0;
      case (state)
        RUN: if (fire && s_axis_tlast) state <= FIN1;
        FIN1: state <= FIN2;
        default: begin
          if (!m_meta_valid || m_meta_ready) begin
            m_meta <= meta;
            m_meta.icrc_ok <= icrc == icrc_got;
            // An empty Solar block: CRC-32C of nothing is 0.
            m_meta.crc32c_ok <= (meta.pay_len > 16'd32 ? crc32c : 32'd0) == c32_got;
            m_meta_valid <= 1'b1;
            state <= RUN;
          end
        end
      endcase
    end
  end
endmodule

`resetall
