"""nic_spec.py - the one source of the NIC's shared constants and layouts.

The RTL (hw/fpga/rtl), the reference model (hw/fpga/model), the net_cleave PMD
(src/dataplane/nic/rte_pmd_cleave.h) and the testbenches (hw/fpga/tb) all take their enum
values, counter order, command opcodes, record layouts and register blocks from here, through
gen_nic_defs.py, which Meson runs at build time. Data only: no logic lives in this file.

Change a record layout or a register block: bump that block's version (REG_BLOCKS) and
RECORD_VERSION. Values are appended, never renumbered: drivers and counters rely on them.
"""

# ---- enums ----------------------------------------------------------------------------------
# Each enum: model C++ name, PMD C prefix (None: not in the PMD's API), and its values in order
# from 0 as (identifier, counter/display name or None for the identifier, comment).

ENUMS = [
    {
        "name": "Err",
        "doc": "Result of a driver command.",
        "pmd": None,
        "values": [
            ("ok", None, ""),
            ("bad_argument", None, ""),
            ("unknown_mr", None, ""),
            ("mr_exists", None, ""),
            ("mr_table_full", None, ""),
            ("mr_in_use", None, ""),
            ("out_of_bounds", None, "MS or TX reference outside its MR, or base/length overflow"),
            ("unknown_flow", None, ""),
            ("flow_exists", None, ""),
            ("flow_table_full", None, ""),
            ("ms_full", None, "the flow's committed chunks and the shared store are exhausted"),
            ("not_consumed", None, "retiring an MS the cursor has not passed"),
            ("no_such_message", None, ""),
            ("access_denied", None, "an rkey or READ sink the flow's owner may not use"),
        ],
    },
    {
        "name": "FlowMode",
        "doc": "How a flow's frames are delivered.",
        "pmd": ("rte_pmd_cleave_flow_mode", ""),
        "values": [
            ("zero_copy", None, "place payloads into posted MSs"),
            ("copy", None, "deliver every frame whole (copy path)"),
        ],
    },
    {
        "name": "Parser",
        "doc": "The transport a flow's frames are parsed as.",
        "pmd": ("rte_pmd_cleave_parser", "PARSER_"),
        "values": [
            ("tcp", None, ""),
            ("roce", None, ""),
            ("solar", None, ""),
            ("udp", None, ""),
        ],
    },
    {
        "name": "Decision",
        "doc": "What the NIC did with a received frame.",
        "pmd": ("rte_pmd_cleave_decision", ""),
        "values": [
            ("placed", None, "(a)/(d): the whole payload was written to app memory"),
            ("trimmed", None, "(c): the part before the cursor was cut, the rest placed"),
            ("dropped", None, "(b): wholly before the cursor (a duplicate); header still delivered"),
            ("deferred", None, "(e): the whole frame goes to the copy path; see DeferReason"),
            ("no_payload", None, "nothing to place (ACKs, zero-length segments, CNPs)"),
        ],
    },
    {
        "name": "DeferReason",
        "doc": "Why a frame was deferred to the copy path.",
        "pmd": ("rte_pmd_cleave_defer_reason", "DEFER_"),
        "values": [
            ("none", None, ""),
            ("not_ipv4", None, "not Ethernet/IPv4"),
            ("truncated", None, "a header or the payload extends beyond the frame"),
            ("bad_ip_header", None, "version, IHL or total length inconsistent"),
            ("ip_fragment", None, ""),
            ("bad_ip_checksum", "bad_ip_csum", ""),
            ("bad_l4_header", None, "TCP data offset, UDP length, BTH version/opcode inconsistent"),
            ("bad_l4_checksum", "bad_l4_csum", ""),
            ("bad_icrc", None, ""),
            ("bad_crc32c", None, ""),
            ("not_l4", None, "IPv4 but neither TCP nor UDP"),
            ("flow_miss", None, ""),
            ("copy_mode", None, ""),
            ("no_ms", None, "no posted MS covers the payload (MS exhaustion)"),
            ("too_many_frags", None, "the payload would straddle more than kMaxFrags MSs"),
            ("no_message", None, "message semantics: no MS posted for that message, or no context"),
            ("ms_overflow", None, "the payload runs past the end of its message's MS"),
            ("unsupported", None, "an opcode the NIC does not place (RoCE atomics, SEND with "
                                  "invalidate, what UC does not have)"),
            ("dma_fault", None, "the MR check failed at write time"),
            ("remote_access", None, "RoCE WRITE: rkey, owner, access flag or VA range refused"),
            ("out_of_sequence", None, "RoCE go-back-N: a request other than the one expected next"),
            ("bad_length", None, "RoCE: a request's payload or RETH lengths break IBTA's rules"),
            ("bad_pkey", None, "RoCE: a P_Key outside the default partition"),
        ],
    },
    {
        "name": "CsumStatus",
        "doc": "A checksum's status in an RX entry.",
        "pmd": ("rte_pmd_cleave_csum", "CSUM_"),
        "values": [
            ("not_checked", None, ""),
            ("good", None, ""),
            ("bad", None, ""),
        ],
    },
    {
        "name": "TxStatus",
        "doc": "Result of a TX request, in its completion.",
        "pmd": None,
        "values": [
            ("ok", None, ""),
            ("bad_header", None, ""),
            ("dma_fault", None, ""),
            ("too_long", None, ""),
            ("no_room", None, "output buffer or frame array too small"),
            ("completions_full", None, "the driver must poll completions first; nothing was sent"),
        ],
    },
    {
        "name": "Ctr",
        "doc": "Counters of their own (then one per DeferReason, Err and TxStatus).",
        "pmd": None,
        "values": [
            ("rx_frames", None, ""),
            ("rx_in_order", None, ""),
            ("rx_past_hole", None, ""),
            ("rx_trimmed", None, ""),
            ("rx_trimmed_bytes", None, ""),
            ("rx_dropped", None, ""),
            ("rx_no_payload", None, ""),
            ("rx_deferred", None, ""),
            ("rx_placed_bytes", None, ""),
            ("rx_fragments", None, ""),
            ("rx_unreliable", None, ""),
            ("rx_message", None, ""),
            ("rx_placed_past_gap", None,
             "RoCE selective repeat: a WRITE packet placed through a WRITE context beyond the "
             "flow's first (NicConfig::roce_write_ctxs; with one it is deferred)"),
            ("tx_requests", None, ""),
            ("tx_frames", None, ""),
            ("tx_bytes", None, ""),
            ("tx_tso_requests", None, ""),
            ("tx_errors", None, ""),
            ("cmd_ok", None, ""),
            ("cmd_errors", None, ""),
        ],
    },
]

