-- A stand-in for the parts of Wireshark's Lua API that the dissectors in
-- scripts/wireshark/ use, so that tests can run them with a plain Lua interpreter:
--   lua wireshark_mock.lua <dissector.lua> <encapsulation> <packets.hex>
-- loads the dissector, looks up what it registered for the encapsulation (e.g. USER0)
-- in the "wtap_encap" table, dissects each packet (one hex line each) and prints one
-- line per field: "<packet index> <field abbreviation> <value>" (integers as 0x and
-- hex digits, unsigned; byte fields as bare hex digits). A ProtoField's value is read from its range as Wireshark does:
-- big endian (add) or little endian (add_le), then its mask applied and shifted down.

local registered = {}

base = {DEC = "DEC", HEX = "HEX"}
wtap = setmetatable({}, {__index = function(_, k) return k end})

local function field(kind)
    return function(abbr, name, b, strings, mask)
        return {abbr = abbr, kind = kind, mask = mask}
    end
end
ProtoField = {uint8 = field("uint"), uint16 = field("uint"), uint24 = field("uint"),
              uint32 = field("uint"), uint64 = field("uint"), bytes = field("bytes")}

function Proto(name, desc)
    return {name = name, is_proto = true}
end

DissectorTable = {get = function(table_name)
    return {add = function(_, key, proto) registered[table_name .. ":" .. key] = proto end}
end}

local function range_of(bytes, offset, len)
    assert(offset >= 0 and len >= 0 and offset + len <= #bytes,
           string.format("range (%d, %d) outside a %d-byte packet", offset, len, #bytes))
    local r = {}
    function r:uint()
        local v = 0
        for i = 1, len do v = v * 256 + bytes:byte(offset + i) end
        return v
    end
    function r:le_uint()
        local v = 0
        for i = len, 1, -1 do v = v * 256 + bytes:byte(offset + i) end
        return v
    end
    function r:len() return len end
    function r:hex()
        local out = {}
        for i = 1, len do out[i] = string.format("%02x", bytes:byte(offset + i)) end
        return table.concat(out)
    end
    return r
end

local function tvb_of(bytes)
    return setmetatable({len = function() return #bytes end},
                        {__call = function(_, offset, len)
                            return range_of(bytes, offset, len) end})
end

local function tree_of(out, index)
    local tree = {}
    local function add(fld, range, le)
        if fld.is_proto then return tree end
        local value
        if fld.kind == "bytes" then
            value = range:hex()
        else
            value = le and range:le_uint() or range:uint()
            if fld.mask then
                local m = fld.mask
                value = value & m
                while m & 1 == 0 do value, m = value >> 1, m >> 1 end
            end
        end
        if fld.kind ~= "bytes" then value = string.format("0x%x", value) end
        out[#out + 1] = string.format("%d %s %s", index, fld.abbr, value)
        return tree
    end
    function tree:add(fld, range) return add(fld, range, false) end
    function tree:add_le(fld, range) return add(fld, range, true) end
    return tree
end

local script, encap, packets = arg[1], arg[2], arg[3]
dofile(script)
local proto = assert(registered["wtap_encap:" .. encap],
                     "the dissector registered nothing for wtap_encap " .. encap)
local out, index = {}, 0
for line in io.lines(packets) do
    local bytes = line:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
    local pinfo = {cols = {}}
    local used = proto.dissector(tvb_of(bytes), pinfo, tree_of(out, index))
    out[#out + 1] = string.format("%d used 0x%x", index, used)
    out[#out + 1] = string.format("%d protocol %s", index, tostring(pinfo.cols.protocol))
    index = index + 1
end
print(table.concat(out, "\n"))
