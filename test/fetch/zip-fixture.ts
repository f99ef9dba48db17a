/** Builds small zip archives in memory for the reader's tests (no zip tool needed). */
import { crc32, deflateRawSync } from "node:zlib";

export interface FixtureMember {
  name: string;
  data: Buffer;
  /** 0 = stored, 8 = deflate. */
  method: 0 | 8;
  /** Record this CRC instead of the real one, to simulate corruption. */
  crcOverride?: number;
  /** Write sizes and offset as 0xFFFFFFFF with the real values in a zip64 extra field. */
  zip64?: boolean;
}

export function buildZip(members: FixtureMember[], comment = ""): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const name = Buffer.from(m.name, "utf8");
    const body = m.method === 8 ? deflateRawSync(m.data) : m.data;
    const crc = m.crcOverride ?? crc32(m.data);
    // Local header (its extra field is left empty even for zip64: readers must use the central one).
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(m.method, 8);
    local.writeUInt32LE(crc >>> 0, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(m.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    locals.push(local, name, body);

    let extra = Buffer.alloc(0);
    if (m.zip64) {
      extra = Buffer.alloc(4 + 24);
      extra.writeUInt16LE(0x0001, 0);
      extra.writeUInt16LE(24, 2);
      extra.writeBigUInt64LE(BigInt(m.data.length), 4);
      extra.writeBigUInt64LE(BigInt(body.length), 12);
      extra.writeBigUInt64LE(BigInt(offset), 20);
    }
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(m.method, 10);
    central.writeUInt32LE(crc >>> 0, 16);
    central.writeUInt32LE(m.zip64 ? 0xffffffff : body.length, 20);
    central.writeUInt32LE(m.zip64 ? 0xffffffff : m.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt16LE(extra.length, 30);
    central.writeUInt32LE(m.zip64 ? 0xffffffff : offset, 42);
    centrals.push(central, name, extra);
    offset += 30 + name.length + body.length;
  }
  const cd = Buffer.concat(centrals);
  const commentBuf = Buffer.from(comment, "utf8");
  const eocd = Buffer.alloc(22);
  eocd.writeUInt32LE(0x06054b50, 0);
  eocd.writeUInt16LE(members.length, 8);
  eocd.writeUInt16LE(members.length, 10);
  eocd.writeUInt32LE(cd.length, 12);
  eocd.writeUInt32LE(offset, 16);
  eocd.writeUInt16LE(commentBuf.length, 20);
  return Buffer.concat([...locals, cd, eocd, commentBuf]);
}