# Bit flags: (model C++ enum name, model value prefix, PMD macro prefix or None, values).
FLAGS = [
    ("TxFlags", "kTx", None, [
        ("ip_csum", 1, "IPv4 header checksum"),
        ("l4_csum", 2, "TCP or UDP checksum"),
        ("tso", 4, "implies both checksums; header must be Ethernet/IPv4/TCP"),
        ("icrc", 8, "RoCEv2: append pad (BTH PadCnt) and ICRC"),
        ("crc32c", 16, "Solar: CRC32C of each frame's payload into UDP payload bytes 28..31; the "
                       "header must end with the 32-byte Solar header (model only, not the RTL)"),
    ]),
    ("MrAccess", "kMr", "RTE_PMD_CLEAVE_MR_", [
        ("remote_write", 1, "RoCE peers may WRITE into the MR"),
        ("remote_read", 2, "RoCE peers may READ from the MR"),
    ]),
]

# The counter block's order: Ctr, then these groups with a name prefix each.
COUNTER_GROUPS = [
    ("Ctr", ""),
    ("DeferReason", "defer_"),
    ("Err", "cmd_err_"),
    ("TxStatus", "tx_status_"),
]

# ---- scalar constants ---------------------------------------------------------------------------
# (identifier, value, C++ type, comment). Model: kCamelCase; C: CLEAVE_NIC_UPPER; Verilog: UPPER.
CONSTANTS = [
    ("max_frags", 4, "size_t", "MSs one payload may straddle; more is deferred (too_many_frags)"),
    ("max_mtu", 9216, "uint32_t", "largest IPv4 packet the NIC sends"),
    ("max_tso_bytes", 65536, "uint32_t", "largest TSO payload"),
    ("max_header_bytes", 192, "size_t", "header bytes an RX entry carries"),
    ("max_tx_header_bytes", 255, "size_t",
     "longest TX header template (the descriptor's 8-bit length)"),
    ("no_flow", 0xFFFFFFFF, "uint32_t", "flow id of an RX entry without a flow"),
    ("no_flow_24", 0xFFFFFF, "uint32_t", "flow id of an RX completion without a flow"),
    ("rx_header_slot_bytes", 256, "uint32_t", "one RX header ring slot"),
    ("roce_port", 4791, "uint16_t", "UDP destination port of RoCEv2"),
    ("solar_port", 7000, "uint16_t", "UDP destination port of Solar"),
    ("record_version", 2, "uint32_t", "layout version of the records"),
]

