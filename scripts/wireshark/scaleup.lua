-- Wireshark dissector for the RDMA engine's scale-up frames (header="scaleup").
--
-- Frame: scale-up header (10 bytes) | IBTA BTH (12) | RETH (16) or AETH (4) or nothing |
-- payload | pad | ICRC (4) | FCS (4). Layout and ICRC: spec/formats/scaleup.py and
-- docs/rdma.md, "Scale-up header". The project's pcap writer (pymodel/pcap.py) stores
-- these frames with pcap link type 147 (LINKTYPE_USER0, "reserved for private use",
-- tcpdump.org link-layer header types), which Wireshark maps to the encapsulation
-- wtap.USER0; this file registers on it.
--
-- Use: wireshark -X lua_script:scripts/wireshark/scaleup.lua build/sim/rdma.pcap
-- (or copy it to the personal Lua plugins folder).
--
-- Scale-up header, big endian:
--   bytes 0-1 dst, 2-3 src (node addresses), 4 type (0x1B: a BTH follows),
--   5 hop_limit, 6-7 length (BTH to ICRC, bytes), 8-9 entropy (flow label).
-- BTH (IBTA Vol 1 section 9.2): opcode, SE|M|PadCnt|TVer, P_Key, FECN|BECN|resv,
--   DestQP (3), AckReq|resv, PSN (3). RETH (9.3.3): VA (8), R_Key (4), DMA length (4).
--   AETH (9.3.5): syndrome (1), MSN (3).

local TYPE_BTH = 0x1B
local SU_BYTES = 10
local BTH_BYTES = 12

local su = Proto("scaleup", "Scale-up header (RDMA engine)")
local f = {
    dst = ProtoField.uint16("scaleup.dst", "Destination", base.HEX),
    src = ProtoField.uint16("scaleup.src", "Source", base.HEX),
    type = ProtoField.uint8("scaleup.type", "Type", base.HEX,
                            {[TYPE_BTH] = "IBTA BTH (RDMA transport)"}),
    hop_limit = ProtoField.uint8("scaleup.hop_limit", "Hop limit", base.DEC),
    length = ProtoField.uint16("scaleup.length", "Length (BTH to ICRC)", base.DEC),
    entropy = ProtoField.uint16("scaleup.entropy", "Entropy", base.HEX),
    opcode = ProtoField.uint8("scaleup.bth.opcode", "BTH opcode", base.HEX, {
        [0x06] = "RC RDMA WRITE FIRST", [0x07] = "RC RDMA WRITE MIDDLE",
        [0x08] = "RC RDMA WRITE LAST", [0x0A] = "RC RDMA WRITE ONLY",
        [0x0C] = "RC RDMA READ REQUEST", [0x0D] = "RC RDMA READ RESPONSE FIRST",
        [0x0E] = "RC RDMA READ RESPONSE MIDDLE", [0x0F] = "RC RDMA READ RESPONSE LAST",
        [0x10] = "RC RDMA READ RESPONSE ONLY", [0x11] = "RC ACKNOWLEDGE",
        [0x12] = "RC ATOMIC ACKNOWLEDGE", [0x13] = "RC COMPARE SWAP",
        [0x14] = "RC FETCH ADD"}),
    pad = ProtoField.uint8("scaleup.bth.pad_count", "Pad count", base.DEC, nil, 0x30),
    tver = ProtoField.uint8("scaleup.bth.tver", "Transport version", base.DEC, nil, 0x0F),
    pkey = ProtoField.uint16("scaleup.bth.pkey", "P_Key", base.HEX),
    dest_qp = ProtoField.uint24("scaleup.bth.dest_qp", "Destination QP", base.HEX),
    ack_req = ProtoField.uint8("scaleup.bth.ack_req", "AckReq", base.DEC, nil, 0x80),
    psn = ProtoField.uint24("scaleup.bth.psn", "PSN", base.DEC),
    va = ProtoField.uint64("scaleup.reth.va", "Virtual address", base.HEX),
    rkey = ProtoField.uint32("scaleup.reth.rkey", "R_Key", base.HEX),
    dma_length = ProtoField.uint32("scaleup.reth.dma_length", "DMA length", base.DEC),
    syndrome = ProtoField.uint8("scaleup.aeth.syndrome", "Syndrome", base.HEX),
    msn = ProtoField.uint24("scaleup.aeth.msn", "MSN", base.DEC),
    payload = ProtoField.bytes("scaleup.payload", "Payload and pad"),
    icrc = ProtoField.uint32("scaleup.icrc", "ICRC (little endian on the wire)", base.HEX),
    fcs = ProtoField.uint32("scaleup.fcs", "FCS (little endian on the wire)", base.HEX),
}
su.fields = {f.dst, f.src, f.type, f.hop_limit, f.length, f.entropy, f.opcode, f.pad,
             f.tver, f.pkey, f.dest_qp, f.ack_req, f.psn, f.va, f.rkey, f.dma_length,
             f.syndrome, f.msn, f.payload, f.icrc, f.fcs}

