// cleave_ram.sv - simple dual-port RAM: one write port, one synchronous read port.
//
// rd_data is mem[rd_addr] from the cycle before (one cycle of latency); a read of the address
// written in the same cycle returns the old contents. No reset: the owner initializes what it
// reads. ULTRA asks for UltraRAM (large tables), otherwise the synthesizer picks block RAM or
// distributed RAM by size.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cleave_ram #(
    // Entries
    parameter int DEPTH = 1024,
    // Bits per entry
    parameter int WIDTH = 32,
    // Map to UltraRAM
    parameter bit ULTRA = 1'b0,
    parameter int AW = DEPTH > 1 ? $clog2(DEPTH) : 1
) (
    input wire logic clk,

    input wire logic          wr_en,
    input wire logic [AW-1:0] wr_addr,
    input wire logic [WIDTH-1:0] wr_data,

    input  wire logic [AW-1:0] rd_addr,
    output logic [WIDTH-1:0]   rd_data
);
  initial begin
    if (DEPTH < 1) $error("DEPTH must be at least 1");
    if (WIDTH < 1) $error("WIDTH must be at least 1");
  end

  generate
    if (ULTRA) begin : g_ultra
      (* ram_style = "ultra" *) logic [WIDTH-1:0] mem[DEPTH];
      always_ff @(posedge clk) begin
        if (wr_en) mem[wr_addr] <= wr_data;
        rd_data <= mem[rd_addr];
      end
    end else begin : g_block
      logic [WIDTH-1:0] mem[DEPTH];
      always_ff @(posedge clk) begin
        if (wr_en) mem[wr_addr] <= wr_data;
        rd_data <= mem[rd_addr];
      end
    end
  endgenerate
endmodule

`resetall