# ---- records ------------------------------------------------------------------------------------
# Little-endian bit positions in a record of `bits` bits (byte k holds bits 8k..8k+7), as
# (field, lsb, width, comment). Drivers and the testbenches pack and unpack with the generated
# helpers; the RTL with the generated Verilog localparams (<RECORD>_<FIELD>_LSB/_W).

RECORDS = {
    # One per received frame (hw/fpga/docs/formats.md 1.1).
    "rx_cpl": (256, [
        ("flow_id", 0, 24, "flow id, 0xFFFFFF: no flow"),
        ("decision", 24, 3, "Decision"),
        ("reason", 27, 5, "DeferReason"),
        ("seq", 32, 32, "TCP seq, RoCE PSN (24 bits), Solar tx seq"),
        ("payload_len", 64, 16, "payload bytes in the frame (no pad or ICRC)"),
        ("header_len", 80, 8, "header bytes in the slot"),
        ("nfrags", 88, 3, "fragments written (0-4)"),
        ("out_of_order", 91, 1, "placed past a hole"),
        ("ip_csum", 92, 2, "CsumStatus of the IPv4 header"),
        ("l4_csum", 94, 2, "CsumStatus of TCP/UDP checksum, ICRC or CRC32C"),
        ("trimmed", 96, 16, "bytes trimmed before the cursor"),
        ("placed", 112, 16, "bytes placed"),
        ("msg_seq", 128, 32, "message number of the MS written"),
        ("mr", 160, 16, "first fragment: MR id"),
        ("offset", 176, 48, "first fragment: byte offset in the MR"),
        ("parser", 224, 2, "Parser of the flow"),
        ("slot", 226, 16, "header slot (ring index) or copy-path sequence"),
        ("copy", 242, 1, "the whole frame went to the copy path"),
        ("phase", 255, 1, "flips on each ring wrap"),
    ]),
    # A TX request (formats.md 1.2): the header template follows in the TX stream.
    "tx_desc": (256, [
        ("header_len", 16, 8, "header bytes following the descriptor"),
        ("flags", 24, 8, "TxFlags"),
        ("mss", 32, 16, "TSO: payload bytes per frame"),
        ("mr", 48, 16, "MR id of the payload"),
        ("offset", 64, 48, "payload offset in the MR"),
        ("len", 128, 32, "payload length"),
        ("cookie", 160, 64, "echoed in the completion"),
    ]),
    "tx_cpl": (64, [
        ("cookie", 0, 32, "the descriptor's cookie, low 32 bits"),
        ("status", 32, 8, "TxStatus"),
        ("frames", 40, 16, "frames sent (a TSO request of 64 KiB at MSS 1 sends 65536)"),
        ("phase", 63, 1, "flips on each ring wrap"),
    ]),
    # Commands (formats.md 1.3): eight little-endian 32-bit words; word 0 bits 7..0 the opcode.
    # Fields of different opcodes share bits; each opcode lists what it reads in CMD_ARGS.
    "cmd": (256, [
        ("opcode", 0, 8, "CMD_*"),
        ("arg8", 8, 8, "MR_ADD access; FLOW_ADD protocol (6, 17); FLOW_MODE mode; RKEY_CHECK access"),
        ("arg16", 16, 16, "MR id (MR_ADD, MR_REMOVE, MS_POST, READ_POST); FLOW_ADD PMTU"),
        ("flow", 32, 24, "flow id"),
        ("fparser", 56, 2, "FLOW_ADD: Parser"),
        ("fmode", 58, 1, "FLOW_ADD: FlowMode"),
        ("freliable", 59, 1, "FLOW_ADD: reliable"),
        ("fmessages", 60, 1, "FLOW_ADD: message semantics"),
        ("fselrep", 61, 1, "FLOW_ADD: RoCE selective repeat (clear: go-back-N)"),
        ("w2", 64, 32, "word 2"),
        ("w3", 96, 32, "word 3"),
        ("w4", 128, 32, "word 4"),
        ("w5", 160, 32, "word 5"),
        ("w6", 192, 32, "word 6"),
        ("w7", 224, 32, "word 7"),
    ]),
}

