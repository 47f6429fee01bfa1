-- solar.lua - a Wireshark/tshark dissector for Solar, Cleave's multipath block-storage transport
-- over UDP (the wire format: src/transport/solar/README.md).
--
--   tshark -X lua_script:tools/solar.lua -r capture.pcap
--   tshark -X lua_script:tools/solar.lua -o solar.port:7001 ...   (another UDP port)
--   wireshark: copy or link this file into the personal Lua plugins folder
--
-- Decodes every field of every type (WRITE_BLK, READ_REQ, READ_BLK, ACK, NACK), the SACK bitmap
-- as the sequences it acknowledges, and checks each block's CRC32C (an error "Bad block CRC32C"
-- when it does not match, as solar.crc.status). A header that breaks a rule of the format is
-- shown with an error naming the rule, the same names as src/transport/solar/solar_wire.h.
-- Works with the Lua 5.2 of Wireshark 4.0 (bit32) and the 5.3/5.4 of later ones.

local solar = Proto("solar", "Solar block transport")

local HEADER_LEN = 32
local DEFAULT_PORT = 7000

local types = { [1] = "WRITE_BLK", [2] = "READ_REQ", [3] = "READ_BLK", [4] = "ACK", [5] = "NACK" }
local reasons = { [1] = "bad_crc", [2] = "unknown_io", [3] = "out_of_range" }
local crc_status = { [0] = "Bad", [1] = "Good" }
-- Flags each type allows, as in solar_wire.cc.
local allowed_flags = { [1] = 0x03, [2] = 0x03, [3] = 0x03, [4] = 0x05, [5] = 0x00 }

local f = solar.fields
f.type = ProtoField.uint8("solar.type", "Type", base.DEC, types)
f.flags = ProtoField.uint8("solar.flags", "Flags", base.HEX)
f.flag_ack_req = ProtoField.bool("solar.flags.ack_req", "ACK request (probe on an ACK)", 8, nil, 0x01)
f.flag_retx = ProtoField.bool("solar.flags.retx", "Resend", 8, nil, 0x02)
f.flag_probe_reply = ProtoField.bool("solar.flags.probe_reply", "Probe reply", 8, nil, 0x04)
f.path = ProtoField.uint16("solar.path", "Path id", base.DEC)
f.conn = ProtoField.uint32("solar.conn", "Connection id", base.DEC)
f.seq = ProtoField.uint32("solar.seq", "Transmit sequence", base.DEC)
f.io_id = ProtoField.uint32("solar.io_id", "I/O id", base.DEC)
f.offset = ProtoField.uint64("solar.offset", "Byte offset", base.DEC)
f.index = ProtoField.uint16("solar.index", "Block index", base.DEC)
f.count = ProtoField.uint16("solar.count", "Block count", base.DEC)
f.crc = ProtoField.uint32("solar.crc", "Block CRC32C", base.HEX)
f.crc_computed = ProtoField.uint32("solar.crc.computed", "Computed CRC32C", base.HEX)
f.crc_status = ProtoField.uint8("solar.crc.status", "CRC32C status", base.DEC, crc_status)
f.length = ProtoField.uint32("solar.length", "Bytes asked for", base.DEC)
f.largest = ProtoField.uint32("solar.largest", "Largest sequence received", base.DEC)
f.sack = ProtoField.uint64("solar.sack", "SACK bitmap", base.HEX)
f.sacked = ProtoField.uint32("solar.sacked", "Also received", base.DEC)
f.echo = ProtoField.uint32("solar.echo", "Echoed sequence", base.DEC)
f.ack_delay = ProtoField.uint16("solar.ack_delay", "ACK delay (us)", base.DEC)
f.reserved = ProtoField.uint16("solar.reserved", "Reserved", base.HEX)
f.ce_count = ProtoField.uint32("solar.ce_count", "CE count", base.DEC)
f.reason = ProtoField.uint32("solar.reason", "Reason", base.DEC, reasons)
f.block = ProtoField.bytes("solar.block", "Block")
f.block_len = ProtoField.uint32("solar.block_len", "Block length", base.DEC)

