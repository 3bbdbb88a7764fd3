-- Wireshark dissector for the NIC's compact frames (spec/formats/nic.py, framing
-- "compact"): dst node (1) | src node (1) | store header (6) | payload | FCS (4).
--
-- The store header is one little-endian 48-bit word: bits 0-1 opcode (1: STORE), bit 2
-- ack_req (ask the receiver for its completion at once), bits 3-15 length (payload
-- bytes), bits 16-47 addr (remote byte address). Registered on the
-- encapsulation wtap.USER1, which Wireshark gives pcap link type 148 (LINKTYPE_USER1,
-- "reserved for private use", tcpdump.org link-layer header types); a pcap of compact
-- frames is written with that link type (pymodel/pcap.py, ``linktype=148``).
--
-- Use: wireshark -X lua_script:scripts/wireshark/nic_compact.lua nic_compact.pcap

local HDR = 8

local nic = Proto("niccompact", "NIC compact header")
local f = {
    dst = ProtoField.uint8("niccompact.dst", "Destination node", base.DEC),
    src = ProtoField.uint8("niccompact.src", "Source node", base.DEC),
    opcode = ProtoField.uint8("niccompact.opcode", "Opcode", base.DEC, {[1] = "STORE"},
                              0x03),
    ack_req = ProtoField.uint8("niccompact.ack_req", "Ack request", base.DEC, nil, 0x04),
    length = ProtoField.uint16("niccompact.length", "Length", base.DEC, nil, 0xFFF8),
    addr = ProtoField.uint32("niccompact.addr", "Address", base.HEX),
    payload = ProtoField.bytes("niccompact.payload", "Payload"),
    fcs = ProtoField.uint32("niccompact.fcs", "FCS (little endian on the wire)", base.HEX),
}
nic.fields = {f.dst, f.src, f.opcode, f.ack_req, f.length, f.addr, f.payload, f.fcs}

function nic.dissector(tvb, pinfo, tree)
    local n = tvb:len()
    if n < HDR + 4 then
        return 0
    end
    pinfo.cols.protocol = "NIC"
    local t = tree:add(nic, tvb(0, n))
    t:add(f.dst, tvb(0, 1))
    t:add(f.src, tvb(1, 1))
    t:add_le(f.opcode, tvb(2, 1))
    t:add_le(f.ack_req, tvb(2, 1))
    t:add_le(f.length, tvb(2, 2))
    t:add_le(f.addr, tvb(4, 4))
    if n - 4 > HDR then
        t:add(f.payload, tvb(HDR, n - 4 - HDR))
    end
    t:add_le(f.fcs, tvb(n - 4, 4))
    return n
end

DissectorTable.get("wtap_encap"):add(wtap.USER1, nic)
