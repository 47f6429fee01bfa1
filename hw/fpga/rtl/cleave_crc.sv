// cleave_crc.sv - CRC-32 or CRC-32C of a byte region of an AXI-Stream frame, a beat per cycle.
//
// The caller zeroes the bytes outside the region (and substitutes masked fields) and flags the
// beat holding the region's first byte (in_first, at lane in_first_lane) and the beat holding
// its last byte (in_last, with in_tail bytes after it in that beat). Bytes before the region
// leave the state at zero, so the init value is injected at the first byte already advanced to
// the end of its beat; the zero bytes after the region are undone in the cycle after the last
// beat. out_crc (the final value, inverted) is valid from the second cycle after the last beat
// until the next region ends. in_restart on a frame's first beat clears the state.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_crc #(
    // AXI-Stream data width in bits: 64, 128, 256 or 512
    parameter int DATA_WIDTH = 64,
    // 0: CRC-32 (reflected 0xEDB88320, the RoCEv2 ICRC); 1: CRC-32C (reflected 0x82F63B78)
    parameter bit CASTAGNOLI = 1'b0
) (
    input wire logic clk,
    input wire logic rst,

    input wire logic                  in_valid,
    input wire logic                  in_restart,
    input wire logic [DATA_WIDTH-1:0] in_data,
    input wire logic                  in_first,
    input wire logic [           5:0] in_first_lane,
    input wire logic                  in_last,
    input wire logic [           5:0] in_tail,

    output logic [31:0] out_crc
);
  `include "cleave_crc_tables.vh"

  initial begin
    if (DATA_WIDTH != 64 && DATA_WIDTH != 128 && DATA_WIDTH != 256 && DATA_WIDTH != 512)
      $error("DATA_WIDTH must be 64, 128, 256 or 512");
  end

  logic [31:0] state, s_next, s_in, init, fin_state;
  logic [5:0] fin_tail;
  logic fin;

  assign s_in = in_restart ? 32'd0 : state;

  // The beat's equations for this width and polynomial.
  generate
    if (DATA_WIDTH == 64) begin : g64
      always_comb begin
        init = CASTAGNOLI ? crc32c_init_64(in_first_lane) : crc32_init_64(in_first_lane);
        s_next = (CASTAGNOLI ? crc32c_beat_64(s_in, in_data) : crc32_beat_64(s_in, in_data))
            ^ (in_first ? init : 32'd0);
      end
    end else if (DATA_WIDTH == 128) begin : g128
      always_comb begin
        init = CASTAGNOLI ? crc32c_init_128(in_first_lane) : crc32_init_128(in_first_lane);
        s_next = (CASTAGNOLI ? crc32c_beat_128(s_in, in_data) : crc32_beat_128(s_in, in_data))
            ^ (in_first ? init : 32'd0);
      end
    end else if (DATA_WIDTH == 256) begin : g256
      always_comb begin
        init = CASTAGNOLI ? crc32c_init_256(in_first_lane) : crc32_init_256(in_first_lane);
        s_next = (CASTAGNOLI ? crc32c_beat_256(s_in, in_data) : crc32_beat_256(s_in, in_data))
            ^ (in_first ? init : 32'd0);
      end
    end else begin : g512
      always_comb begin
        init = CASTAGNOLI ? crc32c_init_512(in_first_lane) : crc32_init_512(in_first_lane);
        s_next = (CASTAGNOLI ? crc32c_beat_512(s_in, in_data) : crc32_beat_512(s_in, in_data))
            ^ (in_first ? init : 32'd0);
      end
    end
  endgenerate

  always_ff @(posedge clk) begin
    if (rst) begin
      state <= '0;
      fin <= 1'b0;
      fin_state <= '0;
      fin_tail <= '0;
      out_crc <= '0;
    end else begin
      fin <= 1'b0;
      if (in_valid) begin
        state <= s_next;
        if (in_last) begin
          fin <= 1'b1;
          fin_state <= s_next;
          fin_tail <= in_tail;
        end
      end
      if (fin)
        out_crc <= ~(CASTAGNOLI ? crc32c_unshift(fin_state, fin_tail) :
                                  crc32_unshift(fin_state, fin_tail));
    end
  end
endmodule

`resetall