# Opcodes and the arguments each reads (word: meaning), for the docs and the generated comments.
COMMANDS = [
    ("mr_add", 1, "arg16 MR id, arg8 access, w2 owner, w3/w4 IOVA base (64), w5/w6 length "
                  "(40 bits), w7 bits 15..0 key tag"),
    ("mr_remove", 2, "arg16 MR id"),
    ("flow_add", 3, "flow, fparser/fmode/freliable/fmessages/fselrep, arg8 protocol, arg16 PMTU, w2 src IP "
                    "(the peer), w3 dst IP, w4 src port (15..0) and dst port (31..16), w5 initial "
                    "seq/PSN (TCP, RoCE, UDP) or connection number (Solar), w6 owner (RoCE) or "
                    "initial offset low (Solar), w7 QPN (RoCE) or initial offset high (Solar)"),
    ("flow_remove", 4, "flow"),
    ("flow_mode", 5, "flow, arg8 FlowMode"),
    ("ms_post", 6, "flow, arg16 MR id, w2/w3 offset (48 bits), w4 length, w5 message number"),
    ("cursor", 7, "flow, w2 cursor"),
    ("ms_retire", 8, "flow, w2 count"),
    ("ms_retire_msg", 9, "flow, w2 message number"),
    ("roce_resync", 10, "flow, w2 PSN, w3 next SEND's message number"),
    ("read_post", 11, "flow, w2 first PSN, arg16 MR id, w3/w4 offset (48 bits), w5 length"),
    ("read_retire", 12, "flow, w2 first PSN"),
    ("rkey_check", 13, "flow, w2 rkey, w3/w4 VA (64), w5/w6 length (64), arg8 access"),
    ("flow_query", 14, "flow: its MS entries, cursor and READ sinks (0 for an unknown flow) into "
                       "the debug block; issued by writing its flow select; not counted"),
]

# ---- register blocks -------------------------------------------------------------------------
# Corundum register blocks (docs/source/rb/index.rst upstream): type (vendor 0xC1EA in the upper
# 16 bits), version, next pointer, then registers at these block-relative offsets. The app
# block's control space holds them back to back in this order; every register is 32 bits.
VENDOR = 0xC1EA