local e_bad_crc = ProtoExpert.new("solar.crc.bad", "Bad block CRC32C", expert.group.CHECKSUM,
                                  expert.severity.ERROR)
local e_malformed = ProtoExpert.new("solar.malformed", "Malformed Solar header",
                                    expert.group.MALFORMED, expert.severity.ERROR)
local e_sport = ProtoExpert.new("solar.sport", "UDP source port is not 0xC000 | path id",
                                expert.group.PROTOCOL, expert.severity.WARN)
solar.experts = { e_bad_crc, e_malformed, e_sport }

solar.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "UDP destination port of Solar receivers")

-- Bit operations: bit32 on Lua 5.2, the native operators (compiled at run time, as 5.2 cannot
-- parse them) on 5.3 and later.
local band, bxor, rshift
if bit32 then
  band, bxor, rshift = bit32.band, bit32.bxor, bit32.rshift
else
  band = load("return function(a, b) return a & b end")()
  bxor = load("return function(a, b) return (a ~ b) & 0xFFFFFFFF end")()
  rshift = load("return function(a, n) return (a & 0xFFFFFFFF) >> n end")()
end

-- CRC-32C (Castagnoli, reflected 0x82F63B78), one table.
local crc_table = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if band(c, 1) ~= 0 then
      c = bxor(rshift(c, 1), 0x82F63B78)
    else
      c = rshift(c, 1)
    end
  end
  crc_table[i] = c
end

local function crc32c(s)
  local crc = 0xFFFFFFFF
  for i = 1, #s do
    crc = bxor(crc_table[band(bxor(crc, s:byte(i)), 0xFF)], rshift(crc, 8))
  end
  return bxor(crc, 0xFFFFFFFF)
end

local function malformed(tree, item, rule)
  (item or tree):add_proto_expert_info(e_malformed, "Malformed Solar header: " .. rule)
end