-- IBTA Vol 1 table 38: a RETH follows the BTH of WRITE FIRST/ONLY and READ REQUEST, an
-- AETH that of ACKNOWLEDGE, READ RESPONSE FIRST/LAST/ONLY and ATOMIC ACKNOWLEDGE (whose
-- AtomicAckETH, like the atomics' AtomicETH, is shown as payload).
local RETH_OPCODES = {[0x06] = true, [0x0A] = true, [0x0C] = true}
local AETH_OPCODES = {[0x11] = true, [0x0D] = true, [0x0F] = true, [0x10] = true,
                      [0x12] = true}

function su.dissector(tvb, pinfo, tree)
    local n = tvb:len()
    if n < SU_BYTES + BTH_BYTES + 8 then
        return 0
    end
    pinfo.cols.protocol = "SU-RoCE"
    local t = tree:add(su, tvb(0, n))
    t:add(f.dst, tvb(0, 2))
    t:add(f.src, tvb(2, 2))
    t:add(f.type, tvb(4, 1))
    t:add(f.hop_limit, tvb(5, 1))
    t:add(f.length, tvb(6, 2))
    t:add(f.entropy, tvb(8, 2))
    if tvb(4, 1):uint() ~= TYPE_BTH then
        return n
    end
    local b = SU_BYTES
    local opcode = tvb(b, 1):uint()
    t:add(f.opcode, tvb(b, 1))
    t:add(f.pad, tvb(b + 1, 1))
    t:add(f.tver, tvb(b + 1, 1))
    t:add(f.pkey, tvb(b + 2, 2))
    t:add(f.dest_qp, tvb(b + 5, 3))
    t:add(f.ack_req, tvb(b + 8, 1))
    t:add(f.psn, tvb(b + 9, 3))
    local at = b + BTH_BYTES
    if RETH_OPCODES[opcode] then
        t:add(f.va, tvb(at, 8))
        t:add(f.rkey, tvb(at + 8, 4))
        t:add(f.dma_length, tvb(at + 12, 4))
        at = at + 16
    elseif AETH_OPCODES[opcode] then
        t:add(f.syndrome, tvb(at, 1))
        t:add(f.msn, tvb(at + 1, 3))
        at = at + 4
    end
    if n - 8 > at then
        t:add(f.payload, tvb(at, n - 8 - at))
    end
    t:add_le(f.icrc, tvb(n - 8, 4))
    t:add_le(f.fcs, tvb(n - 4, 4))
    pinfo.cols.info = string.format("QP 0x%06x PSN %d opcode 0x%02x",
                                    tvb(b + 5, 3):uint(), tvb(b + 9, 3):uint(), opcode)
    return n
end

DissectorTable.get("wtap_encap"):add(wtap.USER0, su)
