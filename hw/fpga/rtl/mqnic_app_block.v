// mqnic_app_block.v - the header-split NIC as Corundum's application block.
//
// Corundum (not part of this tree) instantiates mqnic_app_block in mqnic_core and lets an
// application replace it; this one puts cleave_nic between the interface-level streams and
// on the data DMA interface. The port list is Corundum's application block interface
// (docs/source/modules/mqnic_app_block.rst upstream); hw/fpga/docs/app_block.md maps every
// port. Plain Verilog-2001 so Corundum's Vivado flow reads it as the .v it expects; the unit
// below it is SystemVerilog.
//   s_axil_app_ctrl   cleave's register blocks (cleave_regs)
//   *_axis_if_rx      every received frame into the unit; the copy path back out
//   *_axis_if_tx      the TX merge queue's packets (stream id = the merge queue register) to the
//                     unit, the rest through; merged frames joined in (cleave_app_if)
//   data DMA          payload, header slots and completions written, TX payload read
//                     (cleave_dma_adapter: two RAMs behind the DMA RAM interface)
//   direct and sync streams pass through untouched; the control DMA, the NIC control AXI-Lite
//   master, DDR, HBM, statistics and GPIO are idle.
// One interface with one port (IF_COUNT = PORTS_PER_IF = 1) and a data width of one DMA RAM row
// (AXIS_IF_DATA_WIDTH = RAM_SEG_COUNT * RAM_SEG_DATA_WIDTH) are required.
`resetall
`timescale 1ns / 1ps
`default_nettype none

// Corundum's interface has parameters and inputs this application does not use.
/* verilator lint_off UNUSEDPARAM */
/* verilator lint_off UNUSEDSIGNAL */
module mqnic_app_block #
(
    // Structural configuration
    parameter IF_COUNT = 1,
    parameter PORTS_PER_IF = 1,
    parameter SCHED_PER_IF = PORTS_PER_IF,
    parameter PORT_COUNT = IF_COUNT*PORTS_PER_IF,

    // Clock configuration
    parameter CLK_PERIOD_NS_NUM = 4,
    parameter CLK_PERIOD_NS_DENOM = 1,

    // PTP configuration
    parameter PTP_CLK_PERIOD_NS_NUM = 4,
    parameter PTP_CLK_PERIOD_NS_DENOM = 1,
    parameter PTP_TS_WIDTH = 96,
    parameter PTP_PORT_CDC_PIPELINE = 0,
    parameter PTP_PEROUT_ENABLE = 0,
    parameter PTP_PEROUT_COUNT = 1,

    // Interface configuration
    parameter PTP_TS_ENABLE = 1,
    parameter TX_TAG_WIDTH = 16,
    parameter MAX_TX_SIZE = 9214,
    parameter MAX_RX_SIZE = 9214,

    // RAM configuration
    parameter DDR_CH = 1,
    parameter DDR_ENABLE = 0,
    parameter DDR_GROUP_SIZE = 1,
    parameter AXI_DDR_DATA_WIDTH = 256,
    parameter AXI_DDR_ADDR_WIDTH = 32,
    parameter AXI_DDR_STRB_WIDTH = (AXI_DDR_DATA_WIDTH/8),
    parameter AXI_DDR_ID_WIDTH = 8,
    parameter AXI_DDR_AWUSER_ENABLE = 0,
    parameter AXI_DDR_AWUSER_WIDTH = 1,
    parameter AXI_DDR_WUSER_ENABLE = 0,
    parameter AXI_DDR_WUSER_WIDTH = 1,
    parameter AXI_DDR_BUSER_ENABLE = 0,
    parameter AXI_DDR_BUSER_WIDTH = 1,
    parameter AXI_DDR_ARUSER_ENABLE = 0,
    parameter AXI_DDR_ARUSER_WIDTH = 1,
    parameter AXI_DDR_RUSER_ENABLE = 0,
    parameter AXI_DDR_RUSER_WIDTH = 1,
    parameter AXI_DDR_MAX_BURST_LEN = 256,
    parameter AXI_DDR_NARROW_BURST = 0,
    parameter AXI_DDR_FIXED_BURST = 0,
    parameter AXI_DDR_WRAP_BURST = 0,
    parameter HBM_CH = 1,
    parameter HBM_ENABLE = 0,
    parameter HBM_GROUP_SIZE = 1,
    parameter AXI_HBM_DATA_WIDTH = 256,
    parameter AXI_HBM_ADDR_WIDTH = 32,
    parameter AXI_HBM_STRB_WIDTH = (AXI_HBM_DATA_WIDTH/8),
    parameter AXI_HBM_ID_WIDTH = 8,
    parameter AXI_HBM_AWUSER_ENABLE = 0,
    parameter AXI_HBM_AWUSER_WIDTH = 1,
    parameter AXI_HBM_WUSER_ENABLE = 0,
    parameter AXI_HBM_WUSER_WIDTH = 1,
    parameter AXI_HBM_BUSER_ENABLE = 0,
    parameter AXI_HBM_BUSER_WIDTH = 1,
    parameter AXI_HBM_ARUSER_ENABLE = 0,
    parameter AXI_HBM_ARUSER_WIDTH = 1,
    parameter AXI_HBM_RUSER_ENABLE = 0,
    parameter AXI_HBM_RUSER_WIDTH = 1,
    parameter AXI_HBM_MAX_BURST_LEN = 256,
    parameter AXI_HBM_NARROW_BURST = 0,
    parameter AXI_HBM_FIXED_BURST = 0,
    parameter AXI_HBM_WRAP_BURST = 0,

    // Application configuration: cleave's application id is 0xC1EA0001
    parameter APP_ID = 32'hC1EA0001,
    parameter APP_CTRL_ENABLE = 1,
    parameter APP_DMA_ENABLE = 1,
    parameter APP_AXIS_DIRECT_ENABLE = 1,
    parameter APP_AXIS_SYNC_ENABLE = 1,
    parameter APP_AXIS_IF_ENABLE = 1,
    parameter APP_STAT_ENABLE = 1,
    parameter APP_GPIO_IN_WIDTH = 32,
    parameter APP_GPIO_OUT_WIDTH = 32,

    // DMA interface configuration
    parameter DMA_ADDR_WIDTH = 64,
    parameter DMA_IMM_ENABLE = 0,
    parameter DMA_IMM_WIDTH = 32,
    parameter DMA_LEN_WIDTH = 16,
    parameter DMA_TAG_WIDTH = 16,
    parameter RAM_SEL_WIDTH = 4,
    parameter RAM_ADDR_WIDTH = 16,
    parameter RAM_SEG_COUNT = 2,
    parameter RAM_SEG_DATA_WIDTH = 256*2/RAM_SEG_COUNT,
    parameter RAM_SEG_BE_WIDTH = RAM_SEG_DATA_WIDTH/8,
    parameter RAM_SEG_ADDR_WIDTH = RAM_ADDR_WIDTH-$clog2(RAM_SEG_COUNT*RAM_SEG_BE_WIDTH),
    parameter RAM_PIPELINE = 2,

    // AXI lite interface (application control from host)
    parameter AXIL_APP_CTRL_DATA_WIDTH = 32,
    parameter AXIL_APP_CTRL_ADDR_WIDTH = 16,
    parameter AXIL_APP_CTRL_STRB_WIDTH = (AXIL_APP_CTRL_DATA_WIDTH/8),

    // AXI lite interface (control to NIC)
    parameter AXIL_CTRL_DATA_WIDTH = 32,
    parameter AXIL_CTRL_ADDR_WIDTH = 16,
    parameter AXIL_CTRL_STRB_WIDTH = (AXIL_CTRL_DATA_WIDTH/8),

    // Ethernet interface configuration (direct, async)
    parameter AXIS_DATA_WIDTH = 512,
    parameter AXIS_KEEP_WIDTH = AXIS_DATA_WIDTH/8,
    parameter AXIS_TX_USER_WIDTH = TX_TAG_WIDTH + 1,
    parameter AXIS_RX_USER_WIDTH = (PTP_TS_ENABLE ? PTP_TS_WIDTH : 0) + 1,
    parameter AXIS_RX_USE_READY = 0,

    // Ethernet interface configuration (direct, sync)
    parameter AXIS_SYNC_DATA_WIDTH = AXIS_DATA_WIDTH,
    parameter AXIS_SYNC_KEEP_WIDTH = AXIS_SYNC_DATA_WIDTH/8,
    parameter AXIS_SYNC_TX_USER_WIDTH = AXIS_TX_USER_WIDTH,
    parameter AXIS_SYNC_RX_USER_WIDTH = AXIS_RX_USER_WIDTH,

    // Ethernet interface configuration (interface)
    parameter AXIS_IF_DATA_WIDTH = AXIS_SYNC_DATA_WIDTH*2**$clog2(PORTS_PER_IF),
    parameter AXIS_IF_KEEP_WIDTH = AXIS_IF_DATA_WIDTH/8,
    parameter AXIS_IF_TX_ID_WIDTH = 12,
    parameter AXIS_IF_RX_ID_WIDTH = PORTS_PER_IF > 1 ? $clog2(PORTS_PER_IF) : 1,
    parameter AXIS_IF_TX_DEST_WIDTH = $clog2(PORTS_PER_IF)+4,
    parameter AXIS_IF_RX_DEST_WIDTH = 8,
    parameter AXIS_IF_TX_USER_WIDTH = AXIS_SYNC_TX_USER_WIDTH,
    parameter AXIS_IF_RX_USER_WIDTH = AXIS_SYNC_RX_USER_WIDTH,

    // Statistics counter subsystem
    parameter STAT_ENABLE = 1,
    parameter STAT_INC_WIDTH = 24,
    parameter STAT_ID_WIDTH = 12,

    // cleave: flow table entries, hash buckets (a power of two >= 2x flows), MRs, MS lists
    parameter CLEAVE_MAX_FLOWS = 10240,
    parameter CLEAVE_BUCKETS = 32768,
    parameter CLEAVE_MAX_MRS = 4096,
    parameter CLEAVE_MS_CHUNK = 16,
    parameter CLEAVE_MS_COMMITTED = 32,
    parameter CLEAVE_MS_STORE = 65536,
    // cleave: receive frame buffer (32 KB), big tables in UltraRAM
    parameter CLEAVE_FBUF_BEATS = 32768/AXIS_IF_KEEP_WIDTH,
    parameter CLEAVE_ULTRA = 1
)
(
    input  wire clk,
    input  wire rst,
    input  wire [AXIL_APP_CTRL_ADDR_WIDTH-1:0] s_axil_app_ctrl_awaddr,
    input  wire [2:0] s_axil_app_ctrl_awprot,
    input  wire s_axil_app_ctrl_awvalid,
    output wire s_axil_app_ctrl_awready,
    input  wire [AXIL_APP_CTRL_DATA_WIDTH-1:0] s_axil_app_ctrl_wdata,
    input  wire [AXIL_APP_CTRL_STRB_WIDTH-1:0] s_axil_app_ctrl_wstrb,
    input  wire s_axil_app_ctrl_wvalid,
    output wire s_axil_app_ctrl_wready,
    output wire [1:0] s_axil_app_ctrl_bresp,
    output wire s_axil_app_ctrl_bvalid,
    input  wire s_axil_app_ctrl_bready,
    input  wire [AXIL_APP_CTRL_ADDR_WIDTH-1:0] s_axil_app_ctrl_araddr,
    input  wire [2:0] s_axil_app_ctrl_arprot,
    input  wire s_axil_app_ctrl_arvalid,
    output wire s_axil_app_ctrl_arready,
    output wire [AXIL_APP_CTRL_DATA_WIDTH-1:0] s_axil_app_ctrl_rdata,
    output wire [1:0] s_axil_app_ctrl_rresp,
    output wire s_axil_app_ctrl_rvalid,
    input  wire s_axil_app_ctrl_rready,
    output wire [AXIL_CTRL_ADDR_WIDTH-1:0] m_axil_ctrl_awaddr,
    output wire [2:0] m_axil_ctrl_awprot,
    output wire m_axil_ctrl_awvalid,
    input  wire m_axil_ctrl_awready,
    output wire [AXIL_CTRL_DATA_WIDTH-1:0] m_axil_ctrl_wdata,
    output wire [AXIL_CTRL_STRB_WIDTH-1:0] m_axil_ctrl_wstrb,
    output wire m_axil_ctrl_wvalid,
    input  wire m_axil_ctrl_wready,
    input  wire [1:0] m_axil_ctrl_bresp,
    input  wire m_axil_ctrl_bvalid,
    output wire m_axil_ctrl_bready,
    output wire [AXIL_CTRL_ADDR_WIDTH-1:0] m_axil_ctrl_araddr,
    output wire [2:0] m_axil_ctrl_arprot,
    output wire m_axil_ctrl_arvalid,
    input  wire m_axil_ctrl_arready,
    input  wire [AXIL_CTRL_DATA_WIDTH-1:0] m_axil_ctrl_rdata,
    input  wire [1:0] m_axil_ctrl_rresp,
    input  wire m_axil_ctrl_rvalid,
    output wire m_axil_ctrl_rready,
    output wire [DMA_ADDR_WIDTH-1:0] m_axis_ctrl_dma_read_desc_dma_addr,
    output wire [RAM_SEL_WIDTH-1:0] m_axis_ctrl_dma_read_desc_ram_sel,
    output wire [RAM_ADDR_WIDTH-1:0] m_axis_ctrl_dma_read_desc_ram_addr,
    output wire [DMA_LEN_WIDTH-1:0] m_axis_ctrl_dma_read_desc_len,
    output wire [DMA_TAG_WIDTH-1:0] m_axis_ctrl_dma_read_desc_tag,
    output wire m_axis_ctrl_dma_read_desc_valid,
    input  wire m_axis_ctrl_dma_read_desc_ready,
    input  wire [DMA_TAG_WIDTH-1:0] s_axis_ctrl_dma_read_desc_status_tag,
    input  wire [3:0] s_axis_ctrl_dma_read_desc_status_error,
    input  wire s_axis_ctrl_dma_read_desc_status_valid,
    output wire [DMA_ADDR_WIDTH-1:0] m_axis_ctrl_dma_write_desc_dma_addr,
    output wire [RAM_SEL_WIDTH-1:0] m_axis_ctrl_dma_write_desc_ram_sel,
    output wire [RAM_ADDR_WIDTH-1:0] m_axis_ctrl_dma_write_desc_ram_addr,
    output wire [DMA_IMM_WIDTH-1:0] m_axis_ctrl_dma_write_desc_imm,
    output wire m_axis_ctrl_dma_write_desc_imm_en,
    output wire [DMA_LEN_WIDTH-1:0] m_axis_ctrl_dma_write_desc_len,
    output wire [DMA_TAG_WIDTH-1:0] m_axis_ctrl_dma_write_desc_tag,
    output wire m_axis_ctrl_dma_write_desc_valid,
    input  wire m_axis_ctrl_dma_write_desc_ready,
    input  wire [DMA_TAG_WIDTH-1:0] s_axis_ctrl_dma_write_desc_status_tag,
    input  wire [3:0] s_axis_ctrl_dma_write_desc_status_error,
    input  wire s_axis_ctrl_dma_write_desc_status_valid,
    output wire [DMA_ADDR_WIDTH-1:0] m_axis_data_dma_read_desc_dma_addr,
    output wire [RAM_SEL_WIDTH-1:0] m_axis_data_dma_read_desc_ram_sel,
    output wire [RAM_ADDR_WIDTH-1:0] m_axis_data_dma_read_desc_ram_addr,
    output wire [DMA_LEN_WIDTH-1:0] m_axis_data_dma_read_desc_len,
    output wire [DMA_TAG_WIDTH-1:0] m_axis_data_dma_read_desc_tag,
    output wire m_axis_data_dma_read_desc_valid,
    input  wire m_axis_data_dma_read_desc_ready,
    input  wire [DMA_TAG_WIDTH-1:0] s_axis_data_dma_read_desc_status_tag,
    input  wire [3:0] s_axis_data_dma_read_desc_status_error,
    input  wire s_axis_data_dma_read_desc_status_valid,
    output wire [DMA_ADDR_WIDTH-1:0] m_axis_data_dma_write_desc_dma_addr,
    output wire [RAM_SEL_WIDTH-1:0] m_axis_data_dma_write_desc_ram_sel,
    output wire [RAM_ADDR_WIDTH-1:0] m_axis_data_dma_write_desc_ram_addr,
    output wire [DMA_IMM_WIDTH-1:0] m_axis_data_dma_write_desc_imm,
    output wire m_axis_data_dma_write_desc_imm_en,
    output wire [DMA_LEN_WIDTH-1:0] m_axis_data_dma_write_desc_len,
    output wire [DMA_TAG_WIDTH-1:0] m_axis_data_dma_write_desc_tag,
    output wire m_axis_data_dma_write_desc_valid,
    input  wire m_axis_data_dma_write_desc_ready,
    input  wire [DMA_TAG_WIDTH-1:0] s_axis_data_dma_write_desc_status_tag,
    input  wire [3:0] s_axis_data_dma_write_desc_status_error,
    input  wire s_axis_data_dma_write_desc_status_valid,
    input  wire [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0] ctrl_dma_ram_wr_cmd_sel,
    input  wire [RAM_SEG_COUNT*RAM_SEG_BE_WIDTH-1:0] ctrl_dma_ram_wr_cmd_be,
    input  wire [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] ctrl_dma_ram_wr_cmd_addr,
    input  wire [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] ctrl_dma_ram_wr_cmd_data,
    input  wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_wr_cmd_valid,
    output wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_wr_cmd_ready,
    output wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_wr_done,
    input  wire [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0] ctrl_dma_ram_rd_cmd_sel,
    input  wire [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] ctrl_dma_ram_rd_cmd_addr,
    input  wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_rd_cmd_valid,
    output wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_rd_cmd_ready,
    output wire [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] ctrl_dma_ram_rd_resp_data,
    output wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_rd_resp_valid,
    input  wire [RAM_SEG_COUNT-1:0] ctrl_dma_ram_rd_resp_ready,
    input  wire [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0] data_dma_ram_wr_cmd_sel,
    input  wire [RAM_SEG_COUNT*RAM_SEG_BE_WIDTH-1:0] data_dma_ram_wr_cmd_be,
    input  wire [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] data_dma_ram_wr_cmd_addr,
    input  wire [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] data_dma_ram_wr_cmd_data,
    input  wire [RAM_SEG_COUNT-1:0] data_dma_ram_wr_cmd_valid,
    output wire [RAM_SEG_COUNT-1:0] data_dma_ram_wr_cmd_ready,
    output wire [RAM_SEG_COUNT-1:0] data_dma_ram_wr_done,
    input  wire [RAM_SEG_COUNT*RAM_SEL_WIDTH-1:0] data_dma_ram_rd_cmd_sel,
    input  wire [RAM_SEG_COUNT*RAM_SEG_ADDR_WIDTH-1:0] data_dma_ram_rd_cmd_addr,
    input  wire [RAM_SEG_COUNT-1:0] data_dma_ram_rd_cmd_valid,
    output wire [RAM_SEG_COUNT-1:0] data_dma_ram_rd_cmd_ready,
    output wire [RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH-1:0] data_dma_ram_rd_resp_data,
    output wire [RAM_SEG_COUNT-1:0] data_dma_ram_rd_resp_valid,
    input  wire [RAM_SEG_COUNT-1:0] data_dma_ram_rd_resp_ready,
    input  wire ptp_clk,
    input  wire ptp_rst,
    input  wire ptp_sample_clk,
    input  wire ptp_td_sd,
    input  wire ptp_pps,
    input  wire ptp_pps_str,
    input  wire ptp_sync_locked,
    input  wire [PTP_TS_WIDTH-1:0] ptp_sync_ts_rel,
    input  wire ptp_sync_ts_rel_step,
    input  wire [PTP_TS_WIDTH-1:0] ptp_sync_ts_tod,
    input  wire ptp_sync_ts_tod_step,
    input  wire ptp_sync_pps,
    input  wire ptp_sync_pps_str,
    input  wire [PTP_PEROUT_COUNT-1:0] ptp_perout_locked,
    input  wire [PTP_PEROUT_COUNT-1:0] ptp_perout_error,
    input  wire [PTP_PEROUT_COUNT-1:0] ptp_perout_pulse,
    input  wire [PORT_COUNT-1:0] direct_tx_clk,
    input  wire [PORT_COUNT-1:0] direct_tx_rst,
    input  wire [PORT_COUNT*AXIS_DATA_WIDTH-1:0] s_axis_direct_tx_tdata,
    input  wire [PORT_COUNT*AXIS_KEEP_WIDTH-1:0] s_axis_direct_tx_tkeep,
    input  wire [PORT_COUNT-1:0] s_axis_direct_tx_tvalid,
    output wire [PORT_COUNT-1:0] s_axis_direct_tx_tready,
    input  wire [PORT_COUNT-1:0] s_axis_direct_tx_tlast,
    input  wire [PORT_COUNT*AXIS_TX_USER_WIDTH-1:0] s_axis_direct_tx_tuser,
    output wire [PORT_COUNT*AXIS_DATA_WIDTH-1:0] m_axis_direct_tx_tdata,
    output wire [PORT_COUNT*AXIS_KEEP_WIDTH-1:0] m_axis_direct_tx_tkeep,
    output wire [PORT_COUNT-1:0] m_axis_direct_tx_tvalid,
    input  wire [PORT_COUNT-1:0] m_axis_direct_tx_tready,
    output wire [PORT_COUNT-1:0] m_axis_direct_tx_tlast,
    output wire [PORT_COUNT*AXIS_TX_USER_WIDTH-1:0] m_axis_direct_tx_tuser,
    input  wire [PORT_COUNT*PTP_TS_WIDTH-1:0] s_axis_direct_tx_cpl_ts,
    input  wire [PORT_COUNT*TX_TAG_WIDTH-1:0] s_axis_direct_tx_cpl_tag,
    input  wire [PORT_COUNT-1:0] s_axis_direct_tx_cpl_valid,
    output wire [PORT_COUNT-1:0] s_axis_direct_tx_cpl_ready,
    output wire [PORT_COUNT*PTP_TS_WIDTH-1:0] m_axis_direct_tx_cpl_ts,
    output wire [PORT_COUNT*TX_TAG_WIDTH-1:0] m_axis_direct_tx_cpl_tag,
    output wire [PORT_COUNT-1:0] m_axis_direct_tx_cpl_valid,
    input  wire [PORT_COUNT-1:0] m_axis_direct_tx_cpl_ready,
    input  wire [PORT_COUNT-1:0] direct_rx_clk,
    input  wire [PORT_COUNT-1:0] direct_rx_rst,
    input  wire [PORT_COUNT*AXIS_DATA_WIDTH-1:0] s_axis_direct_rx_tdata,
    input  wire [PORT_COUNT*AXIS_KEEP_WIDTH-1:0] s_axis_direct_rx_tkeep,
    input  wire [PORT_COUNT-1:0] s_axis_direct_rx_tvalid,
    output wire [PORT_COUNT-1:0] s_axis_direct_rx_tready,
    input  wire [PORT_COUNT-1:0] s_axis_direct_rx_tlast,
    input  wire [PORT_COUNT*AXIS_RX_USER_WIDTH-1:0] s_axis_direct_rx_tuser,
    output wire [PORT_COUNT*AXIS_DATA_WIDTH-1:0] m_axis_direct_rx_tdata,
    output wire [PORT_COUNT*AXIS_KEEP_WIDTH-1:0] m_axis_direct_rx_tkeep,
    output wire [PORT_COUNT-1:0] m_axis_direct_rx_tvalid,
    input  wire [PORT_COUNT-1:0] m_axis_direct_rx_tready,
    output wire [PORT_COUNT-1:0] m_axis_direct_rx_tlast,
    output wire [PORT_COUNT*AXIS_RX_USER_WIDTH-1:0] m_axis_direct_rx_tuser,
    input  wire [PORT_COUNT*AXIS_SYNC_DATA_WIDTH-1:0] s_axis_sync_tx_tdata,
    input  wire [PORT_COUNT*AXIS_SYNC_KEEP_WIDTH-1:0] s_axis_sync_tx_tkeep,
    input  wire [PORT_COUNT-1:0] s_axis_sync_tx_tvalid,
    output wire [PORT_COUNT-1:0] s_axis_sync_tx_tready,
    input  wire [PORT_COUNT-1:0] s_axis_sync_tx_tlast,
    input  wire [PORT_COUNT*AXIS_SYNC_TX_USER_WIDTH-1:0] s_axis_sync_tx_tuser,
    output wire [PORT_COUNT*AXIS_SYNC_DATA_WIDTH-1:0] m_axis_sync_tx_tdata,
    output wire [PORT_COUNT*AXIS_SYNC_KEEP_WIDTH-1:0] m_axis_sync_tx_tkeep,
    output wire [PORT_COUNT-1:0] m_axis_sync_tx_tvalid,
    input  wire [PORT_COUNT-1:0] m_axis_sync_tx_tready,
    output wire [PORT_COUNT-1:0] m_axis_sync_tx_tlast,
    output wire [PORT_COUNT*AXIS_SYNC_TX_USER_WIDTH-1:0] m_axis_sync_tx_tuser,
    input  wire [PORT_COUNT*PTP_TS_WIDTH-1:0] s_axis_sync_tx_cpl_ts,
    input  wire [PORT_COUNT*TX_TAG_WIDTH-1:0] s_axis_sync_tx_cpl_tag,
    input  wire [PORT_COUNT-1:0] s_axis_sync_tx_cpl_valid,
    output wire [PORT_COUNT-1:0] s_axis_sync_tx_cpl_ready,
    output wire [PORT_COUNT*PTP_TS_WIDTH-1:0] m_axis_sync_tx_cpl_ts,
    output wire [PORT_COUNT*TX_TAG_WIDTH-1:0] m_axis_sync_tx_cpl_tag,
    output wire [PORT_COUNT-1:0] m_axis_sync_tx_cpl_valid,
    input  wire [PORT_COUNT-1:0] m_axis_sync_tx_cpl_ready,
    input  wire [PORT_COUNT*AXIS_SYNC_DATA_WIDTH-1:0] s_axis_sync_rx_tdata,
    input  wire [PORT_COUNT*AXIS_SYNC_KEEP_WIDTH-1:0] s_axis_sync_rx_tkeep,
    input  wire [PORT_COUNT-1:0] s_axis_sync_rx_tvalid,
    output wire [PORT_COUNT-1:0] s_axis_sync_rx_tready,
    input  wire [PORT_COUNT-1:0] s_axis_sync_rx_tlast,
    input  wire [PORT_COUNT*AXIS_SYNC_RX_USER_WIDTH-1:0] s_axis_sync_rx_tuser,
    output wire [PORT_COUNT*AXIS_SYNC_DATA_WIDTH-1:0] m_axis_sync_rx_tdata,
    output wire [PORT_COUNT*AXIS_SYNC_KEEP_WIDTH-1:0] m_axis_sync_rx_tkeep,
    output wire [PORT_COUNT-1:0] m_axis_sync_rx_tvalid,
    input  wire [PORT_COUNT-1:0] m_axis_sync_rx_tready,
    output wire [PORT_COUNT-1:0] m_axis_sync_rx_tlast,
    output wire [PORT_COUNT*AXIS_SYNC_RX_USER_WIDTH-1:0] m_axis_sync_rx_tuser,
    input  wire [IF_COUNT*AXIS_IF_DATA_WIDTH-1:0] s_axis_if_tx_tdata,
    input  wire [IF_COUNT*AXIS_IF_KEEP_WIDTH-1:0] s_axis_if_tx_tkeep,
    input  wire [IF_COUNT-1:0] s_axis_if_tx_tvalid,
    output wire [IF_COUNT-1:0] s_axis_if_tx_tready,
    input  wire [IF_COUNT-1:0] s_axis_if_tx_tlast,
    input  wire [IF_COUNT*AXIS_IF_TX_ID_WIDTH-1:0] s_axis_if_tx_tid,
    input  wire [IF_COUNT*AXIS_IF_TX_DEST_WIDTH-1:0] s_axis_if_tx_tdest,
    input  wire [IF_COUNT*AXIS_IF_TX_USER_WIDTH-1:0] s_axis_if_tx_tuser,
    output wire [IF_COUNT*AXIS_IF_DATA_WIDTH-1:0] m_axis_if_tx_tdata,
    output wire [IF_COUNT*AXIS_IF_KEEP_WIDTH-1:0] m_axis_if_tx_tkeep,
    output wire [IF_COUNT-1:0] m_axis_if_tx_tvalid,
    input  wire [IF_COUNT-1:0] m_axis_if_tx_tready,
    output wire [IF_COUNT-1:0] m_axis_if_tx_tlast,
    output wire [IF_COUNT*AXIS_IF_TX_ID_WIDTH-1:0] m_axis_if_tx_tid,
    output wire [IF_COUNT*AXIS_IF_TX_DEST_WIDTH-1:0] m_axis_if_tx_tdest,
    output wire [IF_COUNT*AXIS_IF_TX_USER_WIDTH-1:0] m_axis_if_tx_tuser,
    input  wire [IF_COUNT*PTP_TS_WIDTH-1:0] s_axis_if_tx_cpl_ts,
    input  wire [IF_COUNT*TX_TAG_WIDTH-1:0] s_axis_if_tx_cpl_tag,
    input  wire [IF_COUNT-1:0] s_axis_if_tx_cpl_valid,
    output wire [IF_COUNT-1:0] s_axis_if_tx_cpl_ready,
    output wire [IF_COUNT*PTP_TS_WIDTH-1:0] m_axis_if_tx_cpl_ts,
    output wire [IF_COUNT*TX_TAG_WIDTH-1:0] m_axis_if_tx_cpl_tag,
    output wire [IF_COUNT-1:0] m_axis_if_tx_cpl_valid,
    input  wire [IF_COUNT-1:0] m_axis_if_tx_cpl_ready,
    input  wire [IF_COUNT*AXIS_IF_DATA_WIDTH-1:0] s_axis_if_rx_tdata,
    input  wire [IF_COUNT*AXIS_IF_KEEP_WIDTH-1:0] s_axis_if_rx_tkeep,
    input  wire [IF_COUNT-1:0] s_axis_if_rx_tvalid,
    output wire [IF_COUNT-1:0] s_axis_if_rx_tready,
    input  wire [IF_COUNT-1:0] s_axis_if_rx_tlast,
    input  wire [IF_COUNT*AXIS_IF_RX_ID_WIDTH-1:0] s_axis_if_rx_tid,
    input  wire [IF_COUNT*AXIS_IF_RX_DEST_WIDTH-1:0] s_axis_if_rx_tdest,
    input  wire [IF_COUNT*AXIS_IF_RX_USER_WIDTH-1:0] s_axis_if_rx_tuser,
    output wire [IF_COUNT*AXIS_IF_DATA_WIDTH-1:0] m_axis_if_rx_tdata,
    output wire [IF_COUNT*AXIS_IF_KEEP_WIDTH-1:0] m_axis_if_rx_tkeep,
    output wire [IF_COUNT-1:0] m_axis_if_rx_tvalid,
    input  wire [IF_COUNT-1:0] m_axis_if_rx_tready,
    output wire [IF_COUNT-1:0] m_axis_if_rx_tlast,
    output wire [IF_COUNT*AXIS_IF_RX_ID_WIDTH-1:0] m_axis_if_rx_tid,
    output wire [IF_COUNT*AXIS_IF_RX_DEST_WIDTH-1:0] m_axis_if_rx_tdest,
    output wire [IF_COUNT*AXIS_IF_RX_USER_WIDTH-1:0] m_axis_if_rx_tuser,
    input  wire [DDR_CH-1:0] ddr_clk,
    input  wire [DDR_CH-1:0] ddr_rst,
    output wire [DDR_CH*AXI_DDR_ID_WIDTH-1:0] m_axi_ddr_awid,
    output wire [DDR_CH*AXI_DDR_ADDR_WIDTH-1:0] m_axi_ddr_awaddr,
    output wire [DDR_CH*8-1:0] m_axi_ddr_awlen,
    output wire [DDR_CH*3-1:0] m_axi_ddr_awsize,
    output wire [DDR_CH*2-1:0] m_axi_ddr_awburst,
    output wire [DDR_CH-1:0] m_axi_ddr_awlock,
    output wire [DDR_CH*4-1:0] m_axi_ddr_awcache,
    output wire [DDR_CH*3-1:0] m_axi_ddr_awprot,
    output wire [DDR_CH*4-1:0] m_axi_ddr_awqos,
    output wire [DDR_CH*AXI_DDR_AWUSER_WIDTH-1:0] m_axi_ddr_awuser,
    output wire [DDR_CH-1:0] m_axi_ddr_awvalid,
    input  wire [DDR_CH-1:0] m_axi_ddr_awready,
    output wire [DDR_CH*AXI_DDR_DATA_WIDTH-1:0] m_axi_ddr_wdata,
    output wire [DDR_CH*AXI_DDR_STRB_WIDTH-1:0] m_axi_ddr_wstrb,
    output wire [DDR_CH-1:0] m_axi_ddr_wlast,
    output wire [DDR_CH*AXI_DDR_WUSER_WIDTH-1:0] m_axi_ddr_wuser,
    output wire [DDR_CH-1:0] m_axi_ddr_wvalid,
    input  wire [DDR_CH-1:0] m_axi_ddr_wready,
    input  wire [DDR_CH*AXI_DDR_ID_WIDTH-1:0] m_axi_ddr_bid,
    input  wire [DDR_CH*2-1:0] m_axi_ddr_bresp,
    input  wire [DDR_CH*AXI_DDR_BUSER_WIDTH-1:0] m_axi_ddr_buser,
    input  wire [DDR_CH-1:0] m_axi_ddr_bvalid,
    output wire [DDR_CH-1:0] m_axi_ddr_bready,
    output wire [DDR_CH*AXI_DDR_ID_WIDTH-1:0] m_axi_ddr_arid,
    output wire [DDR_CH*AXI_DDR_ADDR_WIDTH-1:0] m_axi_ddr_araddr,
    output wire [DDR_CH*8-1:0] m_axi_ddr_arlen,
    output wire [DDR_CH*3-1:0] m_axi_ddr_arsize,
    output wire [DDR_CH*2-1:0] m_axi_ddr_arburst,
    output wire [DDR_CH-1:0] m_axi_ddr_arlock,
    output wire [DDR_CH*4-1:0] m_axi_ddr_arcache,
    output wire [DDR_CH*3-1:0] m_axi_ddr_arprot,
    output wire [DDR_CH*4-1:0] m_axi_ddr_arqos,
    output wire [DDR_CH*AXI_DDR_ARUSER_WIDTH-1:0] m_axi_ddr_aruser,
    output wire [DDR_CH-1:0] m_axi_ddr_arvalid,
    input  wire [DDR_CH-1:0] m_axi_ddr_arready,
    input  wire [DDR_CH*AXI_DDR_ID_WIDTH-1:0] m_axi_ddr_rid,
    input  wire [DDR_CH*AXI_DDR_DATA_WIDTH-1:0] m_axi_ddr_rdata,
    input  wire [DDR_CH*2-1:0] m_axi_ddr_rresp,
    input  wire [DDR_CH-1:0] m_axi_ddr_rlast,
    input  wire [DDR_CH*AXI_DDR_RUSER_WIDTH-1:0] m_axi_ddr_ruser,
    input  wire [DDR_CH-1:0] m_axi_ddr_rvalid,
    output wire [DDR_CH-1:0] m_axi_ddr_rready,
    input  wire [DDR_CH-1:0] ddr_status,
    input  wire [HBM_CH-1:0] hbm_clk,
    input  wire [HBM_CH-1:0] hbm_rst,
    output wire [HBM_CH*AXI_HBM_ID_WIDTH-1:0] m_axi_hbm_awid,
    output wire [HBM_CH*AXI_HBM_ADDR_WIDTH-1:0] m_axi_hbm_awaddr,
    output wire [HBM_CH*8-1:0] m_axi_hbm_awlen,
    output wire [HBM_CH*3-1:0] m_axi_hbm_awsize,
    output wire [HBM_CH*2-1:0] m_axi_hbm_awburst,
    output wire [HBM_CH-1:0] m_axi_hbm_awlock,
    output wire [HBM_CH*4-1:0] m_axi_hbm_awcache,
    output wire [HBM_CH*3-1:0] m_axi_hbm_awprot,
    output wire [HBM_CH*4-1:0] m_axi_hbm_awqos,
    output wire [HBM_CH*AXI_HBM_AWUSER_WIDTH-1:0] m_axi_hbm_awuser,
    output wire [HBM_CH-1:0] m_axi_hbm_awvalid,
    input  wire [HBM_CH-1:0] m_axi_hbm_awready,
    output wire [HBM_CH*AXI_HBM_DATA_WIDTH-1:0] m_axi_hbm_wdata,
    output wire [HBM_CH*AXI_HBM_STRB_WIDTH-1:0] m_axi_hbm_wstrb,
    output wire [HBM_CH-1:0] m_axi_hbm_wlast,
    output wire [HBM_CH*AXI_HBM_WUSER_WIDTH-1:0] m_axi_hbm_wuser,
    output wire [HBM_CH-1:0] m_axi_hbm_wvalid,
    input  wire [HBM_CH-1:0] m_axi_hbm_wready,
    input  wire [HBM_CH*AXI_HBM_ID_WIDTH-1:0] m_axi_hbm_bid,
    input  wire [HBM_CH*2-1:0] m_axi_hbm_bresp,
    input  wire [HBM_CH*AXI_HBM_BUSER_WIDTH-1:0] m_axi_hbm_buser,
    input  wire [HBM_CH-1:0] m_axi_hbm_bvalid,
    output wire [HBM_CH-1:0] m_axi_hbm_bready,
    output wire [HBM_CH*AXI_HBM_ID_WIDTH-1:0] m_axi_hbm_arid,
    output wire [HBM_CH*AXI_HBM_ADDR_WIDTH-1:0] m_axi_hbm_araddr,
    output wire [HBM_CH*8-1:0] m_axi_hbm_arlen,
    output wire [HBM_CH*3-1:0] m_axi_hbm_arsize,
    output wire [HBM_CH*2-1:0] m_axi_hbm_arburst,
    output wire [HBM_CH-1:0] m_axi_hbm_arlock,
    output wire [HBM_CH*4-1:0] m_axi_hbm_arcache,
    output wire [HBM_CH*3-1:0] m_axi_hbm_arprot,
    output wire [HBM_CH*4-1:0] m_axi_hbm_arqos,
    output wire [HBM_CH*AXI_HBM_ARUSER_WIDTH-1:0] m_axi_hbm_aruser,
    output wire [HBM_CH-1:0] m_axi_hbm_arvalid,
    input  wire [HBM_CH-1:0] m_axi_hbm_arready,
    input  wire [HBM_CH*AXI_HBM_ID_WIDTH-1:0] m_axi_hbm_rid,
    input  wire [HBM_CH*AXI_HBM_DATA_WIDTH-1:0] m_axi_hbm_rdata,
    input  wire [HBM_CH*2-1:0] m_axi_hbm_rresp,
    input  wire [HBM_CH-1:0] m_axi_hbm_rlast,
    input  wire [HBM_CH*AXI_HBM_RUSER_WIDTH-1:0] m_axi_hbm_ruser,
    input  wire [HBM_CH-1:0] m_axi_hbm_rvalid,
    output wire [HBM_CH-1:0] m_axi_hbm_rready,
    input  wire [HBM_CH-1:0] hbm_status,
    output wire [STAT_INC_WIDTH-1:0] m_axis_stat_tdata,
    output wire [STAT_ID_WIDTH-1:0] m_axis_stat_tid,
    output wire m_axis_stat_tvalid,
    input  wire m_axis_stat_tready,
    input  wire [APP_GPIO_IN_WIDTH-1:0] gpio_in,
    output wire [APP_GPIO_OUT_WIDTH-1:0] gpio_out,
    input  wire jtag_tdi,
    output wire jtag_tdo,
    input  wire jtag_tms,
    input  wire jtag_tck
);
/* verilator lint_on UNUSEDPARAM */
/* verilator lint_on UNUSEDSIGNAL */

// check configuration
initial begin
    if (APP_ID != 32'hC1EA0001) begin
        $error("Error: Invalid APP_ID (expected 32'hC1EA0001, got 32'h%x) (instance %m)", APP_ID);
        $finish;
    end
    if (IF_COUNT != 1 || PORTS_PER_IF != 1) begin
        $error("Error: cleave needs IF_COUNT = PORTS_PER_IF = 1 (instance %m)");
        $finish;
    end
    if (AXIS_IF_DATA_WIDTH != RAM_SEG_COUNT*RAM_SEG_DATA_WIDTH) begin
        $error("Error: AXIS_IF_DATA_WIDTH must be a DMA RAM row (instance %m)");
        $finish;
    end
    if (AXIL_APP_CTRL_DATA_WIDTH != 32) begin
        $error("Error: cleave's registers are 32 bits (instance %m)");
        $finish;
    end
end

// ---- unused interfaces: passed through or idle -------------------------------------------------
assign m_axis_direct_tx_tdata = s_axis_direct_tx_tdata;
assign m_axis_direct_tx_tkeep = s_axis_direct_tx_tkeep;
assign m_axis_direct_tx_tvalid = s_axis_direct_tx_tvalid;
assign m_axis_direct_tx_tlast = s_axis_direct_tx_tlast;
assign m_axis_direct_tx_tuser = s_axis_direct_tx_tuser;
assign s_axis_direct_tx_tready = m_axis_direct_tx_tready;
assign m_axis_direct_rx_tdata = s_axis_direct_rx_tdata;
assign m_axis_direct_rx_tkeep = s_axis_direct_rx_tkeep;
assign m_axis_direct_rx_tvalid = s_axis_direct_rx_tvalid;
assign m_axis_direct_rx_tlast = s_axis_direct_rx_tlast;
assign m_axis_direct_rx_tuser = s_axis_direct_rx_tuser;
assign s_axis_direct_rx_tready = m_axis_direct_rx_tready;
assign m_axis_direct_tx_cpl_ts = s_axis_direct_tx_cpl_ts;
assign m_axis_direct_tx_cpl_tag = s_axis_direct_tx_cpl_tag;
assign m_axis_direct_tx_cpl_valid = s_axis_direct_tx_cpl_valid;
assign s_axis_direct_tx_cpl_ready = m_axis_direct_tx_cpl_ready;
assign m_axis_sync_tx_tdata = s_axis_sync_tx_tdata;
assign m_axis_sync_tx_tkeep = s_axis_sync_tx_tkeep;
assign m_axis_sync_tx_tvalid = s_axis_sync_tx_tvalid;
assign m_axis_sync_tx_tlast = s_axis_sync_tx_tlast;
assign m_axis_sync_tx_tuser = s_axis_sync_tx_tuser;
assign s_axis_sync_tx_tready = m_axis_sync_tx_tready;
assign m_axis_sync_rx_tdata = s_axis_sync_rx_tdata;
assign m_axis_sync_rx_tkeep = s_axis_sync_rx_tkeep;
assign m_axis_sync_rx_tvalid = s_axis_sync_rx_tvalid;
assign m_axis_sync_rx_tlast = s_axis_sync_rx_tlast;
assign m_axis_sync_rx_tuser = s_axis_sync_rx_tuser;
assign s_axis_sync_rx_tready = m_axis_sync_rx_tready;
assign m_axis_sync_tx_cpl_ts = s_axis_sync_tx_cpl_ts;
assign m_axis_sync_tx_cpl_tag = s_axis_sync_tx_cpl_tag;
assign m_axis_sync_tx_cpl_valid = s_axis_sync_tx_cpl_valid;
assign s_axis_sync_tx_cpl_ready = m_axis_sync_tx_cpl_ready;
assign m_axil_ctrl_awaddr = 0;
assign m_axil_ctrl_awprot = 0;
assign m_axil_ctrl_awvalid = 0;
assign m_axil_ctrl_wdata = 0;
assign m_axil_ctrl_wstrb = 0;
assign m_axil_ctrl_wvalid = 0;
assign m_axil_ctrl_bready = 1'b1;
assign m_axil_ctrl_araddr = 0;
assign m_axil_ctrl_arprot = 0;
assign m_axil_ctrl_arvalid = 0;
assign m_axil_ctrl_rready = 1'b1;
assign m_axis_ctrl_dma_read_desc_dma_addr = 0;
assign m_axis_ctrl_dma_read_desc_ram_sel = 0;
assign m_axis_ctrl_dma_read_desc_ram_addr = 0;
assign m_axis_ctrl_dma_read_desc_len = 0;
assign m_axis_ctrl_dma_read_desc_tag = 0;
assign m_axis_ctrl_dma_read_desc_valid = 0;
assign m_axis_ctrl_dma_write_desc_dma_addr = 0;
assign m_axis_ctrl_dma_write_desc_ram_sel = 0;
assign m_axis_ctrl_dma_write_desc_ram_addr = 0;
assign m_axis_ctrl_dma_write_desc_imm = 0;
assign m_axis_ctrl_dma_write_desc_imm_en = 0;
assign m_axis_ctrl_dma_write_desc_len = 0;
assign m_axis_ctrl_dma_write_desc_tag = 0;
assign m_axis_ctrl_dma_write_desc_valid = 0;
assign ctrl_dma_ram_wr_cmd_ready = {RAM_SEG_COUNT{1'b1}};
assign ctrl_dma_ram_wr_done = 0;
assign ctrl_dma_ram_rd_cmd_ready = {RAM_SEG_COUNT{1'b1}};
assign ctrl_dma_ram_rd_resp_data = 0;
assign ctrl_dma_ram_rd_resp_valid = 0;
assign m_axi_ddr_awid = 0;
assign m_axi_ddr_awaddr = 0;
assign m_axi_ddr_awlen = 0;
assign m_axi_ddr_awsize = 0;
assign m_axi_ddr_awburst = 0;
assign m_axi_ddr_awlock = 0;
assign m_axi_ddr_awcache = 0;
assign m_axi_ddr_awprot = 0;
assign m_axi_ddr_awqos = 0;
assign m_axi_ddr_awuser = 0;
assign m_axi_ddr_awvalid = 0;
assign m_axi_ddr_wdata = 0;
assign m_axi_ddr_wstrb = 0;
assign m_axi_ddr_wlast = 0;
assign m_axi_ddr_wuser = 0;
assign m_axi_ddr_wvalid = 0;
assign m_axi_ddr_bready = {DDR_CH{1'b1}};
assign m_axi_ddr_arid = 0;
assign m_axi_ddr_araddr = 0;
assign m_axi_ddr_arlen = 0;
assign m_axi_ddr_arsize = 0;
assign m_axi_ddr_arburst = 0;
assign m_axi_ddr_arlock = 0;
assign m_axi_ddr_arcache = 0;
assign m_axi_ddr_arprot = 0;
assign m_axi_ddr_arqos = 0;
assign m_axi_ddr_aruser = 0;
assign m_axi_ddr_arvalid = 0;
assign m_axi_ddr_rready = {DDR_CH{1'b1}};
assign m_axi_hbm_awid = 0;
assign m_axi_hbm_awaddr = 0;
assign m_axi_hbm_awlen = 0;
assign m_axi_hbm_awsize = 0;
assign m_axi_hbm_awburst = 0;
assign m_axi_hbm_awlock = 0;
assign m_axi_hbm_awcache = 0;
assign m_axi_hbm_awprot = 0;
assign m_axi_hbm_awqos = 0;
assign m_axi_hbm_awuser = 0;
assign m_axi_hbm_awvalid = 0;
assign m_axi_hbm_wdata = 0;
assign m_axi_hbm_wstrb = 0;
assign m_axi_hbm_wlast = 0;
assign m_axi_hbm_wuser = 0;
assign m_axi_hbm_wvalid = 0;
assign m_axi_hbm_bready = {HBM_CH{1'b1}};
assign m_axi_hbm_arid = 0;
assign m_axi_hbm_araddr = 0;
assign m_axi_hbm_arlen = 0;
assign m_axi_hbm_arsize = 0;
assign m_axi_hbm_arburst = 0;
assign m_axi_hbm_arlock = 0;
assign m_axi_hbm_arcache = 0;
assign m_axi_hbm_arprot = 0;
assign m_axi_hbm_arqos = 0;
assign m_axi_hbm_aruser = 0;
assign m_axi_hbm_arvalid = 0;
assign m_axi_hbm_rready = {HBM_CH{1'b1}};
assign m_axis_stat_tdata = 0;
assign m_axis_stat_tid = 0;
assign m_axis_stat_tvalid = 0;
assign gpio_out = 0;
assign jtag_tdo = jtag_tdi;

// ---- the unit --------------------------------------------------------------------------------
wire [AXIS_IF_DATA_WIDTH-1:0] txd_tdata, nic_tx_tdata, copy_tdata, dwr_tdata, drd_tdata;
wire [AXIS_IF_KEEP_WIDTH-1:0] txd_tkeep, nic_tx_tkeep, copy_tkeep, dwr_tkeep, drd_tkeep;
wire txd_tvalid, txd_tready, txd_tlast;
wire nic_tx_tvalid, nic_tx_tready, nic_tx_tlast;
wire copy_tvalid, copy_tready, copy_tlast;
wire dwr_tvalid, dwr_tready, dwr_tlast, drd_tvalid, drd_tready, drd_tlast;
wire [63:0] dwr_addr, drd_addr;
wire [15:0] dwr_len, drd_len;
wire dwr_last, dwr_valid, dwr_ready, drd_valid, drd_ready;
wire [15:0] merge_tid;
wire [31:0] dma_errors;

cleave_nic #(
    .DATA_WIDTH(AXIS_IF_DATA_WIDTH),
    .MAX_FLOWS(CLEAVE_MAX_FLOWS),
    .BUCKETS(CLEAVE_BUCKETS),
    .MAX_MRS(CLEAVE_MAX_MRS),
    .MS_CHUNK(CLEAVE_MS_CHUNK),
    .MS_COMMITTED(CLEAVE_MS_COMMITTED),
    .MS_STORE(CLEAVE_MS_STORE),
    .FBUF_BEATS(CLEAVE_FBUF_BEATS),
    .VERIFY_L4(1'b1),
    .ULTRA(CLEAVE_ULTRA),
    .AXIL_ADDR_WIDTH(AXIL_APP_CTRL_ADDR_WIDTH)
)
nic_inst (
    .clk(clk),
    .rst(rst),
    .s_axil_awaddr(s_axil_app_ctrl_awaddr),
    .s_axil_awprot(s_axil_app_ctrl_awprot),
    .s_axil_awvalid(s_axil_app_ctrl_awvalid),
    .s_axil_awready(s_axil_app_ctrl_awready),
    .s_axil_wdata(s_axil_app_ctrl_wdata),
    .s_axil_wstrb(s_axil_app_ctrl_wstrb),
    .s_axil_wvalid(s_axil_app_ctrl_wvalid),
    .s_axil_wready(s_axil_app_ctrl_wready),
    .s_axil_bresp(s_axil_app_ctrl_bresp),
    .s_axil_bvalid(s_axil_app_ctrl_bvalid),
    .s_axil_bready(s_axil_app_ctrl_bready),
    .s_axil_araddr(s_axil_app_ctrl_araddr),
    .s_axil_arprot(s_axil_app_ctrl_arprot),
    .s_axil_arvalid(s_axil_app_ctrl_arvalid),
    .s_axil_arready(s_axil_app_ctrl_arready),
    .s_axil_rdata(s_axil_app_ctrl_rdata),
    .s_axil_rresp(s_axil_app_ctrl_rresp),
    .s_axil_rvalid(s_axil_app_ctrl_rvalid),
    .s_axil_rready(s_axil_app_ctrl_rready),
    .s_axis_rx_tdata(s_axis_if_rx_tdata),
    .s_axis_rx_tkeep(s_axis_if_rx_tkeep),
    .s_axis_rx_tvalid(s_axis_if_rx_tvalid),
    .s_axis_rx_tready(s_axis_if_rx_tready),
    .s_axis_rx_tlast(s_axis_if_rx_tlast),
    .m_axis_copy_tdata(copy_tdata),
    .m_axis_copy_tkeep(copy_tkeep),
    .m_axis_copy_tvalid(copy_tvalid),
    .m_axis_copy_tready(copy_tready),
    .m_axis_copy_tlast(copy_tlast),
    .s_axis_txd_tdata(txd_tdata),
    .s_axis_txd_tkeep(txd_tkeep),
    .s_axis_txd_tvalid(txd_tvalid),
    .s_axis_txd_tready(txd_tready),
    .s_axis_txd_tlast(txd_tlast),
    .m_axis_tx_tdata(nic_tx_tdata),
    .m_axis_tx_tkeep(nic_tx_tkeep),
    .m_axis_tx_tvalid(nic_tx_tvalid),
    .m_axis_tx_tready(nic_tx_tready),
    .m_axis_tx_tlast(nic_tx_tlast),
    .m_dma_wr_addr(dwr_addr),
    .m_dma_wr_len(dwr_len),
    .m_dma_wr_last(dwr_last),
    .m_dma_wr_valid(dwr_valid),
    .m_dma_wr_ready(dwr_ready),
    .m_axis_dma_wr_tdata(dwr_tdata),
    .m_axis_dma_wr_tkeep(dwr_tkeep),
    .m_axis_dma_wr_tvalid(dwr_tvalid),
    .m_axis_dma_wr_tready(dwr_tready),
    .m_axis_dma_wr_tlast(dwr_tlast),
    .m_dma_rd_addr(drd_addr),
    .m_dma_rd_len(drd_len),
    .m_dma_rd_valid(drd_valid),
    .m_dma_rd_ready(drd_ready),
    .s_axis_dma_rd_tdata(drd_tdata),
    .s_axis_dma_rd_tkeep(drd_tkeep),
    .s_axis_dma_rd_tvalid(drd_tvalid),
    .s_axis_dma_rd_tready(drd_tready),
    .s_axis_dma_rd_tlast(drd_tlast),
    .merge_tid(merge_tid),
    .dma_errors(dma_errors)
);

cleave_app_if #(
    .DATA_WIDTH(AXIS_IF_DATA_WIDTH),
    .TX_ID_WIDTH(AXIS_IF_TX_ID_WIDTH),
    .TX_DEST_WIDTH(AXIS_IF_TX_DEST_WIDTH),
    .TX_USER_WIDTH(AXIS_IF_TX_USER_WIDTH),
    .TX_TAG_WIDTH(TX_TAG_WIDTH),
    .PTP_TS_WIDTH(PTP_TS_WIDTH),
    .RX_ID_WIDTH(AXIS_IF_RX_ID_WIDTH),
    .RX_DEST_WIDTH(AXIS_IF_RX_DEST_WIDTH),
    .RX_USER_WIDTH(AXIS_IF_RX_USER_WIDTH)
)
if_inst (
    .clk(clk),
    .rst(rst),
    .merge_tid(merge_tid),
    .s_axis_if_tx_tdata(s_axis_if_tx_tdata),
    .s_axis_if_tx_tkeep(s_axis_if_tx_tkeep),
    .s_axis_if_tx_tvalid(s_axis_if_tx_tvalid),
    .s_axis_if_tx_tready(s_axis_if_tx_tready),
    .s_axis_if_tx_tlast(s_axis_if_tx_tlast),
    .s_axis_if_tx_tid(s_axis_if_tx_tid),
    .s_axis_if_tx_tdest(s_axis_if_tx_tdest),
    .s_axis_if_tx_tuser(s_axis_if_tx_tuser),
    .m_axis_if_tx_tdata(m_axis_if_tx_tdata),
    .m_axis_if_tx_tkeep(m_axis_if_tx_tkeep),
    .m_axis_if_tx_tvalid(m_axis_if_tx_tvalid),
    .m_axis_if_tx_tready(m_axis_if_tx_tready),
    .m_axis_if_tx_tlast(m_axis_if_tx_tlast),
    .m_axis_if_tx_tid(m_axis_if_tx_tid),
    .m_axis_if_tx_tdest(m_axis_if_tx_tdest),
    .m_axis_if_tx_tuser(m_axis_if_tx_tuser),
    .s_axis_if_tx_cpl_ts(s_axis_if_tx_cpl_ts),
    .s_axis_if_tx_cpl_tag(s_axis_if_tx_cpl_tag),
    .s_axis_if_tx_cpl_valid(s_axis_if_tx_cpl_valid),
    .s_axis_if_tx_cpl_ready(s_axis_if_tx_cpl_ready),
    .m_axis_if_tx_cpl_ts(m_axis_if_tx_cpl_ts),
    .m_axis_if_tx_cpl_tag(m_axis_if_tx_cpl_tag),
    .m_axis_if_tx_cpl_valid(m_axis_if_tx_cpl_valid),
    .m_axis_if_tx_cpl_ready(m_axis_if_tx_cpl_ready),
    .m_axis_txd_tdata(txd_tdata),
    .m_axis_txd_tkeep(txd_tkeep),
    .m_axis_txd_tvalid(txd_tvalid),
    .m_axis_txd_tready(txd_tready),
    .m_axis_txd_tlast(txd_tlast),
    .s_axis_nic_tx_tdata(nic_tx_tdata),
    .s_axis_nic_tx_tkeep(nic_tx_tkeep),
    .s_axis_nic_tx_tvalid(nic_tx_tvalid),
    .s_axis_nic_tx_tready(nic_tx_tready),
    .s_axis_nic_tx_tlast(nic_tx_tlast),
    .s_axis_copy_tdata(copy_tdata),
    .s_axis_copy_tkeep(copy_tkeep),
    .s_axis_copy_tvalid(copy_tvalid),
    .s_axis_copy_tready(copy_tready),
    .s_axis_copy_tlast(copy_tlast),
    .m_axis_if_rx_tdata(m_axis_if_rx_tdata),
    .m_axis_if_rx_tkeep(m_axis_if_rx_tkeep),
    .m_axis_if_rx_tvalid(m_axis_if_rx_tvalid),
    .m_axis_if_rx_tready(m_axis_if_rx_tready),
    .m_axis_if_rx_tlast(m_axis_if_rx_tlast),
    .m_axis_if_rx_tid(m_axis_if_rx_tid),
    .m_axis_if_rx_tdest(m_axis_if_rx_tdest),
    .m_axis_if_rx_tuser(m_axis_if_rx_tuser)
);

assign m_axis_data_dma_write_desc_imm = 0;
assign m_axis_data_dma_write_desc_imm_en = 1'b0;

cleave_dma_adapter #(
    .DATA_WIDTH(AXIS_IF_DATA_WIDTH),
    .DMA_ADDR_WIDTH(DMA_ADDR_WIDTH),
    .DMA_LEN_WIDTH(DMA_LEN_WIDTH),
    .DMA_TAG_WIDTH(DMA_TAG_WIDTH),
    .RAM_SEL_WIDTH(RAM_SEL_WIDTH),
    .RAM_ADDR_WIDTH(RAM_ADDR_WIDTH),
    .RAM_SEG_COUNT(RAM_SEG_COUNT),
    .RAM_SEG_DATA_WIDTH(RAM_SEG_DATA_WIDTH),
    .RAM_SEG_BE_WIDTH(RAM_SEG_BE_WIDTH),
    .RAM_SEG_ADDR_WIDTH(RAM_SEG_ADDR_WIDTH),
    .WR_ROWS(32768/AXIS_IF_KEEP_WIDTH),
    .RD_ROWS(16384/AXIS_IF_KEEP_WIDTH)
)
dma_inst (
    .clk(clk),
    .rst(rst),
    .s_wr_addr(dwr_addr),
    .s_wr_len(dwr_len),
    .s_wr_last(dwr_last),
    .s_wr_valid(dwr_valid),
    .s_wr_ready(dwr_ready),
    .s_axis_wr_tdata(dwr_tdata),
    .s_axis_wr_tkeep(dwr_tkeep),
    .s_axis_wr_tvalid(dwr_tvalid),
    .s_axis_wr_tready(dwr_tready),
    .s_axis_wr_tlast(dwr_tlast),
    .s_rd_addr(drd_addr),
    .s_rd_len(drd_len),
    .s_rd_valid(drd_valid),
    .s_rd_ready(drd_ready),
    .m_axis_rd_tdata(drd_tdata),
    .m_axis_rd_tkeep(drd_tkeep),
    .m_axis_rd_tvalid(drd_tvalid),
    .m_axis_rd_tready(drd_tready),
    .m_axis_rd_tlast(drd_tlast),
    .m_axis_dma_write_desc_dma_addr(m_axis_data_dma_write_desc_dma_addr),
    .m_axis_dma_write_desc_ram_sel(m_axis_data_dma_write_desc_ram_sel),
    .m_axis_dma_write_desc_ram_addr(m_axis_data_dma_write_desc_ram_addr),
    .m_axis_dma_write_desc_len(m_axis_data_dma_write_desc_len),
    .m_axis_dma_write_desc_tag(m_axis_data_dma_write_desc_tag),
    .m_axis_dma_write_desc_valid(m_axis_data_dma_write_desc_valid),
    .m_axis_dma_write_desc_ready(m_axis_data_dma_write_desc_ready),
    .s_axis_dma_write_desc_status_tag(s_axis_data_dma_write_desc_status_tag),
    .s_axis_dma_write_desc_status_error(s_axis_data_dma_write_desc_status_error),
    .s_axis_dma_write_desc_status_valid(s_axis_data_dma_write_desc_status_valid),
    .m_axis_dma_read_desc_dma_addr(m_axis_data_dma_read_desc_dma_addr),
    .m_axis_dma_read_desc_ram_sel(m_axis_data_dma_read_desc_ram_sel),
    .m_axis_dma_read_desc_ram_addr(m_axis_data_dma_read_desc_ram_addr),
    .m_axis_dma_read_desc_len(m_axis_data_dma_read_desc_len),
    .m_axis_dma_read_desc_tag(m_axis_data_dma_read_desc_tag),
    .m_axis_dma_read_desc_valid(m_axis_data_dma_read_desc_valid),
    .m_axis_dma_read_desc_ready(m_axis_data_dma_read_desc_ready),
    .s_axis_dma_read_desc_status_tag(s_axis_data_dma_read_desc_status_tag),
    .s_axis_dma_read_desc_status_error(s_axis_data_dma_read_desc_status_error),
    .s_axis_dma_read_desc_status_valid(s_axis_data_dma_read_desc_status_valid),
    .ram_wr_cmd_sel(data_dma_ram_wr_cmd_sel),
    .ram_wr_cmd_be(data_dma_ram_wr_cmd_be),
    .ram_wr_cmd_addr(data_dma_ram_wr_cmd_addr),
    .ram_wr_cmd_data(data_dma_ram_wr_cmd_data),
    .ram_wr_cmd_valid(data_dma_ram_wr_cmd_valid),
    .ram_wr_cmd_ready(data_dma_ram_wr_cmd_ready),
    .ram_wr_done(data_dma_ram_wr_done),
    .ram_rd_cmd_sel(data_dma_ram_rd_cmd_sel),
    .ram_rd_cmd_addr(data_dma_ram_rd_cmd_addr),
    .ram_rd_cmd_valid(data_dma_ram_rd_cmd_valid),
    .ram_rd_cmd_ready(data_dma_ram_rd_cmd_ready),
    .ram_rd_resp_data(data_dma_ram_rd_resp_data),
    .ram_rd_resp_valid(data_dma_ram_rd_resp_valid),
    .ram_rd_resp_ready(data_dma_ram_rd_resp_ready),
    .error_count(dma_errors)
);

endmodule

`resetall