function solar.dissector(tvb, pinfo, tree)
  local len = tvb:len()
  pinfo.cols.protocol = "Solar"
  local t = tree:add(solar, tvb(), "Solar")
  if len < HEADER_LEN then
    malformed(t, nil, "truncated")
    pinfo.cols.info = "Solar [truncated]"
    return len
  end
  local type = tvb(0, 1):uint()
  local type_item = t:add(f.type, tvb(0, 1))
  local flags = tvb(1, 1):uint()
  local flags_item = t:add(f.flags, tvb(1, 1))
  flags_item:add(f.flag_ack_req, tvb(1, 1))
  flags_item:add(f.flag_retx, tvb(1, 1))
  flags_item:add(f.flag_probe_reply, tvb(1, 1))
  local path = tvb(2, 2):uint()
  local path_item = t:add(f.path, tvb(2, 2))
  t:add(f.conn, tvb(4, 4))
  local name = types[type]
  if not name then
    malformed(t, type_item, "bad_type")
    pinfo.cols.info = "Solar type " .. type .. " [bad_type]"
    return len
  end
  local info = name .. " path=" .. path
  if band(flags, 0xFF - allowed_flags[type]) ~= 0 then malformed(t, flags_item, "bad_flags") end
  if path >= 0x4000 then
    malformed(t, path_item, "bad_path")
  elseif pinfo.src_port ~= 0xC000 + path then
    path_item:add_proto_expert_info(e_sport)
  end
  local blen = len - HEADER_LEN
  local carries_block = type == 1 or type == 3

  if type == 4 then
    local largest = tvb(8, 4):uint()
    t:add(f.largest, tvb(8, 4))
    local sack_item = t:add(f.sack, tvb(12, 8))
    -- Bit i of the 64-bit value: largest - 1 - i arrived (bit 0 in byte 19).
    local n = 0
    for i = 0, 63 do
      local byte = tvb(19 - math.floor(i / 8), 1):uint()
      if band(rshift(byte, i % 8), 1) ~= 0 then
        sack_item:add(f.sacked, tvb(19 - math.floor(i / 8), 1),
                      (largest - 1 - i) % 4294967296):set_generated()
        n = n + 1
      end
    end
    t:add(f.echo, tvb(20, 4))
    t:add(f.ack_delay, tvb(24, 2))
    local res_item = t:add(f.reserved, tvb(26, 2))
    if tvb(26, 2):uint() ~= 0 then malformed(t, res_item, "reserved") end
    t:add(f.ce_count, tvb(28, 4))
    info = info .. " largest=" .. largest .. " sacked=" .. n .. " echo=" .. tvb(20, 4):uint() ..
           " ce=" .. tvb(28, 4):uint()
    if band(flags, 0x01) ~= 0 then info = info .. " [probe]" end
    if band(flags, 0x04) ~= 0 then info = info .. " [probe reply]" end
  else
    t:add(f.seq, tvb(8, 4))
    t:add(f.io_id, tvb(12, 4))
    local off_item = t:add(f.offset, tvb(16, 8))
    local idx_item = t:add(f.index, tvb(24, 2))
    local count_item = t:add(f.count, tvb(26, 2))
    local index, count = tvb(24, 2):uint(), tvb(26, 2):uint()
    info = info .. " seq=" .. tvb(8, 4):uint() .. " io=" .. tvb(12, 4):uint() .. " off=" ..
           tostring(tvb(16, 8):uint64()) .. " blk=" .. index .. "/" .. count
    if count == 0 then
      malformed(t, count_item, "zero_count")
    elseif index >= count then
      malformed(t, idx_item, "index_past_count")
    end
    local last = tvb(28, 4):uint()
    local span = 0
    if carries_block then
      local crc_item = t:add(f.crc, tvb(28, 4))
      if blen == 0 then
        malformed(t, nil, "no_block")
      else
        span = blen
        local computed = crc32c(tvb(HEADER_LEN, blen):raw())
        crc_item:add(f.crc_computed, tvb(28, 4), computed):set_generated()
        local good = computed == last
        crc_item:add(f.crc_status, tvb(28, 4), good and 1 or 0):set_generated()
        if not good then
          crc_item:add_proto_expert_info(e_bad_crc, string.format(
              "Bad block CRC32C: 0x%08x, the block's is 0x%08x", last, computed))
          info = info .. " [bad CRC32C]"
        end
        t:add(f.block_len, tvb(HEADER_LEN, blen), blen):set_generated()
        t:add(f.block, tvb(HEADER_LEN, blen))
        info = info .. " len=" .. blen
      end
    elseif type == 2 then
      local len_item = t:add(f.length, tvb(28, 4))
      span = last
      if last == 0 then malformed(t, len_item, "zero_length") end
      info = info .. " length=" .. last
    else
      local r_item = t:add(f.reason, tvb(28, 4))
      if not reasons[last] then malformed(t, r_item, "bad_reason") end
      info = info .. " reason=" .. (reasons[last] or last)
    end
    if span > 0 and tvb(16, 8):uint64() > UInt64.max() - UInt64.new(span) then
      malformed(t, off_item, "offset_overflow")
    end
    if band(flags, 0x01) ~= 0 then info = info .. " [ack req]" end
    if band(flags, 0x02) ~= 0 then info = info .. " [retx]" end
  end
  if not carries_block and blen ~= 0 then malformed(t, nil, "block_on_control") end
  pinfo.cols.info = info
  return len
end

local registered = DEFAULT_PORT
DissectorTable.get("udp.port"):add(registered, solar)

function solar.prefs_changed()
  if solar.prefs.port ~= registered then
    local udp = DissectorTable.get("udp.port")
    udp:remove(registered, solar)
    registered = solar.prefs.port
    udp:add(registered, solar)
  end
end