REG_BLOCKS = [
    ("info", 0x0001, 0x00000100, "NIC geometry and capabilities (read only)", [
        ("caps", 0x0C, "bit 0 TCP, 1 RoCEv2, 2 Solar, 3 UDP, 4 TSO, 5 ICRC, 6 CRC32C"),
        ("max_flows", 0x10, ""),
        ("max_mrs", 0x14, ""),
        ("ms_committed", 0x18, "MS entries committed per flow"),
        ("ms_store", 0x1C, "MS store entries"),
        ("ms_chunk", 0x20, "entries per MS chunk"),
        ("header_slot", 0x24, "RX header slot bytes"),
        ("max_frags", 0x28, "fragments per RX completion"),
        ("data_width", 0x2C, "AXI-Stream data width in bits"),
        ("record_version", 0x30, "layout version of the records"),
    ]),
    ("cmd", 0x0002, 0x00000100, "command mailbox: one command at a time", [
        ("word0", 0x10, "command word 0 (CMD record, little-endian words 0..7 at 0x10..0x2C)"),
        ("word1", 0x14, ""),
        ("word2", 0x18, ""),
        ("word3", 0x1C, ""),
        ("word4", 0x20, ""),
        ("word5", 0x24, ""),
        ("word6", 0x28, ""),
        ("word7", 0x2C, ""),
        ("tag", 0x30, "echoed in the result"),
        ("doorbell", 0x34, "write: run the command in words 0..7; read: bit 0 busy"),
        ("result", 0x38, "bits 7..0 Err, 23..8 MR id (RKEY_CHECK), bit 31 done (clears on doorbell)"),
        ("result_tag", 0x3C, "tag of the command the result belongs to"),
    ]),
    ("counters", 0x0003, 0x00000100, "counters in COUNTER order", [
        ("count", 0x0C, "number of counters"),
        ("select", 0x10, "counter index"),
        ("value_lo", 0x14, "selected counter, bits 31..0 (reading latches the high word)"),
        ("value_hi", 0x18, "bits 63..32 latched by the last value_lo read"),
    ]),
    ("rxq", 0x0004, 0x00000100, "RX split queue: completions and header slots in host memory", [
        ("cpl_base_lo", 0x0C, ""),
        ("cpl_base_hi", 0x10, ""),
        ("log2_entries", 0x14, "entries of both rings (completion and header slot)"),
        ("cpl_prod", 0x18, "completion producer index (NIC)"),
        ("cpl_cons", 0x1C, "completion consumer index (driver writes)"),
        ("hdr_base_lo", 0x20, ""),
        ("hdr_base_hi", 0x24, ""),
        ("enable", 0x28, "bit 0: frames are delivered (else held back)"),
    ]),
    ("txq", 0x0005, 0x00000100, "TX merge queue: descriptors from the TX stream, completions out", [
        ("cpl_base_lo", 0x0C, ""),
        ("cpl_base_hi", 0x10, ""),
        ("log2_entries", 0x14, "completion ring entries"),
        ("cpl_prod", 0x18, "completion producer index (NIC)"),
        ("cpl_cons", 0x1C, "completion consumer index (driver writes)"),
        ("merge_queue", 0x20, "TX stream tid from which frames are merge descriptors"),
        ("enable", 0x24, "bit 0: completions are written"),
    ]),
    ("debug", 0x0006, 0x00000100, "table introspection (read only but the selects)", [
        ("flows_in_use", 0x0C, ""),
        ("store_free", 0x10, "MS-store chunks free"),
        ("flow_select", 0x14, "flow id the next three read"),
        ("ms_count", 0x18, "MS entries of the selected flow, tombstones included"),
        ("cursor", 0x1C, "cursor of the selected flow"),
        ("read_count", 0x20, "READ sinks posted on the selected flow"),
        ("busy", 0x24, "bit 0: a command or frame is in the engine"),
        ("dma_errors", 0x28, "DMA transfers the host side reported an error for"),
    ]),
]

# Each block occupies this many bytes of the control space.
REG_BLOCK_STRIDE = 0x40
